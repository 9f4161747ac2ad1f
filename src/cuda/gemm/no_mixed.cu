// A library built without SM90 or without the CUTLASS headers has none of the CUTLASS
// GEMMs (the mixed-input GEMM, W8A8's groupwise GEMM; CMakeLists.txt): their launchers
// report that, and the planner never asks for them (core/gemm_plan.cc, mixed_gemm_built).
#include "cuda/launchers.h"

namespace bqmm::cuda {

Status launch_mixed_gemm(const FusedGemmArgs&, const MixedGemmLaunch&, cudaStream_t) {
  return Status(StatusCode::kInternal,
                "launch_mixed_gemm: not built (no SM90 in CUDA_ARCHITECTURES or no CUTLASS headers)");
}

Status launch_w8a8_groupwise(const Fp8KernelArgs&, bool, int, int, const W8A8Workspace&, cudaStream_t) {
  return Status(StatusCode::kInternal,
                "launch_w8a8_groupwise: not built (no SM90 in CUDA_ARCHITECTURES or no CUTLASS headers)");
}

}  // namespace bqmm::cuda
