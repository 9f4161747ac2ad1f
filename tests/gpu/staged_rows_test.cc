// The staged row tile (cuda/gemv/staged_rows.cu, SM90: M = 9..16, the activation rows
// staged in shared memory as the mma's A operand) of both operators, launched through its
// launchers with every instantiated configuration (float16 / bfloat16; NBitsMatMul's 4-bit
// and 8-bit codes with default and packed zero points; Fp8WeightMatMul's e4m3) and every K
// split (1, 2, 4, 8: one thread-block cluster summing the split in rank order) against the
// float64 reference: M = 9, 12, 16 and below the planners' range (1, 8), odd N (masked
// columns, a last block of one column), blocks of one window and more (e4m3: any multiple
// of a window, the last block partial), and rows whose windows do not divide evenly among
// the split's blocks (the last slices short or empty). Then through the operators as
// planned (staged=1), and the launchers' refusals. Every test skips itself, saying so,
// without an SM90 device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemv_split.h"
#include "cuda/launchers.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;
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

// Runs `launch` on a fresh stream and checks case c's Y, uploaded NaN-poisoned as d (an
// output no block writes fails the check), against the reference.
template <typename Case, typename DeviceCase, typename Launch>
void expect_launch_matches(const Case& c, const DeviceCase& d, const Launch& launch) {
  BQMM_ASSERT_OK(testing::run_on_fresh_stream(launch));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

void check_staged(const NBitsCase& c, int k_split, bool lines) {
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  const cuda::NBitsGemvArgs g = nbits_gemv_args(c, d);
  expect_launch_matches(c, d, [&](cudaStream_t stream) { return cuda::launch_nbits_gemv_staged(g, k_split, lines, stream); });
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

// ----------------------------------------------------------------- FP8
void check_fp8_staged(const Fp8Case& c, int k_split, bool lines) {
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  const cuda::Fp8KernelArgs g = testing::fp8_kernel_args(c, d);
  expect_launch_matches(c, d, [&](cudaStream_t stream) { return cuda::launch_fp8_gemv_staged(g, k_split, lines, stream); });
}

TEST(Fp8StagedRows, EveryConfigurationAgainstReference) {
  BQMM_REQUIRE_SM90();
  constexpr int64_t kRows[] = {9, 12, 16, 1, 8};
  uint64_t seed = 1600;
  for (const DType t : kDTypes)
    for (const int k_split : {1, 2, 4, 8})
      for (const bool lines : {false, true})
        for (const int64_t block : {64, 128, 192}) {
          // Rows of 12 or 20 windows (K = 768, 1280): blocks of 192 leave a partial last
          // block at K = 1280; uneven slices at a split of 8.
          const int64_t m = kRows[seed % 5];
          const int64_t k = (seed / 3) % 2 == 0 ? 768 : 1280;
          const int64_t n = seed % 2 == 0 ? 1000 : 513;
          SCOPED_TRACE(::testing::Message() << "e4m3 M=" << m << " N=" << n << " K=" << k << " block=" << block
                                            << " " << dtype_name(t) << " k_split=" << k_split
                                            << (lines ? " line loads" : ""));
          const Fp8Case c = reference::make_random_fp8_case(t, m, n, k, block, /*bias=*/seed % 3 != 0,
                                                            /*w8a8=*/false, seed, reference::WeightInit::kAllCodes);
          ++seed;
          check_fp8_staged(c, k_split, lines);
        }
}

// Through the operator, the tile forced: weight-only, and dynamic activation quantization
// (A QDQ'd into the workspace first); the prefill shape class at its planned split.
TEST(Fp8StagedRows, TheOperatorAsPlanned) {
  BQMM_REQUIRE_SM90();
  const Handle* handle = testing::shared_handle();
  uint64_t seed = 1700;
  for (const bool dynamic : {false, true})
    for (const int64_t m : {int64_t{9}, int64_t{16}}) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << "M=" << m << " " << dtype_name(t) << (dynamic ? " dynamic" : ""));
      Fp8Case c = reference::make_random_fp8_case(t, m, 2056, 4096, 128, /*bias=*/true, /*w8a8=*/false, seed);
      c.dynamic_act_quant = dynamic;
      ++seed;
      for (const char* force : {"staged=1,w8a8=0", "staged=1,lines=1,w8a8=0"}) {
        SCOPED_TRACE(force);
        testing::Fp8Knobs knobs;
        BQMM_ASSERT_OK(parse_plan_override(force, &knobs.force));
        testing::Fp8Run run;
        BQMM_ASSERT_OK(testing::run_fp8_on_device(*handle, c, knobs, &run));
        EXPECT_TRUE(run.plan.gemv.staged);
        EXPECT_EQ(run.plan.gemv.lines, std::string(force).find("lines") != std::string::npos);
        EXPECT_EQ(run.plan.gemv.k_split, 8);  // 9 column blocks: split as far as it goes to fill the SMs
        EXPECT_TRUE(testing::matches_reference(c, run.y));
      }
    }
}

// Small shapes for compute-sanitizer.
TEST(Fp8StagedRows, SanitizeSmall) {
  BQMM_REQUIRE_SM90();
  uint64_t seed = 1800;
  for (const int k_split : {1, 2, 8})
    for (const bool lines : {false, true}) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " k_split=" << k_split << (lines ? " line loads" : ""));
      const Fp8Case c = reference::make_random_fp8_case(t, 11, 37, 1024, 128, /*bias=*/true, /*w8a8=*/false, seed);
      ++seed;
      check_fp8_staged(c, k_split, lines);
    }
}

// The FP8 launcher's refusals: static W8A8 (an a_scale), blocks below or not a multiple of
// a window, K not whole windows, M above 16, a split beyond the row's windows.
TEST(Fp8StagedRows, LauncherRefusesWhatItDoesNotTake) {
  BQMM_REQUIRE_SM90();
  auto code = [](const Status& s) { return s.code(); };
  const Fp8Case c = reference::make_random_fp8_case(DType::kFloat16, 16, 64, 512, 128, false, /*w8a8=*/true, 5);
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  cuda::Fp8KernelArgs good = testing::fp8_kernel_args(c, d);
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(good, 1, false, nullptr)), StatusCode::kInternal);  // a_scale
  good.a_scale = nullptr;
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(good, 4, false, nullptr)), StatusCode::kOk);
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(good, 4, true, nullptr)), StatusCode::kOk);
  cuda::Fp8KernelArgs g = good;
  for (const int64_t block : {32, 96}) {
    g.block_size = block;
    EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal) << block;
  }
  g = good;
  g.k = 480;  // 7.5 windows
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal);
  g = good;
  g.m = 17;
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(g, 1, false, nullptr)), StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_fp8_gemv_staged(good, 16, false, nullptr)), StatusCode::kInternal);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace bqmm
