// The mixed-input GEMM (cuda/gemm/mixed_gemm.cuh, CUTLASS's SM90 collective) through the
// operators' validate -> plan -> run, the plan override forcing it (mixed=1) and each tile
// and schedule (mixed_tile, mixed_sk, mixed_swizzle: 128 and 256 rows, persistent in
// CUTLASS's tile order and weight tiles first, and stream-K), against the float64
// reference: FP8 (weight-only and W8A8 on QDQ'd A) and 8-bit / 4-bit weights with every
// zero-point form (none, packed, typed), both activation types, bias, block sizes 64 / 128
// / 256, K not a multiple of block_size (a partial last block; for N-bit random padding
// codes in the stored row), M not a multiple of the tile and N not a multiple of the
// 128-row weight tile. Every case checks that the plan is the mixed-input GEMM, so a
// planner that stops taking it fails here rather than passing on another path. Y is
// NaN-poisoned first; one case runs inside a CUDA graph; small cases for
// compute-sanitizer. The prepack functions write the reference's layout bit for bit, and
// the GEMM given their output writes the Y it writes without (bit for bit). Skips itself
// without an SM90 device or a build without it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
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

// The kernels a plan can run: tiles of 128 or 256 activation rows, on the persistent grid
// (in CUTLASS's tile order, or weight tiles first in bands of `swizzle` activation tiles)
// or stream-K.
struct Schedule {
  int tile_m;
  bool stream_k;
  int swizzle = 0;
};
constexpr Schedule kSchedules[] = {{128, false}, {256, false},    {128, true},
                                   {256, true},  {128, false, 4}, {256, false, 2}};
constexpr int kNumSchedules = sizeof(kSchedules) / sizeof(kSchedules[0]);
::std::ostream& operator<<(::std::ostream& os, const Schedule& s) {
  os << "tile_m=" << s.tile_m << (s.stream_k ? " stream-K" : " persistent");
  if (s.swizzle > 0) os << " swizzle=" << s.swizzle;
  return os;
}

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

PlanOverride force_mixed(const Schedule& s) {
  PlanOverride o;
  o.mixed = 1;
  o.mixed_sk = s.stream_k ? 1 : 0;
  o.mixed_tile = s.tile_m;
  o.mixed_swizzle = s.swizzle;
  return o;
}

template <typename Plan>
void expect_schedule(const Plan& plan, const Schedule& s) {
  ASSERT_EQ(plan.gemm.tile_m, s.tile_m);
  ASSERT_EQ(plan.gemm.stream_k, s.stream_k);
  ASSERT_EQ(plan.gemm.swizzle, s.swizzle);
  ASSERT_EQ(plan.regions.partial_bytes > 0, s.stream_k);
}

void check_fp8(const Fp8Case& c, const Schedule& s) {
  testing::Fp8Knobs knobs;
  knobs.force = force_mixed(s);
  testing::Fp8Run run;
  BQMM_ASSERT_OK(testing::run_fp8_on_device(*testing::shared_handle(), c, knobs, &run));
  ASSERT_EQ(run.plan.path, Fp8Path::kMixedGemm) << to_string(knobs.force);
  expect_schedule(run.plan, s);
  EXPECT_TRUE(testing::matches_reference(c, run.y));
}

void check_nbits(const NBitsCase& c, const Schedule& s) {
  testing::NBitsKnobs knobs;
  knobs.force = force_mixed(s);
  testing::NBitsRun run;
  BQMM_ASSERT_OK(testing::run_nbits_on_device(*testing::shared_handle(), c, knobs, &run));
  ASSERT_EQ(run.plan.path, NBitsPath::kMixedGemm);
  expect_schedule(run.plan, s);
  EXPECT_TRUE(testing::matches_reference(c, run.y));
}

// FP8: every row count on every schedule, blocks 64 / 128 / 256 with K % block != 0 in the
// second and third shapes, N of a partial last weight tile.
TEST(MixedGemmFp8, EveryRowCountTileAndBlockAgainstReference) {
  BQMM_REQUIRE_MIXED();
  struct Shape3 { int64_t n, k, block; };
  const Shape3 shapes[] = {{1000, 1024, 128}, {136, 1088, 256}, {520, 1040, 64}};
  uint64_t seed = 1100;
  for (const Shape3 sh : shapes)
    for (const int64_t m : kRows)
      for (const Schedule& sched : kSchedules) {
        const DType t = kDTypes[seed % 2];
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << sh.n << " K=" << sh.k
                                          << " block=" << sh.block << " " << dtype_name(t) << " "
                                          << sched);
        const Fp8Case c = reference::make_random_fp8_case(t, m, sh.n, sh.k, sh.block,
                                                          /*bias=*/seed % 3 != 0, /*w8a8=*/false, seed);
        ++seed;
        check_fp8(c, sched);
      }
}

