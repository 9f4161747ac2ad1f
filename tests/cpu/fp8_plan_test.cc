// plan_fp8_matmul's dispatch decisions at their boundaries, its tiling and workspace
// layout, and the environment overrides of the options.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "core/gemv_split.h"
#include "common/plan_testing.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

Fp8MatMulProblem problem(int64_t m, int64_t n, int64_t k, int64_t block_size = 128,
                         DType dtype = DType::kFloat16) {
  Fp8MatMulProblem p;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.block_size = block_size;
  return p;
}

const DeviceInfo kAllDevices[] = {kHopper, kAmpere, kTuring};

TEST(Fp8Plan, PathNames) {
  EXPECT_STREQ(fp8_path_name(Fp8Path::kEmpty), "empty");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kBiasOnly), "bias_only");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kGemvFma), "gemv_fma");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kGemvMma), "gemv_mma");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kDequantGemm), "dequant_gemm");
}

TEST(Fp8Plan, EmptyProblemsNeedNoWorkspace) {
  for (const DeviceInfo& d : kAllDevices) {
    for (const auto& p : {problem(0, 4096, 4096), problem(16, 0, 4096), problem(0, 0, 0),
                          problem(0, 4096, 0)}) {
      const Fp8MatMulPlan pl = plan(p, d);
      EXPECT_EQ(pl.path, Fp8Path::kEmpty) << p;
      EXPECT_EQ(pl.workspace_bytes, 0u) << p;
    }
  }
}

TEST(Fp8Plan, KZeroIsBiasOnly) {
  for (const DeviceInfo& d : kAllDevices) {
    for (int64_t m : {1, 8, 9, 1000}) {
      const Fp8MatMulPlan pl = plan(problem(m, 4096, 0), d);
      EXPECT_EQ(pl.path, Fp8Path::kBiasOnly) << m;
      EXPECT_EQ(pl.workspace_bytes, 0u);
    }
  }
}

TEST(Fp8Plan, DecodeRowsTakeTheGemv) {
  for (int64_t m : {2, 8}) {
    EXPECT_EQ(path(problem(m, 4096, 4096), kHopper), Fp8Path::kGemvMma) << m;
    EXPECT_EQ(path(problem(m, 4096, 4096), kAmpere), Fp8Path::kGemvMma) << m;
    EXPECT_EQ(path(problem(m, 4096, 4096), kTuring), Fp8Path::kGemvFma) << m;
    // K % 16 == 0 and block % 16 == 0 but not the mma's multiples of 64.
    EXPECT_EQ(path(problem(m, 4096, 4112, 16), kHopper), Fp8Path::kGemvFma) << m;
  }
  const Fp8MatMulPlan pl = plan(problem(2, 4096, 4096));
  EXPECT_EQ(pl.gemv_k_split, 8);
  EXPECT_EQ(pl.workspace_bytes, 0u);
}

// M = 1 streams faster on CUDA cores (docs/PERF.md): the tensor cores start at
// gemv_mma_min_rows = 2 by default; 1 restores the original design's rule.
TEST(Fp8Plan, GemvMmaStartsAtTwoRows) {
  for (const DeviceInfo& d : {kHopper, kAmpere}) {
    EXPECT_EQ(path(problem(1, 4096, 4096), d), Fp8Path::kGemvFma);
    EXPECT_EQ(path(problem(2, 4096, 4096), d), Fp8Path::kGemvMma);
    EXPECT_EQ(path(problem(3, 4096, 4096), d), Fp8Path::kGemvMma);
  }
  EXPECT_EQ(plan(problem(1, 4096, 4096)).gemv_rows_per_warp, 1);
  Fp8MatMulOptions o;
  o.gemv_mma_min_rows = 1;
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, o), Fp8Path::kGemvMma);
  o.gemv_mma_min_rows = 9;
  EXPECT_EQ(path(problem(8, 4096, 4096), kHopper, o), Fp8Path::kGemvFma);
  o.gemv_mma_min_rows = 0;
  Fp8MatMulPlan pl;
  const Status s = plan_fp8_matmul(problem(1, 4096, 4096), kHopper, o, &pl);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gemv_mma_min_rows"), std::string::npos) << s.message();
}

