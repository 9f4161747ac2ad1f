// The mixed-input GEMM (cuda/gemm/mixed_gemm.cuh, CUTLASS's SM90 collective) through the
// operators' validate -> plan -> run, the plan override forcing it (mixed=1) and each tile
// (mixed_tile), against the float64 reference: FP8 (weight-only and W8A8 on QDQ'd A) and
// 8-bit / 4-bit weights with every zero-point form (none, packed, typed), both activation
// types, bias, block sizes 64 / 128 / 256, K not a multiple of block_size (a partial last
// block; for N-bit random padding codes in the stored row), M not a multiple of the tile
// and N not a multiple of the 128-row weight tile. Every case checks that the plan is the
// mixed-input GEMM, so a planner that stops taking it fails here rather than passing on
// another path. Y is NaN-poisoned first; one case runs inside a CUDA graph; small cases
// for compute-sanitizer. Skips itself without an SM90 device or a build without it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemm_plan.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;
using reference::NBitsCase;
using testing::nbits_spec;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};
constexpr int64_t kRows[] = {9, 17, 64, 100, 128, 257, 1024};

bool mixed_available() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm == 90 && mixed_gemm_built();
}
#define BQMM_REQUIRE_MIXED()                                                                  \
  BQMM_REQUIRE_GPU();                                                                         \
  if (!mixed_available())                                                                     \
  GTEST_SKIP() << "the mixed-input GEMM needs an SM90 device and a build with SM90 and the " \
                  "CUTLASS headers ("                                                         \
               << (mixed_gemm_built() ? "built" : "not built") << ")"

PlanOverride force_mixed(int tile_m) {
  PlanOverride o;
  o.mixed = 1;
  o.mixed_tile = tile_m;
  return o;
}

void check_fp8(const Fp8Case& c, int tile_m) {
  testing::Fp8Knobs knobs;
  knobs.force = force_mixed(tile_m);
  testing::Fp8Run run;
  BQMM_ASSERT_OK(testing::run_fp8_on_device(*testing::shared_handle(), c, knobs, &run));
  ASSERT_EQ(run.plan.path, Fp8Path::kMixedGemm) << to_string(knobs.force);
  ASSERT_EQ(run.plan.gemm.tile_m, tile_m);
  EXPECT_TRUE(testing::matches_reference(c, run.y));
}

void check_nbits(const NBitsCase& c, int tile_m) {
  testing::NBitsKnobs knobs;
  knobs.force = force_mixed(tile_m);
  testing::NBitsRun run;
  BQMM_ASSERT_OK(testing::run_nbits_on_device(*testing::shared_handle(), c, knobs, &run));
  ASSERT_EQ(run.plan.path, NBitsPath::kMixedGemm);
  ASSERT_EQ(run.plan.gemm.tile_m, tile_m);
  EXPECT_TRUE(testing::matches_reference(c, run.y));
}

// FP8: every row count on both tiles, blocks 64 / 128 / 256 with K % block != 0 in the
// second and third shapes, N of a partial last weight tile.
TEST(MixedGemmFp8, EveryRowCountTileAndBlockAgainstReference) {
  BQMM_REQUIRE_MIXED();
  struct Shape3 { int64_t n, k, block; };
  const Shape3 shapes[] = {{1000, 1024, 128}, {136, 1088, 256}, {520, 1040, 64}};
  uint64_t seed = 1100;
  for (const Shape3 sh : shapes)
    for (const int64_t m : kRows)
      for (const int tile_m : {128, 256}) {
        const DType t = kDTypes[seed % 2];
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << sh.n << " K=" << sh.k
                                          << " block=" << sh.block << " " << dtype_name(t)
                                          << " tile_m=" << tile_m);
        const Fp8Case c = reference::make_random_fp8_case(t, m, sh.n, sh.k, sh.block,
                                                          /*bias=*/seed % 3 != 0, /*w8a8=*/false, seed);
        ++seed;
        check_fp8(c, tile_m);
      }
}

