// A library built without SM90 has no Hopper mainloop (CMakeLists.txt): its launcher
// entries report that, and the planner never asks for them (core/gemm_plan.cc).
#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {

template <typename T, GemmWeights kW>
Status launch_wgmma_tile(const GemmParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>>&,
                         int, int, dim3, cudaStream_t) {
  return Status(StatusCode::kInternal,
                "launch_fused_gemm: the wgmma mainloop is not built (no SM90 in CUDA_ARCHITECTURES)");
}

template Status launch_wgmma_tile<__half, GemmWeights::kFp8>(const GemmParams<__half, float>&, int,
                                                             int, dim3, cudaStream_t);
template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::kFp8>(
    const GemmParams<__nv_bfloat16, float>&, int, int, dim3, cudaStream_t);
template Status launch_wgmma_tile<__half, GemmWeights::kInt8>(const GemmParams<__half, __half>&, int,
                                                              int, dim3, cudaStream_t);
template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::kInt8>(
    const GemmParams<__nv_bfloat16, __nv_bfloat16>&, int, int, dim3, cudaStream_t);
template Status launch_wgmma_tile<__half, GemmWeights::kInt4>(const GemmParams<__half, __half>&, int,
                                                              int, dim3, cudaStream_t);
template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::kInt4>(
    const GemmParams<__nv_bfloat16, __nv_bfloat16>&, int, int, dim3, cudaStream_t);

Status launch_w8a8_gemm(const Fp8KernelArgs&, bool, const GemmConfig&, const W8A8Workspace&, cudaStream_t) {
  return Status(StatusCode::kInternal, "launch_w8a8_gemm: not built (no SM90 in CUDA_ARCHITECTURES)");
}

}  // namespace bqmm::cuda