// gemv_mma's K split, the wave model of core/gemv_split.h with 132 x 16 resident warps:
// cost = waves x (K / 64 / k_split + 2), the cheapest wins, the larger on a tie. (Line
// loads deal out pairs of windows: GemvLinesWhereMeasuredFasterOrWhenAsked.)
TEST(Fp8Plan, GemvMmaKSplitBalancesWavesAndWindows) {
  const auto plan = [](const Fp8MatMulProblem& p, const DeviceInfo& d = kHopper,
                       Fp8MatMulOptions o = {}) {
    o.gemv_lines = 0;
    return testing::plan(p, d, o);
  };
  // 256 tiles x 8 warps = one wave: 64 windows / 8 + 2 = 10.
  EXPECT_EQ(plan(problem(4, 4096, 4096)).gemv_k_split, 8);
  EXPECT_EQ(plan(problem(8, 4096, 14336)).gemv_k_split, 8);
  // 512 tiles: k_split 4 is one wave (32 + 2), 8 two (2 x 18).
  EXPECT_EQ(plan(problem(4, 8192, 8192)).gemv_k_split, 4);
  // 896 tiles: k_split 2 is one wave (34), 4 two (2 x 18).
  EXPECT_EQ(plan(problem(4, 14336, 4096)).gemv_k_split, 2);
  // 1792 tiles: 7 waves of k_split 8 (7 x 18 = 126) against one of k_split 1 (130).
  // (Fragment register loads forced: by default this layer takes line loads of two tiles
  // per warp, below.)
  Fp8MatMulOptions regs;
  regs.gemv_tma = 0;
  regs.gemv_lines = 0;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, regs).gemv_k_split, 8);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kAmpere, regs).gemv_k_split, 8);
  // K = 256 is 4 windows: at most k_split 4.
  EXPECT_EQ(plan(problem(4, 16, 256)).gemv_k_split, 4);
  // 108 SMs hold 1728 warps: 512 tiles take 2 waves at k_split 4 (2 x 34) and 3 at
  // k_split 8 (3 x 18).
  EXPECT_EQ(plan(problem(4, 8192, 8192), kAmpere).gemv_k_split, 8);
  // An unknown SM count is one SM, never a division by zero.
  EXPECT_EQ(plan(problem(4, 4096, 4096), DeviceInfo{90, 0}).gemv_k_split, 1);
}

// SM90+: TMA tiles where they pay (weights of 128 Mi codes and more) but line loads do
// not apply (K % 128 == 64), or as forced; their K split deals out 128-byte tiles instead
// of 64-byte windows.
TEST(Fp8Plan, GemvTmaWhereLineLoadsDoNotApplyOrWhenAsked) {
  const int64_t k = 8192 + 64;  // rows of 64 lines and a half
  EXPECT_TRUE(plan(problem(2, 16384, k)).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 28672, k, 128, DType::kBFloat16)).gemv_tma);
  EXPECT_FALSE(plan(problem(2, 16000, k)).gemv_tma);  // 132 M codes: below 128 Mi
  EXPECT_FALSE(plan(problem(4, 28672, k), kAmpere).gemv_tma);  // no TMA below SM90
  EXPECT_FALSE(plan(problem(4, 28672, 8192)).gemv_tma);  // line loads apply (below)
  EXPECT_FALSE(plan(problem(4, 8192, 8192)).gemv_tma);
  // 1792 tiles, 65 tiles per row: one wave of k_split 1 (65 + 2) against two of 2 (2 x 35).
  EXPECT_EQ(plan(problem(4, 28672, k)).gemv_k_split, 1);
  EXPECT_NE(printed(plan(problem(4, 28672, k))).find("tma=1; lines=0; tiles=1"), std::string::npos);

  Fp8MatMulOptions o;
  o.gemv_tma = 1;  // forced: in place of line loads too
  EXPECT_TRUE(plan(problem(8, 4096, 4096), kHopper, o).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(8, 28672, 8192), kHopper, o).gemv_lines);
  EXPECT_FALSE(plan(problem(8, 4096, 4096), kAmpere, o).gemv_tma);
  // 256 tiles, 32 tiles per row: one wave of k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv_k_split, 8);
  // K = 320: 3 TMA tiles (the last a half tile), so k_split 2 at most.
  EXPECT_EQ(plan(problem(8, 16, 320), kHopper, o).gemv_k_split, 2);
  o.gemv_tma = 0;
  EXPECT_FALSE(plan(problem(4, 28672, k), kHopper, o).gemv_tma);
  testing::expect_switch_rejects_out_of_range(problem(4, 4096, 4096), o, &Fp8MatMulOptions::gemv_tma,
                                              "gemv_tma");
}

