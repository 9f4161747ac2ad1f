// plan_nbits_matmul's dispatch decisions at their boundaries, the GEMV configuration,
// the dequant tiling and workspace layout, and the environment overrides of the options.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "bqmm/nbits_matmul.h"
#include "core/gemv_split.h"
#include "common/plan_testing.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

NBitsMatMulProblem problem(int64_t m, int64_t n, int64_t k, int bits = 4,
                           int64_t block_size = 32, DType dtype = DType::kFloat16) {
  NBitsMatMulProblem p;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.bits = bits;
  p.block_size = block_size;
  return p;
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
      EXPECT_EQ(path(problem(9, 4096, 4096, bits, 32, t)), NBitsPath::kDequantGemm);
    }
}

TEST(NBitsPlan, GemvRowsPerWarp) {
  // The tensor-core tile always has 8 rows; the float32 FMA tile is sized to M.
  const int64_t expected[9] = {0, 1, 2, 4, 4, 8, 8, 8, 8};
  for (int64_t m = 1; m <= 8; ++m) {
    EXPECT_EQ(plan(problem(m, 256, 4096, 4, 32, DType::kFloat32)).gemv_rows, expected[m]) << m;
    EXPECT_EQ(plan(problem(m, 256, 4096, 4, 32, DType::kFloat16)).gemv_rows, 8) << m;
  }
}

TEST(NBitsPlan, GemvNeedsWholeBlocksByPosition) {
  // g_idx and typed zero points go through dequant + GEMM.
  NBitsMatMulProblem p = problem(1, 4096, 4096);
  p.has_g_idx = true;
  EXPECT_EQ(path(p), NBitsPath::kDequantGemm);
  p = problem(1, 4096, 4096);
  p.zero_points = NBitsZeroPoints::kTyped;
  EXPECT_EQ(path(p), NBitsPath::kDequantGemm);
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
  EXPECT_TRUE(q.dequant_vec8);
  p.alignment = 4;
  EXPECT_FALSE(plan(p).dequant_vec8);
}

// Line loads on blocks of one window (4-bit 128 codes, 8-bit 64) read a row's two scales
// of a pair as one 4-byte load: 2-byte aligned scales take the kernels without line loads.
// Larger blocks (one scale per pair) and smaller ones (per-chunk scales) do not need it.
TEST(NBitsPlan, LineLoadsOnWindowBlocksNeedFourByteAlignedScales) {
  struct Case { int bits; int64_t block; bool needs_four; };
  for (const Case c : {Case{4, 128, true}, Case{8, 64, true}, Case{4, 256, false},
                       Case{8, 128, false}, Case{4, 64, false}}) {
    NBitsMatMulProblem p = problem(1, 28672, 8192, c.bits, c.block);
    NBitsMatMulOptions o;
    o.gemv_lines = 1;
    o.gemv_fma = 0;
    for (int a : {16, 4, 2}) {
      p.scale_alignment = a;
      const NBitsMatMulPlan q = plan(p, kHopper, o);
      SCOPED_TRACE(printed(q));
      EXPECT_EQ(q.path, NBitsPath::kGemv);
      EXPECT_EQ(q.gemv_lines, a >= 4 || !c.needs_four);
    }
  }
  // The default plan of the decode shape: line loads of two tiles, or without 4-byte scales
  // the window kernel without line loads.
  NBitsMatMulProblem p = problem(1, 28672, 8192, 4, 128);
  p.scale_alignment = 2;
  const NBitsMatMulPlan q = plan(p);
  EXPECT_TRUE(q.gemv_window);
  EXPECT_FALSE(q.gemv_lines);
  EXPECT_EQ(q.gemv_tiles_per_warp, 1);
  EXPECT_NE(printed(q).find("align=16 scale_align=2;"), std::string::npos) << q;
}

TEST(NBitsPlan, TensorCoresNeedAmpere) {
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kFloat16), kTuring), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kBFloat16), kTuring), NBitsPath::kDequantGemm);
  EXPECT_EQ(path(problem(1, 4096, 4096, 4, 32, DType::kFloat32), kTuring), NBitsPath::kGemv);
}

TEST(NBitsPlan, AllowGemvFalseForcesDequantGemm) {
  NBitsMatMulOptions o;
  o.allow_gemv = false;
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, o), NBitsPath::kDequantGemm);
}

// The measured defaults (docs/PERF.md): the unrolled loop for both widths at every block
// size (and above 256). M = 2: at M = 1 8-bit takes the CUDA-core kernel by default.
TEST(NBitsPlan, GemvAlgoDefaultsAndOverride) {
  for (int bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128, 256, 512}) {
      const NBitsMatMulPlan p = plan(problem(2, 4096, 4096, bits, bs));
      ASSERT_EQ(p.path, NBitsPath::kGemv) << bits << " " << bs;
      EXPECT_FALSE(p.gemv_fma);
      EXPECT_EQ(p.gemv_algo, kNBitsGemvAlgoUnrolled) << bits << " " << bs;
      for (int m : {1, 2})
        for (int algo : {0, 1, 2}) {
          NBitsMatMulOptions o;
          o.gemv_algo = algo;  // a forced algorithm keeps the tensor-core kernel at M = 1
          const NBitsMatMulPlan q = plan(problem(m, 4096, 4096, bits, bs), kHopper, o);
          EXPECT_FALSE(q.gemv_fma);
          EXPECT_EQ(q.gemv_algo, algo);
        }
    }
}