// Every e4m3 code, and W8A8 (a_scale) with blocks of 64, which the W8A8 GEMM does not
// take: A is QDQ'd into the workspace first.
TEST(MixedGemmFp8, AllCodesAndW8a8) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1200;
  for (const DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << "all codes " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 200, 264, 2048, 128, true, false, seed,
                                              reference::WeightInit::kAllCodes),
              kSchedules[seed % kNumSchedules]);
    ++seed;
  }
  for (const DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << "w8a8 block 64 " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 129, 1000, 960, 64, true, /*w8a8=*/true, seed),
              kSchedules[seed % kNumSchedules]);
    ++seed;
  }
}

// N-bit: both widths, blocks 64 / 128 / 256, each zero-point form, K = 1056 (a partial
// last block, random padding codes); M, the type, the schedule and the bias cycle with the seed.
TEST(MixedGemmNBits, EveryBlockAndZeroPointFormAgainstReference) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1300;
  for (const int bits : {4, 8})
    for (const int64_t block : {int64_t{64}, int64_t{128}, int64_t{256}})
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
        const DType t = kDTypes[seed % 2];
        const int64_t m = kRows[seed % 7];
        const int64_t n = seed % 2 == 0 ? 1000 : 264;
        const Schedule& sched = kSchedules[seed % kNumSchedules];
        SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " N=" << n << " block=" << block
                                          << " zero points " << nbits_zero_points_name(zp) << " "
                                          << dtype_name(t) << " " << sched);
        const NBitsCase c = reference::make_random_nbits_case(
            nbits_spec(t, bits, m, n, 1056, block, zp, /*bias=*/seed % 3 != 1), seed);
        ++seed;
        check_nbits(c, sched);
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
        check_nbits(reference::make_random_nbits_case(spec, seed), kSchedules[seed % kNumSchedules]);
        ++seed;
      }
  for (const int64_t m : kRows) {
    const DType t = kDTypes[seed % 2];
    const int bits = seed % 2 == 0 ? 8 : 4;
    SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t));
    check_nbits(reference::make_random_nbits_case(nbits_spec(t, bits, m, 520, 4096, 128, seed % 3 == 0, true), seed),
                kSchedules[seed % kNumSchedules]);
    ++seed;
  }
}

// The planner's own choices at prefill sizes take the mixed-input GEMM (M >= 128, SM90):
// persistent with a wave of tiles or more, stream-K below; each run inside a CUDA graph (the
// stream-K flags' memset a node of it, so replays start from zeroed flags) matches the
// reference, replayed twice.
TEST(MixedGemm, PlannedAndInCudaGraph) {
  BQMM_REQUIRE_MIXED();
  const Handle& handle = *testing::shared_handle();
  struct Case { int64_t m, n, k; bool stream_k; };
  uint64_t seed = 1500;
  for (const Case cs : {Case{300, 8192, 512, false}, Case{200, 2048, 4096, true}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k);
    const Fp8Case c = reference::make_random_fp8_case(DType::kBFloat16, cs.m, cs.n, cs.k, 128, true, false, seed++);
    testing::Fp8DeviceCase d;
    BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
    BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, testing::Fp8Knobs{}, &d));
    ASSERT_EQ(d.plan.path, Fp8Path::kMixedGemm);
    ASSERT_EQ(d.plan.gemm.stream_k, cs.stream_k);
    BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(handle, s); }, /*replays=*/2));
    HostTensor y;
    BQMM_ASSERT_OK(d.y.download(&y));
    EXPECT_TRUE(testing::matches_reference(c, y));
  }
}

// Small shapes for compute-sanitizer: each format and schedule, masked rows and columns.
TEST(MixedGemm, SanitizeSmall) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1600;
  for (const Schedule& sched : kSchedules) {
    const DType t = kDTypes[seed % 2];
    SCOPED_TRACE(::testing::Message() << sched << " " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 70, 40, 320, 64, true, false, seed), sched);
    for (const int bits : {4, 8})
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(t, bits, 70, 40, 320, 64, NBitsZeroPoints::kPacked, true), seed),
                  sched);
    ++seed;
  }
}

// Bit for bit: same dtype, shape and bytes.
::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& expected) {
  if (got.dtype != expected.dtype || !(got.shape == expected.shape) || got.bytes.size() != expected.bytes.size())
    return ::testing::AssertionFailure() << "dtype or shape differs: " << got.shape.to_string() << " vs "
                                         << expected.shape.to_string();
  for (size_t i = 0; i < got.bytes.size(); ++i)
    if (got.bytes[i] != expected.bytes[i]) return ::testing::AssertionFailure() << "byte " << i << " differs";
  return ::testing::AssertionSuccess();
}

