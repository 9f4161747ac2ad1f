// plan_nbits_matmul's dispatch decisions at their boundaries, the GEMV configuration,
// the dequant tiling and workspace layout, the kernel choices a PlanOverride forces, and
// BQMM_DEQUANT_SCRATCH_MIB.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "bqmm/nbits_matmul.h"
#include "common/plan_testing.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/gemv_split.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

NBitsMatMulProblem problem(int64_t m, int64_t n, int64_t k, int bits = 4,
                           int64_t block_size = 32, DType dtype = DType::kFloat16) {
  return nbits_problem(m, n, k, bits, block_size, dtype);
}

TEST(NBitsPlan, PathNames) {
  EXPECT_STREQ(nbits_path_name(NBitsPath::kEmpty), "empty");
  EXPECT_STREQ(nbits_path_name(NBitsPath::kBiasOnly), "bias_only");
  EXPECT_STREQ(nbits_path_name(NBitsPath::kGemv), "gemv");
  EXPECT_STREQ(nbits_path_name(NBitsPath::kDequantGemm), "dequant_gemm");
}

TEST(NBitsPlan, EmptyProblemsNeedNoWorkspace) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 4096}, {16, 0}, {0, 0}}) {
    const NBitsMatMulPlan p = plan(problem(m, n, 4096));
    EXPECT_EQ(p.path, NBitsPath::kEmpty);
    EXPECT_EQ(p.workspace_bytes, 0u);
  }
  const NBitsMatMulPlan p = plan(problem(3, 4096, 0));
  EXPECT_EQ(p.path, NBitsPath::kBiasOnly);
  EXPECT_EQ(p.workspace_bytes, 0u);
}

TEST(NBitsPlan, GemvUpToEightRows) {
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (int64_t m = 1; m <= 8; ++m) {
        const NBitsMatMulPlan p = plan(problem(m, 4096, 4096, bits, 32, t));
        EXPECT_EQ(p.path, NBitsPath::kGemv) << "M=" << m << " " << dtype_name(t);
        EXPECT_EQ(p.workspace_bytes, 0u);
      }
      // Above 8 rows float32 has neither the fused GEMM nor row groups.
      if (t == DType::kFloat32) {
        EXPECT_EQ(path(problem(9, 4096, 4096, bits, 32, t)), NBitsPath::kDequantGemm);
      }
    }
}

// With the fused GEMM forced off (gemm=0: the plans before it), above 8 rows the window
// kernel's line loads take row groups of 16 (float16 / bfloat16, rows of whole 128-byte
// lines, blocks of a 16-byte chunk or more), up to kGemvFusedMaxRows (measured faster than
// dequant + cuBLAS there); everything else above 8 rows is dequant + cuBLAS.
TEST(NBitsPlan, RowGroupsUpToTheFusedLimitWithoutTheGemm) {
  const PlanOverride off = without_gemm();
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (int64_t m : {9, 16, 17, 25, 32}) {
        SCOPED_TRACE(::testing::Message() << bits << " " << dtype_name(t) << " M=" << m);
        NBitsMatMulProblem p = problem(m, 4096, 4096, bits, 128, t);
        NBitsMatMulPlan pl = plan(p, kHopper, off);
        EXPECT_EQ(pl.path, NBitsPath::kGemv);
        EXPECT_TRUE(pl.gemv.window && pl.gemv.lines);
        EXPECT_FALSE(pl.gemv.fma);
        EXPECT_EQ(pl.gemv.row_groups, (m + 15) / 16);
        EXPECT_NE(printed(pl).find("row_groups="), std::string::npos);
        // By default one row group (M <= 16; 4-bit from 13 rows the wgmma tile 16 where
        // built), else the fused GEMM.
        const bool tile16 = bits == 4 && m >= 13 && wgmma_built();
        EXPECT_EQ(path(p), m <= 16 && !tile16 ? NBitsPath::kGemv : NBitsPath::kFusedGemm);
        p.zero_points = NBitsZeroPoints::kPacked;
        EXPECT_EQ(path(p, kHopper, off), NBitsPath::kGemv);
        p.zero_points = NBitsZeroPoints::kTyped;
        EXPECT_EQ(path(p, kHopper, off), NBitsPath::kDequantGemm);
      }
  const auto off_path = [&](const NBitsMatMulProblem& p, const DeviceInfo& d = kHopper) {
    return path(p, d, off);
  };
  EXPECT_EQ(off_path(problem(kGemvFusedMaxRows + 1, 4096, 4096, 4, 128)), NBitsPath::kDequantGemm);
  EXPECT_EQ(off_path(problem(16, 4096, 4096, 4, 16)), NBitsPath::kDequantGemm);  // block < a chunk
  EXPECT_EQ(off_path(problem(16, 4096, 4096, 8, 16)), NBitsPath::kGemv);         // 8-bit: one chunk
  EXPECT_EQ(off_path(problem(16, 4096, 4160, 8, 32)), NBitsPath::kDequantGemm);  // not whole lines
  EXPECT_EQ(off_path(problem(16, 4096, 4096, 4, 128), kTuring), NBitsPath::kDequantGemm);
  for (const char* o : {"lines=0", "window=0", "tma=1", "algo=1", "gemv=0"})
    EXPECT_EQ(path(problem(16, 4096, 4096, 4, 128), kHopper, parsed(std::string("gemm=0,") + o)),
              NBitsPath::kDequantGemm)
        << o;
  NBitsMatMulProblem g_idx = problem(16, 4096, 4096, 4, 128);
  g_idx.has_g_idx = true;
  EXPECT_EQ(off_path(g_idx), NBitsPath::kDequantGemm);
  EXPECT_EQ(plan(problem(16, 28672, 8192, 4, 128), kHopper, off).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(16, 4096, 4096, 4, 128), kHopper, parsed("gemm=0,tiles=1")).gemv.tiles, 1);
}

// By default M = 9..16 takes one row group of the window kernel's line loads where they
// fit: two tiles per warp for 4-bit, and for 8-bit on weights of 128 Mi or more; the fused
// GEMM where they do not fit, wherever forced (gemm=1 or its own keys), and for 4-bit
// blocks of 128 or more from 13 rows on the wgmma mainloop (below).
TEST(NBitsPlan, RowGroupInTheFusedGemmsPlaceToSixteenRows) {
  for (const int bits : {4, 8})
    for (const DType t : {DType::kFloat16, DType::kBFloat16})
      for (const auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
        for (const int64_t m : {9, 16}) {
          SCOPED_TRACE(::testing::Message() << bits << " " << dtype_name(t) << " M=" << m);
          const int64_t block = bits == 4 && m == 16 ? 64 : 128;  // 4-bit M = 16: below
          NBitsMatMulProblem p = problem(m, 8192, 8192, bits, block, t);
          p.zero_points = zp;
          const NBitsMatMulPlan pl = plan(p);
          EXPECT_EQ(pl.path, NBitsPath::kGemv);
          EXPECT_TRUE(pl.gemv.window && pl.gemv.lines);
          EXPECT_EQ(pl.gemv.row_groups, 1);
          EXPECT_EQ(pl.gemv.tiles, bits == 4 ? 2 : 1);
          EXPECT_EQ(pl.workspace_bytes, 0u);
          EXPECT_NE(printed(pl).find("; row_groups=1;"), std::string::npos) << printed(pl);
          p.n = 28672;
          EXPECT_EQ(plan(p).gemv.tiles, 2);
          for (const char* o : {"gemm=1", "wgmma=0", "tile_m=16", "gemm_k_split=2"})
            EXPECT_EQ(path(p, kHopper, parsed(o)), NBitsPath::kFusedGemm) << o;
          p.n = 8192;
          p.m = 17;
          EXPECT_EQ(path(p), NBitsPath::kFusedGemm);
        }
  // Where line loads do not fit: the fused GEMM.
  EXPECT_EQ(path(problem(16, 4096, 4160, 8, 32)), NBitsPath::kFusedGemm);
  EXPECT_EQ(path(problem(16, 4096, 4096, 4, 16)), NBitsPath::kFusedGemm);
  EXPECT_EQ(path(problem(16, 4096, 4096, 4, 128), kHopper, parsed("lines=0")), NBitsPath::kFusedGemm);
}

// 4-bit codes in blocks of 128 or more take the wgmma mainloop's 16-row tile from M = 13
// to 16 (SM90, wgmma built) in the row group's place; M = 12, smaller blocks, 8-bit codes,
// Ampere and a build without SM90 keep the row group, and gemm=0 keeps it everywhere.
TEST(NBitsPlan, WgmmaTile16For4BitFromThirteenRows) {
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
      for (const int64_t block : {128, 256})
        for (const int64_t m : {12, 13, 16}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m << " block=" << block);
          NBitsMatMulProblem p = problem(m, 8192, 8192, 4, block, t);
          p.zero_points = zp;
          const NBitsMatMulPlan pl = plan(p);
          if (m >= 13 && wgmma_built()) {
            EXPECT_EQ(pl.path, NBitsPath::kFusedGemm) << printed(pl);
            EXPECT_TRUE(pl.gemm.wgmma);
            EXPECT_EQ(pl.gemm.tile_m, 16);
          } else {
            EXPECT_EQ(pl.path, NBitsPath::kGemv) << printed(pl);
            EXPECT_EQ(pl.gemv.row_groups, 1);
          }
          EXPECT_EQ(path(p, kAmpere), NBitsPath::kGemv);
          EXPECT_EQ(path(p, kHopper, parsed("gemm=0")), NBitsPath::kGemv);
        }
  for (const int64_t block : {32, 64}) EXPECT_EQ(path(problem(16, 8192, 8192, 4, block)), NBitsPath::kGemv) << block;
  EXPECT_EQ(path(problem(16, 8192, 8192, 8, 128)), NBitsPath::kGemv);
  for (const int64_t n : {4096, 14336, 28672})
    EXPECT_EQ(path(problem(16, n, 8192, 4, 128)), wgmma_built() ? NBitsPath::kFusedGemm : NBitsPath::kGemv) << n;
}

// The wgmma tiles of 32 rows or fewer scale each commit group's float32 sums (the codes
// decoded as the exact q - zp) where every group lies in one block (blocks of 128 or more)
// and the zero points are integers, and the plan says so; the 64-row tile, typed zero
// points, smaller blocks and mma.sync round each weight to T1.
TEST(NBitsPlan, SmallWgmmaTilesScaleWholeBlocksSums) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no Hopper mainloop (no SM90 or no CUTLASS)";
  const auto on_sums = [](const NBitsMatMulProblem& p, const DeviceInfo& d) {
    const NBitsMatMulPlan pl = plan(p, d, parsed("gemm=1"));
    EXPECT_EQ(pl.path, NBitsPath::kFusedGemm) << printed(pl);
    return printed(pl).find("; scales_on=sums") != std::string::npos;
  };
  for (const int bits : {4, 8})
    for (const DType t : {DType::kFloat16, DType::kBFloat16})
      for (const int64_t m : {16, 32, 64}) {
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t) << " M=" << m);
        for (const int64_t block : {16, 32, 64, 128, 256}) {
          NBitsMatMulProblem p = problem(m, 8192, 8192, bits, block, t);
          const bool folds = m <= 32 && block >= 128;
          EXPECT_EQ(plan(p, kHopper, parsed("gemm=1")).gemm.tile_m, m) << block;
          EXPECT_EQ(on_sums(p, kHopper), folds) << block;
          p.zero_points = NBitsZeroPoints::kPacked;
          EXPECT_EQ(on_sums(p, kHopper), folds) << block << " packed";
          p.zero_points = NBitsZeroPoints::kTyped;
          EXPECT_FALSE(on_sums(p, kHopper)) << block << " typed";
          p.zero_points = NBitsZeroPoints::kNone;
          EXPECT_FALSE(on_sums(p, kAmpere)) << block << " mma.sync";
        }
      }
}

// ------------------------------------------------------------------ fused GEMM
// M <= 8 is the decode GEMV's, 8 < M <= kGemmMaxRows (128) the fused GEMM's (float16 /
// bfloat16 on SM80+, both widths, without or with packed zero points). It
// needs none of the row groups' whole lines or chunk-sized blocks, takes a partial last
// block, and the GEMV's keys leave it alone.
TEST(NBitsPlan, FusedGemmAboveTheDecodeRows) {
  EXPECT_EQ(kGemmMaxRows, 128);
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
        for (const DeviceInfo& d : {kHopper, kAmpere}) {
          NBitsMatMulProblem p = problem(8, 4096, 4096, bits, 128, t);
          p.zero_points = zp;
          SCOPED_TRACE(printed(plan(p, d)));
          EXPECT_EQ(path(p, d), NBitsPath::kGemv);
          for (int64_t m : {17, 32, 33, 64, 100}) {
            p.m = m;
            EXPECT_EQ(path(p, d), NBitsPath::kFusedGemm) << m;
          }
          // At 128 rows, too, where the fused GEMM's grid is one wave (its rule and the
          // larger shapes: tests/cpu/mixed_plan_test.cc); to 256 rows on SM90's 256-row
          // tile (4096 x 4096: 32 tiles, at most half the SMs); above, the mixed-input GEMM
          // where built on SM90, else dequant + cuBLAS.
          p.m = 128;
          EXPECT_EQ(path(p, d), NBitsPath::kFusedGemm);
          EXPECT_EQ(path(p, d, parsed("mixed=0")), NBitsPath::kFusedGemm);
          const bool tall = d.sm == 90 && wgmma_built();
          for (int64_t m : {129, 200, 256}) {
            p.m = m;
            const bool mixed = d.sm == 90 && mixed_gemm_built();
            EXPECT_EQ(path(p, d), tall    ? NBitsPath::kFusedGemm
                                  : mixed ? NBitsPath::kMixedGemm
                                          : NBitsPath::kDequantGemm)
                << m;
            EXPECT_EQ(path(p, d, parsed("mixed=0")), tall ? NBitsPath::kFusedGemm : NBitsPath::kDequantGemm) << m;
            if (tall) {
              EXPECT_EQ(plan(p, d, parsed("mixed=0")).gemm.tile_m, 256) << m;
            }
          }
          for (int64_t m : {257, 4096, 65536}) {
            p.m = m;
            const bool mixed = d.sm == 90 && mixed_gemm_built();
            EXPECT_EQ(nbits_mixed_gemm_refusal(p, d, {}) == nullptr, mixed) << m;
            EXPECT_EQ(path(p, d), mixed ? NBitsPath::kMixedGemm : NBitsPath::kDequantGemm) << m;
            EXPECT_EQ(path(p, d, parsed("mixed=0")), NBitsPath::kDequantGemm) << m;
          }
        }
  EXPECT_EQ(path(problem(9, 4096, 4096, 4, 16)), NBitsPath::kFusedGemm);   // block < a chunk
  EXPECT_EQ(path(problem(9, 4096, 4160, 8, 32)), NBitsPath::kFusedGemm);   // not whole lines
  EXPECT_EQ(path(problem(9, 4096, 4096 + 32, 4, 64)), NBitsPath::kFusedGemm);  // partial block
  EXPECT_EQ(path(problem(9, 4096, 4096, 4, 1024)), NBitsPath::kGemv);  // a row group
  EXPECT_EQ(path(problem(17, 4096, 4096, 4, 1024)), NBitsPath::kFusedGemm);
  for (const char* o : {"lines=0", "window=0", "tma=1", "algo=1", "gemv=0", "gemm=1", "tile_m=16"})
    EXPECT_EQ(path(problem(16, 4096, 4096, 8, 128), kHopper, parsed(o)), NBitsPath::kFusedGemm)
        << o;
  const NBitsMatMulPlan pl = plan(problem(17, 4096, 4096));
  EXPECT_EQ(pl.gemv.tiles, 0);  // GEMV and dequant parts stay empty
  EXPECT_EQ(pl.dequant.n_tile, 0);
}