// The CUDA-core kernel: 8-bit codes, float16 / bfloat16, M <= 2 where it applies; by
// default at M = 1, and at M = 2 in bfloat16 below 128 Mi codes or where line loads do
// not apply (measured faster there, docs/PERF.md), and
// not when gemv_algo or gemv_tma choose a tensor-core kernel. Its plan has no K split or
// TMA.
TEST(NBitsPlan, GemvFmaAtOneRowOfEightBitCodes) {
  NBitsMatMulOptions o;
  EXPECT_EQ(o.gemv_fma, -1);
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t bs : {16, 32, 128, 256}) {
      const NBitsMatMulPlan p = plan(problem(1, 28672, 8192, 8, bs, t));
      EXPECT_TRUE(p.gemv_fma) << p;
      EXPECT_EQ(p.gemv_rows, 1);
      EXPECT_FALSE(p.gemv_tma);
      EXPECT_EQ(p.gemv_k_split, 0);
      // M = 2: in bfloat16 the CUDA-core kernel below 128 Mi codes on grids of few tiles
      // (line loads on the others, at every block size).
      const NBitsMatMulPlan two = plan(problem(2, 4096, 4096, 8, bs, t));
      EXPECT_EQ(two.gemv_fma, t == DType::kBFloat16) << two;
      if (two.gemv_fma) {
        EXPECT_EQ(two.gemv_rows, 2);
      }
      for (const int64_t n : {int64_t{8192}, int64_t{28672}}) {
        const NBitsMatMulPlan many = plan(problem(2, n, 8192, 8, bs, t));
        EXPECT_FALSE(many.gemv_fma) << many;
        EXPECT_TRUE(many.gemv_lines) << many;
      }
      EXPECT_FALSE(plan(problem(3, 28672, 8192, 8, bs, t)).gemv_fma);
      EXPECT_TRUE(plan(problem(1, 4096, 4096, 8, bs, t), kAmpere).gemv_fma);
    }
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 128)).gemv_fma);  // 4-bit: tensor cores
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 128, DType::kFloat32)).gemv_fma);
  // bfloat16 M = 2 leaves the CUDA-core kernel for line loads only from N x K = 128 Mi or
  // on grids of more than 264 tiles (16 warps per SM at k_split 8 on 132 SMs), without a
  // zero-point tensor, on rows of whole lines, with the window kernel and line loads not
  // switched off.
  EXPECT_TRUE(plan(problem(2, 4096, 32768, 8, 128, DType::kBFloat16)).gemv_lines);
  EXPECT_TRUE(plan(problem(2, 4096, 32768 - 128, 8, 128, DType::kBFloat16)).gemv_fma);
  EXPECT_TRUE(plan(problem(2, 264 * 16, 4096, 8, 128, DType::kBFloat16)).gemv_fma);
  EXPECT_TRUE(plan(problem(2, 264 * 16 + 1, 4096, 8, 128, DType::kBFloat16)).gemv_lines);
  EXPECT_TRUE(plan(problem(2, 28672, 8192 + 64, 8, 64, DType::kBFloat16)).gemv_fma);
  // With packed zero points on any grid (N = 4096: neither large nor many tiles), still on
  // rows of whole lines only.
  NBitsMatMulProblem zp2 = problem(2, 4096, 4096, 8, 128, DType::kBFloat16);
  zp2.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp2).gemv_lines);
  EXPECT_EQ(plan(zp2).gemv_tiles_per_warp, 1);
  zp2 = problem(2, 28672, 8192 + 64, 8, 64, DType::kBFloat16);
  zp2.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp2).gemv_fma);
  for (auto off : {&NBitsMatMulOptions::gemv_window, &NBitsMatMulOptions::gemv_lines}) {
    NBitsMatMulOptions no;
    no.*off = 0;
    EXPECT_TRUE(plan(problem(2, 28672, 8192, 8, 128, DType::kBFloat16), kHopper, no).gemv_fma);
  }
  NBitsMatMulProblem zp = problem(1, 8192, 8192, 8, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp).gemv_fma);
  zp.zero_points = NBitsZeroPoints::kTyped;  // the dequant path's only
  EXPECT_EQ(path(zp), NBitsPath::kDequantGemm);
  // A forced weight stream of the tensor-core kernel keeps it, on or off.
  for (int tma : {0, 1}) {
    o.gemv_tma = tma;
    EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kHopper, o).gemv_fma) << tma;
  }
  // Forced on: M <= 2 of 8-bit half types (rows sized to M); forced off: never.
  o = NBitsMatMulOptions{};
  o.gemv_fma = 1;
  EXPECT_TRUE(plan(problem(2, 8192, 8192, 8, 64), kHopper, o).gemv_fma);
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8, 64), kHopper, o).gemv_rows, 2);
  EXPECT_FALSE(plan(problem(3, 8192, 8192, 8, 64), kHopper, o).gemv_fma);
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 64), kHopper, o).gemv_fma);
  o.gemv_algo = 1;  // forced on wins over a forced algorithm
  EXPECT_TRUE(plan(problem(1, 8192, 8192, 8, 64), kHopper, o).gemv_fma);
  o = NBitsMatMulOptions{};
  o.gemv_fma = 0;
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 64), kHopper, o).gemv_fma);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &NBitsMatMulOptions::gemv_fma,
                                              "gemv_fma");
}

// waves(k) = ceil(tiles * k / (132 SMs * 16 warps)), cost = waves * (windows / k + 2); the
// cheapest k_split wins, the larger on a tie. A window is 64 bytes of a row: 64 8-bit or
// 128 4-bit codes.
TEST(NBitsPlan, GemvKSplitBalancesWavesAndWindows) {
  // The register-load tile's model (16 warps per SM; line loads off: the window kernel's
  // warps are tested with it, below).
  NBitsMatMulOptions regs;
  regs.gemv_lines = 0;
  // M = 2: at M = 1 8-bit takes the CUDA-core kernel, which has no K split.
  // 256 tiles x 8 warps fit one wave: k_split 8 (64 windows: cost 1 * (8 + 2)).
  EXPECT_EQ(plan(problem(2, 4096, 4096, 8), kHopper, regs).gemv_k_split, 8);
  // 512 tiles: k_split 8 needs two waves (2 * 18), 4 one (1 * 34).
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8), kHopper, regs).gemv_k_split, 4);
  EXPECT_EQ(plan(problem(2, 8192, 8192, 4), kHopper, regs).gemv_k_split, 4);
  // 1792 tiles: 7 waves of k_split 8 (7 * 18 = 126) beat 4 of 4 (136) and 1 of 1 (130).
  EXPECT_EQ(plan(problem(2, 28672, 8192, 8), kHopper, regs).gemv_k_split, 8);
  // 896 tiles, 64 windows: k_split 2 fits one wave (34) against 4 waves of 8 (40).
  EXPECT_EQ(plan(problem(2, 14336, 4096, 8), kHopper, regs).gemv_k_split, 2);
  // Never more warps than windows.
  EXPECT_EQ(plan(problem(2, 16, 64, 8), kHopper, regs).gemv_k_split, 1);
  EXPECT_EQ(plan(problem(2, 16, 256, 8), kHopper, regs).gemv_k_split, 4);
  // float32's FMA tile: half the resident warps (8 per SM).
  EXPECT_EQ(plan(problem(2, 8192, 8192, 8, 32, DType::kFloat32), kHopper, regs).gemv_k_split, 2);
  // An unknown device (0 SMs) counts as one SM: every split only adds waves.
  EXPECT_EQ(plan(problem(2, 4096, 4096, 8), DeviceInfo{90, 0}, regs).gemv_k_split, 1);
}

