// The mixed-input GEMM's fp8 instantiations (gemm/mixed_gemm.cuh), built for sm_90a.
#include "cuda/gemm/mixed_gemm.cuh"

namespace bqmm::cuda {

template Status launch_mixed_tile<__half, GemmWeights::kFp8>(const FusedGemmArgs&, const MixedGemmLaunch&,
                                                          const void*, const void*, cudaStream_t);
template Status launch_mixed_tile<__nv_bfloat16, GemmWeights::kFp8>(const FusedGemmArgs&, const MixedGemmLaunch&,
                                                                  const void*, const void*, cudaStream_t);

}  // namespace bqmm::cuda
