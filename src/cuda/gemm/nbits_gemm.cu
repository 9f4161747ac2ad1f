// NBitsMatMul's fused GEMM instantiations (gemm/fused_gemm.cuh): 8-bit and 4-bit codes
// with T scales and packed, typed or default zero points, float16 / bfloat16 activations.
#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {

namespace {

template <typename T, bool kTypedZp>
Status launch_nbits_format(const FusedGemmArgs& args, const GemmConfig& config, float* partials,
                           cudaStream_t stream) {
  if (args.weights == GemmWeights::kInt8)
    return launch_gemm_format<T, GemmWeights::kInt8, kTypedZp>(args, config, partials, stream);
  return launch_gemm_format<T, GemmWeights::kInt4, kTypedZp>(args, config, partials, stream);
}

}  // namespace

Status launch_fused_gemm_nbits(const FusedGemmArgs& args, const GemmConfig& config,
                               float* partials, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_fused_gemm", [&](auto tag) -> Status {
    using T = decltype(tag);
    if (args.zp_typed != nullptr) return launch_nbits_format<T, true>(args, config, partials, stream);
    return launch_nbits_format<T, false>(args, config, partials, stream);
  });
}

}  // namespace bqmm::cuda
