// harness::time_with_events on the GPU: the per-run event times and the back-to-back
// replay, and the order of the iterations it hands to the run (the profiler rotates its
// weight copies by that number, so no two consecutive runs may repeat one).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/gpu.h"
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "harness/timing.h"

namespace bqmm {
namespace {

constexpr int64_t kCols = int64_t{1} << 20;  // a 4 MB float32 fill per run

class HarnessTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    BQMM_REQUIRE_GPU();
    ASSERT_TRUE(harness::DeviceBuffer::allocate(kCols * sizeof(float), &y_).ok());
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // A run that fills y and records its iteration number (host side, at enqueue/capture).
  harness::TimedRun run() {
    return [this](int iteration) {
      iterations_.push_back(iteration);
      return cuda::launch_fill_bias(DType::kFloat32, y_.data(), nullptr, 1, kCols, stream_);
    };
  }
  harness::DeviceBuffer y_;
  cudaStream_t stream_ = nullptr;
  std::vector<int> iterations_;
};

TEST_F(HarnessTiming, GraphReplayTimesEachRunAndTheChain) {
  harness::TimingStats t;
  BQMM_ASSERT_OK(harness::time_with_events(stream_, 3, 20, run(), &t));
  EXPECT_TRUE(t.graph);
  EXPECT_EQ(t.runs, 20);
  EXPECT_GT(t.p10_us, 0);
  EXPECT_LE(t.p10_us, t.median_us);
  EXPECT_LE(t.median_us, t.p90_us);
  // The chain has no event nodes between runs: positive, and not longer than a run
  // with its events by more than noise.
  EXPECT_GT(t.back_to_back_us, 0);
  EXPECT_LT(t.back_to_back_us, 2 * t.p90_us);
  // Captures first (timed runs 3..22, then the chains' 23..42, 43..62, ...), then the
  // warm-up 0..2: every iteration once, so consecutive runs on the GPU (in order) differ.
  const int total = 3 + 20 + harness::kBackToBackChains * 20;
  std::vector<int> sorted = iterations_;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted.size(), static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) EXPECT_EQ(sorted[i], i);
}

TEST_F(HarnessTiming, EagerReplayHasNoChain) {
  harness::TimingStats t;
  BQMM_ASSERT_OK(harness::time_with_events(stream_, 2, 10, run(), &t, harness::Replay::kEager));
  EXPECT_FALSE(t.graph);
  EXPECT_EQ(t.runs, 10);
  EXPECT_GT(t.median_us, 0);
  EXPECT_EQ(t.back_to_back_us, 0);
  EXPECT_EQ(iterations_.size(), 12u);
}

}  // namespace
}  // namespace bqmm