// Line loads wherever they apply (rows of whole 128-byte lines, K % 128 == 0), with two
// 16-column tiles per warp on weights of 128 Mi codes and more, one below; or as forced.
// Their K split deals out pairs of windows (128-byte units, as TMA tiles) to the warps of
// ceil(N / (16 x tiles)) tiles.
TEST(Fp8Plan, GemvLinesWhereMeasuredFasterOrWhenAsked) {
  const int64_t kShapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192},
                                {28672, 8192}};
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const auto& nk : kShapes)
      for (int64_t m = 1; m <= 8; ++m) {
        const int64_t n = nk[0], k = nk[1];
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m << " N=" << n << " K=" << k);
        const Fp8MatMulPlan h = plan(problem(m, n, k, 128, t));
        if (m == 1) {  // the CUDA-core kernel
          EXPECT_EQ(h.path, Fp8Path::kGemvFma);
          EXPECT_FALSE(h.gemv_lines);
          continue;
        }
        ASSERT_EQ(h.path, Fp8Path::kGemvMma);
        const int tiles = n * k >= 128 * kMiB ? 2 : 1;
        EXPECT_TRUE(h.gemv_lines) << h;
        EXPECT_FALSE(h.gemv_tma) << h;
        EXPECT_EQ(h.gemv_tiles_per_warp, tiles) << h;
        EXPECT_EQ(h.gemv_k_split, choose_gemv_k_split(n / tiles, k / 128, kHopper.num_sms,
                                                      kGemvTensorCoreWarpsPerSm)) << h;
        // No TMA below SM90: the same streams.
        EXPECT_EQ(plan(problem(m, n, k, 128, t), kAmpere).gemv_tiles_per_warp, tiles);
        EXPECT_TRUE(plan(problem(m, n, k, 128, t), kAmpere).gemv_lines);
      }
  // Rows of whole lines only: K = 320 or 4160 (K % 128 == 64) keeps register loads.
  for (const int64_t k : {320, 4160}) {
    EXPECT_FALSE(plan(problem(2, 4096, k)).gemv_lines) << k;
    EXPECT_EQ(plan(problem(2, 4096, k)).gemv_tiles_per_warp, 1) << k;
    EXPECT_EQ(plan(problem(2, 4096, k)).path, Fp8Path::kGemvMma) << k;
  }
  EXPECT_TRUE(plan(problem(2, 4096, 384)).gemv_lines);
  // 256 tiles, 32 pairs per row: one wave at k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(2, 4096, 4096)).gemv_k_split, 8);
  EXPECT_NE(printed(plan(problem(2, 4096, 4096))).find("tma=0; lines=1; tiles=1"), std::string::npos);

  Fp8MatMulOptions o;
  o.gemv_lines = 0;  // never: fragment register loads, or TMA tiles where they pay
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, o).gemv_lines);
  EXPECT_FALSE(plan(problem(8, 28672, 8192, 128, DType::kBFloat16), kHopper, o).gemv_lines);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 128, DType::kBFloat16), kHopper, o).gemv_tma);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv_tiles_per_warp, 1);
  o.gemv_lines = 1;  // wherever they apply (the default)
  EXPECT_TRUE(plan(problem(2, 28672, 8192), kHopper, o).gemv_lines);
  EXPECT_FALSE(plan(problem(2, 4096, 320), kHopper, o).gemv_lines);
  EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, o).path, Fp8Path::kGemvFma);
  o.gemv_tma = 1;  // forced TMA tiles win over forced line loads
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, o).gemv_lines);
  EXPECT_TRUE(plan(problem(2, 4096, 4096), kHopper, o).gemv_tma);
  testing::expect_switch_rejects_out_of_range(problem(4, 4096, 4096), o, &Fp8MatMulOptions::gemv_lines,
                                              "gemv_lines");
}

// Two 16-column tiles per warp: by default where line loads run on weights of 128 Mi codes
// and more (measured faster there, docs/PERF.md), or as forced; never without line loads.
TEST(Fp8Plan, GemvTwoTilesPerWarpOnLargeWeights) {
  const int64_t n_at_limit = (int64_t{128} << 20) / 8192;  // 16384
  EXPECT_EQ(plan(problem(2, n_at_limit, 8192)).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(problem(2, n_at_limit - 16, 8192)).gemv_tiles_per_warp, 1);
  // 896 two-tile warps of 64 pairs: one wave of k_split 2 (32 + 2) against two of 4
  // (2 x 18); one tile per warp would take k_split 1 (64 + 2 against 2 x 34).
  const Fp8MatMulPlan large = plan(problem(8, 28672, 8192));
  EXPECT_EQ(large.gemv_tiles_per_warp, 2);
  EXPECT_EQ(large.gemv_k_split, 2);
  EXPECT_NE(printed(large).find("k_split=2; tma=0; lines=1; tiles=2"), std::string::npos) << large;
  Fp8MatMulOptions o;
  EXPECT_EQ(o.gemv_tiles_per_warp, -1);
  o.gemv_tiles_per_warp = 1;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv_k_split, 1);
  o.gemv_tiles_per_warp = 2;
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv_tiles_per_warp, 2);
  // 128 two-tile warps, 32 pairs: k_split 8 (one wave, 4 + 2).
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv_k_split, 8);
  EXPECT_EQ(plan(problem(8, 4096, 4160), kHopper, o).gemv_tiles_per_warp, 1);  // no lines
  o.gemv_lines = 0;
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv_tiles_per_warp, 1);
  o.gemv_lines = -1;
  o.gemv_tma = 1;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv_tiles_per_warp, 1);
  o.gemv_tma = -1;
  for (int bad : {-2, 0, 3}) {
    SCOPED_TRACE(bad);
    o.gemv_tiles_per_warp = bad;
    testing::expect_rejected(problem(8, 4096, 4096), o, "gemv_tiles_per_warp");
  }
}