TEST(NBitsPlan, DequantGemmTilesAndWorkspace) {
  // 256 MiB scratch: float16 rows of K = 8192 are 16 KiB: 16384 rows per tile.
  NBitsMatMulPlan p = plan(problem(64, 32768, 8192));
  EXPECT_EQ(p.path, NBitsPath::kDequantGemm);
  EXPECT_TRUE(p.dequant_vec8);
  EXPECT_EQ(p.n_tile, 16384);
  EXPECT_EQ(p.num_n_tiles, 2);
  EXPECT_EQ(p.scratch_buffers, 1);
  EXPECT_EQ(p.cublas_offset, 0u);
  EXPECT_EQ(p.cublas_bytes, size_t{32} << 20);
  EXPECT_EQ(p.scratch_offset, size_t{32} << 20);
  EXPECT_EQ(p.scratch_bytes, size_t{256} << 20);
  EXPECT_EQ(p.workspace_bytes, size_t{288} << 20);
  // float32 rows are twice as large.
  p = plan(problem(64, 32768, 8192, 4, 32, DType::kFloat32));
  EXPECT_EQ(p.n_tile, 8192);
  EXPECT_EQ(p.num_n_tiles, 4);
  // Overlapped: two buffers of 128 MiB = 8192 float16 rows, 4 tiles.
  NBitsMatMulOptions overlap;
  overlap.overlap_dequant = true;
  p = plan(problem(64, 32768, 8192), kHopper, overlap);
  EXPECT_EQ(p.n_tile, 8192);
  EXPECT_EQ(p.num_n_tiles, 4);
  EXPECT_EQ(p.scratch_buffers, 2);
  EXPECT_EQ(p.scratch_bytes, size_t{256} << 20);
  // Whole N in one tile when it fits; a small limit still gives one row per tile.
  p = plan(problem(64, 100, 8192));
  EXPECT_EQ(p.n_tile, 100);
  EXPECT_EQ(p.num_n_tiles, 1);
  EXPECT_EQ(p.scratch_bytes, size_t{100} * 8192 * 2);
  NBitsMatMulOptions o;
  o.dequant_scratch_bytes = 1000;
  p = plan(problem(64, 100, 8192), kHopper, o);
  EXPECT_EQ(p.n_tile, 1);
  EXPECT_EQ(p.num_n_tiles, 100);
  // Pre-Hopper cuBLAS workspace.
  EXPECT_EQ(plan(problem(64, 100, 8192), kTuring).cublas_bytes, size_t{4} << 20);
}

TEST(NBitsPlan, ScalarDequantForOddK) {
  const NBitsMatMulPlan p = plan(problem(16, 64, 100, 8, 16));
  EXPECT_EQ(p.path, NBitsPath::kDequantGemm);
  EXPECT_FALSE(p.dequant_vec8);
}

// TMA tiles where the kernel applies (SM90, float16 / bfloat16, blocks of at least half a
// 128-byte tile's codes: 8-bit 64, 4-bit 128) and, by default, where measured faster:
// N x K >= 128 Mi codes, and M <= 4 for 8-bit, unless the window kernel (line loads) is
// taken. Its K split deals out 128-byte tiles.
TEST(NBitsPlan, GemvTmaWhereItPaysOrWhenAsked) {
  NBitsMatMulOptions o;
  EXPECT_EQ(o.gemv_tma, -1);
  // The rule: 28672 x 8192 = 224 Mi codes; 8192 x 16384 = 128 Mi exactly; 8192 x 16368 below.
  // 8-bit float16 on rows that are not whole 128-byte lines (8256 bytes; on whole lines,
  // with or without zero points: line loads of two tiles, below).
  NBitsMatMulProblem zp8 = problem(2, 28672, 8192 + 64, 8, 64);  // M = 1: gemv_fma
  zp8.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp8).gemv_tma);
  zp8.m = 4;
  EXPECT_TRUE(plan(zp8).gemv_tma);
  zp8.m = 5;  // 8-bit: M <= 4 only
  EXPECT_FALSE(plan(zp8).gemv_tma);
  EXPECT_FALSE(plan(problem(2, 28672, 8192, 8, 128)).gemv_tma);
  // 4-bit: every M, where the window kernel is off (by default it replaces the TMA tile).
  NBitsMatMulOptions no_window;
  no_window.gemv_window = 0;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, no_window).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 4, 128), kHopper, no_window).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 8192, 16384, 4, 128, DType::kBFloat16), kHopper, no_window).gemv_tma);
  EXPECT_FALSE(plan(problem(8, 8192, 16384 - 128, 4, 128), kHopper, no_window).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128)).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 8, 128)).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 32)).gemv_tma);  // block below half a tile
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64)).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128, DType::kFloat32)).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kAmpere).gemv_tma);
  // Forced on: wherever the kernel applies, at any size and M.
  o.gemv_tma = 1;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 8, 64), kHopper, o).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 8, 128), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 32), kHopper, o).gemv_tma);
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128, DType::kBFloat16), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(8, 4096, 4096, 4, 64), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 8, 128, DType::kFloat32), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 4096, 4096, 8, 128), kAmpere, o).gemv_tma);
  // 256 tiles, 4096 bytes per row = 32 TMA tiles: one wave of k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(1, 4096, 4096, 8, 128), kHopper, o).gemv_k_split, 8);
  // 4-bit K = 512: 256 bytes per row = 2 tiles, so k_split 2 at most (4 windows).
  EXPECT_EQ(plan(problem(1, 16, 512, 4, 128), kHopper, o).gemv_k_split, 2);
  o.gemv_tma = 0;
  EXPECT_EQ(plan(problem(1, 16, 512, 8, 128), kHopper, o).gemv_k_split, 8);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128), kHopper, o).gemv_tma);  // forced off
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &NBitsMatMulOptions::gemv_tma,
                                              "gemv_tma");
}