// The prepacked tensor of `shape`, NaN-poisoned, filled by `prepack` on a fresh stream;
// checked against `expected` (the reference's layout and dtype) bit for bit.
template <typename Prepack>
void prepack_and_check(const Shape& shape, const HostTensor& expected, const Prepack& prepack,
                       harness::DeviceTensor* out) {
  BQMM_ASSERT_OK(testing::upload_poisoned(expected.dtype, shape, out));
  BQMM_ASSERT_OK(testing::run_on_fresh_stream([&](cudaStream_t s) { return prepack(out->mutable_view(), s); }));
  HostTensor got;
  BQMM_ASSERT_OK(out->download(&got));
  EXPECT_TRUE(same_bits(got, expected));
}

// Y of device case `d` (planned), run in a CUDA graph replayed twice, NaN-poisoned first.
template <typename DeviceCase>
void run_twice_in_graph(DeviceCase& d, HostTensor* y) {
  const Handle& handle = *testing::shared_handle();
  BQMM_ASSERT_OK(d.y.poison());
  BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(handle, s); }, /*replays=*/2));
  BQMM_ASSERT_OK(d.y.download(y));
}

// FP8: prepack_fp8_matmul's output is b_scale transposed (fp8_prepacked); with it the plan
// has no scales region and says so, and every schedule writes the same Y as without it.
// A plan made without the prepacked input refuses arguments with it.
TEST(MixedGemmPrepack, Fp8SameYWithoutThePerRunPass) {
  BQMM_REQUIRE_MIXED();
  const Handle& handle = *testing::shared_handle();
  uint64_t seed = 1700;
  for (const Schedule& sched : kSchedules) {
    const DType t = kDTypes[seed % 2];
    SCOPED_TRACE(::testing::Message() << sched << " " << dtype_name(t));
    const Fp8Case c = reference::make_random_fp8_case(t, 150, 520, 1040, 64, /*bias=*/true, false, seed++);
    testing::Fp8Knobs knobs;
    knobs.force = force_mixed(sched);
    testing::Fp8DeviceCase d;
    BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
    BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, knobs, &d));
    ASSERT_EQ(d.plan.path, Fp8Path::kMixedGemm);
    ASSERT_GT(d.plan.regions.scales_bytes, 0u);
    HostTensor y_per_run;
    run_twice_in_graph(d, &y_per_run);
    EXPECT_TRUE(testing::matches_reference(c, y_per_run));

    harness::DeviceTensor prepacked;
    prepack_and_check(fp8_matmul_prepacked_shape(c.n(), c.k_blocks()), reference::fp8_prepacked(c),
                      [&](const MutableTensorView& out, cudaStream_t s) {
                        return prepack_fp8_matmul(d.b_scale.view(), out, s);
                      },
                      &prepacked);
    d.args.prepacked = prepacked.view();
    const Fp8MatMulPlan per_run_plan = d.plan;
    BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, knobs, &d));
    ASSERT_EQ(d.plan.path, Fp8Path::kMixedGemm);
    EXPECT_EQ(d.plan.regions.scales_bytes, 0u);
    std::ostringstream text;
    text << d.plan;
    EXPECT_NE(text.str().find("scales=prepacked"), std::string::npos) << text.str();
    expect_schedule(d.plan, sched);
    HostTensor y_prepacked;
    run_twice_in_graph(d, &y_prepacked);
    EXPECT_TRUE(same_bits(y_prepacked, y_per_run));

    // The per-run plan with the prepacked input given: a plan mismatch.
    const Status mismatch = run_fp8_matmul(handle, per_run_plan, d.args, d.workspace.data(), d.workspace.size(), nullptr);
    EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument) << mismatch.message();
  }
}

