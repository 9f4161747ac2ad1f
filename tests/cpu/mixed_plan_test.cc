// The mixed-input GEMM's planning (core/gemm_plan.h; both planners): where it is taken
// (M > 64 on an SM90 build that has it, where the fused GEMM is not the faster, and every
// M above 128), why not elsewhere (the reasons --explain
// prints), its schedule model (tile 128 / 256, persistent / stream-K) and its workspace of
// transposed scales and stream-K's partial tiles. Where the library is built
// without it (no CUTLASS headers or no SM90), the tests check that it is never planned.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "common/plan_testing.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"
#include "core/workspace.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

TEST(MixedPlan, PathNames) {
  EXPECT_STREQ(fp8_path_name(Fp8Path::kMixedGemm), "mixed_gemm");
  EXPECT_STREQ(nbits_path_name(NBitsPath::kMixedGemm), "mixed_gemm");
}

// The schedule model (core/gemm_plan.h) on the prefill shapes, 132 SMs: persistent on
// whole waves, stream-K where the last wave would leave SMs idle, tile 256 where it needs
// fewer waves by more than its 1.44x time per tile, stream-K on it only where M fills it.
TEST(MixedPlan, ScheduleRule) {
  struct Case { int64_t m, n, k; int tile; bool stream_k; };
  const Case cases[] = {
      {128, 8192, 8192, 128, true},     {256, 8192, 8192, 128, false},  {384, 8192, 8192, 256, false},
      {768, 8192, 8192, 256, true},     {1024, 8192, 8192, 256, false}, {4096, 8192, 8192, 256, false},
      {128, 4096, 14336, 128, true},    {256, 4096, 14336, 256, true},  {384, 4096, 14336, 128, true},
      {512, 4096, 14336, 256, true},    {1024, 4096, 14336, 256, false}, {128, 14336, 4096, 128, false},
      {256, 14336, 4096, 256, false},   {1024, 14336, 4096, 256, true}, {256, 28672, 8192, 256, true},
      {1024, 28672, 8192, 256, false},  {300, 8192, 8192, 256, false},  {129, 8192, 8192, 128, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.m << " N=" << c.n << " K=" << c.k);
    const MixedSchedule s = choose_mixed_schedule(c.m, c.n, c.k, 132);
    EXPECT_EQ(s.tile_m, c.tile);
    EXPECT_EQ(s.stream_k, c.stream_k);
  }
  // The model's terms: whole waves for the persistent grid; the wave's fraction plus the
  // fix-up (0.2 of a wave at 128 K tiles) for stream-K; 256-row tiles M does not fill are
  // no stream-K candidate.
  EXPECT_EQ(mixed_schedule_cost({128, false}, 128, 8192, 8192, 132), 100 * 100);
  EXPECT_EQ(mixed_schedule_cost({256, false}, 768, 8192, 8192, 132), 2 * 100 * 144);
  EXPECT_EQ(mixed_schedule_cost({128, true}, 128, 8192, 8192, 132), (6400 / 132 + 20) * 100);
  EXPECT_EQ(mixed_schedule_cost({256, true}, 384, 8192, 8192, 132), -1);
  // Forced: each tile and schedule, alone or together.
  const MixedSchedule t256 = choose_mixed_schedule(128, 8192, 8192, 132, {-1, 256});
  EXPECT_EQ(t256.tile_m, 256);
  EXPECT_FALSE(choose_mixed_schedule(128, 8192, 8192, 132, {0, 0}).stream_k);
  const MixedSchedule sk256 = choose_mixed_schedule(100, 8192, 8192, 132, {1, 256});
  EXPECT_EQ(sk256.tile_m, 256);
  EXPECT_TRUE(sk256.stream_k);
  EXPECT_TRUE(choose_mixed_schedule(4096, 8192, 8192, 132, {1, 0}).stream_k);
  EXPECT_EQ(mixed_scales_bytes(8192, 64, DType::kFloat32, false), 8192 * 64 * 4);
  EXPECT_EQ(mixed_scales_bytes(8192, 64, DType::kFloat32, true), 2 * 8192 * 64 * 4);
  EXPECT_EQ(mixed_scales_bytes(8192, 64, DType::kFloat16, true), 2 * 8192 * 64 * 2);
  // N-bit's scales and zeros are T, but float32 for bfloat16 with 8-bit codes.
  EXPECT_EQ(mixed_nbits_scales_dtype(DType::kFloat16, 4), DType::kFloat16);
  EXPECT_EQ(mixed_nbits_scales_dtype(DType::kFloat16, 8), DType::kFloat16);
  EXPECT_EQ(mixed_nbits_scales_dtype(DType::kBFloat16, 4), DType::kBFloat16);
  EXPECT_EQ(mixed_nbits_scales_dtype(DType::kBFloat16, 8), DType::kFloat32);
}