// Every e4m3 code, and W8A8 (a_scale) with blocks of 64, which the W8A8 GEMM does not
// take: A is QDQ'd into the workspace first.
TEST(MixedGemmFp8, AllCodesAndW8a8) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1200;
  for (const DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << "all codes " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 200, 264, 2048, 128, true, false, seed++,
                                              reference::WeightInit::kAllCodes),
              128);
  }
  for (const DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << "w8a8 block 64 " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 129, 1000, 960, 64, true, /*w8a8=*/true, seed++), 256);
  }
}

// N-bit: both widths, blocks 64 / 128 / 256, each zero-point form, K = 1056 (a partial
// last block, random padding codes); M, the type, the tile and the bias cycle with the seed.
TEST(MixedGemmNBits, EveryBlockAndZeroPointFormAgainstReference) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1300;
  for (const int bits : {4, 8})
    for (const int64_t block : {int64_t{64}, int64_t{128}, int64_t{256}})
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
        const DType t = kDTypes[seed % 2];
        const int64_t m = kRows[seed % 7];
        const int64_t n = seed % 2 == 0 ? 1000 : 264;
        const int tile_m = seed % 3 == 0 ? 256 : 128;
        SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " N=" << n << " block=" << block
                                          << " zero points " << nbits_zero_points_name(zp) << " "
                                          << dtype_name(t) << " tile_m=" << tile_m);
        const NBitsCase c = reference::make_random_nbits_case(
            nbits_spec(t, bits, m, n, 1056, block, zp, /*bias=*/seed % 3 != 1), seed);
        ++seed;
        check_nbits(c, tile_m);
      }
}

// Every code and zero point the formats can hold (uniform codes over the whole range,
// fractional typed zero points), each row count once.
TEST(MixedGemmNBits, AllCodesAndEveryRowCount) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1400;
  for (const int bits : {4, 8})
    for (const NBitsZeroPoints zp : {NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
      for (const DType t : kDTypes) {
        reference::NBitsCaseSpec spec = nbits_spec(t, bits, 150, 256, 2048, 128, zp, true);
        spec.init = reference::WeightInit::kAllCodes;
        SCOPED_TRACE(::testing::Message() << bits << "-bit all codes " << nbits_zero_points_name(zp) << " "
                                          << dtype_name(t));
        check_nbits(reference::make_random_nbits_case(spec, seed++), 128);
      }
  for (const int64_t m : kRows) {
    const DType t = kDTypes[seed % 2];
    const int bits = seed % 2 == 0 ? 8 : 4;
    SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t));
    check_nbits(reference::make_random_nbits_case(nbits_spec(t, bits, m, 520, 4096, 128, seed % 3 == 0, true), seed),
                m > 128 ? 256 : 128);
    ++seed;
  }
}

// The planner's own choice at a prefill size takes the mixed-input GEMM (M >= 128 on tiles
// that fill the GPU, SM90),
// and its run inside a CUDA graph matches the reference.
TEST(MixedGemm, PlannedAndInCudaGraph) {
  BQMM_REQUIRE_MIXED();
  const Handle& handle = *testing::shared_handle();
  const Fp8Case c = reference::make_random_fp8_case(DType::kBFloat16, 300, 8192, 512, 128, true, false, 1500);
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, testing::Fp8Knobs{}, &d));
  ASSERT_EQ(d.plan.path, Fp8Path::kMixedGemm);
  BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(handle, s); }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

// Small shapes for compute-sanitizer: each format and tile, masked rows and columns.
TEST(MixedGemm, SanitizeSmall) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1600;
  for (const int tile_m : {128, 256}) {
    const DType t = kDTypes[seed % 2];
    SCOPED_TRACE(::testing::Message() << "tile_m=" << tile_m << " " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 70, 40, 320, 64, true, false, seed), tile_m);
    for (const int bits : {4, 8})
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(t, bits, 70, 40, 320, 64, NBitsZeroPoints::kPacked, true), seed),
                  tile_m);
    ++seed;
  }
}

}  // namespace
}  // namespace bqmm
