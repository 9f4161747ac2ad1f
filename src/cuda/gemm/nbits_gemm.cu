// NBitsMatMul's fused GEMM instantiations (gemm/fused_gemm.cuh): 8-bit and 4-bit codes
// with T scales and packed or default zero points, float16 / bfloat16 activations.
#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {

Status launch_fused_gemm_nbits(const FusedGemmArgs& args, const GemmConfig& config,
                               float* partials, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_fused_gemm", [&](auto tag) -> Status {
    using T = decltype(tag);
    if (args.weights == GemmWeights::kInt8)
      return launch_gemm_format<T, GemmWeights::kInt8>(args, config, partials, stream);
    return launch_gemm_format<T, GemmWeights::kInt4>(args, config, partials, stream);
  });
}

}  // namespace bqmm::cuda
