// Runs one NBitsMatMul case on the GPU the way a user would (validate -> plan -> run)
// with a NaN-poisoned output, and checks it against the float64 reference. The steps are
// also there one by one for the tests that call run_nbits_matmul or a kernel themselves.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/plan_override.h"
#include "bqmm/nbits_matmul.h"
#include "common/gpu.h"  // shared_handle
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"
#include "reference/nbits_reference.h"

namespace bqmm::testing {

// What a GPU test chooses for a plan: the operator's options and the internal plan
// override (core/plan_override.h) that forces kernel choices.
struct NBitsKnobs {
  NBitsMatMulOptions options;
  PlanOverride force;
};

// One case on the device: its tensors (absent optional inputs stay empty), the arguments
// that point at them and, once planned, the plan with a workspace of its size.
struct NBitsDeviceCase {
  harness::DeviceTensor a, b, scales, zero_points, g_idx, bias, y;
  NBitsMatMulArgs args;
  NBitsMatMulPlan plan;
  harness::DeviceBuffer workspace;

  // Enqueues run_nbits_matmul of this plan and these arguments with the whole workspace.
  Status run(const Handle& handle, cudaStream_t stream) const;
};

// Uploads `c` (A and B placed `a_offset` and `b_offset` bytes into their buffers, to make
// misaligned pointers) and a NaN-poisoned Y; fills args.
Status upload_nbits_case(const reference::NBitsCase& c, NBitsDeviceCase* d,
                         size_t a_offset = 0, size_t b_offset = 0);

// Validates d->args, plans with `knobs` for the handle's device and allocates the
// plan's workspace.
Status plan_nbits_case(const Handle& handle, const reference::NBitsCase& c,
                       const NBitsKnobs& knobs, NBitsDeviceCase* d);

struct NBitsRun {
  NBitsMatMulPlan plan;
  harness::HostTensor y;
};

// Uploads and plans `c` as above, runs it on a fresh stream, synchronizes and downloads Y.
Status run_nbits_on_device(const Handle& handle, const reference::NBitsCase& c,
                           const NBitsKnobs& knobs, NBitsRun* out,
                           size_t a_offset = 0, size_t b_offset = 0);

// A case spec of `dtype` and `bits`, A [m, k], B [n, k] in blocks of `block_size`; no
// g_idx and normal weights until set.
reference::NBitsCaseSpec nbits_spec(DType dtype, int bits, int64_t m, int64_t n, int64_t k,
                                    int64_t block_size,
                                    NBitsZeroPoints zero_points = NBitsZeroPoints::kNone,
                                    bool bias = false);
// The same with packed zero points or none.
inline reference::NBitsCaseSpec nbits_spec(DType dtype, int bits, int64_t m, int64_t n,
                                           int64_t k, int64_t block_size, bool packed_zero_points,
                                           bool bias) {
  return nbits_spec(dtype, bits, m, n, k, block_size,
                    packed_zero_points ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kNone, bias);
}

// The GEMV launchers' arguments (cuda/launchers.h) for a case uploaded by
// upload_nbits_case: packed zero points where the case has them, for the tests that launch
// a decode kernel themselves.
cuda::NBitsGemvArgs nbits_gemv_args(const reference::NBitsCase& c, const NBitsDeviceCase& d);

// docs/CONTRACT.md section 4 over every row: rel. Frobenius error within the dtype's tolerance, no NaN
// where the reference has none (unwritten outputs stay NaN) and NaN where it has NaN.
::testing::AssertionResult matches_reference(const reference::NBitsCase& c,
                                             const harness::HostTensor& y);

}  // namespace bqmm::testing
