// A library built without SM90 or without the CUTLASS headers has no mixed-input GEMM
// (CMakeLists.txt): its launcher reports that, and the planner never asks for it
// (core/gemm_plan.cc, mixed_gemm_built).
#include "cuda/launchers.h"

namespace bqmm::cuda {

Status launch_mixed_gemm(const FusedGemmArgs&, const MixedGemmLaunch&, cudaStream_t) {
  return Status(StatusCode::kInternal,
                "launch_mixed_gemm: not built (no SM90 in CUDA_ARCHITECTURES or no CUTLASS headers)");
}

}  // namespace bqmm::cuda