// What sends M > 8 to dequant + cuBLAS instead: g_idx, float32, below SM80, K % 8 != 0,
// rows of B not a multiple of 16 bytes, pointers not 16-byte aligned;
// nbits_fused_gemm_refusal names the first condition that fails. Every zero-point form
// applies (typed ones on both mainloops).
TEST(NBitsPlan, FusedGemmConditions) {
  const auto refusal = [](const NBitsMatMulProblem& p, const DeviceInfo& d = kHopper,
                          const PlanOverride& o = {}) -> std::string {
    const char* why = nbits_fused_gemm_refusal(p, d, o);
    return why == nullptr ? "" : why;
  };
  const auto expect_dequant = [&](const NBitsMatMulProblem& p, const std::string& why,
                                  const DeviceInfo& d = kHopper) {
    EXPECT_EQ(path(p, d), NBitsPath::kDequantGemm) << printed(plan(p, d));
    EXPECT_EQ(refusal(p, d), why) << printed(plan(p, d));
  };
  EXPECT_EQ(refusal(problem(17, 4096, 4096)), "");
  NBitsMatMulProblem p = problem(17, 4096, 4096, 4, 128);
  p.has_g_idx = true;
  expect_dequant(p, "g_idx (act order)");
  for (const auto zp : {NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
    for (const DeviceInfo& d : {kHopper, kAmpere}) {
      p = problem(17, 4096, 4096, 8, 128);
      p.zero_points = zp;
      EXPECT_EQ(refusal(p, d), "") << printed(plan(p, d));
      EXPECT_EQ(path(p, d), NBitsPath::kFusedGemm) << printed(plan(p, d));
    }
  for (int bits : {4, 8})
    expect_dequant(problem(17, 4096, 4096, bits, 32, DType::kFloat32),
                   "float32 activations (tensor cores take float16 / bfloat16)");
  expect_dequant(problem(17, 4096, 4096), "tensor cores need SM80+", kTuring);
  expect_dequant(problem(17, 64, 100, 8, 16), "K % 8 != 0");
  // 4-bit blocks of 16 codes are 8 bytes: an odd block count leaves rows of 8 x odd bytes.
  expect_dequant(problem(17, 256, 48, 4, 16), "rows of B not a multiple of 16 bytes");
  EXPECT_EQ(path(problem(17, 256, 64, 4, 16)), NBitsPath::kFusedGemm);
  for (int align : {1, 2, 4, 8}) {
    p = problem(17, 4096, 4096);
    p.alignment = align;
    expect_dequant(p, "pointers not 16-byte aligned");
  }
  EXPECT_EQ(refusal(problem(0, 4096, 4096)), "empty output");
  EXPECT_EQ(refusal(problem(17, 4096, 0)), "K == 0: Y = bias");
  EXPECT_EQ(refusal(problem(8, 4096, 4096)), "M <= 8 (the decode GEMV's rows)");
  EXPECT_EQ(refusal(problem(17, 4096, 4096), kHopper, parsed("gemm=0")), "gemm=0 (plan override)");
  EXPECT_EQ(refusal(problem(16, 4096, 4096)), "M <= 16: the GEMV's row group of 16 is faster there");
  EXPECT_EQ(refusal(problem(16, 4096, 4096), kHopper, parsed("gemm=1")), "");
  EXPECT_EQ(refusal(problem(16, 4096, 4160, 8, 32)), "");  // not whole lines: no row group
  EXPECT_EQ(refusal(problem(8, 4096, 4096), kHopper, parsed("gemm=1")), "");
}

// The tiling, core/gemm_plan.h's rule for `bits`-bit rows: tile_m the smallest of 16, 32,
// 64 holding M (64 above); as many stages as fit 160 KB (4-bit tile_m 64: 3, its
// activation slabs being twice as long); the K split doubling while the (M, N) blocks do
// not cover the SMs, keeping 4 slabs (128 bytes of a row: 128 codes 8-bit, 256 4-bit) per
// block.
TEST(NBitsPlan, FusedGemmTiling) {
  // mma.sync's tiles (two blocks per SM90 SM); M <= 16 would take the GEMV's row group.
  const PlanOverride gemm_on = parsed("gemm=1,wgmma=0");
  const std::pair<int64_t, int> cases[] = {{9, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64}, {64, 64}};
  // mma.sync (forced: SM90 takes wgmma). Stages two blocks per SM90 SM hold:
  // 4 (three at 4-bit's 32 rows), and 4-bit's 64-row tile, whose activations are twice as
  // long, one block of 3.
  for (int bits : {4, 8})
    for (const auto& [m, tile_m] : cases) {
      const NBitsMatMulPlan pl = plan(problem(m, 4096, 4096, bits, 128), kHopper, parsed("wgmma=0"));
      ASSERT_EQ(pl.path, NBitsPath::kFusedGemm) << m;
      EXPECT_EQ(pl.gemm.tile_m, tile_m) << bits << " " << m;
      EXPECT_EQ(pl.gemm.tile_n, 128) << bits << " " << m;
      EXPECT_EQ(pl.gemm.stages, tile_m == 64 || (bits == 4 && tile_m == 32) ? 3 : 4)
          << bits << " " << m;
    }
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    // M = 16, K = 8192 (32 slabs 4-bit, 64 8-bit): 64 blocks of N = 8192 split 4 ways
    // (one wave of 264 resident), 32 of N = 4096 8 ways; M = 64 x N = 28672 is 224 blocks.
    EXPECT_EQ(plan(problem(16, 8192, 8192, bits, 128), kHopper, gemm_on).gemm.k_split, 4);
    EXPECT_EQ(plan(problem(16, 4096, 8192, bits, 128), kHopper, gemm_on).gemm.k_split, 8);
    EXPECT_EQ(plan(problem(64, 28672, 8192, bits, 128)).gemm.k_split, 1);
  }
  // 108 SMs of one block: 4-bit's 32 slabs unsplit (one wave of 32 + 4 against two of
  // 16 + 4), 8-bit's 64 split 4 (3 waves of 16 + 4 against 68 unsplit).
  EXPECT_EQ(plan(problem(16, 8192, 8192, 4, 128), kAmpere, gemm_on).gemm.k_split, 1);
  EXPECT_EQ(plan(problem(16, 8192, 8192, 8, 128), kAmpere, gemm_on).gemm.k_split, 4);
  // K = 2048, N = 4096 (32 blocks): 8 slabs 4-bit, 16 8-bit, both split 8.
  EXPECT_EQ(plan(problem(16, 4096, 2048, 4, 128), kHopper, gemm_on).gemm.k_split, 8);
  EXPECT_EQ(plan(problem(16, 4096, 2048, 8, 128), kHopper, gemm_on).gemm.k_split, 8);
  const GemmConfig rule = plan_gemm_tiles(GemmShape{33, 5000, 3072 / 2, 4, false, 64}, kHopper);
  const GemmConfig g = plan(problem(33, 5000, 3072, 4, 64)).gemm;
  EXPECT_EQ(std::make_tuple(g.wgmma, g.tile_m, g.tile_n, g.stages, g.k_split),
            std::make_tuple(rule.wgmma, rule.tile_m, rule.tile_n, rule.stages, rule.k_split));
}

// The wgmma mainloop (SM90 builds on SM90) wherever the fused GEMM runs: tiles 16 and 32
// (6 stages), 64 (4 stages 4-bit, 6 8-bit), tile 128 above 64 rows where blocks are 64
// codes or more (4 stages 8-bit, 5 half-slab stages 4-bit); every block size; mma.sync on
// SM80.
TEST(NBitsPlan, FusedGemmWgmma) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  for (const int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    const NBitsMatMulPlan t16 = plan(problem(16, 4096, 4096, bits, 128), kHopper, parsed("gemm=1"));
    EXPECT_TRUE(t16.gemm.wgmma);
    EXPECT_EQ(t16.gemm.tile_m, 16);
    EXPECT_TRUE(plan(problem(32, 4096, 4096, bits, 128)).gemm.wgmma);
    const NBitsMatMulPlan pl = plan(problem(17, 4096, 4096, bits, 128));
    EXPECT_TRUE(pl.gemm.wgmma);
    EXPECT_EQ(pl.gemm.tile_m, 32);
    EXPECT_EQ(pl.gemm.stages, 6);
    const NBitsMatMulPlan t64 = plan(problem(33, 4096, 4096, bits, 128));
    EXPECT_EQ(t64.gemm.tile_m, 64);
    EXPECT_EQ(t64.gemm.stages, bits == 4 ? 4 : 6);
    EXPECT_EQ(plan(problem(100, 4096, 4096, bits, 128)).gemm.tile_m, 128);
    EXPECT_EQ(plan(problem(100, 4096, 4096, bits, 128)).gemm.stages, bits == 4 ? 5 : 4);
    EXPECT_EQ(plan(problem(100, 4096, 4096, bits, 32)).gemm.tile_m, 64);
    EXPECT_TRUE(plan(problem(64, 4096, 4096, bits, 16)).gemm.wgmma);
    EXPECT_FALSE(plan(problem(64, 4096, 4096, bits, 128), kAmpere).gemm.wgmma);
  }
}

// The workspace: the float32 partial sums [k_split, M, N] with a K split (256-byte
// aligned), nothing without one; never an activation region.
TEST(NBitsPlan, FusedGemmWorkspace) {
  NBitsMatMulProblem p = problem(16, 8192, 8192, 4, 128);
  p.zero_points = NBitsZeroPoints::kPacked;
  p.has_bias = true;
  // mma.sync's tiles; M <= 16 would take the GEMV's row group.
  const PlanOverride gemm_on = parsed("gemm=1,wgmma=0");
  const NBitsMatMulPlan split = plan(p, kHopper, gemm_on);
  ASSERT_EQ(split.gemm.k_split, 4);
  EXPECT_EQ(split.regions.partial_offset, 0u);
  EXPECT_EQ(split.regions.partial_bytes, size_t{4} * 16 * 8192 * 4);
  EXPECT_EQ(split.workspace_bytes, size_t{4} * 16 * 8192 * 4);
  EXPECT_EQ(split.regions.act_bytes + split.regions.cublas_bytes + split.regions.scratch_bytes, 0u);
  // One block of 16 slabs (8-bit K = 2048) splits 16 ways: 16 x 9 x 100 x 4 = 57600
  // bytes (whole 256-byte units); N = 99: 57024 padded to 57088.
  const NBitsMatMulPlan odd = plan(problem(9, 100, 2048, 8, 64), kHopper, gemm_on);
  EXPECT_EQ(odd.gemm.k_split, 16);
  EXPECT_EQ(odd.regions.partial_bytes, 57600u);
  EXPECT_EQ(odd.workspace_bytes, 57600u);
  EXPECT_EQ(plan(problem(9, 99, 2048, 8, 64), kHopper, gemm_on).workspace_bytes, 57088u);
  EXPECT_EQ(plan(problem(64, 28672, 8192, 4, 128), kHopper, parsed("wgmma=0")).workspace_bytes, 0u);
  // The Hopper mainloop reads A in its K order from the workspace: M rounded up to the
  // tile x K rounded up to 32, before the partial sums.
  if (wgmma_built()) {
    const NBitsMatMulPlan hopper = plan(problem(64, 28672, 8192, 4, 128));
    ASSERT_TRUE(hopper.gemm.wgmma) << hopper;
    EXPECT_EQ(hopper.regions.act_order_bytes, size_t{64} * 8192 * 2);
    EXPECT_EQ(hopper.workspace_bytes, size_t{64} * 8192 * 2);
    const NBitsMatMulPlan tail = plan(problem(40, 1000, 2056, 8, 64), kHopper, parsed("gemm_k_split=2,cluster_sum=0"));
    ASSERT_TRUE(tail.gemm.wgmma) << tail;
    EXPECT_EQ(tail.regions.act_order_bytes, size_t{64} * 2080 * 2);  // M 40 -> 64, K 2056 -> 2080
    EXPECT_EQ(tail.regions.partial_offset, 266240u);                 // 266240: whole 256-byte units
    EXPECT_EQ(tail.regions.partial_bytes, size_t{2} * 40 * 1000 * 4);
    // The same split summed in the tile's cluster (the planner's for 8-bit): no planes.
    const NBitsMatMulPlan cluster = plan(problem(40, 1000, 2056, 8, 64), kHopper, parsed("gemm_k_split=2"));
    ASSERT_TRUE(cluster.gemm.cluster_reduce) << cluster;
    EXPECT_EQ(cluster.regions.partial_bytes, 0u);
    EXPECT_EQ(cluster.workspace_bytes, size_t{64} * 2080 * 2);
  }
}