// The window kernel (float16 / bfloat16, algorithm 0, blocks of a window or more, rows of
// whole 64-byte windows), 4-bit by default where the grid has more warps than the
// 128-register tiles hold (ceil(N / 16) * 8 > 16 * SMs), with packed zero points at M = 1
// only, and not when TMA tiles are forced; it then replaces the TMA tile, and its K split
// counts 32 resident warps per SM (24 with packed zero points). Line loads (next test)
// take it whatever the grid (4-bit at M <= 4 on N x K >= 128 Mi, 8-bit), so the grid rule
// is checked below 128 Mi, from M = 3 and without them.
TEST(NBitsPlan, GemvWindowWhereItAppliesOrWhenAsked) {
  NBitsMatMulOptions o;
  EXPECT_EQ(o.gemv_window, -1);
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m = 1; m <= 8; ++m)
      for (int64_t bs : {128, 256, 1024}) {
        const NBitsMatMulPlan p = plan(problem(m, 28672, 8192, 4, bs, t));
        EXPECT_TRUE(p.gemv_window) << p;
        EXPECT_FALSE(p.gemv_tma) << p;
        EXPECT_EQ(p.gemv_algo, kNBitsGemvAlgoUnrolled) << p;
      }
  // A window spans 2 blocks: not without line loads (by default two tiles of them, below).
  NBitsMatMulOptions window_only;
  window_only.gemv_window = 1;
  window_only.gemv_lines = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64), kHopper, window_only).gemv_window);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 64)).gemv_lines);
  // 8-bit takes it only with line loads: on rows of 8256 bytes (not whole lines), TMA
  // tiles instead.
  EXPECT_FALSE(plan(problem(2, 28672, 8192 + 64, 8, 64)).gemv_window);
  EXPECT_TRUE(plan(problem(2, 28672, 8192 + 64, 8, 64)).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128, DType::kFloat32)).gemv_window);
  EXPECT_FALSE(plan(problem(9, 28672, 8192, 4, 128)).gemv_window);  // dequant + GEMM
  // The grid: 264 tiles x 8 = 2112 = 16 x 132 warps is not more; 265 tiles are.
  EXPECT_FALSE(plan(problem(3, 264 * 16, 8192, 4, 128)).gemv_window);
  EXPECT_TRUE(plan(problem(3, 264 * 16 + 1, 8192, 4, 128)).gemv_window);
  EXPECT_FALSE(plan(problem(3, 4096, 14336, 4, 128)).gemv_window);
  EXPECT_TRUE(plan(problem(3, 4096, 4096, 4, 128), kAmpere).gemv_window);  // 108 SMs
  NBitsMatMulOptions no_lines;
  no_lines.gemv_lines = 0;
  EXPECT_FALSE(plan(problem(1, 264 * 16, 8192, 4, 128), kHopper, no_lines).gemv_window);
  EXPECT_TRUE(plan(problem(1, 264 * 16 + 1, 8192, 4, 128), kHopper, no_lines).gemv_window);
  NBitsMatMulOptions forced;
  forced.gemv_window = 1;
  // Forced: any grid, rows of whole windows (K = 128 is one).
  EXPECT_TRUE(plan(problem(1, 16, 128, 4, 128), kHopper, forced).gemv_window);
  EXPECT_TRUE(plan(problem(1, 4096, 14336, 4, 128), kHopper, forced).gemv_window);
  // Another algorithm, or TMA tiles forced, keep the other kernels.
  NBitsMatMulOptions algo1;
  algo1.gemv_algo = kNBitsGemvAlgoLoop;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo1).gemv_window);
  NBitsMatMulOptions algo0;
  algo0.gemv_algo = kNBitsGemvAlgoUnrolled;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo0).gemv_window);
  o.gemv_tma = 1;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_window);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_tma);
  o.gemv_window = 1;  // both forced: the window kernel
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_window);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_tma);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 64), kHopper, o).gemv_window);  // still applies only
  o = NBitsMatMulOptions{};
  o.gemv_window = 0;
  EXPECT_FALSE(plan(problem(1, 8192, 8192, 4, 128), kHopper, o).gemv_window);
  // K split: 1792 tiles of 64 windows. 32 warps per SM (4224 resident): k_split 2 is one
  // wave (34) against 1 (66) and 4 (2 waves, 36). 16 (2112): k_split 1 (66) against 2
  // (2 waves, 68). With packed zero points, 24 (3168): 5 waves of k_split 8 (50) against
  // 3 of 4 (54), 2 of 2 (68) and 1 of 1 (66).
  EXPECT_EQ(plan(problem(3, 28672, 8192, 4, 128), kHopper, no_lines).gemv_k_split, 2);
  EXPECT_EQ(plan(problem(3, 28672, 8192, 4, 128), kHopper, o).gemv_k_split, 1);
  // Packed zero points: not by the grid rule (the register tile there), unless forced.
  NBitsMatMulProblem zp = problem(1, 264 * 16 + 1, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_FALSE(plan(zp).gemv_window);
  EXPECT_FALSE(plan(zp).gemv_tma);
  zp = problem(3, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_FALSE(plan(zp, kHopper, no_lines).gemv_window);  // TMA tiles
  NBitsMatMulOptions forced_no_lines = forced;
  forced_no_lines.gemv_lines = 0;
  const NBitsMatMulPlan zp2 = plan(zp, kHopper, forced_no_lines);
  EXPECT_TRUE(zp2.gemv_window);
  EXPECT_EQ(zp2.gemv_k_split, 8);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &NBitsMatMulOptions::gemv_window,
                                              "gemv_window");
}

