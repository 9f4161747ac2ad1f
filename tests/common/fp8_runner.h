// Runs one Fp8WeightMatMul case on the GPU the way a user would (validate -> plan -> run)
// with a NaN-poisoned output, and checks it against the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "bqmm/fp8_matmul.h"
#include "common/gpu.h"  // shared_handle
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"

namespace bqmm::testing {

struct Fp8Run {
  Fp8MatMulPlan plan;
  harness::HostTensor y;
};

// Uploads `c` (B placed `b_offset` bytes into its buffer), plans with `options` for the
// handle's device, runs on a fresh stream, synchronizes and downloads Y.
Status run_fp8_on_device(const Handle& handle, const reference::Fp8Case& c,
                         const Fp8MatMulOptions& options, Fp8Run* out, size_t b_offset = 0);

// SPEC section 4 over every row: rel. Frobenius error within the dtype's tolerance, no NaN
// where the reference has none (unwritten outputs stay NaN).
::testing::AssertionResult matches_reference(const reference::Fp8Case& c,
                                             const harness::HostTensor& y);

}  // namespace bqmm::testing