// Two tiles at 168 registers (12 warps per SM): where the wave model (as NBitsMatMul's,
// both forms with a start of 6 line pairs, the 12-warp cost weighed by 90 %) prefers it at
// k_split 2 or 4, in float16 only; bfloat16 keeps 128 unless forced.
TEST(Fp8Plan, GemvTwoTilesAt168Registers) {
  const DType bf16 = DType::kBFloat16;
  using testing::narrow;
  using testing::wide;
  const auto regs_split = [](const auto& p) { return testing::registers_and_split(p); };
  // K = 8192 (64 line pairs): 640 two-tile columns (N = 20480) one wave at k_split 2 of 12
  // or of 16 warps per SM; 1152 (36864) 3 waves of 4 either way; 896 (28672) two waves at
  // 12, one at 16; 512 (16384) one wave of 4 at 16, two at 12.
  for (int64_t m : {2, 4, 8}) {
    SCOPED_TRACE(m);
    EXPECT_EQ(regs_split(plan(problem(m, 20480, 8192))), wide(2));
    EXPECT_EQ(regs_split(plan(problem(m, 36864, 8192))), wide(4));
    EXPECT_EQ(regs_split(plan(problem(m, 28672, 8192))), narrow(2));
    EXPECT_EQ(regs_split(plan(problem(m, 16384, 8192))), narrow(4));
    // bfloat16: 128 at the 16-warp model's split (8: 3 waves x (8 + 2) = 30 against 32 + 2).
    EXPECT_EQ(regs_split(plan(problem(m, 20480, 8192, 128, bf16))), narrow(8));
  }
  // 1408 columns (45056 x 8192) and 1536 (49152 x 5120): one wave of k_split 1 at 12 warps
  // per SM, which the kernel does not take at 168 registers; at 2 128 is cheaper.
  EXPECT_EQ(regs_split(plan(problem(2, 45056, 8192))), narrow(4));
  EXPECT_EQ(regs_split(plan(problem(2, 49152, 5120))), narrow(4));
  // One tile per warp (below 128 Mi codes): no register choice.
  EXPECT_EQ(plan(problem(2, 8192, 8192)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(2, 8192, 8192)).gemv_registers, 0);
  EXPECT_NE(printed(plan(problem(2, 20480, 8192))).find("tiles=2; regs=168;"), std::string::npos);
  EXPECT_EQ(printed(plan(problem(2, 8192, 8192))).find("regs="), std::string::npos);
  // Forced.
  Fp8MatMulOptions o;
  o.gemv_registers = kGemvWideRegisters;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192, 128, bf16), kHopper, o)), wide(2));
  EXPECT_EQ(regs_split(plan(problem(2, 45056, 8192), kHopper, o)).first, kGemvWideRegisters);
  EXPECT_GE(plan(problem(2, 45056, 8192), kHopper, o).gemv_k_split, 2);
  EXPECT_EQ(plan(problem(2, 8192, 8192), kHopper, o).gemv_registers, 0);  // one tile
  o.gemv_k_split = 8;
  testing::expect_rejected(problem(2, 20480, 8192), o, "gemv_registers");
  o.gemv_registers = -1;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192), kHopper, o)), narrow(8));
  o.gemv_k_split = 0;
  o.gemv_registers = kGemvTwoTileRegisters;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192), kHopper, o)), narrow(8));
  for (int bad : {0, 127, 160, 256, -2}) {
    o.gemv_registers = bad;
    testing::expect_rejected(problem(2, 20480, 8192), o, "gemv_registers");
  }
}

TEST(Fp8Plan, NineRowsLeaveTheGemv) {
  for (const DeviceInfo& d : kAllDevices)
    EXPECT_EQ(path(problem(9, 4096, 4096), d), Fp8Path::kDequantGemm);
}

TEST(Fp8Plan, KNotMultipleOf16LeavesTheGemv) {
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 16 * 256 + 8));
  EXPECT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_FALSE(pl.dequant_vec16);  // a 16-byte chunk would straddle rows of B
}

TEST(Fp8Plan, BlockNotMultipleOf16LeavesTheGemv) {
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 4096, 24));
  EXPECT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_TRUE(pl.dequant_vec16);  // the dequant kernel handles any block size
}