// Line loads (the window kernel's weights as whole 128-byte lines, rows of whole lines:
// K % 256 == 0 4-bit, K % 128 == 0 8-bit): by default 4-bit at M <= 4 (M <= 2 with packed
// zero points) on weights of N x K >= 128 Mi codes (the TMA tiles' threshold), 8-bit
// without zero points wherever the tensor cores run (bfloat16 M = 2 from 128 Mi codes, in
// the CUDA-core kernel's place; float16 not where TMA tiles are taken); not when the
// window kernel is off or TMA tiles are forced; forced on, they take the window kernel
// whatever the grid. Their K split is the window kernel's.
TEST(NBitsPlan, GemvLinesWhereItAppliesOrWhenAsked) {
  NBitsMatMulOptions o;
  EXPECT_EQ(o.gemv_lines, -1);
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
        const bool want = bits == 4                ? large || (many && m > 4)
                          : t == DType::kBFloat16 ? m > 2 || (m == 2 && (large || many))
                                                  : m > 1;
        const bool fp16 = t == DType::kFloat16;
        const bool two = large ? bits == 4 || m >= (fp16 ? 2 : 5)
                               : many && (bits == 4 ? m > 4 : !fp16);
        const int tiles = two ? 2 : 1;
        EXPECT_EQ(p.gemv_lines, want) << p;
        if (bits == 8) {
          EXPECT_EQ(p.gemv_window, want) << p;  // 8-bit: only with line loads
        }
        if (p.gemv_lines) {
          EXPECT_TRUE(p.gemv_window) << p;
          EXPECT_FALSE(p.gemv_tma) << p;
          EXPECT_EQ(p.gemv_tiles_per_warp, tiles) << p;
          const int model = choose_gemv_k_split(nk[0] / tiles, nk[1] * bits / 8 / 64, kHopper.num_sms,
                                                nbits_window_warps_per_sm(bits, false, fp16, tiles));
          EXPECT_EQ(p.gemv_k_split,
                    tiles == 2 && bits == 4 && (!fp16 || m == 1) && m <= 4 ? 2 * model : model)
              << p;
        } else {
          EXPECT_EQ(p.gemv_tiles_per_warp, 1) << p;
        }
      }
  // 8-bit: the window kernel's 24 warps per SM (k_split 8 at 28672 x 8192; 32 would give 4),
  // rows of whole lines (K = 4160: 4160 bytes), a window per block or more, no zero points.
  const DType bf16 = DType::kBFloat16;
  EXPECT_EQ(plan(problem(4, 28672, 8192, 8, 128, bf16)).gemv_k_split, 8);
  EXPECT_FALSE(plan(problem(4, 4096, 4160, 8, 64, bf16)).gemv_lines);
  EXPECT_FALSE(plan(problem(4, 4096, 4160, 8, 64, bf16)).gemv_window);
  EXPECT_TRUE(plan(problem(4, 4096, 4096, 8, 64, bf16)).gemv_lines);
  // Blocks smaller than a window down to a lane's chunk (8-bit: 16 codes, 4-bit: 32).
  EXPECT_TRUE(plan(problem(4, 4096, 4096, 8, 16, bf16)).gemv_lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 4, 32, bf16)).gemv_lines);
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 4, 16, bf16)).gemv_lines);
  // Packed zero points: bfloat16 as without, one tile; float16 below 128 Mi codes too.
  NBitsMatMulProblem zp8 = problem(4, 4096, 4096, 8, 128, bf16);
  zp8.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp8).gemv_lines);
  EXPECT_EQ(plan(zp8).gemv_tiles_per_warp, 1);
  zp8.dtype = DType::kFloat16;
  EXPECT_TRUE(plan(zp8).gemv_lines);
  EXPECT_FALSE(plan(zp8).gemv_tma);
  NBitsMatMulOptions tensor_cores;  // 8-bit M <= 2 on the tensor cores: line loads
  tensor_cores.gemv_fma = 0;
  for (int64_t m : {1, 2}) {
    EXPECT_TRUE(plan(problem(m, 8192, 8192, 8, 128, bf16), kHopper, tensor_cores).gemv_lines);
    EXPECT_TRUE(plan(problem(m, 8192, 8192, 8, 128), kHopper, tensor_cores).gemv_lines);
  }
  // 8-bit float16: line loads of two tiles in place of TMA tiles on N x K >= 128 Mi (one
  // tile: TMA tiles at M <= 4 there), and everywhere without TMA (SM80). Its window kernel
  // holds 16 warps per SM, bfloat16's 24: 300 tiles of 64 windows take k_split 4 (one wave
  // of 1200 warps: 16 + 2) against 8's two waves (2 x 10) at 16, and 8 (one wave) at 24.
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128)).gemv_lines);
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128)).gemv_tma);
  NBitsMatMulOptions one_tile;
  one_tile.gemv_tiles_per_warp = 1;
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128), kHopper, one_tile).gemv_lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128), kHopper, one_tile).gemv_tma);
  EXPECT_TRUE(plan(problem(5, 28672, 8192, 8, 128), kHopper, one_tile).gemv_lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128), kAmpere).gemv_lines);
  EXPECT_EQ(plan(problem(2, 4800, 4096, 8, 128)).gemv_k_split, 4);
  EXPECT_EQ(plan(problem(3, 4800, 4096, 8, 128, bf16)).gemv_k_split, 8);
  NBitsMatMulOptions tma8;
  tma8.gemv_tma = 1;
  EXPECT_FALSE(plan(problem(4, 28672, 8192, 8, 128, bf16), kHopper, tma8).gemv_lines);
  EXPECT_TRUE(plan(problem(4, 28672, 8192, 8, 128, bf16), kHopper, tma8).gemv_tma);
  // The size rule: 8192 x 16384 = 128 Mi codes; K - 256 below.
  EXPECT_TRUE(plan(problem(2, 8192, 16384, 4, 128)).gemv_lines);
  EXPECT_FALSE(plan(problem(2, 8192, 16384 - 256, 4, 128)).gemv_lines);
  EXPECT_TRUE(plan(problem(4, 8192, 16384, 4, 128)).gemv_lines);
  EXPECT_TRUE(plan(problem(5, 8192, 16384, 4, 128)).gemv_lines);  // two tiles per warp
  EXPECT_FALSE(plan(problem(5, 8192, 16384, 4, 128), kHopper, one_tile).gemv_lines);
  // Rows of whole lines only: K = 16384 + 128 is 8256 bytes a row (129 windows).
  EXPECT_FALSE(plan(problem(1, 16384, 16384 + 128, 4, 128)).gemv_lines);
  EXPECT_TRUE(plan(problem(1, 16384, 16384 + 128, 4, 128)).gemv_window);  // the grid rule
  // Only where the window kernel's loop applies, on blocks of a lane's chunk or more.
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 16)).gemv_lines);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 8, 128)).gemv_lines);  // 8-bit M = 1: CUDA cores
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128, DType::kFloat32)).gemv_lines);
  NBitsMatMulOptions algo1;
  algo1.gemv_algo = kNBitsGemvAlgoLoop;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, algo1).gemv_lines);
  // Packed zero points with one tile forced: line loads at M <= 2 (without: M <= 4), and
  // the window kernel's K split for them (24 warps per SM: k_split 8 at 28672 x 8192;
  // two tiles per warp, 16 warps per SM and 896 warps' columns: the model's 2, doubled in
  // float16 only at M = 1 without zero points).
  EXPECT_EQ(plan(problem(1, 28672, 8192, 4, 128)).gemv_k_split, 4);
  EXPECT_EQ(plan(problem(2, 28672, 8192, 4, 128)).gemv_k_split, 2);
  NBitsMatMulProblem zp = problem(2, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv_lines);
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv_window);  // the window kernel's line loads
  EXPECT_EQ(plan(zp, kHopper, one_tile).gemv_k_split, 8);
  EXPECT_EQ(plan(zp).gemv_k_split, 2);
  zp.m = 3;
  EXPECT_FALSE(plan(zp, kHopper, one_tile).gemv_lines);
  EXPECT_FALSE(plan(zp, kHopper, one_tile).gemv_window);
  zp.zero_points = NBitsZeroPoints::kNone;
  EXPECT_TRUE(plan(zp, kHopper, one_tile).gemv_lines);
  // The window kernel off, or TMA tiles forced: no line loads by default.
  NBitsMatMulOptions off;
  off.gemv_window = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, off).gemv_lines);
  off.gemv_lines = 1;  // lines forced, the window kernel off: off wins
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, off).gemv_window);
  NBitsMatMulOptions tma;
  tma.gemv_tma = 1;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv_lines);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv_tma);
  tma.gemv_lines = 1;  // both forced: the window kernel with line loads
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv_lines);
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv_tma);
  // Forced on: any M and grid where it applies; forced off: the window kernel's own rule.
  o.gemv_lines = 1;
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128), kHopper, o).gemv_lines);
  EXPECT_TRUE(plan(problem(8, 4096, 4096, 4, 128), kHopper, o).gemv_window);
  EXPECT_TRUE(plan(problem(1, 16, 256, 4, 128), kHopper, o).gemv_lines);   // one line
  EXPECT_FALSE(plan(problem(1, 16, 128, 4, 128), kHopper, o).gemv_lines);  // one window
  o.gemv_lines = 0;
  EXPECT_FALSE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_lines);
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_window);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), o, &NBitsMatMulOptions::gemv_lines,
                                              "gemv_lines");
}

