// NBitsMatMul's Hopper mainloop instantiations for 4-bit codes (gemm/fused_wgmma.cuh),
// built for sm_90a; 8-bit codes are int8_wgmma.cu's.
#include "cuda/gemm/fused_wgmma.cuh"

namespace bqmm::cuda {

BQMM_INSTANTIATE_NBITS_WGMMA(kInt4)

}  // namespace bqmm::cuda