TEST(Fp8Plan, UnalignedPointersFallBack) {
  for (int align : {1, 2, 4, 8}) {
    Fp8MatMulProblem p = problem(1, 4096, 4096);
    p.alignment = align;
    const Fp8MatMulPlan pl = plan(p);
    EXPECT_EQ(pl.path, Fp8Path::kDequantGemm) << align;
    EXPECT_FALSE(pl.dequant_vec16) << align;
  }
  Fp8MatMulProblem p = problem(16, 4096, 4096);
  EXPECT_TRUE(plan(p).dequant_vec16);
  p.alignment = 8;
  EXPECT_FALSE(plan(p).dequant_vec16);
}

TEST(Fp8Plan, MmaNeedsKAtLeast256) {
  EXPECT_EQ(path(problem(4, 4096, 192, 64)), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 256, 64)), Fp8Path::kGemvMma);
}

TEST(Fp8Plan, MmaNeedsKMultipleOf64) {
  EXPECT_EQ(path(problem(4, 4096, 256 + 16, 64)), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 256 + 64, 64)), Fp8Path::kGemvMma);
}

TEST(Fp8Plan, MmaNeedsBlockMultipleOf64) {
  EXPECT_EQ(path(problem(4, 4096, 256, 32)), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 256, 64)), Fp8Path::kGemvMma);
  EXPECT_EQ(path(problem(4, 4096, 256, 96)), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 256, 128)), Fp8Path::kGemvMma);
}

TEST(Fp8Plan, MmaNeedsSm80) {
  EXPECT_EQ(path(problem(4, 4096, 256, 64), DeviceInfo{75, 40}), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 256, 64), DeviceInfo{80, 108}), Fp8Path::kGemvMma);
}

TEST(Fp8Plan, OptionsDisableGemvPaths) {
  Fp8MatMulOptions o;
  o.allow_gemv_mma = false;
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 4096), kHopper, o);
  EXPECT_EQ(pl.path, Fp8Path::kGemvFma);
  EXPECT_EQ(pl.gemv_rows_per_warp, 1);
  o.allow_gemv = false;
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, o), Fp8Path::kDequantGemm);
}

TEST(Fp8Plan, RowsPerWarpCoverM) {
  const int expected[9] = {0, 1, 2, 4, 4, 8, 8, 8, 8};
  for (int64_t m = 1; m <= 8; ++m) {
    const Fp8MatMulPlan pl = plan(problem(m, 4096, 4096), kTuring);
    ASSERT_EQ(pl.path, Fp8Path::kGemvFma);
    EXPECT_EQ(pl.gemv_rows_per_warp, expected[m]) << "M=" << m;
  }
}

TEST(Fp8Plan, W8A8GemvNeedsNoWorkspace) {
  Fp8MatMulProblem p = problem(4, 4096, 4096);
  p.has_a_scale = true;
  p.has_bias = true;
  const Fp8MatMulPlan pl = plan(p);
  EXPECT_EQ(pl.path, Fp8Path::kGemvMma);  // QDQ and bias are fused
  EXPECT_EQ(pl.workspace_bytes, 0u);
}

// ------------------------------------------------------------------ dequant + GEMM tiling
TEST(Fp8Plan, NTilesOfTheScratchLimit) {
  // Row of B in bf16: 8192 * 2 = 16 KiB; 256 MiB holds exactly 16384 rows.
  const Fp8MatMulPlan pl = plan(problem(16, 262144, 8192, 128, DType::kBFloat16));
  ASSERT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_FALSE(pl.qdq_activation);
  EXPECT_TRUE(pl.dequant_vec16);
  EXPECT_EQ(pl.n_tile, 16384);
  EXPECT_EQ(pl.num_n_tiles, 16);
  EXPECT_EQ(pl.act_bytes, 0u);
  EXPECT_EQ(pl.cublas_offset, 0u);
  EXPECT_EQ(pl.cublas_bytes, size_t{32} << 20);  // Hopper
  EXPECT_EQ(pl.scratch_offset, size_t{32} << 20);
  EXPECT_EQ(pl.scratch_bytes, size_t{256} << 20);
  EXPECT_EQ(pl.workspace_bytes, size_t{288} << 20);
}