// Stream-K's workspace: one float32 tile per output tile and the flags, after the scales.
TEST(MixedPlan, StreamKWorkspace) {
  EXPECT_EQ(mixed_tiles(128, 8192, 128), 64);
  EXPECT_EQ(mixed_tiles(129, 8200, 256), 65);
  EXPECT_EQ(mixed_stream_k_bytes(128, 8192, 128), 64 * 128 * 128 * 4 + 64 * 8 + 384);
  EXPECT_EQ(mixed_stream_k_bytes(512, 4096, 256), 64 * 128 * 256 * 4 + 64 * 8 + 384);
  if (!mixed_gemm_built()) GTEST_SKIP() << "this build has no mixed-input GEMM: checked the sizes only";
  for (const int bits : {4, 8}) {
    const NBitsMatMulPlan q = plan(nbits_problem(128, 8192, 8192, bits, 128), kHopper, parsed("mixed=1"));
    EXPECT_EQ(q.path, NBitsPath::kMixedGemm);
    EXPECT_TRUE(q.gemm.stream_k);
    EXPECT_EQ(q.gemm.tile_m, 128);
    EXPECT_EQ(q.regions.partial_bytes, static_cast<size_t>(mixed_stream_k_bytes(128, 8192, 128)));
    EXPECT_GE(q.regions.partial_offset, q.regions.scales_offset + q.regions.scales_bytes);
    EXPECT_EQ(q.workspace_bytes, align_up(q.regions.partial_offset + q.regions.partial_bytes, kWorkspaceAlign));
  }
  const Fp8MatMulPlan f = plan(fp8_problem(1024, 8192, 8192));
  EXPECT_FALSE(f.gemm.stream_k);
  EXPECT_EQ(f.regions.partial_bytes, 0u);
  // FP8 at M = 256 on 4096 x 14336 (64 tiles) is stream-K's.
  const Fp8MatMulProblem sk_256 = fp8_problem(256, 4096, 14336);
  EXPECT_EQ(plan(sk_256, kHopper, parsed("mixed_sk=0")).path, Fp8Path::kMixedGemm);
  EXPECT_FALSE(plan(sk_256, kHopper, parsed("mixed_sk=0")).gemm.stream_k);
  const Fp8MatMulPlan forced = plan(fp8_problem(1024, 8192, 8192), kHopper, parsed("mixed_sk=1,mixed_tile=256"));
  EXPECT_TRUE(forced.gemm.stream_k);
  EXPECT_EQ(forced.gemm.tile_m, 256);
  EXPECT_EQ(forced.regions.partial_bytes, static_cast<size_t>(mixed_stream_k_bytes(1024, 8192, 256)));
  std::ostringstream os;
  os << plan(sk_256);
  EXPECT_NE(os.str().find("tile_m=256; tile_n=128; schedule=stream_k"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find(", partial " + std::to_string(mixed_stream_k_bytes(256, 4096, 256)) + "@"),
            std::string::npos)
      << os.str();
}

// The persistent grid's tile order (mixed_swizzle): weight tiles first in bands of 4
// activation tiles from 8 activation tiles (M = 2048 on 256-row tiles) where both tile
// counts are whole bands (CUTLASS would run the padding tiles), CUTLASS's order below,
// elsewhere and on stream-K; the override forces either on the persistent grid; the plan
// prints it where it is not CUTLASS's.
TEST(MixedPlan, TileOrderRule) {
  EXPECT_EQ(mixed_swizzle(4096, 8192, {256, false}), kMixedSwizzle);
  EXPECT_EQ(mixed_swizzle(2048, 8192, {256, false}), kMixedSwizzle);
  EXPECT_EQ(mixed_swizzle(4096, 14336, {256, false}), kMixedSwizzle);  // 112 weight tiles
  EXPECT_EQ(mixed_swizzle(1024, 8192, {128, false}), kMixedSwizzle);
  EXPECT_EQ(mixed_swizzle(1793, 8192, {256, false}), kMixedSwizzle);  // 8 tiles, the last one partial
  EXPECT_EQ(mixed_swizzle(1792, 8192, {256, false}), 0);              // 7 tiles
  EXPECT_EQ(mixed_swizzle(1024, 8192, {256, false}), 0);
  EXPECT_EQ(mixed_swizzle(2304, 8192, {256, false}), 0);   // 9 activation tiles: 3 would be padding
  EXPECT_EQ(mixed_swizzle(4096, 11008, {256, false}), 0);  // 86 weight tiles: 2 would be padding
  EXPECT_EQ(mixed_swizzle(4096, 8192, {256, true}), 0);
  EXPECT_EQ(mixed_swizzle(256, 8192, {128, true}, {-1, 0, 8}), 0);  // stream-K: never
  EXPECT_EQ(mixed_swizzle(256, 8192, {128, false}, {-1, 0, 8}), 8);
  EXPECT_EQ(mixed_swizzle(4096, 8192, {256, false}, {-1, 0, 0}), 0);
  if (!mixed_gemm_built()) GTEST_SKIP() << "this build has no mixed-input GEMM: checked the rule only";
  const Fp8MatMulPlan f = plan(fp8_problem(4096, 8192, 8192));
  ASSERT_EQ(f.path, Fp8Path::kMixedGemm);
  EXPECT_EQ(f.gemm.tile_m, 256);
  EXPECT_EQ(f.gemm.swizzle, kMixedSwizzle);
  std::ostringstream os;
  os << f;
  EXPECT_NE(os.str().find("schedule=persistent; swizzle=4"), std::string::npos) << os.str();
  EXPECT_EQ(plan(fp8_problem(1024, 8192, 8192)).gemm.swizzle, 0);
  EXPECT_EQ(plan(fp8_problem(4096, 8192, 8192), kHopper, parsed("mixed_swizzle=0")).gemm.swizzle, 0);
  const NBitsMatMulPlan q = plan(nbits_problem(2048, 8192, 8192, 4, 128), kHopper, parsed("mixed_swizzle=2"));
  ASSERT_EQ(q.path, NBitsPath::kMixedGemm);
  EXPECT_EQ(q.gemm.swizzle, 2);
  std::ostringstream none;
  none << plan(fp8_problem(1024, 8192, 8192));
  EXPECT_EQ(none.str().find("swizzle="), std::string::npos) << none.str();
}

// The fused GEMM's view of an M x N weight of 8192 K (row_bytes: K at `bits`).
GemmShape shape(int64_t m, int64_t n, int bits, bool fp8, int64_t block_size, bool bf16 = false) {
  return GemmShape{m, n, 8192 * bits / 8, bits, fp8, block_size, bf16};
}

// Above 128 rows, N-bit codes on the fused GEMM's 256-row tile: at M = 129 on every
// shape, to 256 where its tiles are at most half the SMs (every format).
TEST(MixedPlan, RowsTheTallTileKeeps) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  EXPECT_EQ(kTallKeepsRowsBelow, 130);
  // Per format (4-bit float16, 4-bit bfloat16, 8-bit float16, 8-bit bfloat16): M = 129,
  // 130, 192, 193, 256.
  struct Case { int64_t n; const char* fused; };
  const Case cases[] = {
      {8192, "FFFFF FFFFF FFFFF FFFFF"},   // 64 tiles of 256 rows
      {4096, "FFFFF FFFFF FFFFF FFFFF"},   // 32
      {14336, "F---- F---- F---- F----"},  // 112
      {28672, "F---- F---- F---- F----"},  // 224
  };
  const int64_t ms[] = {129, 130, 192, 193, 256};
  for (const Case& c : cases)
    for (int f = 0; f < 4; ++f)
      for (int i = 0; i < 5; ++i) {
        SCOPED_TRACE(::testing::Message() << "format " << f << " M=" << ms[i] << " N=" << c.n);
        const int bits = f < 2 ? 4 : 8;
        const bool bf16 = f % 2 == 1;
        EXPECT_EQ(fused_gemm_keeps_rows(shape(ms[i], c.n, bits, false, 128, bf16), kHopper),
                  c.fused[6 * f + i] == 'F');
      }
  EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(129, 28672, 8, false, 128), kHopper),
               "M = 129 on the fused GEMM's 256-row tile: it is faster there");
  EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(256, 8192, 4, false, 64), kHopper),
               "M <= 256 and the fused GEMM's 256-row tiles at most half the SMs (its K split fills "
               "them): it is faster there");
  EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(256, 8192, 8, false, 128), kHopper),
               "M <= 256 and the fused GEMM's 256-row tiles at most half the SMs (its K split fills "
               "them): it is faster there");
  EXPECT_EQ(fused_gemm_keeps_rows_why(shape(200, 14336, 8, false, 128), kHopper), nullptr);
  EXPECT_EQ(fused_gemm_keeps_rows_why(shape(200, 14336, 4, false, 128, true), kHopper), nullptr);
}

