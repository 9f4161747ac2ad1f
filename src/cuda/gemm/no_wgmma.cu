// A library built without SM90 has no Hopper mainloop (CMakeLists.txt): its launcher
// entries report that, and the planner never asks for them (core/gemm_plan.cc).
#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {

template <typename T, GemmWeights kW, bool kTypedZp>
Status launch_wgmma_tile(const GemmParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>>&,
                         const GemmKernelKey&, dim3, bool, cudaStream_t) {
  return Status(StatusCode::kInternal,
                "launch_fused_gemm: the wgmma mainloop is not built (no SM90 in CUDA_ARCHITECTURES)");
}

#define BQMM_NO_WGMMA(T, S, W, TYPED)                                                             \
  template Status launch_wgmma_tile<T, GemmWeights::W, TYPED>(const GemmParams<T, S>&, const GemmKernelKey&, \
                                                              dim3, bool, cudaStream_t);
BQMM_NO_WGMMA(__half, float, kFp8, false)
BQMM_NO_WGMMA(__nv_bfloat16, float, kFp8, false)
BQMM_NO_WGMMA(__half, __half, kInt8, false)
BQMM_NO_WGMMA(__nv_bfloat16, __nv_bfloat16, kInt8, false)
BQMM_NO_WGMMA(__half, __half, kInt4, false)
BQMM_NO_WGMMA(__nv_bfloat16, __nv_bfloat16, kInt4, false)
BQMM_NO_WGMMA(__half, __half, kInt8, true)
BQMM_NO_WGMMA(__nv_bfloat16, __nv_bfloat16, kInt8, true)
BQMM_NO_WGMMA(__half, __half, kInt4, true)
BQMM_NO_WGMMA(__nv_bfloat16, __nv_bfloat16, kInt4, true)
#undef BQMM_NO_WGMMA

Status launch_w8a8_gemm(const Fp8KernelArgs&, bool, const GemmConfig&, const W8A8Workspace&, cudaStream_t) {
  return Status(StatusCode::kInternal, "launch_w8a8_gemm: not built (no SM90 in CUDA_ARCHITECTURES)");
}

}  // namespace bqmm::cuda
