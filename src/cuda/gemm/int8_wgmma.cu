// NBitsMatMul's Hopper mainloop instantiations for 8-bit codes (gemm/fused_wgmma.cuh),
// built for sm_90a; 4-bit codes are int4_wgmma.cu's.
#include "cuda/gemm/fused_wgmma.cuh"

namespace bqmm::cuda {

BQMM_INSTANTIATE_NBITS_WGMMA(kInt8)

}  // namespace bqmm::cuda