// N-bit: both widths, each zero-point form (the default's 2^(bits - 1) included), float16
// and bfloat16 scales: prepack_nbits_matmul's output is nbits_prepacked's bit for bit, and
// the GEMM writes the same Y with it as without it.
TEST(MixedGemmPrepack, NBitsEveryZeroPointFormSameY) {
  BQMM_REQUIRE_MIXED();
  const Handle& handle = *testing::shared_handle();
  uint64_t seed = 1800;
  for (const int bits : {4, 8})
    for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
      const DType t = kDTypes[seed % 2];
      const Schedule& sched = kSchedules[seed % kNumSchedules];
      SCOPED_TRACE(::testing::Message() << bits << "-bit zero points " << nbits_zero_points_name(zp) << " "
                                        << dtype_name(t) << " " << sched);
      reference::NBitsCaseSpec spec = nbits_spec(t, bits, 140, 264, 1056, 64, zp, /*bias=*/seed % 2 == 0);
      spec.init = reference::WeightInit::kAllCodes;
      const NBitsCase c = reference::make_random_nbits_case(spec, seed++);
      testing::NBitsKnobs knobs;
      knobs.force = force_mixed(sched);
      testing::NBitsDeviceCase d;
      BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
      BQMM_ASSERT_OK(testing::plan_nbits_case(handle, c, knobs, &d));
      ASSERT_EQ(d.plan.path, NBitsPath::kMixedGemm);
      HostTensor y_per_run;
      run_twice_in_graph(d, &y_per_run);
      EXPECT_TRUE(testing::matches_reference(c, y_per_run));

      harness::DeviceTensor prepacked;
      std::optional<TensorView> zero_points;
      if (d.args.zero_points) zero_points = d.args.zero_points;
      prepack_and_check(nbits_matmul_prepacked_shape(c.n(), c.k_blocks()), reference::nbits_prepacked(c),
                        [&](const MutableTensorView& out, cudaStream_t s) {
                          return prepack_nbits_matmul(c.attrs, d.scales.view(), zero_points, out, s);
                        },
                        &prepacked);
      d.args.prepacked = prepacked.view();
      BQMM_ASSERT_OK(testing::plan_nbits_case(handle, c, knobs, &d));
      ASSERT_EQ(d.plan.path, NBitsPath::kMixedGemm);
      EXPECT_EQ(d.plan.regions.scales_bytes, 0u);
      HostTensor y_prepacked;
      run_twice_in_graph(d, &y_prepacked);
      EXPECT_TRUE(same_bits(y_prepacked, y_per_run));
    }
}

// The weight as the GEMM dequantizes it, read back through an identity activation (A = I,
// M = K: Y[m, n] = w[n, m], one product with 1.0 among zeros, exact in float32):
// round_T((q - zp) * scale), the dequant path's weight, for the default zero point in both
// types and widths, and for packed zero points where the multiply-add is in float32
// (bfloat16 with 8-bit codes; core/gemm_plan.h, mixed_nbits_scales_dtype; there -zp *
// scale is exact too). This pins the code-to-weight step to one rounding: a multiply and
// an add rounded apart would break it. (Fractional typed zero points make (q - zp) * scale
// longer than float32, so both paths round it twice; the contract's bounds cover them.)
// Values compare equal (+0 and -0 alike, the one freedom of a sum of products).
TEST(MixedGemmNBits, DequantizedWeightExactlyRounded) {
  BQMM_REQUIRE_MIXED();
  uint64_t seed = 1700;
  for (const int bits : {4, 8})
    for (const DType t : kDTypes)
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked}) {
        if (zp == NBitsZeroPoints::kPacked && mixed_nbits_scales_dtype(t, bits) != DType::kFloat32) continue;
        const Schedule& sched = kSchedules[seed % kNumSchedules];
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t) << " zero points "
                                          << nbits_zero_points_name(zp) << " " << sched);
        constexpr int64_t kK = 256, kN = 264;
        reference::NBitsCaseSpec spec = nbits_spec(t, bits, kK, kN, kK, 64, zp, /*bias=*/false);
        spec.init = reference::WeightInit::kAllCodes;
        NBitsCase c = reference::make_random_nbits_case(spec, seed++);
        for (int64_t i = 0; i < c.a.numel(); ++i) c.a.set(i, i / kK == i % kK ? 1.0 : 0.0);
        testing::NBitsKnobs knobs;
        knobs.force = force_mixed(sched);
        testing::NBitsRun run;
        BQMM_ASSERT_OK(testing::run_nbits_on_device(*testing::shared_handle(), c, knobs, &run));
        ASSERT_EQ(run.plan.path, NBitsPath::kMixedGemm);
        ASSERT_EQ(run.y.numel(), kK * kN);
        HostTensor expected = HostTensor::zeros(t, run.y.shape);
        std::vector<double> w;
        for (int64_t n = 0; n < kN; ++n) {
          reference::nbits_weight_row(c, n, &w);
          for (int64_t m = 0; m < kK; ++m) expected.set(m * kN + n, w[m]);  // rounded to T
        }
        int64_t differ = 0, first = -1;
        for (int64_t i = 0; i < expected.numel(); ++i)
          if (!(run.y.get(i) == expected.get(i)) && differ++ == 0) first = i;
        EXPECT_EQ(differ, 0) << "first at Y[" << first / kN << ", " << first % kN << "]: " << run.y.get(first)
                             << " against " << expected.get(first);
      }
}

}  // namespace
}  // namespace bqmm