// Between 65 and 128 rows the fused GEMM keeps the rows where it was measured faster
// (fused_gemm_keeps_rows, core/mixed_plan.h): on its 128-row Hopper tile every M to 128,
// but FP8 with bfloat16 activations from 96 rows where the tiles fill 3/4 of the SMs; on
// 64-row tiles (N-bit blocks under 64; FP8 float16 where they are one wave) one wave of
// them. The prefill suite's shapes at the
// measured M (132 SMs).
TEST(MixedPlan, RowsTheFusedGemmKeeps) {
  EXPECT_EQ(kMixedMinRows, 65);
  EXPECT_EQ(kFusedKeepsRowsBelow, 96);
  // Per format (FP8 float16, FP8 bfloat16, 4-bit, 8-bit): M = 65, 96, 127, 128.
  struct Case { int64_t n, k; const char* fused; };
  const Case cases[] = {
      {8192, 8192, "FFFF FFFF FFFF FFFF"},   // 64 tiles of 128 rows
      {4096, 14336, "FFFF FFFF FFFF FFFF"},  // 32
      {14336, 4096, "FFFF F--- FFFF FFFF"},  // 112
      {28672, 8192, "FFFF F--- FFFF FFFF"},  // 224
  };
  const int64_t ms[] = {65, 96, 127, 128};
  for (const Case& c : cases)
    for (int f = 0; f < 4; ++f)
      for (int i = 0; i < 4; ++i) {
        const int64_t m = ms[i];
        // Without the Hopper mainloop (a build without SM90) the mma.sync tiles' rule: M < 128.
        const bool fused = wgmma_built() ? c.fused[5 * f + i] == 'F' : m < 128;
        SCOPED_TRACE(::testing::Message() << "format " << f << " M=" << m << " N=" << c.n << " K=" << c.k);
        const bool fp8 = f < 2, bf16 = f == 1;
        const int bits = f == 2 ? 4 : 8;
        EXPECT_EQ(fused_gemm_keeps_rows(shape(m, c.n, bits, fp8, 128, bf16), kHopper), fused);
        if (!mixed_gemm_built() || !wgmma_built()) continue;
        if (fp8) {
          Fp8MatMulProblem problem = fp8_problem(m, c.n, c.k);
          problem.dtype = bf16 ? DType::kBFloat16 : DType::kFloat16;
          EXPECT_EQ(plan(problem).path, fused ? Fp8Path::kFusedGemm : Fp8Path::kMixedGemm);
        } else {
          EXPECT_EQ(plan(nbits_problem(m, c.n, c.k, bits, 128)).path,
                    fused ? NBitsPath::kFusedGemm : NBitsPath::kMixedGemm);
        }
      }
  // The reasons --explain prints, one per branch of the rule.
  if (wgmma_built()) {
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(128, 28672, 8, false, 128), kHopper),
                 "M within the fused GEMM's 128-row tile: it is faster there");
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(128, 8192, 4, false, 32), kHopper),
                 "M <= 128 and the fused GEMM's 64-row tiles one wave of SMs: it is faster there");
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(128, 8192, 8, true, 128), kHopper),
                 "M <= 128 and the fused GEMM's 64-row tiles one wave of SMs: it is faster there");
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(96, 8192, 8, true, 128, true), kHopper),
                 "M within the fused GEMM's 128-row tile: it is faster there");
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(65, 28672, 8, true, 128, true), kHopper),
                 "M within the fused GEMM's 128-row tile: it is faster there");
    EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(65, 8192, 4, false, 32), kHopper),
                 "M < 96 and the fused GEMM's tiles one wave of SMs: it is faster there");
    EXPECT_EQ(fused_gemm_keeps_rows_why(shape(96, 14336, 8, true, 128, true), kHopper), nullptr);
    EXPECT_EQ(fused_gemm_keeps_rows_why(shape(65, 28672, 4, false, 32), kHopper), nullptr);
  }
  EXPECT_STREQ(fused_gemm_keeps_rows_why(shape(100, 8192, 4, false, 128), kAmpere),
               "M < 128 on the fused GEMM's mma.sync tiles: it is faster there");
  // At most 64 rows, always; without the Hopper mainloop (Ampere; FP8 blocks of 64), below
  // 128 rows, as before it.
  EXPECT_TRUE(fused_gemm_keeps_rows(shape(64, 28672, 4, false, 128), kHopper));
  EXPECT_TRUE(fused_gemm_keeps_rows(shape(127, 28672, 4, false, 128), kAmpere));
  EXPECT_FALSE(fused_gemm_keeps_rows(shape(128, 8192, 4, false, 128), kAmpere));
  if (wgmma_built()) {
    EXPECT_FALSE(fused_gemm_keeps_rows(shape(100, 14336, 8, true, 128, true), kHopper));
    EXPECT_TRUE(fused_gemm_keeps_rows(shape(100, 8192, 8, true, 128, true), kHopper));
  }
  EXPECT_TRUE(fused_gemm_keeps_rows(shape(100, 8192, 8, true, 64), kHopper));
  // Every zero-point form splits the rows between the two GEMMs alike.
  for (const int64_t m : {64, 100, 128, 256})
    for (const int bits : {4, 8}) {
      NBitsMatMulProblem packed = nbits_problem(m, 8192, 8192, bits, 128);
      packed.zero_points = NBitsZeroPoints::kPacked;
      NBitsMatMulProblem typed = packed;
      typed.zero_points = NBitsZeroPoints::kTyped;
      EXPECT_EQ(plan(typed).path, plan(packed).path) << m << " " << bits;
    }
}

