// Runs one Fp8WeightMatMul case on the GPU the way a user would (validate -> plan -> run)
// with a NaN-poisoned output, and checks it against the float64 reference. The steps are
// also there one by one for the tests that call run_fp8_matmul themselves.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/plan_override.h"
#include "bqmm/fp8_matmul.h"
#include "common/gpu.h"  // shared_handle
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"

namespace bqmm::testing {

// What a GPU test chooses for a plan: the operator's options and the internal plan
// override (core/plan_override.h) that forces kernel choices.
struct Fp8Knobs {
  Fp8MatMulOptions options;
  PlanOverride force;
};

// One case on the device: its tensors (absent optional inputs stay empty), the arguments
// that point at them and, once planned, the plan with a workspace of its size.
struct Fp8DeviceCase {
  harness::DeviceTensor a, b, b_scale, a_scale, bias, y;
  Fp8MatMulArgs args;
  Fp8MatMulPlan plan;
  harness::DeviceBuffer workspace;

  // Enqueues run_fp8_matmul of this plan and these arguments with the whole workspace.
  Status run(const Handle& handle, cudaStream_t stream) const;
};

// Uploads `c` (B placed `b_offset` bytes into its buffer) and a NaN-poisoned Y; fills args.
Status upload_fp8_case(const reference::Fp8Case& c, Fp8DeviceCase* d, size_t b_offset = 0);

// Validates d->args, plans with `knobs` for the handle's device and allocates the
// plan's workspace.
Status plan_fp8_case(const Handle& handle, const reference::Fp8Case& c,
                     const Fp8Knobs& knobs, Fp8DeviceCase* d);

struct Fp8Run {
  Fp8MatMulPlan plan;
  harness::HostTensor y;
};

// Uploads and plans `c` as above, runs it on a fresh stream, synchronizes and downloads Y.
Status run_fp8_on_device(const Handle& handle, const reference::Fp8Case& c,
                         const Fp8Knobs& knobs, Fp8Run* out, size_t b_offset = 0);

// The FP8 kernels' launcher arguments (cuda/launchers.h) for a case uploaded by
// upload_fp8_case (its a_scale where the case has one), for the tests that launch a GEMV
// or the W8A8 GEMM themselves.
cuda::Fp8KernelArgs fp8_kernel_args(const reference::Fp8Case& c, const Fp8DeviceCase& d);

// docs/CONTRACT.md section 4 over every row: rel. Frobenius error within the dtype's tolerance, no NaN
// where the reference has none (unwritten outputs stay NaN).
::testing::AssertionResult matches_reference(const reference::Fp8Case& c,
                                             const harness::HostTensor& y);

}  // namespace bqmm::testing