TEST(NBitsPlan, GemvRowsPerWarp) {
  // The tensor-core tile always has 8 rows; the float32 FMA tile is sized to M.
  const int64_t expected[9] = {0, 1, 2, 4, 4, 8, 8, 8, 8};
  for (int64_t m = 1; m <= 8; ++m) {
    EXPECT_EQ(plan(problem(m, 256, 4096, 4, 32, DType::kFloat32)).gemv.rows, expected[m]) << m;
    EXPECT_EQ(plan(problem(m, 256, 4096, 4, 32, DType::kFloat16)).gemv.rows, 8) << m;
  }
}

// Typed (fractional) zero points: the GEMV's register tile (algorithm 0, each weight
// q * scale - zp * scale) at decode rows in float16 / bfloat16, whatever the shape or the
// forced stream; float32 dequantizes; above 8 rows the GEMMs take them as the other forms
// (no row groups: M = 9..16 the fused GEMM; with it forced off, dequant + cuBLAS).
TEST(NBitsPlan, TypedZeroPointsOnTheRegisterTile) {
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const int bits : {4, 8})
      for (const int64_t m : {1, 2, 8})
        for (const auto& [n, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {28672, 8192}, {4096, 14336}}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << bits << "-bit M=" << m << " "
                                            << n << " x " << k);
          NBitsMatMulProblem p = problem(m, n, k, bits, 128, t);
          p.zero_points = NBitsZeroPoints::kTyped;
          for (const char* force : {"", "window=1,lines=1,tiles=2", "tma=1", "algo=2", "fma=1", "gemv_pdl=1"}) {
            const NBitsMatMulPlan pl = plan(p, kHopper, parsed(force));
            ASSERT_EQ(pl.path, NBitsPath::kGemv) << force << " " << pl;
            EXPECT_FALSE(pl.gemv.fma || pl.gemv.window || pl.gemv.lines || pl.gemv.tma ||
                         pl.gemv.dependent_launch) << force << " " << pl;
            EXPECT_EQ(pl.gemv.algo, kNBitsGemvAlgoUnrolled) << force;
            EXPECT_EQ(pl.gemv.tiles, 1) << force;
            EXPECT_EQ(pl.gemv.rows, 8) << force;
          }
          EXPECT_NE(printed(plan(p)).find("zero_points=typed"), std::string::npos);
        }
  NBitsMatMulProblem p = problem(4, 4096, 4096, 4, 32, DType::kFloat32);
  p.zero_points = NBitsZeroPoints::kTyped;
  EXPECT_EQ(path(p), NBitsPath::kDequantGemm);
  p = problem(16, 4096, 4096, 4, 128);
  p.zero_points = NBitsZeroPoints::kTyped;
  EXPECT_EQ(path(p), NBitsPath::kFusedGemm);  // no typed row groups: the fused GEMM
  EXPECT_EQ(path(p, kHopper, parsed("gemm=0")), NBitsPath::kDequantGemm);
  p = problem(2, 4096, 4096, 4, 16);  // blocks of half a chunk
  p.zero_points = NBitsZeroPoints::kTyped;
  EXPECT_EQ(path(p), NBitsPath::kGemv);
  EXPECT_EQ(path(p, kAmpere), NBitsPath::kGemv);
  EXPECT_EQ(path(p, kTuring), NBitsPath::kDequantGemm);
}

TEST(NBitsPlan, GemvNeedsWholeBlocksByPosition) {
  // g_idx goes through dequant + GEMM.
  NBitsMatMulProblem p = problem(1, 4096, 4096);
  p.has_g_idx = true;
  EXPECT_EQ(path(p), NBitsPath::kDequantGemm);
  p = problem(1, 4096, 4096);
  p.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(path(p), NBitsPath::kGemv);
  // A partial last block.
  EXPECT_EQ(path(problem(1, 4096, 4096 + 32, 4, 64)), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 4096, 4096 + 64, 4, 64)), NBitsPath::kGemv);
}

TEST(NBitsPlan, GemvNeedsSixteenByteRows) {
  // 4-bit, block 16: a block is 8 bytes, so an odd block count leaves rows of 8 * odd bytes.
  EXPECT_EQ(path(problem(1, 256, 16 * 3, 4, 16)), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 256, 16 * 4, 4, 16)), NBitsPath::kGemv);
  // 8-bit, block 16: every row is a multiple of 16 bytes.
  EXPECT_EQ(path(problem(1, 256, 16 * 3, 8, 16)), NBitsPath::kGemv);
}

TEST(NBitsPlan, GemvNeedsSixteenByteAlignment) {
  NBitsMatMulProblem p = problem(1, 4096, 4096);
  p.alignment = 8;
  const NBitsMatMulPlan q = plan(p);
  EXPECT_EQ(q.path, NBitsPath::kDequantGemm);
  EXPECT_TRUE(q.dequant.vector);
  p.alignment = 4;
  EXPECT_FALSE(plan(p).dequant.vector);
}

// Line loads on blocks of one window (4-bit 128 codes, 8-bit 64) read a row's two scales
// of a pair as one 4-byte load: 2-byte aligned scales take the kernels without line loads.
// Larger blocks (one scale per pair) and smaller ones (per-chunk scales) do not need it.
TEST(NBitsPlan, LineLoadsOnWindowBlocksNeedFourByteAlignedScales) {
  struct Case { int bits; int64_t block; bool needs_four; };
  for (const Case c : {Case{4, 128, true}, Case{8, 64, true}, Case{4, 256, false},
                       Case{8, 128, false}, Case{4, 64, false}}) {
    NBitsMatMulProblem p = problem(1, 28672, 8192, c.bits, c.block);
    PlanOverride o;
    o.lines = 1;
    o.fma = 0;
    for (int a : {16, 4, 2}) {
      p.scale_alignment = a;
      const NBitsMatMulPlan q = plan(p, kHopper, o);
      SCOPED_TRACE(printed(q));
      EXPECT_EQ(q.path, NBitsPath::kGemv);
      EXPECT_EQ(q.gemv.lines, a >= 4 || !c.needs_four);
    }
  }
  // The default plan of the decode shape: line loads of two tiles, or without 4-byte scales
  // the window kernel without line loads.
  NBitsMatMulProblem p = problem(1, 28672, 8192, 4, 128);
  p.scale_alignment = 2;
  const NBitsMatMulPlan q = plan(p);
  EXPECT_TRUE(q.gemv.window);
  EXPECT_FALSE(q.gemv.lines);
  EXPECT_EQ(q.gemv.tiles, 1);
  EXPECT_NE(printed(q).find("align=16 scale_align=2;"), std::string::npos) << q;
}

TEST(NBitsPlan, TensorCoresNeedAmpere) {
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kFloat16), kTuring), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kBFloat16), kTuring), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kFloat32), kTuring), NBitsPath::kGemv);
}

TEST(NBitsPlan, GemvZeroForcesDequantGemm) {
  PlanOverride o;
  o.gemv = 0;
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, o), NBitsPath::kDequantGemm);
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int64_t m : {1, 2, 8}) {
      EXPECT_EQ(path(problem(m, 4096, 4096, 8, 128, t), kHopper, parsed("gemv=0")),
                NBitsPath::kDequantGemm)
          << m << " " << dtype_name(t);
    }
  // The trivial paths stay.
  EXPECT_EQ(path(problem(0, 4096, 4096), kHopper, parsed("gemv=0")), NBitsPath::kEmpty);
  EXPECT_EQ(path(problem(1, 4096, 0), kHopper, parsed("gemv=0")), NBitsPath::kBiasOnly);
  testing::expect_override_rejects(problem(1, 4096, 4096), PlanOverride{}, &PlanOverride::gemv,
                                   "gemv", {1, -2});
}

// The measured defaults (H200; choose_algo's comment): the unrolled loop for both widths at every block
// size (and above 256). M = 2: at M = 1 8-bit takes the CUDA-core kernel by default.
TEST(NBitsPlan, GemvAlgoDefaultsAndOverride) {
  for (int bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128, 256, 512}) {
      const NBitsMatMulPlan p = plan(problem(2, 4096, 4096, bits, bs));
      ASSERT_EQ(p.path, NBitsPath::kGemv) << bits << " " << bs;
      EXPECT_FALSE(p.gemv.fma);
      EXPECT_EQ(p.gemv.algo, kNBitsGemvAlgoUnrolled) << bits << " " << bs;
      for (int m : {1, 2})
        for (int algo : {0, 1, 2}) {
          PlanOverride o;
          o.algo = algo;  // a forced algorithm keeps the tensor-core kernel at M = 1
          const NBitsMatMulPlan q = plan(problem(m, 4096, 4096, bits, bs), kHopper, o);
          EXPECT_FALSE(q.gemv.fma);
          EXPECT_EQ(q.gemv.algo, algo);
        }
    }
}

// The CUDA-core kernel: 8-bit codes, float16 / bfloat16, M <= 2 where it applies; by
// default at M = 1, and at M = 2 in bfloat16 below 128 Mi codes or where line loads do
// not apply (measured faster there; choose_fma's comment), and
// not when algo or tma (forced) choose a tensor-core kernel. Its plan has no K split or
// TMA.
TEST(NBitsPlan, GemvFmaAtOneRowOfEightBitCodes) {
  PlanOverride o;
  EXPECT_EQ(o.fma, -1);
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t bs : {16, 32, 128, 256}) {
      const NBitsMatMulPlan p = plan(problem(1, 28672, 8192, 8, bs, t));
      EXPECT_TRUE(p.gemv.fma) << p;
      EXPECT_EQ(p.gemv.rows, 1);
      EXPECT_FALSE(p.gemv.tma);
      EXPECT_EQ(p.gemv.k_split, 0);
      // M = 2: in bfloat16 the CUDA-core kernel below 128 Mi codes on grids of few tiles
      // (line loads on the others, at every block size).
      const NBitsMatMulPlan two = plan(problem(2, 4096, 4096, 8, bs, t));
      EXPECT_EQ(two.gemv.fma, t == DType::kBFloat16) << two;
      if (two.gemv.fma) {
        EXPECT_EQ(two.gemv.rows, 2);
      }
      for (const int64_t n : {int64_t{8192}, int64_t{28672}}) {
        const NBitsMatMulPlan many = plan(problem(2, n, 8192, 8, bs, t));
        EXPECT_FALSE(many.gemv.fma) << many;
        EXPECT_TRUE(many.gemv.lines) << many;
      }
      EXPECT_FALSE(plan(problem(3, 28672, 8192, 8, bs, t)).gemv.fma);
      EXPECT_TRUE(plan(problem(1, 4096, 4096, 8, bs, t), kAmpere).gemv.fma);
    }
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 128)).gemv.fma);  // 4-bit: tensor cores
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 128, DType::kFloat32)).gemv.fma);
  // bfloat16 M = 2 leaves the CUDA-core kernel for line loads only from N x K = 128 Mi or
  // on grids of more than 264 tiles (16 warps per SM at k_split 8 on 132 SMs), without a
  // zero-point tensor, on rows of whole lines, with the window kernel and line loads not
  // switched off.
  EXPECT_TRUE(plan(problem(2, 4096, 32768, 8, 128, DType::kBFloat16)).gemv.lines);
  // (Rows of 96 windows or more on such grids take line loads in blocks of 12 warps:
  // GemvLinesInBlocksOfTwelveOnSmallGridsOfLongRows; 6016 bytes have 94.)
  EXPECT_TRUE(plan(problem(2, 4096, 6144 - 128, 8, 128, DType::kBFloat16)).gemv.fma);
  EXPECT_TRUE(plan(problem(2, 4096, 6144, 8, 128, DType::kBFloat16)).gemv.lines);
  EXPECT_TRUE(plan(problem(2, 264 * 16, 4096, 8, 128, DType::kBFloat16)).gemv.fma);
  EXPECT_TRUE(plan(problem(2, 264 * 16 + 1, 4096, 8, 128, DType::kBFloat16)).gemv.lines);
  EXPECT_TRUE(plan(problem(2, 28672, 8192 + 64, 8, 64, DType::kBFloat16)).gemv.fma);
  // With packed zero points on any grid (N = 4096: neither large nor many tiles), still on
  // rows of whole lines only.
  NBitsMatMulProblem zp2 = problem(2, 4096, 4096, 8, 128, DType::kBFloat16);
  zp2.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp2).gemv.lines);
  EXPECT_EQ(plan(zp2).gemv.tiles, 1);
  zp2 = problem(2, 28672, 8192 + 64, 8, 64, DType::kBFloat16);
  zp2.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp2).gemv.fma);
  for (auto off : {&PlanOverride::window, &PlanOverride::lines}) {
    PlanOverride no;
    no.*off = 0;
    EXPECT_TRUE(plan(problem(2, 28672, 8192, 8, 128, DType::kBFloat16), kHopper, no).gemv.fma);
  }
  NBitsMatMulProblem zp = problem(1, 8192, 8192, 8, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp).gemv.fma);
  zp.zero_points = NBitsZeroPoints::kTyped;  // the register tile's only
  EXPECT_EQ(path(zp), NBitsPath::kGemv);
  EXPECT_FALSE(plan(zp).gemv.fma);
  // A forced weight stream of the tensor-core kernel keeps it, on or off.
  for (int tma : {0, 1}) {
    o.tma = tma;
    EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kHopper, o).gemv.fma) << tma;
  }
  // Forced on: M <= 2 of 8-bit half types (rows sized to M); forced off: never.
  o = PlanOverride{};
  o.fma = 1;
  EXPECT_TRUE(plan(problem(2, 8192, 8192, 8, 64), kHopper, o).gemv.fma);
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8, 64), kHopper, o).gemv.rows, 2);
  EXPECT_FALSE(plan(problem(3, 8192, 8192, 8, 64), kHopper, o).gemv.fma);
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 64), kHopper, o).gemv.fma);
  o.algo = 1;  // forced on wins over a forced algorithm
  EXPECT_TRUE(plan(problem(1, 8192, 8192, 8, 64), kHopper, o).gemv.fma);
  o = PlanOverride{};
  o.fma = 0;
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 64), kHopper, o).gemv.fma);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &PlanOverride::fma,
                                              "fma");
}