// With overlap_dequant, several tiles use two buffers (each half the limit) and an N of at
// least 4 x 512 rows is split in at least 4 tiles even when it would fit.
TEST(Fp8Plan, OverlapUsesTwoBuffersOfHalfTheLimit) {
  Fp8MatMulOptions o;
  o.overlap_dequant = true;
  // bf16 rows of 16 KiB: 256 MiB holds 16384 rows < N, so two buffers of 8192 rows.
  Fp8MatMulPlan pl = plan(problem(16, 262144, 8192, 128, DType::kBFloat16), kHopper, o);
  EXPECT_EQ(pl.n_tile, 8192);
  EXPECT_EQ(pl.num_n_tiles, 32);
  EXPECT_EQ(pl.scratch_buffers, 2);
  EXPECT_EQ(pl.scratch_bytes, size_t{256} << 20);
  EXPECT_NE(printed(pl).find("n_tile=8192 x 32 in 2 buffer(s)"), std::string::npos);
  // N = 4096 fits but is split in 4 tiles of 1024 rows.
  pl = plan(problem(16, 4096, 4096), kAmpere, o);
  EXPECT_EQ(pl.n_tile, 1024);
  EXPECT_EQ(pl.num_n_tiles, 4);
  EXPECT_EQ(pl.scratch_buffers, 2);
  EXPECT_EQ(pl.scratch_bytes, size_t{2} * 1024 * 4096 * 2);
  // Below 4 x 512 rows and fitting: one tile, one buffer.
  pl = plan(problem(16, 2047, 4096), kHopper, o);
  EXPECT_EQ(pl.num_n_tiles, 1);
  EXPECT_EQ(pl.scratch_buffers, 1);
  // A limit that forces tiles: two buffers of 500 rows -> 256-row multiples.
  o.dequant_scratch_bytes = 1000 * 8192;
  pl = plan(problem(16, 4096, 4096), kHopper, o);
  EXPECT_EQ(pl.n_tile, 256);
  EXPECT_EQ(pl.num_n_tiles, 16);
  EXPECT_EQ(pl.scratch_bytes, size_t{2} * 256 * 8192);
}

TEST(Fp8Plan, CublasWorkspaceBeforeHopperIsSmaller) {
  const Fp8MatMulPlan pl = plan(problem(16, 4096, 4096), kAmpere);
  EXPECT_EQ(pl.cublas_bytes, size_t{4} << 20);
  EXPECT_EQ(pl.n_tile, 4096);
  EXPECT_EQ(pl.num_n_tiles, 1);
  EXPECT_EQ(pl.scratch_bytes, size_t{4096} * 4096 * 2);
  EXPECT_EQ(pl.workspace_bytes, (size_t{4} << 20) + size_t{4096} * 4096 * 2);
}

TEST(Fp8Plan, LargeTilesAreWholeMultiplesOf256Rows) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 1000 * 8192;  // 1000 rows of K = 4096 float16
  const Fp8MatMulPlan pl = plan(problem(16, 4096, 4096), kHopper, o);
  EXPECT_EQ(pl.n_tile, 768);
  EXPECT_EQ(pl.num_n_tiles, 6);  // 5 * 768 + 256
  EXPECT_EQ(pl.scratch_bytes, size_t{768} * 8192);
}

TEST(Fp8Plan, SmallTilesAreNotRounded) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 100 * 8192 + 8191;
  const Fp8MatMulPlan pl = plan(problem(16, 4096, 4096), kHopper, o);
  EXPECT_EQ(pl.n_tile, 100);
  EXPECT_EQ(pl.num_n_tiles, 41);
  EXPECT_EQ(pl.scratch_bytes, size_t{100} * 8192);
}

TEST(Fp8Plan, AtLeastOneRowPerTile) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 1000;  // less than one 8 KiB row
  const Fp8MatMulPlan pl = plan(problem(16, 37, 4096), kHopper, o);
  EXPECT_EQ(pl.n_tile, 1);
  EXPECT_EQ(pl.num_n_tiles, 37);
  EXPECT_EQ(pl.scratch_bytes, 8192u);
}

TEST(Fp8Plan, TileNeverExceedsN) {
  const Fp8MatMulPlan pl = plan(problem(16, 300, 4096));
  EXPECT_EQ(pl.n_tile, 300);
  EXPECT_EQ(pl.num_n_tiles, 1);
}

TEST(Fp8Plan, W8A8ReservesTheActivationFirst) {
  // M * K * 2 = 9 * 4104 * 2 = 73872 bytes, padded to 73984 (a multiple of 256).
  Fp8MatMulProblem p = problem(9, 4096, 4104);
  p.has_a_scale = true;
  const Fp8MatMulPlan pl = plan(p);
  ASSERT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_TRUE(pl.qdq_activation);
  EXPECT_EQ(pl.act_offset, 0u);
  EXPECT_EQ(pl.act_bytes, 73872u);
  EXPECT_EQ(pl.cublas_offset, 73984u);
  EXPECT_EQ(pl.scratch_offset, 73984u + (size_t{32} << 20));
  EXPECT_EQ(pl.scratch_bytes, size_t{4096} * 4104 * 2);
  // 4096 * 4104 * 2 is a multiple of 256 already.
  EXPECT_EQ(pl.workspace_bytes, pl.scratch_offset + pl.scratch_bytes);
  for (size_t off : {pl.act_offset, pl.cublas_offset, pl.scratch_offset})
    EXPECT_EQ(off % 256, 0u);
}

