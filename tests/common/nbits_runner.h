// Runs one NBitsMatMul case on the GPU the way a user would (validate -> plan -> run)
// with a NaN-poisoned output, and checks it against the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "bqmm/nbits_matmul.h"
#include "common/gpu.h"  // shared_handle
#include "harness/host_tensor.h"
#include "reference/nbits_reference.h"

namespace bqmm::testing {

struct NBitsRun {
  NBitsMatMulPlan plan;
  harness::HostTensor y;
};

// Uploads `c` (A and B placed `a_offset` and `b_offset` bytes into their buffers, to make
// misaligned pointers), plans with `options` for the handle's device, runs on a fresh
// stream, synchronizes and downloads Y.
Status run_nbits_on_device(const Handle& handle, const reference::NBitsCase& c,
                           const NBitsMatMulOptions& options, NBitsRun* out,
                           size_t a_offset = 0, size_t b_offset = 0);

// SPEC section 4 over every row: rel. Frobenius error within the dtype's tolerance, no NaN
// where the reference has none (unwritten outputs stay NaN) and NaN where it has NaN.
::testing::AssertionResult matches_reference(const reference::NBitsCase& c,
                                             const harness::HostTensor& y);

}  // namespace bqmm::testing
