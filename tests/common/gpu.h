// GPU test guard: every GPU test starts with BQMM_REQUIRE_GPU(), which skips the test,
// saying why, when no CUDA device can be used. A GPU test never passes vacuously.
#pragma once

#include <gtest/gtest.h>

#include <string>

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