// From 128 rows on SM90 both operators take it, every format and activation type, blocks
// of 64, 128 and 256; the scales region (and stream-K's partial tiles) the plan's workspace.
TEST(MixedPlan, TakenAbove128RowsOnHopper) {
  if (!mixed_gemm_built()) {
    EXPECT_STREQ(fp8_mixed_gemm_refusal(fp8_problem(1024, 8192, 8192), kHopper, {}),
                 "not built (no CUTLASS headers or no SM90 in CUDA_ARCHITECTURES)");
    GTEST_SKIP() << "this build has no mixed-input GEMM: checked that it is refused";
  }
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const int64_t block : {int64_t{64}, int64_t{128}, int64_t{256}})
      for (const int64_t m : {int64_t{129}, int64_t{256}, int64_t{1024}, int64_t{4096}}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " block=" << block << " M=" << m);
        const Fp8MatMulPlan f = plan(fp8_problem(m, 8192, 8192, block, t));
        EXPECT_EQ(f.path, Fp8Path::kMixedGemm);
        const MixedSchedule sched = choose_mixed_schedule(m, 8192, 8192, kHopper.num_sms);
        EXPECT_EQ(f.gemm.tile_m, sched.tile_m);
        EXPECT_EQ(f.gemm.stream_k, sched.stream_k);
        EXPECT_EQ(f.regions.scales_bytes, static_cast<size_t>(8192 * (8192 / block) * 4));
        const size_t end = sched.stream_k ? f.regions.partial_offset + f.regions.partial_bytes
                                          : f.regions.scales_offset + f.regions.scales_bytes;
        EXPECT_EQ(f.workspace_bytes, align_up(end, kWorkspaceAlign));
        for (const int bits : {4, 8}) {
          const NBitsMatMulPlan q = plan(nbits_problem(m, 8192, 8192, bits, block, t));
          // To 256 rows the fused GEMM's 256-row tile keeps N-bit codes (64 tiles, at most
          // half the SMs; fused_gemm_keeps_rows).
          const bool fused = m <= 256 && wgmma_built();
          EXPECT_EQ(q.path, fused ? NBitsPath::kFusedGemm : NBitsPath::kMixedGemm);
          if (fused) {
            EXPECT_EQ(q.gemm.tile_m, 256);
            continue;
          }
          // Scales and zeros of T (2 bytes), float32 for bfloat16 with 8-bit codes.
          const size_t scale_bytes = t == DType::kBFloat16 && bits == 8 ? 4 : 2;
          EXPECT_EQ(q.regions.scales_bytes, 2 * 8192 * static_cast<size_t>(8192 / block) * scale_bytes);
        }
      }
  // FP8 from 129 rows on every prefill shape (and at 128 where the fused GEMM does not
  // keep it: FP8 bfloat16 on 28672 x 8192, 224 tiles, stream-K, and 14336 x 4096, 112
  // tiles, persistent); N-bit codes from 130 rows where the fused GEMM's 256-row tiles are
  // more than half the SMs; forced (mixed=1) it takes every M above 8.
  EXPECT_EQ(plan(fp8_problem(128, 28672, 8192, 128, DType::kBFloat16)).path, Fp8Path::kMixedGemm);
  EXPECT_TRUE(plan(fp8_problem(128, 28672, 8192, 128, DType::kBFloat16)).gemm.stream_k);
  EXPECT_EQ(plan(fp8_problem(128, 14336, 4096, 128, DType::kBFloat16)).path, Fp8Path::kMixedGemm);
  EXPECT_FALSE(plan(fp8_problem(128, 14336, 4096, 128, DType::kBFloat16)).gemm.stream_k);
  EXPECT_EQ(plan(nbits_problem(130, 14336, 4096, 4, 128)).path, NBitsPath::kMixedGemm);
  EXPECT_EQ(plan(nbits_problem(256, 28672, 8192, 8, 128)).path, NBitsPath::kMixedGemm);
  EXPECT_EQ(plan(nbits_problem(129, 14336, 4096, 4, 128)).path,
            wgmma_built() ? NBitsPath::kFusedGemm : NBitsPath::kMixedGemm);
  const Fp8MatMulPlan sk = plan(fp8_problem(256, 4096, 14336));
  EXPECT_EQ(sk.path, Fp8Path::kMixedGemm);
  EXPECT_TRUE(sk.gemm.stream_k);
  EXPECT_EQ(plan(fp8_problem(512, 4096, 14336)).path, Fp8Path::kMixedGemm);
  EXPECT_EQ(plan(fp8_problem(9, 8192, 8192), kHopper, parsed("mixed=1")).path, Fp8Path::kMixedGemm);
  EXPECT_EQ(plan(fp8_problem(8, 8192, 8192), kHopper, parsed("mixed=1")).path, Fp8Path::kGemvMma);
  EXPECT_EQ(plan(fp8_problem(300, 8192, 8192), kHopper, parsed("mixed_tile=256")).gemm.tile_m, 256);
  // W8A8 with blocks of 64 (the W8A8 GEMM needs 128): A QDQ'd into the workspace first.
  Fp8MatMulProblem w = fp8_problem(300, 8192, 8192, 64);
  w.has_a_scale = true;
  const Fp8MatMulPlan wp = plan(w);
  EXPECT_EQ(wp.path, Fp8Path::kMixedGemm);
  EXPECT_EQ(wp.regions.act_bytes, static_cast<size_t>(300 * 8192 * 2));
  // The printed plan names the tile and the region.
  std::ostringstream os;
  os << plan(fp8_problem(1024, 8192, 8192));
  const std::string text = os.str();
  EXPECT_NE(text.find("path=mixed_gemm"), std::string::npos) << text;
  EXPECT_NE(text.find("tile_m=256; tile_n=128"), std::string::npos) << text;
  EXPECT_NE(text.find("scales 2097152@0"), std::string::npos) << text;
  EXPECT_NE(text.find("; scales=per_run"), std::string::npos) << text;
}