// Blocks smaller than a window but no smaller than a lane's 16-byte chunk (4-bit 32, 64;
// 8-bit 16, 32 codes) take the plans of blocks of a window (4-bit 128, 8-bit 64 codes): the
// same rules, measured on the decode suite at blocks of 32 and 64 codes (H200,
// 2026-11-30c: line loads 8-32 % faster than the register tile wherever they are taken),
// except where those take the window kernel without line loads (4-bit, grids of many
// tiles, M <= 4; it needs blocks of a window): two tiles of line loads there. 4-bit
// blocks of 16 codes keep the register tile. The 4-bit bfloat16 K-split doubling stays on
// N x K >= 128 Mi.
TEST(NBitsPlan, GemvLinesOnBlocksSmallerThanAWindow) {
  const int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}, {28672, 8192}};
  int window_cases = 0;
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked})
        for (int64_t m : {1, 2, 3, 4, 5, 8})
          for (const auto& nk : shapes) {
            NBitsMatMulProblem big = problem(m, nk[0], nk[1], bits, 512 / bits, t);
            big.zero_points = zp;
            const NBitsMatMulPlan pb = plan(big);
            for (int64_t bs : {int64_t{128} / bits, int64_t{256} / bits}) {
              NBitsMatMulProblem small = big;
              small.block_size = bs;
              const NBitsMatMulPlan ps = plan(small);
              SCOPED_TRACE(::testing::Message() << pb << " vs " << ps);
              EXPECT_EQ(ps.path, NBitsPath::kGemv);
              EXPECT_EQ(ps.gemv_fma, pb.gemv_fma);
              EXPECT_FALSE(ps.gemv_tma);
              if (pb.gemv_window && !pb.gemv_lines) {
                ++window_cases;
                EXPECT_TRUE(ps.gemv_lines);
                EXPECT_EQ(ps.gemv_tiles_per_warp, 2);
              } else {
                EXPECT_FALSE(pb.gemv_tma);
                EXPECT_EQ(ps.gemv_window, pb.gemv_window);
                EXPECT_EQ(ps.gemv_lines, pb.gemv_lines);
                EXPECT_EQ(ps.gemv_tiles_per_warp, pb.gemv_tiles_per_warp);
                EXPECT_EQ(ps.gemv_k_split, pb.gemv_k_split);
              }
            }
          }
  EXPECT_EQ(window_cases, 2 * 2 * 4 * 2);  // 4-bit, both dtypes, M = 1..4, 2 shapes, 2 sizes
  // bfloat16 two tiles below 128 Mi: the model's k_split (896 two-tile warps' columns of 64
  // windows: 4), not twice it.
  const NBitsMatMulPlan bf16 = plan(problem(2, 14336, 4096, 4, 32, DType::kBFloat16));
  EXPECT_EQ(bf16.gemv_tiles_per_warp, 2);
  EXPECT_EQ(bf16.gemv_k_split, plan(problem(2, 14336, 4096, 4, 32)).gemv_k_split);
  EXPECT_EQ(bf16.gemv_k_split, 4);
  EXPECT_EQ(plan(problem(2, 28672, 8192, 4, 32, DType::kBFloat16)).gemv_k_split,
            2 * plan(problem(2, 28672, 8192, 4, 32)).gemv_k_split);
  // Below a chunk: never line loads, not even forced.
  NBitsMatMulOptions forced;
  forced.gemv_lines = 1;
  forced.gemv_tiles_per_warp = 2;
  const NBitsMatMulPlan tiny = plan(problem(2, 28672, 8192, 4, 16), kHopper, forced);
  EXPECT_FALSE(tiny.gemv_lines) << tiny;
  EXPECT_FALSE(tiny.gemv_window) << tiny;
  EXPECT_EQ(tiny.gemv_tiles_per_warp, 1) << tiny;
}

