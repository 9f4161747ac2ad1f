// NBitsMatMul's Hopper mainloop instantiations (gemm/fused_wgmma.cuh), built for sm_90a:
// packed or default zero points, and typed ones.
#include "cuda/gemm/fused_wgmma.cuh"

namespace bqmm::cuda {

#define BQMM_NBITS_WGMMA(T, W, TYPED)                                                           \
  template Status launch_wgmma_tile<T, GemmWeights::W, TYPED>(const GemmParams<T, T>&, const GemmKernelKey&, \
                                                              dim3, bool, cudaStream_t);
BQMM_NBITS_WGMMA(__half, kInt8, false)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt8, false)
BQMM_NBITS_WGMMA(__half, kInt4, false)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt4, false)
BQMM_NBITS_WGMMA(__half, kInt8, true)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt8, true)
BQMM_NBITS_WGMMA(__half, kInt4, true)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt4, true)
#undef BQMM_NBITS_WGMMA

}  // namespace bqmm::cuda
