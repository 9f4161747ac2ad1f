// GPU test guard: every GPU test starts with BQMM_REQUIRE_GPU(), which skips the test,
// saying why, when no CUDA device can be used. A GPU test never passes vacuously.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "harness/device_buffer.h"

#define BQMM_REQUIRE_GPU()                                                        \
  do {                                                                            \
    std::string bqmm_why_;                                                        \
    if (!::bqmm::harness::cuda_device_available(&bqmm_why_))                      \
      GTEST_SKIP() << "no CUDA device (" << bqmm_why_ << "): GPU test not run";   \
  } while (0)

// ASSERT that a bqmm::Status is OK, printing its message otherwise.
#define BQMM_ASSERT_OK(expr)                                  \
  do {                                                        \
    const ::bqmm::Status bqmm_s_ = (expr);                    \
    ASSERT_TRUE(bqmm_s_.ok()) << #expr << ": " << bqmm_s_.to_string(); \
  } while (0)

namespace bqmm::testing {

// One handle per test binary (creating cuBLAS handles is slow); nullptr (and a test
// failure) when it cannot be created.
const Handle* shared_handle();

// Runs `enqueue` on a fresh stream and synchronizes: the enqueue's error, else the
// kernels' execution error, else OK.
Status run_on_fresh_stream(const std::function<Status(cudaStream_t)>& enqueue);

}  // namespace bqmm::testing