// Two 16-column tiles per warp: line loads without a zero-point tensor; by default on
// N x K >= 128 Mi (4-bit every M, 8-bit float16 from M = 2, bfloat16 from M = 5) and
// below it on grids of many tiles (4-bit from M = 5, 8-bit bfloat16), or as forced; their
// K split counts 16 warps per SM (4-bit bfloat16 at M <= 4 and float16 at M = 1: twice that).
TEST(NBitsPlan, GemvTwoTilesPerWarpOnLargeWeights) {
  const DType bf16 = DType::kBFloat16;
  // 896 two-tile warps of 64 windows: one wave of k_split 2 (32 + 2), two of 4 (2 x 18).
  const NBitsMatMulPlan four = plan(problem(8, 28672, 8192, 4, 128));
  EXPECT_EQ(four.gemv_tiles_per_warp, 2);
  EXPECT_EQ(four.gemv_k_split, 2);
  EXPECT_NE(printed(four).find("window=1; lines=1; tiles=2"), std::string::npos) << four;
  EXPECT_EQ(plan(problem(4, 28672, 8192, 4, 128, bf16)).gemv_k_split, 4);
  EXPECT_EQ(plan(problem(5, 28672, 8192, 4, 128, bf16)).gemv_k_split, 2);
  // 8-bit: 128 windows, k_split 2 (64 + 2 against 2 x 34).
  EXPECT_EQ(plan(problem(2, 28672, 8192, 8, 128)).gemv_k_split, 2);
  EXPECT_EQ(plan(problem(4, 28672, 8192, 8, 128, bf16)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(5, 28672, 8192, 8, 128, bf16)).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(problem(2, 8192, 16384 - 128, 8, 128)).gemv_tiles_per_warp, 1);  // < 128 Mi
  // Below 128 Mi, grids of more than 264 tiles: 4-bit from M = 5, 8-bit bfloat16.
  EXPECT_EQ(plan(problem(5, 8192, 8192, 4, 128)).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(problem(4, 8192, 8192, 4, 128)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(8, 264 * 16, 8192, 4, 128)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(8, 264 * 16 + 1, 8192, 4, 128)).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(problem(3, 8192, 8192, 8, 128, bf16)).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(problem(3, 264 * 16, 8192, 8, 128, bf16)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(8, 8192, 8192, 8, 128)).gemv_tiles_per_warp, 1);  // float16 8-bit
  // Packed zero points: on N x K >= 128 Mi, 4-bit at every M, 8-bit float16 (M >= 2 by
  // default, the CUDA-core kernel at M = 1), not 8-bit bfloat16; not below 128 Mi.
  NBitsMatMulProblem zp = problem(1, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  for (int64_t m : {1, 8}) {
    zp.m = m;
    EXPECT_TRUE(plan(zp).gemv_lines);
    EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 2);
  }
  // 4-bit: twice the model's split (2) in bfloat16 at M <= 4 with or without zero points,
  // in float16 at M = 1 without them.
  for (int64_t m : {1, 2, 3, 4, 5}) {
    zp.m = m;
    zp.dtype = DType::kFloat16;
    EXPECT_EQ(plan(zp).gemv_k_split, 2) << plan(zp);
    zp.dtype = DType::kBFloat16;
    EXPECT_EQ(plan(zp).gemv_k_split, m <= 4 ? 4 : 2) << plan(zp);
    EXPECT_EQ(plan(problem(m, 28672, 8192, 4, 128)).gemv_k_split, m == 1 ? 4 : 2);
  }
  // The split across N at K = 8192 (two-tile warps' start costs 6 windows; twice the
  // split only where the model's leaves one partial wave of >= 3/4 of the 2112 resident
  // warps): 528 warps x 4 fill one wave; 704 x 2 are 0.67 of one (k_split 8, 2.7 waves,
  // with a start of 2); 896 x 2 0.85 (doubled at M = 1 float16, M <= 4 bfloat16); 1056 x 2
  // one; 1408 x 4 2.7 waves (34 + 6 x 2 = 76 against 3 x 22 = 66).
  // At 128 registers (the wide kernel's choice: GemvTwoTilesAt168Registers below).
  NBitsMatMulOptions narrow;
  narrow.gemv_registers = kGemvTwoTileRegisters;
  const std::pair<int64_t, int> fp16_m1[] = {{16896, 4}, {22528, 2}, {28672, 4}, {33792, 2}, {45056, 4}};
  for (const auto& [n, split] : fp16_m1) {
    EXPECT_EQ(plan(problem(1, n, 8192, 4, 128), kHopper, narrow).gemv_k_split, split) << n;
    EXPECT_EQ(plan(problem(4, n, 8192, 4, 128, bf16), kHopper, narrow).gemv_k_split, split) << n;
    EXPECT_EQ(plan(problem(8, n, 8192, 4, 128), kHopper, narrow).gemv_k_split,
              n == 28672 ? 2 : split)
        << n;
  }
  // K = 4096 (32 windows), 57344 columns: one partial wave (0.85) of k_split 1.
  EXPECT_EQ(plan(problem(8, 57344, 4096, 4, 128)).gemv_k_split, 1);
  EXPECT_EQ(plan(problem(1, 57344, 4096, 4, 128)).gemv_k_split, 2);
  zp.dtype = DType::kFloat16;
  zp.n = 8192;
  zp.k = 16384;  // 128 Mi codes
  EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 2);
  zp.k = 16384 - 256;  // below: the register tile
  EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 1);
  EXPECT_FALSE(plan(zp).gemv_lines);
  EXPECT_FALSE(plan(zp).gemv_window);
  zp = problem(2, 28672, 8192, 8, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 2);
  zp.k = 16384 - 128;  // N = 8192: below 128 Mi, one tile
  zp.n = 8192;
  EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 1);
  EXPECT_TRUE(plan(zp).gemv_lines);
  zp = problem(8, 28672, 8192, 8, 128, bf16);
  zp.zero_points = NBitsZeroPoints::kPacked;
  EXPECT_EQ(plan(zp).gemv_tiles_per_warp, 1);
  EXPECT_TRUE(plan(zp).gemv_lines);
  zp = problem(1, 28672, 8192, 4, 128);
  zp.zero_points = NBitsZeroPoints::kPacked;
  NBitsMatMulOptions o;
  EXPECT_EQ(o.gemv_tiles_per_warp, -1);
  o.gemv_tiles_per_warp = 2;  // forced: line loads of two tiles wherever they apply
  const NBitsMatMulPlan small = plan(problem(3, 4096, 4096, 4, 128), kHopper, o);
  EXPECT_TRUE(small.gemv_lines) << small;
  EXPECT_EQ(small.gemv_tiles_per_warp, 2) << small;
  EXPECT_EQ(plan(zp, kHopper, o).gemv_tiles_per_warp, 2);  // forced: with zero points too
  EXPECT_EQ(plan(problem(3, 4096, 4096 + 128, 4, 128), kHopper, o).gemv_tiles_per_warp, 1);
  o.gemv_lines = 0;
  EXPECT_EQ(plan(problem(3, 4096, 4096, 4, 128), kHopper, o).gemv_tiles_per_warp, 1);
  o = NBitsMatMulOptions{};
  o.gemv_tiles_per_warp = 1;  // one tile: 4-bit M = 8 keeps the window kernel's own loads
  EXPECT_FALSE(plan(problem(8, 28672, 8192, 4, 128), kHopper, o).gemv_lines);
  EXPECT_EQ(plan(problem(1, 28672, 8192, 4, 128), kHopper, o).gemv_tiles_per_warp, 1);
  for (int bad : {-2, 0, 3}) {
    SCOPED_TRACE(bad);
    o.gemv_tiles_per_warp = bad;
    testing::expect_rejected(problem(3, 4096, 4096, 4, 128), o, "gemv_tiles_per_warp");
  }
}

TEST(NBitsPlan, PrintsEveryDecision) {
  NBitsMatMulProblem q = problem(3, 4096, 4096, 8, 128, DType::kBFloat16);
  q.zero_points = NBitsZeroPoints::kPacked;
  q.has_bias = true;
  NBitsMatMulOptions o;
  o.gemv_algo = 2;
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
  EXPECT_NE(dq.find("dequant=vec8; n_tile=4096 x 1 in 1 buffer(s)"), std::string::npos) << dq;
  EXPECT_NE(dq.find("cublas 33554432@0, scratch 33554432@33554432"), std::string::npos) << dq;
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
  NBitsMatMulOptions o;
  o.dequant_scratch_bytes = 0;
  EXPECT_EQ(plan_nbits_matmul(problem(1, 64, 64), kHopper, o, &out).code(),
            StatusCode::kInvalidArgument);
  o = NBitsMatMulOptions{};
  o.gemv_algo = 3;
  EXPECT_EQ(plan_nbits_matmul(problem(1, 64, 64), kHopper, o, &out).code(),
            StatusCode::kInvalidArgument);
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
      EXPECT_EQ(plan(problem(m, 28672, 8192, 4, 128, t)).gemv_registers, kGemvTwoTileRegisters);
      EXPECT_EQ(plan(problem(m, 16384, 8192, 4, 128, t)).gemv_registers, kGemvTwoTileRegisters);
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
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128)).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128)).gemv_registers, 0);
  EXPECT_NE(printed(plan(problem(1, 20480, 8192, 4, 128))).find("tiles=2; regs=168;"),
            std::string::npos);
  EXPECT_EQ(printed(plan(problem(1, 12288, 8192, 4, 128))).find("regs="), std::string::npos);
  // Forced: 168 wherever two tiles are taken (its split the 12-warp model's: at 28672 3
  // waves of 4, 66, against one of 1, 70), 128 likewise;
  // ignored with one tile; a forced k_split of 8 keeps 128 unless 168 is forced too (an
  // error: the wide kernel's blocks hold 4 warps).
  NBitsMatMulOptions o;
  o.gemv_registers = kGemvWideRegisters;
  EXPECT_EQ(regs_split(plan(problem(1, 28672, 8192, 4, 128), kHopper, o)), wide(4));
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128), kHopper, o).gemv_registers, 0);
  o.gemv_k_split = 2;
  EXPECT_EQ(regs_split(plan(problem(1, 28672, 8192, 4, 128), kHopper, o)), wide(2));
  o.gemv_k_split = 8;
  testing::expect_rejected(problem(1, 28672, 8192, 4, 128), o, "gemv_registers");
  EXPECT_EQ(plan(problem(1, 12288, 8192, 4, 128), kHopper, o).gemv_k_split, 8);  // one tile
  o.gemv_registers = -1;
  EXPECT_EQ(regs_split(plan(problem(1, 20480, 8192, 4, 128), kHopper, o)), narrow(8));
  o.gemv_registers = kGemvTwoTileRegisters;
  o.gemv_k_split = 0;
  EXPECT_EQ(regs_split(plan(problem(1, 20480, 8192, 4, 128), kHopper, o)), narrow(2));
  for (int bad : {0, 64, 127, 160, 256, -2}) {
    o.gemv_registers = bad;
    testing::expect_rejected(problem(1, 20480, 8192, 4, 128), o, "gemv_registers");
  }
}

