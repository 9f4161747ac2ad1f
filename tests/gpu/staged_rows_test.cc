// NBitsMatMul's staged row tile (cuda/gemv/staged_rows.cu, SM90: M = 9..16, the
// activation rows staged in shared memory as the mma's A operand) launched through its
// launcher with every instantiated configuration (float16 / bfloat16, 4-bit and 8-bit,
// default and packed zero points) and every K split (1, 2, 4, 8: one thread-block cluster
// summing the split in rank order) against the float64 reference: M = 9, 12, 16 and
// below the planner's range (1, 8), odd N (masked columns, a last block of one column),
// blocks of one window and more, and rows whose windows do not divide evenly among the
// split's blocks (the last slices short or empty). Then through the operator as planned
// (staged=1), and the launcher's refusals. Every test skips itself, saying so, without an
// SM90 device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "bqmm/status.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemv_split.h"
#include "cuda/launchers.h"
#include "harness/host_tensor.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::NBitsCase;
using testing::nbits_gemv_args;
using testing::nbits_spec;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};

bool hopper_available() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm >= 90;
}
#define BQMM_REQUIRE_SM90()                                                                 \
  BQMM_REQUIRE_GPU();                                                                       \
  if (!hopper_available()) GTEST_SKIP() << "the staged row tile needs SM90 (thread-block clusters)"

// Launches the tile on `c` (NaN-poisoned Y: an output no block writes fails the check).
void check_staged(const NBitsCase& c, int k_split, bool lines) {
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  const cuda::NBitsGemvArgs g = nbits_gemv_args(c, d);
  BQMM_ASSERT_OK(testing::run_on_fresh_stream(
      [&](cudaStream_t stream) { return cuda::launch_nbits_gemv_staged(g, k_split, lines, stream); }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

TEST(NBitsStagedRows, EveryConfigurationAgainstReference) {
  BQMM_REQUIRE_SM90();
  constexpr int64_t kRows[] = {9, 12, 16, 1, 8};
  uint64_t seed = 600;
  for (const int bits : {4, 8})
    for (const bool zero_points : {false, true})
      for (const int k_split : {1, 2, 4, 8})
        for (const bool lines : {false, true}) {
          const DType t = kDTypes[(seed / 7) % 2];
          const int64_t m = kRows[seed % 5];
          // Blocks of one window (4-bit 128 codes, 8-bit 64) and more; rows of 12 or 20
          // windows (K = 12 or 20 windows' codes): uneven slices at a split of 8 (with line
          // loads, slices of whole pairs: 12 windows at a split of 4 leave the last block
          // empty); N odd, or a multiple of the block's 256 columns plus one.
          const int64_t window = bits == 4 ? 128 : 64;
          const int64_t block = (seed / 5) % 2 == 0 ? window : 2 * window;
          const int64_t k = (seed / 3) % 2 == 0 ? 12 * window : 20 * window;
          const int64_t n = seed % 2 == 0 ? 1000 : 513;
          SCOPED_TRACE(::testing::Message()
                       << bits << "-bit M=" << m << " N=" << n << " K=" << k << " block=" << block
                       << " " << dtype_name(t) << (zero_points ? " zero points" : "")
                       << " k_split=" << k_split << (lines ? " line loads" : ""));
          const NBitsCase c = reference::make_random_nbits_case(
              nbits_spec(t, bits, m, n, k, block, zero_points, /*bias=*/seed % 3 != 0), seed);
          ++seed;
          check_staged(c, k_split, lines);
        }
}

// The prefill suite's shape class at its planned split: 16 rows, K = 4096 split 4.
TEST(NBitsStagedRows, LargerShapesAtThePlannedSplit) {
  BQMM_REQUIRE_SM90();
  uint64_t seed = 700;
  for (const int bits : {4, 8})
    for (const DType t : kDTypes) {
      SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t));
      const NBitsCase c = reference::make_random_nbits_case(
          nbits_spec(t, bits, 16, 2056, 4096, 128, /*zero_points=*/seed % 2 == 0, /*bias=*/true), seed);
      ++seed;
      check_staged(c, 4, /*lines=*/false);
      check_staged(c, 4, /*lines=*/true);
    }
}

// Through the operator (validate -> plan -> run), the tile forced where it applies.
TEST(NBitsStagedRows, TheOperatorAsPlanned) {
  BQMM_REQUIRE_SM90();
  const Handle* handle = testing::shared_handle();
  uint64_t seed = 800;
  for (const int bits : {4, 8})
    for (const int64_t m : {int64_t{9}, int64_t{16}}) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t));
      const NBitsCase c = reference::make_random_nbits_case(
          nbits_spec(t, bits, m, 777, 2048, 128, /*zero_points=*/true, /*bias=*/true), seed);
      ++seed;
      for (const char* force : {"staged=1", "staged=1,lines=1"}) {
        SCOPED_TRACE(force);
        testing::NBitsKnobs knobs;
        BQMM_ASSERT_OK(parse_plan_override(force, &knobs.force));
        testing::NBitsRun run;
        BQMM_ASSERT_OK(testing::run_nbits_on_device(*handle, c, knobs, &run));
        EXPECT_TRUE(run.plan.gemv.staged);
        EXPECT_EQ(run.plan.gemv.lines, std::string(force).find("lines") != std::string::npos);
        EXPECT_EQ(run.plan.gemv.k_split, 8);  // 4 column blocks: split as far as it goes to fill the SMs
        EXPECT_TRUE(testing::matches_reference(c, run.y));
      }
    }
}

