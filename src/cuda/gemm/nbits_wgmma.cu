// NBitsMatMul's Hopper mainloop instantiations (gemm/fused_wgmma.cuh), built for sm_90a.
#include "cuda/gemm/fused_wgmma.cuh"

namespace bqmm::cuda {

#define BQMM_NBITS_WGMMA(T, W)                                                              \
  template Status launch_wgmma_tile<T, GemmWeights::W>(const GemmParams<T, T>&, int, int, dim3, \
                                                       cudaStream_t);
BQMM_NBITS_WGMMA(__half, kInt8)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt8)
BQMM_NBITS_WGMMA(__half, kInt4)
BQMM_NBITS_WGMMA(__nv_bfloat16, kInt4)
#undef BQMM_NBITS_WGMMA

}  // namespace bqmm::cuda
