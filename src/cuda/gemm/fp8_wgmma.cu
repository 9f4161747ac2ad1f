// Fp8WeightMatMul's Hopper mainloop instantiations (gemm/fused_wgmma.cuh), built for sm_90a.
#include "cuda/gemm/fused_wgmma.cuh"

namespace bqmm::cuda {

template Status launch_wgmma_tile<__half, GemmWeights::kFp8, false>(const GemmParams<__half, float>&,
                                                                    const GemmKernelKey&, dim3, bool, cudaStream_t);
template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::kFp8, false>(
    const GemmParams<__nv_bfloat16, float>&, const GemmKernelKey&, dim3, bool, cudaStream_t);

}  // namespace bqmm::cuda