// With the prepacked input (has_prepacked) the same path, tile and schedule with no scales
// region (the run reads the caller's tensor instead of writing the workspace's), and the
// plan says so; other paths are unchanged by it.
TEST(MixedPlan, PrepackedScalesNeedNoRegion) {
  if (!mixed_gemm_built()) GTEST_SKIP() << "this build has no mixed-input GEMM";
  for (const int64_t m : {int64_t{256}, int64_t{1024}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    Fp8MatMulProblem f = fp8_problem(m, 8192, 8192, 128, DType::kBFloat16);
    const Fp8MatMulPlan per_run = plan(f);
    f.has_prepacked = true;
    const Fp8MatMulPlan prepacked = plan(f);
    EXPECT_EQ(prepacked.path, Fp8Path::kMixedGemm);
    EXPECT_EQ(prepacked.gemm.tile_m, per_run.gemm.tile_m);
    EXPECT_EQ(prepacked.gemm.stream_k, per_run.gemm.stream_k);
    EXPECT_EQ(prepacked.regions.scales_bytes, 0u);
    EXPECT_EQ(prepacked.workspace_bytes + align_up(per_run.regions.scales_bytes, kWorkspaceAlign),
              per_run.workspace_bytes);
    std::ostringstream os;
    os << prepacked;
    EXPECT_NE(os.str().find(" prepacked align="), std::string::npos) << os.str();
    EXPECT_NE(os.str().find("; scales=prepacked"), std::string::npos) << os.str();
    EXPECT_EQ(os.str().find("scales 0@"), std::string::npos) << os.str();
    for (const int bits : {4, 8}) {
      // 28672 x 8192: 224 tiles, the mixed-input GEMM's at M = 256 (fused_gemm_keeps_rows).
      NBitsMatMulProblem q = nbits_problem(m, 28672, 8192, bits, 128, DType::kFloat16);
      q.has_prepacked = true;
      const NBitsMatMulPlan qp = plan(q);
      EXPECT_EQ(qp.path, NBitsPath::kMixedGemm);
      EXPECT_EQ(qp.regions.scales_bytes, 0u);
      std::ostringstream qs;
      qs << qp;
      EXPECT_NE(qs.str().find("; scales=prepacked"), std::string::npos) << qs.str();
    }
  }
  // The decode GEMV and the fused GEMM read the operator's own layout: the same plan.
  for (const int64_t m : {int64_t{1}, int64_t{64}}) {
    Fp8MatMulProblem f = fp8_problem(m, 8192, 8192);
    const Fp8MatMulPlan without = plan(f);
    f.has_prepacked = true;
    const Fp8MatMulPlan with = plan(f);
    EXPECT_EQ(with.path, without.path);
    EXPECT_EQ(with.workspace_bytes, without.workspace_bytes);
  }
}

// Where it is not taken, and why: the first failing condition, in the planner's order.
TEST(MixedPlan, Refusals) {
  const char* built_reason = mixed_gemm_built() ? nullptr : "not built";
  struct Case { Fp8MatMulProblem p; DeviceInfo d; const char* ov; const char* why; };
  Fp8MatMulProblem unaligned = fp8_problem(1024, 8192, 8192);
  unaligned.alignment = 8;
  const Case cases[] = {
      {fp8_problem(1024, 8192, 8192), kHopper, "mixed=0", "mixed=0 (plan override)"},
      {fp8_problem(8, 8192, 8192), kHopper, "mixed=1", "M <= 8 (the decode GEMV's rows)"},
      {fp8_problem(64, 28672, 8192), kHopper, "", "M <= 64: the fused GEMM is faster there"},
      {fp8_problem(80, 8192, 8192), kHopper, "",
       wgmma_built() ? "M < 96 and the fused GEMM's tiles one wave of SMs: it is faster there"
                     : "M < 128 on the fused GEMM's mma.sync tiles: it is faster there"},
      {fp8_problem(1024, 8192, 8192), kAmpere, "", "not an SM90 device (CUTLASS's mixed-input collective is sm_90a)"},
      {fp8_problem(1024, 8192, 8192, 32), kHopper, "", "block_size % 64 != 0 (scale groups of whole 64-K tiles)"},
      {fp8_problem(1024, 8192, 8200, 64), kHopper, "", "K % 16 != 0 (TMA of whole 16-byte units of B)"},
      {fp8_problem(1024, 8191, 8192), kHopper, "", "N % 8 != 0 (rows of Y not whole 16-byte units)"},
      {unaligned, kHopper, "", "pointers not 16-byte aligned"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    const char* why = fp8_mixed_gemm_refusal(c.p, c.d, parsed(c.ov));
    ASSERT_NE(why, nullptr);
    const bool device_independent = std::string(c.why).rfind("mixed=0", 0) == 0 ||
                                    std::string(c.why).rfind("M <", 0) == 0 ||
                                    std::string(c.why).rfind("not an SM90", 0) == 0;
    if (built_reason != nullptr && !device_independent) {
      EXPECT_NE(std::string(why).find(built_reason), std::string::npos) << why;
    } else {
      EXPECT_STREQ(why, c.why);
    }
    EXPECT_NE(plan(c.p, c.d, parsed(c.ov)).path, Fp8Path::kMixedGemm);
  }
  // NBitsMatMul: g_idx first; 4-bit K in whole 32-code units; float32 activations.
  NBitsMatMulProblem g = nbits_problem(1024, 8192, 8192, 4, 128);
  g.has_g_idx = true;
  EXPECT_STREQ(nbits_mixed_gemm_refusal(g, kHopper, {}), "g_idx (act order)");
  EXPECT_EQ(plan(g).path, NBitsPath::kDequantGemm);
  if (mixed_gemm_built()) {
    EXPECT_STREQ(nbits_mixed_gemm_refusal(nbits_problem(1024, 8192, 8208, 4, 128), kHopper, {}),
                 "K % 32 != 0 (TMA of whole 16-byte units of B)");
    EXPECT_EQ(nbits_mixed_gemm_refusal(nbits_problem(1024, 8192, 8208, 8, 128), kHopper, {}), nullptr);
    // Both widths at every M (4-bit, too, since its codes decode in T).
    for (const int bits : {4, 8})
      for (const int64_t m : {int64_t{2048}, int64_t{4096}, int64_t{65536}})
        EXPECT_EQ(nbits_mixed_gemm_refusal(nbits_problem(m, 8192, 8192, bits, 128), kHopper, {}), nullptr);
    EXPECT_STREQ(nbits_mixed_gemm_refusal(nbits_problem(1024, 8192, 8192, 4, 128, DType::kFloat32), kHopper, {}),
                 "float32 activations (tensor cores take float16 / bfloat16)");
  }
}

}  // namespace
}  // namespace bqmm