// Small shapes for compute-sanitizer: one column block of masked columns, each split.
TEST(NBitsStagedRows, SanitizeSmall) {
  BQMM_REQUIRE_SM90();
  uint64_t seed = 900;
  for (const int bits : {4, 8})
    for (const int k_split : {1, 2, 8})
      for (const bool lines : {false, true}) {
        const DType t = kDTypes[seed % 2];
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t) << " k_split=" << k_split
                                          << (lines ? " line loads" : ""));
        const NBitsCase c = reference::make_random_nbits_case(
            nbits_spec(t, bits, 11, 37, 1024, 128, /*zero_points=*/seed % 2 == 0, /*bias=*/true), seed);
        ++seed;
        check_staged(c, k_split, lines);
      }
}

// What the tile does not take is kInternal (a planner bug), before anything is launched:
// blocks below a window, typed zero points, M above 16, a split that is not a power of two
// up to 8 or exceeds the row's windows, float32.
TEST(NBitsStagedRows, LauncherRefusesWhatItDoesNotTake) {
  BQMM_REQUIRE_SM90();
  auto code = [](const Status& s) { return s.code(); };
  const NBitsCase c = reference::make_random_nbits_case(
      nbits_spec(DType::kFloat16, 4, 16, 64, 512, 128, false, false), 3);
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  const cuda::NBitsGemvArgs good = nbits_gemv_args(c, d);
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(good, 4, false, nullptr)), StatusCode::kOk);
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(good, 2, true, nullptr)), StatusCode::kOk);
  cuda::NBitsGemvArgs g = good;
  g.block_size = 64;  // below a 4-bit window
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal);
  g = good;
  g.zp_typed = d.scales.data();
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal);
  g = good;
  g.m = 17;
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal);
  for (const int k_split : {0, 3, 16, 8})  // 8 > the row's 4 windows
    EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(good, k_split, false, nullptr)), StatusCode::kInternal)
        << k_split;
  // Line loads: rows of whole 128-byte lines (K = 384: three windows of 4-bit codes).
  const NBitsCase odd = reference::make_random_nbits_case(
      nbits_spec(DType::kFloat16, 4, 16, 64, 384, 128, false, false), 4);
  testing::NBitsDeviceCase od;
  BQMM_ASSERT_OK(testing::upload_nbits_case(odd, &od));
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(nbits_gemv_args(odd, od), 1, true, nullptr)), StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_nbits_gemv_staged(nbits_gemv_args(odd, od), 1, false, nullptr)), StatusCode::kOk);
  g = good;
  g.dtype = DType::kFloat32;
  EXPECT_NE(code(cuda::launch_nbits_gemv_staged(g, 1, false, nullptr)), StatusCode::kOk);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace bqmm
