// GPU test guard: every GPU test starts with BQMM_REQUIRE_GPU(), which skips the test,
// saying why, when no CUDA device can be used. A GPU test never passes vacuously.
// Also what the tests of both operators share on the device: the cuBLAS handle, a fresh
// stream, a CUDA graph replay and a NaN-poisoned output.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"

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

// What a test enqueues: one operator call on the given stream.
using Enqueue = std::function<Status(cudaStream_t)>;

// Runs `enqueue` on a fresh stream and synchronizes: the enqueue's error, else the
// kernels' execution error, else OK.
Status run_on_fresh_stream(const Enqueue& enqueue);

// Captures `enqueue` on a fresh stream into a CUDA graph, replays the graph `replays` times
// on that stream and synchronizes: the enqueue's error, else the capture's, a replay's or
// the kernels' execution error, else OK. An allocation or a synchronization inside
// `enqueue` breaks the capture, so OK shows that it only enqueues (the run() contract);
// more than one replay shows that a run leaves nothing the next one depends on.
Status run_in_graph(const Enqueue& enqueue, int replays = 1);

// Two layers in a row on one fresh stream (either operator's device cases: run(handle,
// stream) and a device y), then both outputs downloaded: the second may read the first's
// y (a test of a dependent launch points its A there).
template <typename DeviceCase>
Status run_two_layers(const Handle& handle, const DeviceCase& first, const DeviceCase& second,
                      harness::HostTensor* y1, harness::HostTensor* y2) {
  BQMM_RETURN_IF_ERROR(run_on_fresh_stream([&](cudaStream_t stream) -> Status {
    BQMM_RETURN_IF_ERROR(first.run(handle, stream));
    return second.run(handle, stream);
  }));
  BQMM_RETURN_IF_ERROR(first.y.download(y1));
  return second.y.download(y2);
}

// A device output of `dtype` and `shape` with every byte 0xFF (NaN in every float type):
// an output element that no kernel writes stays NaN, which the accuracy check reports.
Status upload_poisoned(DType dtype, const Shape& shape, harness::DeviceTensor* out);

}  // namespace bqmm::testing