// waves(k) = ceil(tiles * k / (132 SMs * 16 warps)), cost = waves * (windows / k + 2); the
// cheapest k_split wins, the larger on a tie. A window is 64 bytes of a row: 64 8-bit or
// 128 4-bit codes.
TEST(NBitsPlan, GemvKSplitBalancesWavesAndWindows) {
  // The register-load tile's model (16 warps per SM; line loads off: the window kernel's
  // warps are tested with it, below).
  PlanOverride regs;
  regs.lines = 0;
  // M = 2: at M = 1 8-bit takes the CUDA-core kernel, which has no K split.
  // 256 tiles x 8 warps fit one wave: k_split 8 (64 windows: cost 1 * (8 + 2)).
  EXPECT_EQ(plan(problem(2, 4096, 4096, 8), kHopper, regs).gemv.k_split, 8);
  // 512 tiles: k_split 8 needs two waves (2 * 18), 4 one (1 * 34).
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8), kHopper, regs).gemv.k_split, 4);
  EXPECT_EQ(plan(problem(2, 8192, 8192, 4), kHopper, regs).gemv.k_split, 4);
  // 1792 tiles: 7 waves of k_split 8 (7 * 18 = 126) beat 4 of 4 (136) and 1 of 1 (130).
  EXPECT_EQ(plan(problem(2, 28672, 8192, 8), kHopper, regs).gemv.k_split, 8);
  // 896 tiles, 64 windows: k_split 2 fits one wave (34) against 4 waves of 8 (40).
  EXPECT_EQ(plan(problem(2, 14336, 4096, 8), kHopper, regs).gemv.k_split, 2);
  // Never more warps than windows.
  EXPECT_EQ(plan(problem(2, 16, 64, 8), kHopper, regs).gemv.k_split, 1);
  EXPECT_EQ(plan(problem(2, 16, 256, 8), kHopper, regs).gemv.k_split, 4);
  // float32's FMA tile: half the resident warps (8 per SM).
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8, 32, DType::kFloat32), kHopper, regs).gemv.k_split, 2);
  // An unknown device (0 SMs) counts as one SM: every split only adds waves.
  EXPECT_EQ(plan(problem(2, 4096, 4096, 8), DeviceInfo{90, 0}, regs).gemv.k_split, 1);
}

TEST(NBitsPlan, DequantGemmTilesAndWorkspace) {
  // 256 MiB scratch: float16 rows of K = 8192 are 16 KiB: 16384 rows per tile.
  // M = 100 with the fused GEMM forced off (it takes these problems by default).
  const PlanOverride off = without_gemm();
  NBitsMatMulPlan p = plan(problem(100, 32768, 8192), kHopper, off);
  EXPECT_EQ(p.path, NBitsPath::kDequantGemm);
  EXPECT_TRUE(p.dequant.vector);
  EXPECT_EQ(p.dequant.n_tile, 16384);
  EXPECT_EQ(p.dequant.num_n_tiles, 2);
  EXPECT_EQ(p.regions.cublas_offset, 0u);
  EXPECT_EQ(p.regions.cublas_bytes, size_t{32} << 20);
  EXPECT_EQ(p.regions.scratch_offset, size_t{32} << 20);
  EXPECT_EQ(p.regions.scratch_bytes, size_t{256} << 20);
  EXPECT_EQ(p.workspace_bytes, size_t{288} << 20);
  // float32 rows are twice as large.
  p = plan(problem(100, 32768, 8192, 4, 32, DType::kFloat32));  // float32: dequant anyway
  EXPECT_EQ(p.dequant.n_tile, 8192);
  EXPECT_EQ(p.dequant.num_n_tiles, 4);
  // Whole N in one tile when it fits; a small limit still gives one row per tile.
  p = plan(problem(100, 100, 8192), kHopper, off);
  EXPECT_EQ(p.dequant.n_tile, 100);
  EXPECT_EQ(p.dequant.num_n_tiles, 1);
  EXPECT_EQ(p.regions.scratch_bytes, size_t{100} * 8192 * 2);
  NBitsMatMulOptions o;
  o.dequant_scratch_bytes = 1000;
  p = plan(problem(100, 100, 8192), kHopper, o, off);
  EXPECT_EQ(p.dequant.n_tile, 1);
  EXPECT_EQ(p.dequant.num_n_tiles, 100);
  // Pre-Hopper cuBLAS workspace.
  EXPECT_EQ(plan(problem(100, 100, 8192), kTuring).regions.cublas_bytes, size_t{4} << 20);
}

TEST(NBitsPlan, ScalarDequantForOddK) {
  const NBitsMatMulPlan p = plan(problem(16, 64, 100, 8, 16));
  EXPECT_EQ(p.path, NBitsPath::kDequantGemm);
  EXPECT_FALSE(p.dequant.vector);
}

// TMA tiles where the kernel applies (SM90, float16 / bfloat16, blocks of at least half a
// 128-byte tile's codes: 8-bit 64, 4-bit 128) and, by default, where measured faster:
// N x K >= 128 Mi codes, and M <= 4 for 8-bit, unless the window kernel (line loads) is
// taken. Its K split deals out 128-byte tiles.
TEST(NBitsPlan, GemvTmaWhereItPaysOrWhenAsked) {
  PlanOverride o;
  EXPECT_EQ(o.tma, -1);
  // The rule: 28672 x 8192 = 224 Mi codes; 8192 x 16384 = 128 Mi exactly; 8192 x 16368 below.
  // 8-bit float16 on rows that are not whole 128-byte lines (8256 bytes; on whole lines,
  // with or without zero points: line loads of two tiles, below).
  NBitsMatMulProblem zp8 = problem(2, 28672, 8192 + 64, 8, 64);  // M = 1: gemv_fma
  zp8.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp8).gemv.tma);
  zp8.m = 4;
  EXPECT_TRUE(plan(zp8).gemv.tma);
  zp8.m = 5;  // 8-bit: M <= 4 only
  EXPECT_FALSE(plan(zp8).gemv.tma);
  EXPECT_FALSE(plan(problem(2, 28672, 8192, 8, 128)).gemv.tma);
  // 4-bit: every M, where the window kernel is off (by default it replaces the TMA tile).
  PlanOverride no_window;
  no_window.window = 0;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, no_window).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 4, 128), kHopper, no_window).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 8192, 16384, 4, 128, DType::kBFloat16), kHopper, no_window).gemv.tma);
  EXPECT_FALSE(plan(problem(8, 8192, 16384 - 128, 4, 128), kHopper, no_window).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128)).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 128)).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 32)).gemv.tma);  // block below half a tile
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64)).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128, DType::kFloat32)).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kAmpere).gemv.tma);
  // Forced on: wherever the kernel applies, at any size and M.
  o.tma = 1;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 8, 64), kHopper, o).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 8, 128), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 32), kHopper, o).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128, DType::kBFloat16), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(8, 4096, 4096, 4, 64), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 8, 128, DType::kFloat32), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 8, 128), kAmpere, o).gemv.tma);
  // 256 tiles, 4096 bytes per row = 32 TMA tiles: one wave of k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(1, 4096, 4096, 8, 128), kHopper, o).gemv.k_split, 8);
  // 4-bit K = 512: 256 bytes per row = 2 tiles, so k_split 2 at most (4 windows).
  EXPECT_EQ(plan(problem(1, 16, 512, 4, 128), kHopper, o).gemv.k_split, 2);
  o.tma = 0;
  EXPECT_EQ(plan(problem(1, 16, 512, 8, 128), kHopper, o).gemv.k_split, 8);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kHopper, o).gemv.tma);  // forced off
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &PlanOverride::tma,
                                              "tma");
}

// The 4-bit register tile (algorithm 0) launches as a programmatic dependent of the kernel
// before it on SM90 where the caller's option gemv_dependent_launch allows it, or where
// forced (gemv_pdl=1; gemv_pdl=0 keeps it plain whatever the option); by default, the
// other GEMV kernels and algorithms, 8-bit and Ampere launch plainly.
TEST(NBitsPlan, DependentLaunchOfTheFourBitRegisterTile) {
  expect_switch_parses("gemv_pdl", &PlanOverride::gemv_pdl);
  if (!sm90_code_built())
    GTEST_SKIP() << "this build has no SM90 code: its GEMVs launch plainly (see DependentLaunchNeedsSm90Code)";
  NBitsMatMulOptions on;
  on.gemv_dependent_launch = true;
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m : {1, 4, 8}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m);
      const NBitsMatMulProblem p = problem(m, 4096, 4096, 4, 128, t);
      const NBitsMatMulPlan plain = plan(p);
      ASSERT_EQ(plain.path, NBitsPath::kGemv);
      ASSERT_FALSE(plain.gemv.window || plain.gemv.tma || plain.gemv.fma);
      EXPECT_FALSE(plain.gemv.dependent_launch);
      EXPECT_EQ(printed(plain).find("dependent_launch"), std::string::npos) << printed(plain);
      const NBitsMatMulPlan regs = plan(p, kHopper, on);
      EXPECT_TRUE(regs.gemv.dependent_launch);
      EXPECT_NE(printed(regs).find("tiles=1; dependent_launch=yes; workspace="), std::string::npos)
          << printed(regs);
      EXPECT_TRUE(plan(p, kHopper, parsed("gemv_pdl=1")).gemv.dependent_launch);
      EXPECT_FALSE(plan(p, kHopper, on, parsed("gemv_pdl=0")).gemv.dependent_launch);
      EXPECT_FALSE(plan(p, kAmpere, on).gemv.dependent_launch);
      // Algorithms 1 and 2 (forced) have no dependent instance.
      EXPECT_FALSE(plan(p, kHopper, on, parsed("algo=1")).gemv.dependent_launch);
      EXPECT_FALSE(plan(p, kHopper, on, parsed("algo=2")).gemv.dependent_launch);
      // The window kernel (8192 x 8192), TMA tiles and 8-bit stay plain, forced or not.
      const NBitsMatMulPlan window = plan(problem(m, 8192, 8192, 4, 128, t), kHopper, on, parsed("gemv_pdl=1"));
      EXPECT_TRUE(window.gemv.window);
      EXPECT_FALSE(window.gemv.dependent_launch);
      EXPECT_EQ(printed(window).find("dependent_launch"), std::string::npos);
      const NBitsMatMulPlan tma = plan(p, kHopper, on, parsed("tma=1"));
      EXPECT_TRUE(tma.gemv.tma);
      EXPECT_FALSE(tma.gemv.dependent_launch);
      EXPECT_FALSE(plan(problem(m, 4096, 4096, 8, 128, t), kHopper, on, parsed("window=0,gemv_pdl=1"))
                       .gemv.dependent_launch);
    }
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 4, 128, DType::kFloat32), kHopper, on).gemv.dependent_launch);
}

// A build without SM90 code (CUDA_ARCHITECTURES 80 alone) runs on an SM90 GPU from PTX
// that has no griddepcontrol.wait: no GEMV plan launches as a dependent there.
TEST(NBitsPlan, DependentLaunchNeedsSm90Code) {
  NBitsMatMulOptions on;
  on.gemv_dependent_launch = true;
  EXPECT_EQ(plan(problem(4, 4096, 4096, 4, 128, DType::kFloat16), kHopper, on).gemv.dependent_launch,
            sm90_code_built());
}

