// Fp8WeightMatMul's fused GEMM instantiations (gemm/fused_gemm.cuh): e4m3 weights with
// float32 block scales, float16 / bfloat16 activations.
#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {

Status launch_fused_gemm_fp8(const FusedGemmArgs& args, const GemmConfig& config,
                             float* partials, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_fused_gemm", [&](auto tag) -> Status {
    return launch_gemm_format<decltype(tag), GemmWeights::kFp8, false>(args, config, partials, stream);
  });
}

}  // namespace bqmm::cuda