TEST(Fp8Plan, OffsetsStay256AlignedForOddSizes) {
  Fp8MatMulProblem p = problem(13, 7, 4104, 8);
  p.has_a_scale = true;
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 3 * 4104 * 2 + 1;
  const Fp8MatMulPlan pl = plan(p, kAmpere, o);
  EXPECT_EQ(pl.n_tile, 3);
  EXPECT_EQ(pl.num_n_tiles, 3);
  EXPECT_EQ(pl.act_bytes, 13u * 4104 * 2);
  for (size_t off : {pl.act_offset, pl.cublas_offset, pl.scratch_offset})
    EXPECT_EQ(off % 256, 0u) << off;
  EXPECT_GE(pl.cublas_offset, pl.act_offset + pl.act_bytes);
  EXPECT_GE(pl.scratch_offset, pl.cublas_offset + pl.cublas_bytes);
  EXPECT_GE(pl.workspace_bytes, pl.scratch_offset + pl.scratch_bytes);
  EXPECT_EQ(pl.workspace_bytes % 256, 0u);
}

// ------------------------------------------------------------------ errors, printing
TEST(Fp8Plan, RejectsBadProblemsAndOptions) {
  Fp8MatMulPlan pl;
  EXPECT_FALSE(plan_fp8_matmul(problem(1, 1, 1, 128, DType::kFloat32), kHopper, {}, &pl).ok());
  EXPECT_FALSE(plan_fp8_matmul(problem(-1, 1, 1), kHopper, {}, &pl).ok());
  EXPECT_FALSE(plan_fp8_matmul(problem(1, 1, 1, 0), kHopper, {}, &pl).ok());
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 0;
  const Status s = plan_fp8_matmul(problem(16, 64, 64), kHopper, o, &pl);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dequant_scratch_bytes"), std::string::npos) << s.message();
}

TEST(Fp8Plan, PrintsPathAndTiles) {
  EXPECT_NE(printed(plan(problem(0, 64, 64))).find("path=empty"), std::string::npos);
  EXPECT_NE(printed(plan(problem(1, 64, 0))).find("path=bias_only"), std::string::npos);
  EXPECT_NE(printed(plan(problem(3, 64, 4096))).find("path=gemv_mma"), std::string::npos);
  const std::string fma = printed(plan(problem(3, 64, 4096), kTuring));
  EXPECT_NE(fma.find("path=gemv_fma"), std::string::npos) << fma;
  EXPECT_NE(fma.find("rows_per_warp=4"), std::string::npos) << fma;
  const std::string gemm = printed(plan(problem(16, 262144, 8192, 128, DType::kBFloat16)));
  EXPECT_NE(gemm.find("path=dequant_gemm"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("n_tile=16384 x 16 in 1 buffer(s)"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("bfloat16"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("sm90"), std::string::npos) << gemm;
}

TEST(Fp8Plan, IsPure) {
  Fp8MatMulProblem p = problem(9, 5000, 4104, 8);
  p.has_a_scale = true;
  EXPECT_EQ(printed(plan(p)), printed(plan(p)));
}

// ------------------------------------------------------------------ environment
class Fp8EnvTest : public ::testing::Test {
 protected:
  testing::EnvGuard env_{"BQMM_DEQUANT_SCRATCH_MIB", "BQMM_FP8_GEMV_MMA", "BQMM_DEQUANT_OVERLAP",
                         "BQMM_FP8_GEMV_KSPLIT", "BQMM_FP8_GEMV_TMA", "BQMM_FP8_GEMV_LINES",
                         "BQMM_FP8_GEMV_TILES", "BQMM_FP8_GEMV_REGISTERS"};
};

TEST_F(Fp8EnvTest, UnsetKeepsOptions) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 12345;
  o.allow_gemv_mma = false;
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_EQ(o.dequant_scratch_bytes, 12345);
  EXPECT_FALSE(o.allow_gemv_mma);
  EXPECT_TRUE(o.allow_gemv);
}

TEST_F(Fp8EnvTest, EmptyIsUnset) {
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "", 1);
  setenv("BQMM_FP8_GEMV_MMA", "", 1);
  Fp8MatMulOptions o;
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_EQ(o.dequant_scratch_bytes, 256 * kMiB);
  EXPECT_TRUE(o.allow_gemv_mma);
}

TEST_F(Fp8EnvTest, ScratchMib) {
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "64", 1);
  Fp8MatMulOptions o;
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_EQ(o.dequant_scratch_bytes, 64 * kMiB);
  EXPECT_EQ(plan(problem(16, 262144, 8192, 128, DType::kBFloat16), kHopper, o).n_tile, 4096);
  EXPECT_FALSE(o.overlap_dequant);
  setenv("BQMM_DEQUANT_OVERLAP", "1", 1);
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_TRUE(o.overlap_dequant);
  setenv("BQMM_DEQUANT_OVERLAP", "2", 1);
  const Status s = fp8_matmul_options_from_env(&o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("BQMM_DEQUANT_OVERLAP"), std::string::npos) << s.message();
}