// The window kernel (float16 / bfloat16, algorithm 0, blocks of a window or more, rows of
// whole 64-byte windows), 4-bit by default where the grid has more warps than the
// 128-register tiles hold (ceil(N / 16) * 8 > 16 * SMs), with packed zero points at M = 1
// only, and not when TMA tiles are forced; it then replaces the TMA tile, and its K split
// counts 32 resident warps per SM (24 with packed zero points). Line loads (next test)
// take it whatever the grid (4-bit at M <= 4 on N x K >= 128 Mi, 8-bit), so the grid rule
// is checked below 128 Mi, from M = 3 and without them.
TEST(NBitsPlan, GemvWindowWhereItAppliesOrWhenAsked) {
  PlanOverride o;
  EXPECT_EQ(o.window, -1);
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m = 1; m <= 8; ++m)
      for (int64_t bs : {128, 256, 1024}) {
        const NBitsMatMulPlan p = plan(problem(m, 28672, 8192, 4, bs, t));
        EXPECT_TRUE(p.gemv.window) << p;
        EXPECT_FALSE(p.gemv.tma) << p;
        EXPECT_EQ(p.gemv.algo, kNBitsGemvAlgoUnrolled) << p;
      }
  // A window spans 2 blocks: not without line loads (by default two tiles of them, below).
  PlanOverride window_only;
  window_only.window = 1;
  window_only.lines = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64), kHopper, window_only).gemv.window);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 64)).gemv.lines);
  // 8-bit takes it only with line loads: on rows of 8256 bytes (not whole lines), TMA
  // tiles instead.
  EXPECT_FALSE(plan(problem(2, 28672, 8192 + 64, 8, 64)).gemv.window);
  EXPECT_TRUE(plan(problem(2, 28672, 8192 + 64, 8, 64)).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128, DType::kFloat32)).gemv.window);
  EXPECT_FALSE(plan(problem(100, 28672, 8192, 4, 128)).gemv.window);  // the fused GEMM
  // The grid: 264 tiles x 8 = 2112 = 16 x 132 warps is not more; 265 tiles are.
  EXPECT_FALSE(plan(problem(3, 264 * 16, 8192, 4, 128)).gemv.window);
  EXPECT_TRUE(plan(problem(3, 264 * 16 + 1, 8192, 4, 128)).gemv.window);
  EXPECT_FALSE(plan(problem(3, 4096, 4096, 4, 128)).gemv.window);
  EXPECT_TRUE(plan(problem(3, 4096, 4096, 4, 128), kAmpere).gemv.window);  // 108 SMs
  // Small grids of long rows: the split of 16 (GemvWindowSplit16OnSmallGridsOfLongRows).
  EXPECT_TRUE(plan(problem(3, 4096, 14336, 4, 128)).gemv.window);
  PlanOverride no_lines;
  no_lines.lines = 0;
  EXPECT_FALSE(plan(problem(1, 264 * 16, 8192, 4, 128), kHopper, no_lines).gemv.window);
  EXPECT_TRUE(plan(problem(1, 264 * 16 + 1, 8192, 4, 128), kHopper, no_lines).gemv.window);
  PlanOverride forced;
  forced.window = 1;
  // Forced: any grid, rows of whole windows (K = 128 is one).
  EXPECT_TRUE(plan(problem(1, 16, 128, 4, 128), kHopper, forced).gemv.window);
  EXPECT_TRUE(plan(problem(1, 4096, 14336, 4, 128), kHopper, forced).gemv.window);
  // Another algorithm, or TMA tiles forced, keep the other kernels.
  PlanOverride algo1;
  algo1.algo = kNBitsGemvAlgoLoop;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo1).gemv.window);
  PlanOverride algo0;
  algo0.algo = kNBitsGemvAlgoUnrolled;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo0).gemv.window);
  o.tma = 1;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.window);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.tma);
  o.window = 1;  // both forced: the window kernel
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.window);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64), kHopper, o).gemv.window);  // still applies only
  o = PlanOverride{};
  o.window = 0;
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 128), kHopper, o).gemv.window);
  // K split: 1792 tiles of 64 windows. 32 warps per SM (4224 resident): k_split 2 is one
  // wave (34) against 1 (66) and 4 (2 waves, 36). 16 (2112): k_split 1 (66) against 2
  // (2 waves, 68). With packed zero points, 24 (3168): 5 waves of k_split 8 (50) against
  // 3 of 4 (54), 2 of 2 (68) and 1 of 1 (66).
  EXPECT_EQ(plan(problem(3, 28672, 8192, 4, 128), kHopper, no_lines).gemv.k_split, 2);
  EXPECT_EQ(plan(problem(3, 28672, 8192, 4, 128), kHopper, o).gemv.k_split, 1);
  // Packed zero points: not by the grid rule (the register tile there), unless forced.
  NBitsMatMulProblem zp = problem(1, 264 * 16 + 1, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_FALSE(plan(zp).gemv.window);
  EXPECT_FALSE(plan(zp).gemv.tma);
  zp = problem(3, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_FALSE(plan(zp, kHopper, no_lines).gemv.window);  // TMA tiles
  PlanOverride forced_no_lines = forced;
  forced_no_lines.lines = 0;
  const NBitsMatMulPlan zp2 = plan(zp, kHopper, forced_no_lines);
  EXPECT_TRUE(zp2.gemv.window);
  EXPECT_EQ(zp2.gemv.k_split, 8);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &PlanOverride::window,
                                              "window");
}

// The window kernel's split of 16 warps (4-bit, no zero points, no line loads): where the
// register tile's grid is small (not more tiles x 8 warps than 16 warps per SM hold) and
// rows have at least 96 windows (6 a warp at 16): 4096 x 14336 at every decode M, both
// types. Rows of 95 windows, zero points, 8-bit, blocks smaller than a window and grids of
// many tiles keep their kernels; a forced window kernel splits by 16 only on such rows, and
// k_split=16 elsewhere is refused.
// Blocks of 12 warps (the one-tile window kernel at 80 registers): 8-bit bfloat16 line
// loads at M = 2..8, with or without zero points, on grids a split of 8 leaves at 16 warps
// per SM with rows of at least 96 windows (8-bit K >= 6144): 4096 x 14336. M = 1 keeps
// the CUDA-core kernel; float16 (128 registers), 4-bit, short rows (4096 x 4096) and grids
// of many tiles keep a split of at most 8. Forced, 12 is taken on those kernels alone.
TEST(NBitsPlan, GemvLinesInBlocksOfTwelveOnSmallGridsOfLongRows) {
  for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
    for (int64_t m = 2; m <= 8; ++m) {
      NBitsMatMulProblem pr = problem(m, 4096, 14336, 8, 128, DType::kBFloat16);
      pr.zero_points = zp;
      const NBitsMatMulPlan p = plan(pr);
      SCOPED_TRACE(::testing::Message() << p);
      EXPECT_TRUE(p.gemv.lines);
      EXPECT_EQ(p.gemv.tiles, 1);
      EXPECT_EQ(p.gemv.k_split, kNBitsWindow80MaxKSplit);
    }
  EXPECT_TRUE(plan(problem(1, 4096, 14336, 8, 128, DType::kBFloat16)).gemv.fma);
  EXPECT_LE(plan(problem(4, 4096, 14336, 8, 128, DType::kFloat16)).gemv.k_split, kGemvMaxKSplit);
  EXPECT_LE(plan(problem(4, 4096, 4096, 8, 128, DType::kBFloat16)).gemv.k_split, kGemvMaxKSplit);
  EXPECT_LE(plan(problem(4, 8192, 8192, 8, 128, DType::kBFloat16)).gemv.k_split, kGemvMaxKSplit);
  EXPECT_EQ(plan(problem(4, 4096, 6144, 8, 128, DType::kBFloat16)).gemv.k_split,
            kNBitsWindow80MaxKSplit);
  EXPECT_LE(plan(problem(4, 4096, 6144 - 128, 8, 128, DType::kBFloat16)).gemv.k_split, kGemvMaxKSplit);
  // Forced: the 80-register one-tile kernels (4-bit with zero points too) take 12; the
  // 128-register ones refuse it.
  NBitsMatMulProblem zp4 = problem(1, 4096, 14336, 4, 128, DType::kBFloat16);
  zp4.zero_points = NBitsZeroPoints::kPacked;
  const NBitsMatMulPlan forced = plan(zp4, kHopper, parsed("window=1,lines=0,k_split=12"));
  EXPECT_TRUE(forced.gemv.window);
  EXPECT_EQ(forced.gemv.k_split, kNBitsWindow80MaxKSplit);
  testing::expect_rejected(problem(4, 4096, 14336, 8, 128, DType::kFloat16), parsed("k_split=12"),
                           "12 only on the window kernel's one tile at 80 registers");
}

TEST(NBitsPlan, GemvWindowSplit16OnSmallGridsOfLongRows) {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m = 1; m <= 8; ++m) {
      const NBitsMatMulPlan p = plan(problem(m, 4096, 14336, 4, 128, t));
      SCOPED_TRACE(::testing::Message() << p);
      EXPECT_TRUE(p.gemv.window);
      EXPECT_FALSE(p.gemv.lines);
      EXPECT_EQ(p.gemv.k_split, kNBitsWindowMaxKSplit);
    }
  // 96 windows of 64 bytes: K = 12288 4-bit codes; 95 keep the register tile.
  EXPECT_EQ(plan(problem(1, 4096, 12288, 4, 128)).gemv.k_split, kNBitsWindowMaxKSplit);
  const NBitsMatMulPlan short_rows = plan(problem(1, 4096, 12288 - 128, 4, 128));
  EXPECT_FALSE(short_rows.gemv.window);
  EXPECT_EQ(short_rows.gemv.k_split, kGemvMaxKSplit);
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 4, 128)).gemv.window);
  // Smaller grids too (N = 1024: 64 tiles).
  EXPECT_EQ(plan(problem(1, 1024, 14336, 4, 128)).gemv.k_split, kNBitsWindowMaxKSplit);
  // Grids of many tiles: the window kernel at a split of 8 or less.
  const NBitsMatMulPlan many = plan(problem(1, 8192, 14336, 4, 128));
  EXPECT_TRUE(many.gemv.window);
  EXPECT_LE(many.gemv.k_split, kGemvMaxKSplit);
  NBitsMatMulProblem zp = problem(1, 4096, 14336, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_LE(plan(zp).gemv.k_split, kGemvMaxKSplit);
  EXPECT_LE(plan(problem(2, 4096, 14336, 8, 128)).gemv.k_split, kGemvMaxKSplit);
  // Blocks below a window: line loads (GemvLinesOnBlocksSmallerThanAWindow).
  const NBitsMatMulPlan small_blocks = plan(problem(1, 4096, 14336, 4, 64));
  EXPECT_TRUE(small_blocks.gemv.lines);
  EXPECT_LE(small_blocks.gemv.k_split, kGemvMaxKSplit);
  // Forced: the window kernel on rows of 32 windows splits by at most 8; k_split=16 is
  // taken on long rows and refused elsewhere, naming the kernel.
  EXPECT_EQ(plan(problem(1, 4096, 4096, 4, 128), kHopper, parsed("window=1")).gemv.k_split,
            kGemvMaxKSplit);
  EXPECT_EQ(plan(problem(1, 4096, 14336, 4, 128), kHopper, parsed("k_split=16")).gemv.k_split, 16);
  const NBitsMatMulPlan forced = plan(problem(1, 8192, 14336, 4, 128), kHopper, parsed("k_split=16"));
  EXPECT_TRUE(forced.gemv.window);
  EXPECT_EQ(forced.gemv.k_split, 16);
  for (const NBitsMatMulProblem& refused :
       {problem(1, 4096, 4096, 4, 128), zp, problem(2, 4096, 14336, 8, 128),
        problem(1, 28672, 8192, 4, 128)})
    testing::expect_rejected(refused, parsed("k_split=16"), "only on the 4-bit window kernel");
}