// ------------------------------------------------------------------ environment
class NBitsEnvTest : public ::testing::Test {
 protected:
  testing::EnvGuard env_{"BQMM_DEQUANT_SCRATCH_MIB", "BQMM_NBITS_GEMV_ALGO",
                         "BQMM_NBITS_GEMV_TMA", "BQMM_NBITS_GEMV_FMA",
                         "BQMM_NBITS_GEMV_WINDOW", "BQMM_NBITS_GEMV_LINES",
                         "BQMM_NBITS_GEMV_TILES", "BQMM_NBITS_GEMV_KSPLIT",
                         "BQMM_NBITS_GEMV_REGISTERS"};
};

// BQMM_NBITS_GEMV_KSPLIT and NBitsMatMulOptions::gemv_k_split force the tensor-core
// GEMV's K split, as FP8's, on the window kernel's line loads (4-bit 28672 x 8192, the
// planner's 2) and on the register tile (8192 x 8192 at blocks of 16, its 4).
TEST_F(NBitsEnvTest, GemvKSplit) {
  testing::expect_k_split_forced(nbits_matmul_options_from_env, "BQMM_NBITS_GEMV_KSPLIT",
                                 problem(1, 28672, 8192, 4, 128));
  testing::expect_k_split_forced(nbits_matmul_options_from_env, "BQMM_NBITS_GEMV_KSPLIT",
                                 problem(2, 8192, 8192, 4, 16));
  // The CUDA-core kernels have none.
  NBitsMatMulOptions o;
  o.gemv_k_split = 4;
  EXPECT_EQ(plan(problem(1, 8192, 8192, 8, 128), kHopper, o).gemv_k_split, 0);
}

TEST_F(NBitsEnvTest, UnsetKeepsDefaults) {
  NBitsMatMulOptions o;
  ASSERT_TRUE(nbits_matmul_options_from_env(&o).ok());
  EXPECT_EQ(o.dequant_scratch_bytes, 256 * kMiB);
  EXPECT_EQ(o.gemv_algo, -1);
  EXPECT_TRUE(o.allow_gemv);
}

TEST_F(NBitsEnvTest, GemvAlgoOverride) {
  for (int algo : {0, 1, 2}) {
    setenv("BQMM_NBITS_GEMV_ALGO", std::to_string(algo).c_str(), 1);
    NBitsMatMulOptions o;
    ASSERT_TRUE(nbits_matmul_options_from_env(&o).ok());
    EXPECT_EQ(o.gemv_algo, algo);
    EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, o).gemv_algo, algo);
  }
  testing::expect_env_rejects(nbits_matmul_options_from_env, "BQMM_NBITS_GEMV_ALGO",
                              &NBitsMatMulOptions::gemv_algo, {"3", "-1", "x", "1.5"});
}

NBitsMatMulOptions with_env(const char* var, const char* value) {
  return testing::options_with_env(nbits_matmul_options_from_env, var, value);
}

// Each GEMV kernel switch: parsed from its variable (0 or 1; anything else an error that
// names it), and the planner follows it both ways, on a case whose default it flips.
TEST_F(NBitsEnvTest, GemvSwitchOverrides) {
  // Rows of 8256 bytes: no line loads (on whole lines: two tiles of them).
  const NBitsMatMulProblem tma_by_default = problem(2, 28672, 8192 + 64, 8, 64);
  const testing::PlanSwitch<NBitsMatMulProblem> switches[] = {
      {"BQMM_NBITS_GEMV_TMA", &NBitsMatMulOptions::gemv_tma, &NBitsMatMulPlan::gemv_tma,
       problem(1, 4096, 4096, 8, 128), tma_by_default},
      {"BQMM_NBITS_GEMV_FMA", &NBitsMatMulOptions::gemv_fma, &NBitsMatMulPlan::gemv_fma,
       problem(2, 4096, 4096, 8, 128), problem(1, 4096, 4096, 8, 128)},
      {"BQMM_NBITS_GEMV_WINDOW", &NBitsMatMulOptions::gemv_window, &NBitsMatMulPlan::gemv_window,
       problem(3, 4096, 14336, 4, 128), problem(1, 8192, 8192, 4, 128)},
      {"BQMM_NBITS_GEMV_LINES", &NBitsMatMulOptions::gemv_lines, &NBitsMatMulPlan::gemv_lines,
       problem(8, 4096, 14336, 4, 128), problem(1, 28672, 8192, 4, 128)},
  };
  testing::expect_switch_overrides(nbits_matmul_options_from_env, switches);
  // The window kernel forced wins over TMA tiles forced.
  NBitsMatMulOptions tma = with_env("BQMM_NBITS_GEMV_WINDOW", "1");
  tma.gemv_tma = 1;
  EXPECT_TRUE(plan(problem(1, 28672, 8192, 4, 128), kHopper, tma).gemv_window);
}

// BQMM_NBITS_GEMV_TILES: 1 or 2 tiles per warp of line loads, as FP8's.
TEST_F(NBitsEnvTest, GemvTilesFromEnv) {
  testing::expect_tiles_from_env(nbits_matmul_options_from_env, "BQMM_NBITS_GEMV_TILES",
                                 problem(4, 8192, 8192, 8, 128), problem(4, 28672, 8192, 8, 128));
}

// BQMM_NBITS_GEMV_REGISTERS: 128 or 168 forces the two-tile kernel's register bound.
TEST_F(NBitsEnvTest, GemvRegistersFromEnv) {
  testing::expect_registers_from_env(nbits_matmul_options_from_env, "BQMM_NBITS_GEMV_REGISTERS",
                                     problem(1, 20480, 8192, 4, 128),
                                     problem(1, 28672, 8192, 4, 128));
}

TEST_F(NBitsEnvTest, ScratchOverride) {
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "64", 1);
  NBitsMatMulOptions o;
  ASSERT_TRUE(nbits_matmul_options_from_env(&o).ok());
  EXPECT_EQ(o.dequant_scratch_bytes, 64 * kMiB);
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "0", 1);
  EXPECT_EQ(nbits_matmul_options_from_env(&o).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bqmm