TEST_F(Fp8EnvTest, MalformedScratchMibIsAnError) {
  for (const char* bad : {"abc", "0", "-5", "12x", "1.5"}) {
    setenv("BQMM_DEQUANT_SCRATCH_MIB", bad, 1);
    Fp8MatMulOptions o;
    const Status s = fp8_matmul_options_from_env(&o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("BQMM_DEQUANT_SCRATCH_MIB"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
    EXPECT_EQ(o.dequant_scratch_bytes, 256 * kMiB) << bad;
  }
}

TEST_F(Fp8EnvTest, GemvMma) {
  Fp8MatMulOptions o;
  setenv("BQMM_FP8_GEMV_MMA", "0", 1);
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_FALSE(o.allow_gemv_mma);
  EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, o).path, Fp8Path::kGemvFma);
  setenv("BQMM_FP8_GEMV_MMA", "1", 1);
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_TRUE(o.allow_gemv_mma);
  EXPECT_EQ(o.gemv_mma_min_rows, 1);
  EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, o).path, Fp8Path::kGemvMma);
}

// BQMM_FP8_GEMV_KSPLIT and Fp8MatMulOptions::gemv_k_split force the tensor-core GEMV's
// K split.
TEST_F(Fp8EnvTest, GemvKSplit) {
  testing::expect_k_split_forced(fp8_matmul_options_from_env, "BQMM_FP8_GEMV_KSPLIT",
                                 problem(4, 4096, 4096));
}

// The weight-stream switches: each reads 0 / 1 (malformed values rejected), and each flips
// a decision that is off by default on one problem and on by default on another.
TEST_F(Fp8EnvTest, GemvSwitchOverrides) {
  const testing::PlanSwitch<Fp8MatMulProblem> switches[] = {
      {"BQMM_FP8_GEMV_TMA", &Fp8MatMulOptions::gemv_tma, &Fp8MatMulPlan::gemv_tma,
       problem(8, 4096, 4096), problem(4, 28672, 8192 + 64)},
  };
  testing::expect_switch_overrides(fp8_matmul_options_from_env, switches);
  // Line loads are on wherever they apply: 0 turns them off, 1 keeps them.
  testing::expect_switch_from_env(fp8_matmul_options_from_env, "BQMM_FP8_GEMV_LINES",
                                  &Fp8MatMulOptions::gemv_lines);
  const auto with_env = [](const char* var, const char* value) {
    return testing::options_with_env(fp8_matmul_options_from_env, var, value);
  };
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, with_env("BQMM_FP8_GEMV_LINES", "0")).gemv_lines);
  EXPECT_TRUE(plan(problem(2, 4096, 4096), kHopper, with_env("BQMM_FP8_GEMV_LINES", "1")).gemv_lines);
  unsetenv("BQMM_FP8_GEMV_LINES");
}

// BQMM_FP8_GEMV_TILES: 1 or 2 tiles per warp of line loads; anything else is an error that
// names the variable and leaves the option at -1.
TEST_F(Fp8EnvTest, GemvTilesFromEnv) {
  testing::expect_tiles_from_env(fp8_matmul_options_from_env, "BQMM_FP8_GEMV_TILES",
                                 problem(2, 4096, 4096), problem(2, 28672, 8192));
}

// BQMM_FP8_GEMV_REGISTERS: 128 or 168 forces the two-tile kernel's register bound.
TEST_F(Fp8EnvTest, GemvRegistersFromEnv) {
  testing::expect_registers_from_env(fp8_matmul_options_from_env, "BQMM_FP8_GEMV_REGISTERS",
                                     problem(2, 20480, 8192), problem(2, 28672, 8192));
}

TEST_F(Fp8EnvTest, MalformedGemvMmaIsAnError) {
  for (const char* bad : {"2", "yes", "-1"}) {
    setenv("BQMM_FP8_GEMV_MMA", bad, 1);
    Fp8MatMulOptions o;
    const Status s = fp8_matmul_options_from_env(&o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("BQMM_FP8_GEMV_MMA"), std::string::npos) << s.message();
    EXPECT_TRUE(o.allow_gemv_mma) << bad;
  }
}

}  // namespace
}  // namespace bqmm