// Line loads (the window kernel's weights as whole 128-byte lines, rows of whole lines:
// K % 256 == 0 4-bit, K % 128 == 0 8-bit): by default 4-bit at M <= 4 (M <= 2 with packed
// zero points) on weights of N x K >= 128 Mi codes (the TMA tiles' threshold), 8-bit
// without zero points wherever the tensor cores run (bfloat16 M = 2 from 128 Mi codes, in
// the CUDA-core kernel's place; float16 not where TMA tiles are taken); not when the
// window kernel is off or TMA tiles are forced; forced on, they take the window kernel
// whatever the grid. Their K split is the window kernel's.
TEST(NBitsPlan, GemvLinesWhereItAppliesOrWhenAsked) {
  PlanOverride o;
  EXPECT_EQ(o.lines, -1);
  const int64_t shapes[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}};
  // 4-bit at every M on the large shape (two tiles per warp; with one, M <= 4) and from
  // M = 5 on grids of many tiles (two tiles); 8-bit wherever the tensor cores run
  // (bfloat16 from M = 3, and M = 2 on the large shape or a grid of many tiles; float16
  // from M = 2: below, the CUDA-core kernel). Two tiles per warp on the large shape: 4-bit
  // at every M, 8-bit float16 from M = 2, bfloat16 from M = 5; below it on grids of many
  // tiles 4-bit from M = 5 and 8-bit bfloat16. Their K split counts 16 warps per SM over
  // ceil(N / 32) warps' columns (4-bit bfloat16 at M <= 4: twice the model's).
  for (int bits : {4, 8})
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (const auto& nk : shapes)
      for (int64_t m = 1; m <= 8; ++m) {
        const NBitsMatMulPlan p = plan(problem(m, nk[0], nk[1], bits, 128, t));
        const bool large = nk[0] == 28672;
        const bool many = nk[0] > 264 * 16;  // the window kernel's grid rule
        // 8-bit bfloat16 on 4096 x 14336: blocks of 12 from M = 2 (below).
        const bool split12 = bits == 8 && t == DType::kBFloat16 && nk[1] == 14336 && m >= 2;
        const bool want = bits == 4                ? large || (many && m > 4)
                          : t == DType::kBFloat16 ? m > 2 || (m == 2 && (large || many || split12))
                                                  : m > 1;
        const bool fp16 = t == DType::kFloat16;
        const bool two = large ? bits == 4 || m >= (fp16 ? 2 : 5)
                               : many && (bits == 4 ? m > 4 : !fp16);
        const int tiles = two ? 2 : 1;
        EXPECT_EQ(p.gemv.lines, want) << p;
        if (bits == 8) {
          EXPECT_EQ(p.gemv.window, want) << p;  // 8-bit: only with line loads
        }
        if (p.gemv.lines) {
          EXPECT_TRUE(p.gemv.window) << p;
          EXPECT_FALSE(p.gemv.tma) << p;
          EXPECT_EQ(p.gemv.tiles, tiles) << p;
          const int model = choose_gemv_k_split(
              gemv_split_model(nk[0] / tiles, nk[1] * bits / 8 / 64, kHopper.num_sms,
                               nbits_window_warps_per_sm(bits, false, fp16, tiles)));
          EXPECT_EQ(p.gemv.k_split,
                    split12 ? kNBitsWindow80MaxKSplit
                    : tiles == 2 && bits == 4 && (!fp16 || m == 1) && m <= 4 ? 2 * model
                                                                             : model)
              << p;
        } else {
          EXPECT_EQ(p.gemv.tiles, 1) << p;
        }
      }
  // 8-bit: the window kernel's 24 warps per SM (k_split 8 at 28672 x 8192; 32 would give 4),
  // rows of whole lines (K = 4160: 4160 bytes), a window per block or more, no zero points.
  const DType bf16 = DType::kBFloat16;
  EXPECT_EQ(plan(problem(4, 28672, 8192, 8, 128, bf16)).gemv.k_split, 8);
  EXPECT_FALSE(plan(problem(4, 4096, 4160, 8, 64, bf16)).gemv.lines);
  EXPECT_FALSE(plan(problem(4, 4096, 4160, 8, 64, bf16)).gemv.window);
  EXPECT_TRUE(plan(problem(4, 4096, 4096, 8, 64, bf16)).gemv.lines);
  // Blocks smaller than a window down to a lane's chunk (8-bit: 16 codes, 4-bit: 32).
  EXPECT_TRUE(plan(problem(4, 4096, 4096, 8, 16, bf16)).gemv.lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 4, 32, bf16)).gemv.lines);
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 4, 16, bf16)).gemv.lines);
  // Packed zero points: bfloat16 as without, one tile; float16 below 128 Mi codes too.
  NBitsMatMulProblem zp8 = problem(4, 4096, 4096, 8, 128, bf16);
  zp8.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp8).gemv.lines);
  EXPECT_EQ(plan(zp8).gemv.tiles, 1);
  zp8.dtype = DType::kFloat16;
  EXPECT_TRUE(plan(zp8).gemv.lines);
  EXPECT_FALSE(plan(zp8).gemv.tma);
  PlanOverride tensor_cores;  // 8-bit M <= 2 on the tensor cores: line loads
  tensor_cores.fma = 0;
  for (int64_t m : {1, 2}) {
    EXPECT_TRUE(plan(problem(m, 8192, 8192, 8, 128, bf16), kHopper, tensor_cores).gemv.lines);
    EXPECT_TRUE(plan(problem(m, 8192, 8192, 8, 128), kHopper, tensor_cores).gemv.lines);
  }
  // 8-bit float16: line loads of two tiles in place of TMA tiles on N x K >= 128 Mi (one
  // tile: TMA tiles at M <= 4 there), and everywhere without TMA (SM80). Its window kernel
  // holds 16 warps per SM, bfloat16's 24: 300 tiles of 64 windows take k_split 4 (one wave
  // of 1200 warps: 16 + 2) against 8's two waves (2 x 10) at 16, and 8 (one wave) at 24.
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128)).gemv.lines);
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128)).gemv.tma);
  PlanOverride one_tile;
  one_tile.tiles = 1;
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128), kHopper, one_tile).gemv.lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128), kHopper, one_tile).gemv.tma);
  EXPECT_TRUE(plan(problem(5, 28672, 8192, 8, 128), kHopper, one_tile).gemv.lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128), kAmpere).gemv.lines);
  EXPECT_EQ(plan(problem(2, 4800, 4096, 8, 128)).gemv.k_split, 4);
  EXPECT_EQ(plan(problem(3, 4800, 4096, 8, 128, bf16)).gemv.k_split, 8);
  PlanOverride tma8;
  tma8.tma = 1;
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128, bf16), kHopper, tma8).gemv.lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128, bf16), kHopper, tma8).gemv.tma);
  // The size rule: 8192 x 16384 = 128 Mi codes; K - 256 below.
  EXPECT_TRUE(plan(problem(2, 8192, 16384, 4, 128)).gemv.lines);
  EXPECT_FALSE(plan(problem(2, 8192, 16384 - 256, 4, 128)).gemv.lines);
  EXPECT_TRUE(plan(problem(4, 8192, 16384, 4, 128)).gemv.lines);
  EXPECT_TRUE(plan(problem(5, 8192, 16384, 4, 128)).gemv.lines);  // two tiles per warp
  EXPECT_FALSE(plan(problem(5, 8192, 16384, 4, 128), kHopper, one_tile).gemv.lines);
  // Rows of whole lines only: K = 16384 + 128 is 8256 bytes a row (129 windows).
  EXPECT_FALSE(plan(problem(1, 16384, 16384 + 128, 4, 128)).gemv.lines);
  EXPECT_TRUE(plan(problem(1, 16384, 16384 + 128, 4, 128)).gemv.window);  // the grid rule
  // Only where the window kernel's loop applies, on blocks of a lane's chunk or more.
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 16)).gemv.lines);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128)).gemv.lines);  // 8-bit M = 1: CUDA cores
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128, DType::kFloat32)).gemv.lines);
  PlanOverride algo1;
  algo1.algo = kNBitsGemvAlgoLoop;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo1).gemv.lines);
  // Packed zero points with one tile forced: line loads at M <= 2 (without: M <= 4), and
  // the window kernel's K split for them (24 warps per SM: k_split 8 at 28672 x 8192;
  // two tiles per warp, 16 warps per SM and 896 warps' columns: the model's 2, doubled in
  // float16 only at M = 1 without zero points).
  EXPECT_EQ(plan(problem(1, 28672, 8192, 4, 128)).gemv.k_split, 4);
  EXPECT_EQ(plan(problem(2, 28672, 8192, 4, 128)).gemv.k_split, 2);
  NBitsMatMulProblem zp = problem(2, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv.lines);
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv.window);  // the window kernel's line loads
  EXPECT_EQ(plan(zp, kHopper, one_tile).gemv.k_split, 8);
  EXPECT_EQ(plan(zp).gemv.k_split, 2);
  zp.m = 3;
  EXPECT_FALSE(plan(zp, kHopper, one_tile).gemv.lines);
  EXPECT_FALSE(plan(zp, kHopper, one_tile).gemv.window);
  zp.zero_points = NBitsZeroPoints::kNone;
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv.lines);
  // The window kernel off, or TMA tiles forced: no line loads by default.
  PlanOverride off;
  off.window = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, off).gemv.lines);
  off.lines = 1;  // lines forced, the window kernel off: off wins
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, off).gemv.window);
  PlanOverride tma;
  tma.tma = 1;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv.lines);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv.tma);
  tma.lines = 1;  // both forced: the window kernel with line loads
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv.lines);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv.tma);
  // Forced on: any M and grid where it applies; forced off: the window kernel's own rule.
  o.lines = 1;
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128), kHopper, o).gemv.lines);
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128), kHopper, o).gemv.window);
  EXPECT_TRUE(plan(problem(1, 16, 256, 4, 128), kHopper, o).gemv.lines);   // one line
  EXPECT_FALSE(plan(problem(1, 16, 128, 4, 128), kHopper, o).gemv.lines);  // one window
  o.lines = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.lines);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.window);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &PlanOverride::lines,
                                              "lines");
}

// Blocks smaller than a window but no smaller than a lane's 16-byte chunk (4-bit 32, 64;
// 8-bit 16, 32 codes) take the plans of blocks of a window (4-bit 128, 8-bit 64 codes): the
// same rules, measured on the decode suite at blocks of 32 and 64 codes (H200: line loads
// 8-32 % faster than the register tile wherever they are taken),
// except where those take the window kernel without line loads (4-bit, grids of many
// tiles, M <= 4; it needs blocks of a window): two tiles of line loads there; and where
// they take the 4-bit register tile: line loads with packed zero points (M <= 4, long
// rows, two tiles on grids of many tiles above M = 4) and on small grids of long rows
// without (the split of 16's place). 4-bit blocks of 16 codes keep the register tile. The
// 4-bit bfloat16 K-split doubling stays on N x K >= 128 Mi.
TEST(NBitsPlan, GemvLinesOnBlocksSmallerThanAWindow) {
  const int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}, {28672, 8192}};
  int window_cases = 0, split16_cases = 0, zp_register_cases = 0, zp_lines_cases = 0;
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
        for (int64_t m : {1, 2, 3, 4, 5, 8})
          for (const auto& nk : shapes) {
            NBitsMatMulProblem big = problem(m, nk[0], nk[1], bits, 512 / bits, t);
            big.zero_points = zp;
            const NBitsMatMulPlan pb = plan(big);
            // On 132 SMs: rows of 96 windows or more (K = 14336), grids of many tiles (N >= 8192).
            const bool long_rows = nk[1] == 14336, many_tiles = nk[0] >= 8192;
            for (int64_t bs : {int64_t{128} / bits, int64_t{256} / bits}) {
              NBitsMatMulProblem small = big;
              small.block_size = bs;
              const NBitsMatMulPlan ps = plan(small);
              SCOPED_TRACE(::testing::Message() << pb << " vs " << ps);
              EXPECT_EQ(ps.path, NBitsPath::kGemv);
              EXPECT_EQ(ps.gemv.fma, pb.gemv.fma);
              EXPECT_FALSE(ps.gemv.tma);
              if (pb.gemv.window && !pb.gemv.lines && pb.gemv.k_split == kNBitsWindowMaxKSplit) {
                // The split of 16 (small grids of long rows, no zero points) needs blocks of
                // a window: smaller ones take line loads, two tiles above M = 4.
                ++split16_cases;
                EXPECT_TRUE(ps.gemv.lines);
                EXPECT_EQ(ps.gemv.tiles, m > 4 ? 2 : 1);
              } else if (pb.gemv.window && !pb.gemv.lines) {
                ++window_cases;
                EXPECT_TRUE(ps.gemv.lines);
                EXPECT_EQ(ps.gemv.tiles, 2);
              } else if (bits == 4 && zp == NBitsZeroPoints::kPacked && !pb.gemv.window) {
                // Packed zero points on the register tile at blocks of a window: line loads
                // at M <= 4 and on long rows, two tiles above M = 4 on grids of many tiles;
                // short rows of few tiles above M = 4 stay on the register tile.
                ++zp_register_cases;
                const bool lines = m <= 4 || long_rows || many_tiles;
                zp_lines_cases += lines ? 1 : 0;
                EXPECT_EQ(ps.gemv.lines, lines);
                EXPECT_EQ(ps.gemv.window, lines);
                EXPECT_EQ(ps.gemv.tiles, lines && m > 4 && many_tiles ? 2 : 1);
              } else {
                EXPECT_FALSE(pb.gemv.tma);
                EXPECT_EQ(ps.gemv.window, pb.gemv.window);
                EXPECT_EQ(ps.gemv.lines, pb.gemv.lines);
                EXPECT_EQ(ps.gemv.tiles, pb.gemv.tiles);
                EXPECT_EQ(ps.gemv.k_split, pb.gemv.k_split);
              }
            }
          }
  EXPECT_EQ(window_cases, 2 * 2 * 4 * 2);  // 4-bit, both dtypes, M = 1..4, 2 shapes, 2 sizes
  EXPECT_EQ(split16_cases, 2 * 6 * 2);     // 4-bit 4096 x 14336, both dtypes, every M, 2 sizes
  // 4096 x 4096, 4096 x 14336 and 8192 x 8192, both dtypes, every M, 2 sizes; line loads
  // but at 4096 x 4096 M = 5 and 8.
  EXPECT_EQ(zp_register_cases, 2 * 6 * 3 * 2);
  EXPECT_EQ(zp_lines_cases, 2 * 2 * (4 + 6 + 6));
  // bfloat16 two tiles below 128 Mi: the model's k_split (896 two-tile warps' columns of 64
  // windows: 4), not twice it.
  const NBitsMatMulPlan bf16 = plan(problem(2, 14336, 4096, 4, 32, DType::kBFloat16));
  EXPECT_EQ(bf16.gemv.tiles, 2);
  EXPECT_EQ(bf16.gemv.k_split, plan(problem(2, 14336, 4096, 4, 32)).gemv.k_split);
  EXPECT_EQ(bf16.gemv.k_split, 4);
  EXPECT_EQ(plan(problem(2, 28672, 8192, 4, 32, DType::kBFloat16)).gemv.k_split,
            2 * plan(problem(2, 28672, 8192, 4, 32)).gemv.k_split);
  // Below a chunk: never line loads, not even forced.
  PlanOverride forced;
  forced.lines = 1;
  forced.tiles = 2;
  const NBitsMatMulPlan tiny = plan(problem(2, 28672, 8192, 4, 16), kHopper, forced);
  EXPECT_FALSE(tiny.gemv.lines) << tiny;
  EXPECT_FALSE(tiny.gemv.window) << tiny;
  EXPECT_EQ(tiny.gemv.tiles, 1) << tiny;
}

// Two 16-column tiles per warp: line loads without a zero-point tensor; by default on
// N x K >= 128 Mi (4-bit every M, 8-bit float16 from M = 2, bfloat16 from M = 5) and
// below it on grids of many tiles (4-bit from M = 5, 8-bit bfloat16), or as forced; their
// K split counts 16 warps per SM (4-bit bfloat16 at M <= 4 and float16 at M = 1: twice that).
TEST(NBitsPlan, GemvTwoTilesPerWarpOnLargeWeights) {
  const DType bf16 = DType::kBFloat16;
  // 896 two-tile warps of 64 windows: one wave of k_split 2 (32 + 2), two of 4 (2 x 18).
  const NBitsMatMulPlan four = plan(problem(8, 28672, 8192, 4, 128));
  EXPECT_EQ(four.gemv.tiles, 2);
  EXPECT_EQ(four.gemv.k_split, 2);
  EXPECT_NE(printed(four).find("window=1; lines=1; tiles=2"), std::string::npos) << four;
  EXPECT_EQ(plan(problem(4, 28672, 8192, 4, 128, bf16)).gemv.k_split, 4);
  EXPECT_EQ(plan(problem(5, 28672, 8192, 4, 128, bf16)).gemv.k_split, 2);
  // 8-bit: 128 windows, k_split 2 (64 + 2 against 2 x 34).
  EXPECT_EQ(plan(problem(2, 28672, 8192, 8, 128)).gemv.k_split, 2);
  EXPECT_EQ(plan(problem(4, 28672, 8192, 8, 128, bf16)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(5, 28672, 8192, 8, 128, bf16)).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(2, 8192, 16384 - 128, 8, 128)).gemv.tiles, 1);  // < 128 Mi
  // Below 128 Mi, grids of more than 264 tiles: 4-bit from M = 5, 8-bit bfloat16.
  EXPECT_EQ(plan(problem(5, 8192, 8192, 4, 128)).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(4, 8192, 8192, 4, 128)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(8, 264 * 16, 8192, 4, 128)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(8, 264 * 16 + 1, 8192, 4, 128)).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(3, 8192, 8192, 8, 128, bf16)).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(3, 264 * 16, 8192, 8, 128, bf16)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(8, 8192, 8192, 8, 128)).gemv.tiles, 1);  // float16 8-bit
  // Packed zero points: on N x K >= 128 Mi, 4-bit at every M, 8-bit float16 (M >= 2 by
  // default, the CUDA-core kernel at M = 1), not 8-bit bfloat16; not below 128 Mi.
  NBitsMatMulProblem zp = problem(1, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  for (int64_t m : {1, 8}) {
    zp.m = m;
    EXPECT_TRUE(plan(zp).gemv.lines);
    EXPECT_EQ(plan(zp).gemv.tiles, 2);
  }
  // 4-bit: twice the model's split (2) in bfloat16 at M <= 4 with or without zero points,
  // in float16 at M = 1 without them.
  for (int64_t m : {1, 2, 3, 4, 5}) {
    zp.m = m;
    zp.dtype = DType::kFloat16;
    EXPECT_EQ(plan(zp).gemv.k_split, 2) << plan(zp);
    zp.dtype = DType::kBFloat16;
    EXPECT_EQ(plan(zp).gemv.k_split, m <= 4 ? 4 : 2) << plan(zp);
    EXPECT_EQ(plan(problem(m, 28672, 8192, 4, 128)).gemv.k_split, m == 1 ? 4 : 2);
  }
  // The split across N at K = 8192 (two-tile warps' start costs 6 windows; twice the
  // split only where the model's leaves one partial wave of >= 3/4 of the 2112 resident
  // warps): 528 warps x 4 fill one wave; 704 x 2 are 0.67 of one (k_split 8, 2.7 waves,
  // with a start of 2); 896 x 2 0.85 (doubled at M = 1 float16, M <= 4 bfloat16); 1056 x 2
  // one; 1408 x 4 2.7 waves (34 + 6 x 2 = 76 against 3 x 22 = 66).
  // At 128 registers (the wide kernel's choice: GemvTwoTilesAt168Registers below).
  PlanOverride narrow;
  narrow.registers = kGemvTwoTileRegisters;
  const std::pair<int64_t, int> fp16_m1[] = {{16896, 4}, {22528, 2}, {28672, 4}, {33792, 2}, {45056, 4}};
  for (const auto& [n, split] : fp16_m1) {
    EXPECT_EQ(plan(problem(1, n, 8192, 4, 128), kHopper, narrow).gemv.k_split, split) << n;
    EXPECT_EQ(plan(problem(4, n, 8192, 4, 128, bf16), kHopper, narrow).gemv.k_split, split) << n;
    EXPECT_EQ(plan(problem(8, n, 8192, 4, 128), kHopper, narrow).gemv.k_split,
              n == 28672 ? 2 : split)
        << n;
  }
  // K = 4096 (32 windows), 57344 columns: one partial wave (0.85) of k_split 1.
  EXPECT_EQ(plan(problem(8, 57344, 4096, 4, 128)).gemv.k_split, 1);
  EXPECT_EQ(plan(problem(1, 57344, 4096, 4, 128)).gemv.k_split, 2);
  zp.dtype = DType::kFloat16;
  zp.n = 8192;
  zp.k = 16384;  // 128 Mi codes
  EXPECT_EQ(plan(zp).gemv.tiles, 2);
  zp.k = 16384 - 256;  // below: the register tile
  EXPECT_EQ(plan(zp).gemv.tiles, 1);
  EXPECT_FALSE(plan(zp).gemv.lines);
  EXPECT_FALSE(plan(zp).gemv.window);
  zp = problem(2, 28672, 8192, 8, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(plan(zp).gemv.tiles, 2);
  zp.k = 16384 - 128;  // N = 8192: below 128 Mi, one tile
  zp.n = 8192;
  EXPECT_EQ(plan(zp).gemv.tiles, 1);
  EXPECT_TRUE(plan(zp).gemv.lines);
  zp = problem(8, 28672, 8192, 8, 128, bf16);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(plan(zp).gemv.tiles, 1);
  EXPECT_TRUE(plan(zp).gemv.lines);
  zp = problem(1, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  PlanOverride o;
  EXPECT_EQ(o.tiles, -1);
  o.tiles = 2;  // forced: line loads of two tiles wherever they apply
  const NBitsMatMulPlan small = plan(problem(3, 4096, 4096, 4, 128), kHopper, o);
  EXPECT_TRUE(small.gemv.lines) << small;
  EXPECT_EQ(small.gemv.tiles, 2) << small;
  EXPECT_EQ(plan(zp, kHopper, o).gemv.tiles, 2);  // forced: with zero points too
  EXPECT_EQ(plan(problem(3, 4096, 4096 + 128, 4, 128), kHopper, o).gemv.tiles, 1);
  o.lines = 0;
  EXPECT_EQ(plan(problem(3, 4096, 4096, 4, 128), kHopper, o).gemv.tiles, 1);
  o = PlanOverride{};
  o.tiles = 1;  // one tile: 4-bit M = 8 keeps the window kernel's own loads
  EXPECT_FALSE(plan(problem(8, 28672, 8192, 4, 128), kHopper, o).gemv.lines);
  EXPECT_EQ(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv.tiles, 1);
  testing::expect_override_rejects(problem(3, 4096, 4096, 4, 128), o, &PlanOverride::tiles,
                                   "tiles", {-2, 0, 3});
}

// 4-bit with packed zero points below 128 Mi: two tiles (line loads) where the grid has
// more than 2 two-tile column blocks per SM (N > 8448 on 132 SMs), the register tile below.
TEST(NBitsPlan, GemvTwoTilesWithZeroPointsOnGridsOfManyTilePairs) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t m : {1, 4, 8}) {
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{264 * 32 + 1, 4096},
                                 {10240, 4096}, {14336, 4096}, {28672, 4096}}) {
        NBitsMatMulProblem zp = problem(m, n, k, 4, 128, dtype);
        zp.zero_points = NBitsZeroPoints::kPacked;
        const NBitsMatMulPlan pl = plan(zp);
        EXPECT_TRUE(pl.gemv.lines) << pl;
        EXPECT_EQ(pl.gemv.tiles, 2) << pl;
      }
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{264 * 32, 4096},
                                 {8192, 8192}, {6144, 4096}, {5120, 8192}, {4096, 14336}}) {
        NBitsMatMulProblem zp = problem(m, n, k, 4, 128, dtype);
        zp.zero_points = NBitsZeroPoints::kPacked;
        const NBitsMatMulPlan pl = plan(zp);
        EXPECT_FALSE(pl.gemv.window) << pl;  // the register tile
        EXPECT_EQ(pl.gemv.tiles, 1) << pl;
      }
    }
  }
  // Fewer SMs, fewer pairs: 80 SMs hold 160 pairs' splits of 8 at 16 warps per SM.
  NBitsMatMulProblem zp = problem(1, 160 * 32 + 32, 4096, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  DeviceInfo small = kHopper;
  small.num_sms = 80;
  EXPECT_EQ(plan(zp, small).gemv.tiles, 2);
  zp.n = 160 * 32;
  EXPECT_EQ(plan(zp, small).gemv.tiles, 1);
  // 8-bit keeps one tile below 128 Mi.
  zp = problem(2, 28672, 4096, 8, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(plan(zp).gemv.tiles, 1);
}

TEST(NBitsPlan, PrintsEveryDecision) {
  NBitsMatMulProblem q = problem(3, 4096, 4096, 8, 128, DType::kBFloat16);
  q.zero_points = NBitsZeroPoints::kPacked;
  q.has_bias = true;
  PlanOverride o;
  o.algo = 2;
  const std::string gemv = printed(plan(q, kHopper, o));
  EXPECT_EQ(gemv,
            "NBitsMatMulPlan{path=gemv; nbits int8 bfloat16 M=3 N=4096 K=4096 block_size=128 "
            "zero_points=packed bias align=16 scale_align=16; sm90/132SMs; algo=2; rows=8; k_split=8; "
            "tma=0; window=0; lines=0; tiles=1; workspace=0B}");
  EXPECT_EQ(printed(plan(problem(2, 8192, 4096, 4, 128))),
            "NBitsMatMulPlan{path=gemv; nbits int4 float16 M=2 N=8192 K=4096 block_size=128 "
            "zero_points=none align=16 scale_align=16; sm90/132SMs; algo=0; rows=8; k_split=8; tma=0; "
            "window=1; lines=0; tiles=1; workspace=0B}");
  q.m = 1;
  EXPECT_EQ(printed(plan(q)),
            "NBitsMatMulPlan{path=gemv; nbits int8 bfloat16 M=1 N=4096 K=4096 block_size=128 "
            "zero_points=packed bias align=16 scale_align=16; sm90/132SMs; fma=1; rows=1; workspace=0B}");
  q.m = 100;
  q.has_g_idx = true;
  const std::string dq = printed(plan(q));
  EXPECT_NE(dq.find("path=dequant_gemm"), std::string::npos) << dq;
  EXPECT_NE(dq.find(" g_idx"), std::string::npos) << dq;
  EXPECT_NE(dq.find("; dequant=vec8; n_tile=4096 x 1; "), std::string::npos) << dq;
  EXPECT_EQ(dq.find("buffer"), std::string::npos) << dq;
  EXPECT_NE(dq.find("workspace=67108864B (cublas 33554432@0, scratch 33554432@33554432)}"),
            std::string::npos)
      << dq;
  // The fused GEMM: its tiling, and the partial sums of its K split.
  q.has_g_idx = false;
  q.m = 16;
  q.n = 8192;
  q.k = 8192;
  EXPECT_EQ(printed(plan(q, kHopper, parsed("gemm=1,wgmma=0"))),
            "NBitsMatMulPlan{path=fused_gemm; nbits int8 bfloat16 M=16 N=8192 K=8192 "
            "block_size=128 zero_points=packed bias align=16 scale_align=16; sm90/132SMs; "
            "mainloop=mma; tile_m=16; tile_n=128; stages=4; k_split=4; workspace=2097152B "
            "(partial 2097152@0)}");
  const std::string whole = printed(plan(problem(64, 28672, 8192, 4, 128), kHopper, parsed("wgmma=0")));
  EXPECT_NE(whole.find("path=fused_gemm"), std::string::npos) << whole;
  EXPECT_NE(whole.find("; mainloop=mma; tile_m=64; tile_n=128; stages=3; k_split=1; workspace=0B}"),
            std::string::npos)
      << whole;
  if (wgmma_built()) {
    const std::string hopper = printed(plan(problem(64, 28672, 8192, 4, 128)));
    EXPECT_NE(hopper.find("; mainloop=wgmma; tile_m=64; tile_n=128; stages=4; k_split=1; "
                          "workspace=1048576B (act_order 1048576@0)}"),
              std::string::npos)
        << hopper;
  }
}

TEST(NBitsPlan, RejectsMalformedProblemsAndOptions) {
  NBitsMatMulPlan out;
  NBitsMatMulProblem p = problem(1, 64, 64);
  p.dtype = DType::kUInt8;
  EXPECT_EQ(plan_nbits_matmul(p, kHopper, {}, &out).code(), StatusCode::kInvalidArgument);
  p = problem(1, 64, 64, 2);
  EXPECT_EQ(plan_nbits_matmul(p, kHopper, {}, &out).code(), StatusCode::kNotSupported);
  p = problem(1, 64, 64, 3);
  EXPECT_EQ(plan_nbits_matmul(p, kHopper, {}, &out).code(), StatusCode::kInvalidArgument);
  p = problem(1, 64, 64, 4, 24);
  EXPECT_EQ(plan_nbits_matmul(p, kHopper, {}, &out).code(), StatusCode::kInvalidArgument);
  p = problem(-1, 64, 64);
  EXPECT_EQ(plan_nbits_matmul(p, kHopper, {}, &out).code(), StatusCode::kInvalidArgument);
  NBitsMatMulOptions options;
  options.dequant_scratch_bytes = 0;
  const Status s = plan_nbits_matmul(problem(1, 64, 64), kHopper, options, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dequant_scratch_bytes"), std::string::npos) << s.message();
  PlanOverride o;
  o.algo = 3;
  EXPECT_EQ(plan_nbits_matmul(problem(1, 64, 64), kHopper, {}, o, &out).code(),
            StatusCode::kInvalidArgument);
  testing::expect_override_rejects(problem(1, 64, 64), PlanOverride{}, &PlanOverride::algo,
                                   "algo", {3, -2, 16});
  testing::expect_override_rejects(problem(1, 64, 64), PlanOverride{}, &PlanOverride::window,
                                   "window", {2, -2});
}

// Two tiles at 168 registers (12 warps per SM, k_split <= 4) where the wave model, its
// cost at 12 warps weighed by 90 %, beats the best at 16 warps (both with a start of 6
// windows): where the grid takes as many waves at 12 warps per SM as at 16.
TEST(NBitsPlan, GemvTwoTilesAt168Registers) {
  const DType bf16 = DType::kBFloat16;
  using testing::narrow;
  using testing::wide;
  const auto regs_split = [](const auto& p) { return testing::registers_and_split(p); };
  // 4-bit, K = 8192 (64 windows): 640 two-tile warps' columns at N = 20480 are one wave at
  // k_split 2 of 12 or 16 warps per SM (1280 of 1584 / 2112): 168 (0.9 x 38 against 38).
  // 36864 (1152): 3 waves of 4 either way (2.9 and 2.2). 45056 (1408): one wave of 1 at 12
  // (0.9 x 70) against 3 of 4 at 16 (66). 28672 (896): 2 waves of 2 at 12, one at 16: 128
  // (its split doubled in float16 at M = 1, not at M = 8). 16384 (512): k_split 4 fills one
  // wave of 16 (2048 of 2112), two of 12.
  for (int64_t m : {1, 2, 4, 8})
    for (DType t : {DType::kFloat16, bf16}) {
      SCOPED_TRACE(::testing::Message() << "M = " << m << " " << dtype_name(t));
      EXPECT_EQ(regs_split(plan(problem(m, 20480, 8192, 4, 128, t))), wide(2));
      EXPECT_EQ(regs_split(plan(problem(m, 36864, 8192, 4, 128, t))), wide(4));
      EXPECT_EQ(regs_split(plan(problem(m, 45056, 8192, 4, 128, t))), wide(1));
      EXPECT_EQ(plan(problem(m, 28672, 8192, 4, 128, t)).gemv.registers, kGemvTwoTileRegisters);
      EXPECT_EQ(plan(problem(m, 16384, 8192, 4, 128, t)).gemv.registers, kGemvTwoTileRegisters);
    }
  EXPECT_EQ(regs_split(plan(problem(1, 28672, 8192, 4, 128))), narrow(4));
  EXPECT_EQ(regs_split(plan(problem(8, 28672, 8192, 4, 128))), narrow(2));
  // The wave boundary at k_split 2 (M = 8: no doubled split at 128): 792 warps' columns
  // (N = 25344) fill the 1584 warps of 12 per SM exactly; 793 (N = 25345..25376) need a
  // second wave (or 3 of 4).
  EXPECT_EQ(regs_split(plan(problem(8, 25344, 8192, 4, 128))), wide(2));
  EXPECT_EQ(regs_split(plan(problem(8, 25345, 8192, 4, 128))), narrow(2));
  // The model counts the device's SMs: on 108 (A100) the boundary is 648 warps' columns.
  EXPECT_EQ(regs_split(plan(problem(8, 20736, 8192, 4, 128), kAmpere)), wide(2));
  EXPECT_EQ(regs_split(plan(problem(8, 20737, 8192, 4, 128), kAmpere)), narrow(2));
  // Packed zero points, K = 16384 (128 windows), 8-bit (128 windows at K = 8192; its own
  // split model starts at 2 windows, the comparison at 6).
  NBitsMatMulProblem zp = problem(1, 20480, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(regs_split(plan(zp)), wide(2));
  EXPECT_EQ(regs_split(plan(problem(1, 10240, 16384, 4, 128))), wide(4));
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192, 8, 128))), wide(2));
  EXPECT_EQ(regs_split(plan(problem(8, 20480, 8192, 8, 128, bf16))), wide(2));
  EXPECT_EQ(regs_split(plan(problem(2, 36864, 8192, 8, 128))), wide(4));
  EXPECT_EQ(regs_split(plan(problem(2, 28672, 8192, 8, 128))), narrow(2));
  // Below 128 Mi on grids of many tiles (14336 x 4096, M = 8: one wave of 4 at 16 warps,
  // two at 12): 128.
  EXPECT_EQ(regs_split(plan(problem(8, 14336, 4096, 4, 128))), narrow(4));
  // One tile per warp: no register choice.
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128)).gemv.registers, 0);
  EXPECT_NE(printed(plan(problem(1, 20480, 8192, 4, 128))).find("tiles=2; regs=168;"),
            std::string::npos);
  EXPECT_EQ(printed(plan(problem(1, 12288, 8192, 4, 128))).find("regs="), std::string::npos);
  // Forced: 168 wherever two tiles are taken (its split the 12-warp model's: at 28672 3
  // waves of 4, 66, against one of 1, 70), 128 likewise;
  // ignored with one tile; a forced k_split of 8 keeps 128 unless 168 is forced too (an
  // error: the wide kernel's blocks hold 4 warps).
  PlanOverride o;
  o.registers = kGemvWideRegisters;
  EXPECT_EQ(regs_split(plan(problem(1, 28672, 8192, 4, 128), kHopper, o)), wide(4));
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128), kHopper, o).gemv.registers, 0);
  o.k_split = 2;
  EXPECT_EQ(regs_split(plan(problem(1, 28672, 8192, 4, 128), kHopper, o)), wide(2));
  o.k_split = 8;
  testing::expect_rejected(problem(1, 28672, 8192, 4, 128), o,
                           "plan override: registers=168 holds k_split up to 4, but k_split=8");
  testing::expect_rejected(problem(1, 28672, 8192, 4, 128), parsed("k_split=8,registers=168"),
                           "registers=168");
  // Fp8WeightMatMul's W8A8 GEMM key does not apply here.
  testing::expect_rejected(problem(64, 8192, 8192, 4, 128), parsed("w8a8=1"),
                           "plan override: w8a8 does not apply to NBitsMatMul");
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128), kHopper, o).gemv.k_split, 8);  // one tile
  o.registers = -1;
  EXPECT_EQ(regs_split(plan(problem(1, 20480, 8192, 4, 128), kHopper, o)), narrow(8));
  o.registers = kGemvTwoTileRegisters;
  o.k_split = 0;
  EXPECT_EQ(regs_split(plan(problem(1, 20480, 8192, 4, 128), kHopper, o)), narrow(2));
  testing::expect_override_rejects(problem(1, 20480, 8192, 4, 128), o, &PlanOverride::registers,
                                   "registers", {0, 64, 127, 160, 256, -2});
}

// ------------------------------------------------------------------ plan override
// The kernel choices an override forces, parsed from the grammar of BQMM_PLAN_OVERRIDE;
// the tests above set them in the struct.

// k_split forces the tensor-core GEMV's K split, as FP8's, on the window kernel's line
// loads (4-bit 28672 x 8192, the planner's 4) and on the register tile (8192 x 8192 at
// blocks of 16, its 4).
TEST(NBitsOverride, GemvKSplit) {
  testing::expect_k_split_forced(problem(1, 28672, 8192, 4, 128));
  testing::expect_k_split_forced(problem(2, 8192, 8192, 4, 16));
  // The CUDA-core kernels have none.
  PlanOverride o;
  o.k_split = 4;
  const NBitsMatMulPlan fma = plan(problem(1, 8192, 8192, 8, 128), kHopper, o);
  EXPECT_TRUE(fma.gemv.fma);
  EXPECT_EQ(fma.gemv.k_split, 0);
}

// algo: each of the three K-loop algorithms, parsed; anything else rejected.
TEST(NBitsOverride, GemvAlgo) {
  EXPECT_EQ(PlanOverride{}.algo, -1);
  for (int algo : {kNBitsGemvAlgoUnrolled, kNBitsGemvAlgoLoop, kNBitsGemvAlgoPerBlock}) {
    const PlanOverride o = parsed("algo=" + std::to_string(algo));
    EXPECT_EQ(o.algo, algo);
    const NBitsMatMulPlan p = plan(problem(1, 4096, 4096), kHopper, o);
    EXPECT_EQ(p.path, NBitsPath::kGemv);
    EXPECT_EQ(p.gemv.algo, algo);
  }
  testing::expect_parse_rejects("algo", {"3", "-1", "x", "1.5", ""});
}

// Each GEMV kernel switch: parsed (0 or 1; anything else an error that names the key), and
// the planner follows it both ways, on a case whose default it flips.
TEST(NBitsOverride, GemvSwitchOverrides) {
  // Rows of 8256 bytes: no line loads (on whole lines: two tiles of them).
  const NBitsMatMulProblem tma_by_default = problem(2, 28672, 8192 + 64, 8, 64);
  const testing::PlanSwitch<NBitsMatMulProblem> switches[] = {
      {"tma", &PlanOverride::tma, &GemvConfig::tma, problem(1, 4096, 4096, 8, 128),
       tma_by_default},
      {"fma", &PlanOverride::fma, &GemvConfig::fma, problem(2, 4096, 4096, 8, 128),
       problem(1, 4096, 4096, 8, 128)},
      {"window", &PlanOverride::window, &GemvConfig::window, problem(3, 4096, 4096, 4, 128),
       problem(1, 8192, 8192, 4, 128)},
      {"lines", &PlanOverride::lines, &GemvConfig::lines, problem(8, 4096, 14336, 4, 128),
       problem(1, 28672, 8192, 4, 128)},
  };
  testing::expect_switch_overrides(switches);
  // The window kernel forced wins over TMA tiles forced, in either order.
  for (const char* text : {"window=1,tma=1", "tma=1,window=1"}) {
    const NBitsMatMulPlan p = plan(problem(1, 28672, 8192, 4, 128), kHopper, parsed(text));
    EXPECT_TRUE(p.gemv.window) << text;
    EXPECT_FALSE(p.gemv.tma) << text;
  }
}

// gemm: 0 never the fused GEMM (the plans before it: row groups to 32 rows, then dequant
// + cuBLAS), 1 wherever it applies, the decode rows included (in the CUDA-core kernel's
// place at M = 1 too, typed zero points included); float32 keeps its path.
TEST(NBitsOverride, Gemm) {
  testing::expect_switch_parses("gemm", &PlanOverride::gemm);
  const NBitsMatMulPlan groups = plan(problem(16, 4096, 4096, 4, 128), kHopper, parsed("gemm=0"));
  EXPECT_EQ(groups.path, NBitsPath::kGemv);
  EXPECT_EQ(groups.gemv.row_groups, 1);
  EXPECT_EQ(path(problem(33, 4096, 4096, 4, 128), kHopper, parsed("gemm=0")),
            NBitsPath::kDequantGemm);
  for (int bits : {4, 8})
    for (int64_t m : {1, 4, 8}) {
      const NBitsMatMulPlan forced = plan(problem(m, 4096, 4096, bits, 128), kHopper, parsed("gemm=1"));
      EXPECT_EQ(forced.path, NBitsPath::kFusedGemm) << bits << " " << m;
      EXPECT_EQ(forced.gemm.tile_m, 16) << bits << " " << m;
      EXPECT_FALSE(forced.gemv.fma) << bits << " " << m;
    }
  EXPECT_EQ(path(problem(4, 4096, 4096, 4, 32, DType::kFloat32), kHopper, parsed("gemm=1")),
            NBitsPath::kGemv);
  NBitsMatMulProblem typed = problem(4, 4096, 4096);
  typed.zero_points = NBitsZeroPoints::kTyped;
  EXPECT_EQ(path(typed, kHopper, parsed("gemm=1")), NBitsPath::kFusedGemm);
  testing::expect_switch_rejects_out_of_range(problem(16, 4096, 4096), PlanOverride{},
                                              &PlanOverride::gemm, "gemm");
}

// tile_m and gemm_k_split force the fused GEMM's tiling (the stages and K split follow a
// forced tile_m), as FP8's.
TEST(NBitsOverride, GemmTileMAndKSplit) {
  // 4-bit M = 64, N = 4096, K = 8192 (32 slabs) on mma.sync: 32 blocks of 64 rows
  // (k_split 4, 3 stages, one block per SM); 128 of 16 rows (k_split 2, 4 stages).
  const NBitsMatMulProblem p = problem(64, 4096, 8192, 4, 128);
  EXPECT_EQ(plan(p, kHopper, parsed("wgmma=0")).gemm.k_split, 4);
  EXPECT_EQ(plan(p, kHopper, parsed("wgmma=0")).gemm.stages, 3);
  const NBitsMatMulPlan t16 = plan(p, kHopper, parsed("tile_m=16,wgmma=0"));
  EXPECT_EQ(std::make_tuple(t16.gemm.tile_m, t16.gemm.stages, t16.gemm.k_split),
            std::make_tuple(16, 4, 2));
  EXPECT_EQ(t16.workspace_bytes, size_t{2} * 64 * 4096 * 4);
  const NBitsMatMulPlan k8 = plan(p, kHopper, parsed("gemm_k_split=8"));
  EXPECT_EQ(k8.gemm.k_split, 8);
  EXPECT_EQ(k8.regions.partial_bytes, size_t{8} * 64 * 4096 * 4);
  EXPECT_EQ(plan(problem(2, 4096, 4096), kHopper, parsed("tile_m=64")).path, NBitsPath::kGemv);
  testing::expect_override_rejects(p, PlanOverride{}, &PlanOverride::tile_m, "tile_m",
                                   {-1, 8, 48, 512});
  testing::expect_override_rejects(p, PlanOverride{}, &PlanOverride::gemm_k_split,
                                   "gemm_k_split", {-1, 3, 32});
}

// tiles: 1 or 2 tiles per warp of line loads, as FP8's.
TEST(NBitsOverride, GemvTiles) {
  testing::expect_tiles_overridden(problem(4, 8192, 8192, 8, 128), problem(4, 28672, 8192, 8, 128));
}

// registers: 128 or 168 forces the two-tile kernel's register bound.
TEST(NBitsOverride, GemvRegisters) {
  testing::expect_registers_overridden(problem(1, 20480, 8192, 4, 128),
                                       problem(1, 28672, 8192, 4, 128));
}

// GemvConfig::tiles is 1 on every GEMV plan (the CUDA-core kernel's too), 0 off the GEMV.
TEST(NBitsOverride, TilesOnGemvPlansOnly) {
  EXPECT_EQ(plan(problem(1, 4096, 4096, 8, 128)).gemv.tiles, 1);  // CUDA cores
  EXPECT_EQ(plan(problem(1, 4096, 4096, 4, 128)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(100, 4096, 4096)).gemv.tiles, 0);
  EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, parsed("gemv=0")).gemv.tiles, 0);
  EXPECT_EQ(plan(problem(1, 4096, 0)).gemv.tiles, 0);
}

// ------------------------------------------------------------------ environment
class NBitsEnvTest : public ::testing::Test {
 protected:
  testing::EnvGuard env_{"BQMM_DEQUANT_SCRATCH_MIB", "BQMM_GEMV_DEPENDENT_LAUNCH"};
};

// BQMM_GEMV_DEPENDENT_LAUNCH sets the option gemv_dependent_launch; malformed values name it.
TEST_F(NBitsEnvTest, GemvDependentLaunch) {
  testing::expect_dependent_launch_from_env(nbits_matmul_options_from_env);
}

// BQMM_DEQUANT_SCRATCH_MIB bounds the dequant scratch; malformed values name it.
TEST_F(NBitsEnvTest, ScratchMib) {
  testing::expect_scratch_mib_from_env(nbits_matmul_options_from_env, "BQMM_DEQUANT_SCRATCH_MIB");
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "64", 1);
  NBitsMatMulOptions o;
  ASSERT_TRUE(nbits_matmul_options_from_env(&o).ok());
  // float16 rows of K = 8192 are 16 KiB: 4096 rows per tile.
  const NBitsMatMulPlan p = plan(problem(100, 32768, 8192), kHopper, o, without_gemm());
  EXPECT_EQ(p.dequant.n_tile, 4096);
  EXPECT_EQ(p.dequant.num_n_tiles, 8);
}

}  // namespace
}  // namespace bqmm
