// plan_fp8_matmul's dispatch decisions at their boundaries, its tiling and workspace
// layout, the kernel choices a PlanOverride forces, and BQMM_DEQUANT_SCRATCH_MIB.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "bqmm/fp8_matmul.h"
#include "common/plan_testing.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/gemv_split.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

Fp8MatMulProblem problem(int64_t m, int64_t n, int64_t k, int64_t block_size = 128,
                         DType dtype = DType::kFloat16) {
  return fp8_problem(m, n, k, block_size, dtype);
}

const DeviceInfo kAllDevices[] = {kHopper, kAmpere, kTuring};

TEST(Fp8Plan, PathNames) {
  EXPECT_STREQ(fp8_path_name(Fp8Path::kEmpty), "empty");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kBiasOnly), "bias_only");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kGemvFma), "gemv_fma");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kGemvMma), "gemv_mma");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kW8a8Gemm), "w8a8_gemm");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kW8a8Cublaslt), "w8a8_cublaslt");
  EXPECT_STREQ(fp8_path_name(Fp8Path::kFusedGemm), "fused_gemm");
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
  EXPECT_EQ(pl.gemv.k_split, 8);
  EXPECT_EQ(pl.workspace_bytes, 0u);
}

// M = 1 streams faster on CUDA cores (H200; choose_tensor_cores' comment): the tensor cores start at M = 2 by
// default; fma=0 takes them from M = 1 (the original design's rule), fma=1 never.
TEST(Fp8Plan, GemvMmaStartsAtTwoRows) {
  for (const DeviceInfo& d : {kHopper, kAmpere}) {
    EXPECT_EQ(path(problem(1, 4096, 4096), d), Fp8Path::kGemvFma);
    EXPECT_EQ(path(problem(2, 4096, 4096), d), Fp8Path::kGemvMma);
    EXPECT_EQ(path(problem(3, 4096, 4096), d), Fp8Path::kGemvMma);
  }
  const Fp8MatMulPlan fma = plan(problem(1, 4096, 4096));
  EXPECT_TRUE(fma.gemv.fma);
  EXPECT_EQ(fma.gemv.rows, 1);
  EXPECT_FALSE(plan(problem(2, 4096, 4096)).gemv.fma);
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, parsed("fma=0")), Fp8Path::kGemvMma);
  EXPECT_EQ(path(problem(1, 4096, 4096), kAmpere, parsed("fma=0")), Fp8Path::kGemvMma);
  EXPECT_EQ(path(problem(8, 4096, 4096), kHopper, parsed("fma=1")), Fp8Path::kGemvFma);
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, parsed("fma=1")).gemv.rows, 8);
  // fma=0 where the tensor-core kernel does not apply: the CUDA-core one all the same.
  EXPECT_EQ(path(problem(1, 4096, 4096), kTuring, parsed("fma=0")), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(2, 4096, 4112, 16), kHopper, parsed("fma=0")), Fp8Path::kGemvFma);
  testing::expect_switch_rejects_out_of_range(problem(1, 4096, 4096), PlanOverride{},
                                              &PlanOverride::fma, "fma");
}

// gemv_mma's K split, the wave model of core/gemv_split.h with 132 x 16 resident warps:
// cost = waves x (K / 64 / k_split + 2), the cheapest wins, the larger on a tie. (Line
// loads deal out pairs of windows: GemvLinesWhereMeasuredFasterOrWhenAsked.)
TEST(Fp8Plan, GemvMmaKSplitBalancesWavesAndWindows) {
  const auto plan = [](const Fp8MatMulProblem& p, const DeviceInfo& d = kHopper,
                       PlanOverride o = {}) {
    o.lines = 0;
    return testing::plan(p, d, o);
  };
  // 256 tiles x 8 warps = one wave: 64 windows / 8 + 2 = 10.
  EXPECT_EQ(plan(problem(4, 4096, 4096)).gemv.k_split, 8);
  EXPECT_EQ(plan(problem(8, 4096, 14336)).gemv.k_split, 8);
  // 512 tiles: k_split 4 is one wave (32 + 2), 8 two (2 x 18).
  EXPECT_EQ(plan(problem(4, 8192, 8192)).gemv.k_split, 4);
  // 896 tiles: k_split 2 is one wave (34), 4 two (2 x 18).
  EXPECT_EQ(plan(problem(4, 14336, 4096)).gemv.k_split, 2);
  // 1792 tiles: 7 waves of k_split 8 (7 x 18 = 126) against one of k_split 1 (130).
  // (Fragment register loads forced: by default this layer takes line loads of two tiles
  // per warp, below.)
  PlanOverride regs;
  regs.tma = 0;
  regs.lines = 0;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, regs).gemv.k_split, 8);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kAmpere, regs).gemv.k_split, 8);
  // K = 256 is 4 windows: at most k_split 4.
  EXPECT_EQ(plan(problem(4, 16, 256)).gemv.k_split, 4);
  // 108 SMs hold 1728 warps: 512 tiles take 2 waves at k_split 4 (2 x 34) and 3 at
  // k_split 8 (3 x 18).
  EXPECT_EQ(plan(problem(4, 8192, 8192), kAmpere).gemv.k_split, 8);
  // An unknown SM count is one SM, never a division by zero.
  EXPECT_EQ(plan(problem(4, 4096, 4096), DeviceInfo{90, 0}).gemv.k_split, 1);
}

// SM90+: TMA tiles where they pay (weights of 128 Mi codes and more) but line loads do
// not apply (K % 128 == 64), or as forced; their K split deals out 128-byte tiles instead
// of 64-byte windows.
TEST(Fp8Plan, GemvTmaWhereLineLoadsDoNotApplyOrWhenAsked) {
  const int64_t k = 8192 + 64;  // rows of 64 lines and a half
  EXPECT_TRUE(plan(problem(2, 16384, k)).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 28672, k, 128, DType::kBFloat16)).gemv.tma);
  EXPECT_FALSE(plan(problem(2, 16000, k)).gemv.tma);  // 132 M codes: below 128 Mi
  EXPECT_FALSE(plan(problem(4, 28672, k), kAmpere).gemv.tma);  // no TMA below SM90
  EXPECT_FALSE(plan(problem(4, 28672, 8192)).gemv.tma);  // line loads apply (below)
  EXPECT_FALSE(plan(problem(4, 8192, 8192)).gemv.tma);
  // 1792 tiles, 65 tiles per row: one wave of k_split 1 (65 + 2) against two of 2 (2 x 35).
  EXPECT_EQ(plan(problem(4, 28672, k)).gemv.k_split, 1);
  EXPECT_NE(printed(plan(problem(4, 28672, k))).find("tma=1; lines=0; tiles=1"), std::string::npos);

  PlanOverride o;
  o.tma = 1;  // forced: in place of line loads too
  EXPECT_TRUE(plan(problem(8, 4096, 4096), kHopper, o).gemv.tma);
  EXPECT_TRUE(plan(problem(8, 28672, 8192), kHopper, o).gemv.tma);
  EXPECT_FALSE(plan(problem(8, 28672, 8192), kHopper, o).gemv.lines);
  EXPECT_FALSE(plan(problem(8, 4096, 4096), kAmpere, o).gemv.tma);
  // 256 tiles, 32 tiles per row: one wave of k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv.k_split, 8);
  // K = 320: 3 TMA tiles (the last a half tile), so k_split 2 at most.
  EXPECT_EQ(plan(problem(8, 16, 320), kHopper, o).gemv.k_split, 2);
  o.tma = 0;
  EXPECT_FALSE(plan(problem(4, 28672, k), kHopper, o).gemv.tma);
  testing::expect_switch_rejects_out_of_range(problem(4, 4096, 4096), o, &PlanOverride::tma,
                                              "tma");
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
          EXPECT_FALSE(h.gemv.lines);
          continue;
        }
        ASSERT_EQ(h.path, Fp8Path::kGemvMma);
        const int tiles = n * k >= 128 * kMiB ? 2 : 1;
        EXPECT_TRUE(h.gemv.lines) << h;
        EXPECT_FALSE(h.gemv.tma) << h;
        EXPECT_EQ(h.gemv.tiles, tiles) << h;
        EXPECT_EQ(h.gemv.k_split,
                  choose_gemv_k_split(gemv_split_model(n / tiles, k / 128, kHopper.num_sms,
                                                       kGemvTensorCoreWarpsPerSm)))
            << h;
        // No TMA below SM90: the same streams.
        EXPECT_EQ(plan(problem(m, n, k, 128, t), kAmpere).gemv.tiles, tiles);
        EXPECT_TRUE(plan(problem(m, n, k, 128, t), kAmpere).gemv.lines);
      }
  // Rows of whole lines only: K = 320 or 4160 (K % 128 == 64) keeps register loads.
  for (const int64_t k : {320, 4160}) {
    EXPECT_FALSE(plan(problem(2, 4096, k)).gemv.lines) << k;
    EXPECT_EQ(plan(problem(2, 4096, k)).gemv.tiles, 1) << k;
    EXPECT_EQ(plan(problem(2, 4096, k)).path, Fp8Path::kGemvMma) << k;
  }
  EXPECT_TRUE(plan(problem(2, 4096, 384)).gemv.lines);
  // 256 tiles, 32 pairs per row: one wave at k_split 8 (4 + 2).
  EXPECT_EQ(plan(problem(2, 4096, 4096)).gemv.k_split, 8);
  EXPECT_NE(printed(plan(problem(2, 4096, 4096))).find("tma=0; lines=1; tiles=1"), std::string::npos);

  PlanOverride o;
  o.lines = 0;  // never: fragment register loads, or TMA tiles where they pay
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, o).gemv.lines);
  EXPECT_FALSE(plan(problem(8, 28672, 8192, 128, DType::kBFloat16), kHopper, o).gemv.lines);
  EXPECT_TRUE(plan(problem(8, 28672, 8192, 128, DType::kBFloat16), kHopper, o).gemv.tma);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv.tiles, 1);
  o.lines = 1;  // wherever they apply (the default)
  EXPECT_TRUE(plan(problem(2, 28672, 8192), kHopper, o).gemv.lines);
  EXPECT_FALSE(plan(problem(2, 4096, 320), kHopper, o).gemv.lines);
  EXPECT_EQ(plan(problem(1, 4096, 4096), kHopper, o).path, Fp8Path::kGemvFma);
  o.tma = 1;  // forced TMA tiles win over forced line loads
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, o).gemv.lines);
  EXPECT_TRUE(plan(problem(2, 4096, 4096), kHopper, o).gemv.tma);
  testing::expect_switch_rejects_out_of_range(problem(4, 4096, 4096), o, &PlanOverride::lines,
                                              "lines");
}

// Two 16-column tiles per warp: by default where line loads run on weights of 128 Mi codes
// and more (measured faster there on the H200), or as forced; never without line loads.
TEST(Fp8Plan, GemvTwoTilesPerWarpOnLargeWeights) {
  const int64_t n_at_limit = (int64_t{128} << 20) / 8192;  // 16384
  EXPECT_EQ(plan(problem(2, n_at_limit, 8192)).gemv.tiles, 2);
  EXPECT_EQ(plan(problem(2, n_at_limit - 16, 8192)).gemv.tiles, 1);
  // 896 two-tile warps of 64 pairs: one wave of k_split 2 (32 + 2) against two of 4
  // (2 x 18); one tile per warp would take k_split 1 (64 + 2 against 2 x 34).
  const Fp8MatMulPlan large = plan(problem(8, 28672, 8192));
  EXPECT_EQ(large.gemv.tiles, 2);
  EXPECT_EQ(large.gemv.k_split, 2);
  EXPECT_NE(printed(large).find("k_split=2; tma=0; lines=1; tiles=2"), std::string::npos) << large;
  PlanOverride o;
  EXPECT_EQ(o.tiles, -1);
  o.tiles = 1;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv.k_split, 1);
  o.tiles = 2;
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv.tiles, 2);
  // 128 two-tile warps, 32 pairs: k_split 8 (one wave, 4 + 2).
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv.k_split, 8);
  EXPECT_EQ(plan(problem(8, 4096, 4160), kHopper, o).gemv.tiles, 1);  // no lines
  o.lines = 0;
  EXPECT_EQ(plan(problem(8, 4096, 4096), kHopper, o).gemv.tiles, 1);
  o.lines = -1;
  o.tma = 1;
  EXPECT_EQ(plan(problem(8, 28672, 8192), kHopper, o).gemv.tiles, 1);
  o.tma = -1;
  testing::expect_override_rejects(problem(8, 4096, 4096), o, &PlanOverride::tiles, "tiles",
                                   {-2, 0, 3});
}

// The dependent launch: one tile of line loads without static W8A8 at M = 2..8 on SM90
// where the caller's option gemv_dependent_launch allows it or where forced (gemv_pdl=1),
// and the CUDA-core kernel at M = 1 only where forced; never by default, on Ampere, with
// two tiles, TMA tiles, fragment loads, W8A8, row groups or the CUDA-core kernel above one
// row.
TEST(Fp8Plan, GemvDependentLaunchWhereAllowed) {
  if (!sm90_code_built())
    GTEST_SKIP() << "this build has no SM90 code: its GEMVs launch plainly (see GemvDependentLaunchNeedsSm90Code)";
  const PlanOverride on = parsed("gemv_pdl=1");
  Fp8MatMulOptions option;
  option.gemv_dependent_launch = true;
  for (const int64_t m : {2, 4, 8}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    EXPECT_FALSE(plan(problem(m, 4096, 4096)).gemv.dependent_launch);
    EXPECT_FALSE(plan(problem(m, 4096, 4096), kHopper, parsed("gemv_pdl=0")).gemv.dependent_launch);
    EXPECT_FALSE(plan(problem(m, 4096, 4096), kHopper, option, parsed("gemv_pdl=0")).gemv.dependent_launch);
    EXPECT_TRUE(plan(problem(m, 4096, 4096), kHopper, option).gemv.dependent_launch);
    const Fp8MatMulPlan dep = plan(problem(m, 4096, 4096), kHopper, on);
    EXPECT_TRUE(dep.gemv.dependent_launch) << dep;
    EXPECT_NE(printed(dep).find("lines=1; tiles=1; dependent_launch=yes"), std::string::npos) << dep;
    EXPECT_FALSE(plan(problem(m, 4096, 4096), kAmpere, on).gemv.dependent_launch);
    EXPECT_FALSE(plan(problem(m, 28672, 8192), kHopper, on).gemv.dependent_launch);  // two tiles
    EXPECT_FALSE(plan(problem(m, 4096, 4096), kHopper, parsed("gemv_pdl=1,lines=0")).gemv.dependent_launch);
    EXPECT_FALSE(plan(problem(m, 4096, 4096), kHopper, parsed("gemv_pdl=1,tma=1")).gemv.dependent_launch);
    Fp8MatMulProblem w8a8 = problem(m, 4096, 4096);
    w8a8.has_a_scale = true;
    EXPECT_FALSE(plan(w8a8, kHopper, on).gemv.dependent_launch);
    Fp8MatMulProblem dynamic = problem(m, 4096, 4096);
    dynamic.dynamic_act_quant = true;
    EXPECT_TRUE(plan(dynamic, kHopper, on).gemv.dependent_launch);  // after its QDQ pass
  }
  // The CUDA-core kernel at one row (M = 1), without static W8A8, on SM90.
  const Fp8MatMulPlan fma = plan(problem(1, 4096, 4096), kHopper, on);
  ASSERT_EQ(fma.path, Fp8Path::kGemvFma);
  EXPECT_TRUE(fma.gemv.dependent_launch) << fma;
  EXPECT_NE(printed(fma).find("rows_per_warp=1; dependent_launch=yes"), std::string::npos) << fma;
  EXPECT_FALSE(plan(problem(1, 4096, 4096)).gemv.dependent_launch);
  EXPECT_FALSE(plan(problem(1, 4096, 4096), kHopper, option).gemv.dependent_launch);  // forced only
  EXPECT_FALSE(plan(problem(1, 4096, 4096), kAmpere, on).gemv.dependent_launch);
  Fp8MatMulProblem fma_w8a8 = problem(1, 4096, 4096);
  fma_w8a8.has_a_scale = true;
  EXPECT_FALSE(plan(fma_w8a8, kHopper, on).gemv.dependent_launch);
  const Fp8MatMulPlan fma2 = plan(problem(2, 4096, 4096), kHopper, parsed("gemv_pdl=1,fma=1"));
  ASSERT_EQ(fma2.path, Fp8Path::kGemvFma);
  EXPECT_FALSE(fma2.gemv.dependent_launch) << fma2;  // two rows per warp
  const Fp8MatMulPlan groups = plan(problem(16, 4096, 4096), kHopper, parsed("gemv_pdl=1,gemm=0"));
  EXPECT_FALSE(groups.gemv.dependent_launch) << groups;
}

// A build without SM90 code (CUDA_ARCHITECTURES 80 alone) runs on an SM90 GPU from PTX
// that has no griddepcontrol.wait: no GEMV plan launches as a dependent there.
TEST(Fp8Plan, GemvDependentLaunchNeedsSm90Code) {
  const PlanOverride on = parsed("gemv_pdl=1");
  EXPECT_EQ(plan(problem(4, 4096, 4096), kHopper, on).gemv.dependent_launch, sm90_code_built());
  const Fp8MatMulPlan fma = plan(problem(1, 4096, 4096), kHopper, on);
  ASSERT_EQ(fma.path, Fp8Path::kGemvFma);
  EXPECT_EQ(fma.gemv.dependent_launch, sm90_code_built()) << fma;
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
  EXPECT_EQ(plan(problem(2, 8192, 8192)).gemv.tiles, 1);
  EXPECT_EQ(plan(problem(2, 8192, 8192)).gemv.registers, 0);
  EXPECT_NE(printed(plan(problem(2, 20480, 8192))).find("tiles=2; regs=168;"), std::string::npos);
  EXPECT_EQ(printed(plan(problem(2, 8192, 8192))).find("regs="), std::string::npos);
  // Forced.
  PlanOverride o;
  o.registers = kGemvWideRegisters;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192, 128, bf16), kHopper, o)), wide(2));
  EXPECT_EQ(regs_split(plan(problem(2, 45056, 8192), kHopper, o)).first, kGemvWideRegisters);
  EXPECT_GE(plan(problem(2, 45056, 8192), kHopper, o).gemv.k_split, 2);
  EXPECT_EQ(plan(problem(2, 8192, 8192), kHopper, o).gemv.registers, 0);  // one tile
  o.k_split = 8;  // the 168-register kernel's blocks hold 4 warps
  testing::expect_rejected(problem(2, 20480, 8192), o,
                           "plan override: registers=168 holds k_split up to 4, but k_split=8");
  testing::expect_rejected(problem(2, 20480, 8192), parsed("registers=168,k_split=8"),
                           "registers=168");
  o.registers = -1;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192), kHopper, o)), narrow(8));
  o.k_split = 0;
  o.registers = kGemvTwoTileRegisters;
  EXPECT_EQ(regs_split(plan(problem(2, 20480, 8192), kHopper, o)), narrow(8));
  testing::expect_override_rejects(problem(2, 20480, 8192), o, &PlanOverride::registers,
                                   "registers", {0, 127, 160, 256, -2});
}

// With the fused GEMM forced off (gemm=0: the plans before it), above 8 rows the line-load
// kernel takes row groups of 16 (K % 128 == 0, SM80+), up to kGemvFusedMaxRows (measured
// faster than dequant + cuBLAS there); everything else above 8 rows is dequant + cuBLAS.
TEST(Fp8Plan, RowGroupsUpToTheFusedLimitWithoutTheGemm) {
  const PlanOverride off = without_gemm();
  for (int64_t m : {9, 16, 17, 25, 32}) {
    SCOPED_TRACE(m);
    const Fp8MatMulPlan pl = plan(problem(m, 4096, 4096), kHopper, off);
    EXPECT_EQ(pl.path, Fp8Path::kGemvMma);
    EXPECT_TRUE(pl.gemv.lines);
    EXPECT_EQ(pl.gemv.row_groups, (m + 15) / 16);
    EXPECT_EQ(pl.workspace_bytes, 0u);
    EXPECT_NE(printed(pl).find("row_groups=" + std::to_string((m + 15) / 16)), std::string::npos);
    EXPECT_EQ(path(problem(m, 4096, 4096), kAmpere, off), Fp8Path::kGemvMma);
    EXPECT_EQ(path(problem(m, 4096, 4096), kTuring, off), Fp8Path::kDequantGemm);
    // By default one row group (M <= 16) below 128 Mi weights, else the fused GEMM.
    EXPECT_EQ(path(problem(m, 4096, 4096)), m <= 16 ? Fp8Path::kGemvMma : Fp8Path::kFusedGemm);
  }
  EXPECT_EQ(plan(problem(8, 4096, 4096)).gemv.row_groups, 1);
  EXPECT_EQ(path(problem(kGemvFusedMaxRows + 1, 4096, 4096), kHopper, off),
            Fp8Path::kDequantGemm);
  // No line loads, no row groups: K % 128 == 64, or line loads or the tensor cores
  // forced off.
  EXPECT_EQ(path(problem(16, 4096, 4160), kHopper, off), Fp8Path::kDequantGemm);
  EXPECT_EQ(path(problem(2, 4096, 4160)), Fp8Path::kGemvMma);
  for (const char* o : {"gemm=0,lines=0", "gemm=0,tma=1", "gemm=0,fma=1", "gemm=0,gemv=0"})
    EXPECT_EQ(path(problem(16, 4096, 4096), kHopper, parsed(o)), Fp8Path::kDequantGemm) << o;
}

// Each row group is a copy of the grid in the K split's wave model: 8192 x 8192 takes a
// smaller split at 32 rows than at 8.
TEST(Fp8Plan, RowGroupsCountInTheWaveModel) {
  const int at8 = plan(problem(8, 8192, 8192)).gemv.k_split;
  const int at32 = plan(problem(32, 8192, 8192), kHopper, without_gemm()).gemv.k_split;
  EXPECT_LT(at32, at8);
  EXPECT_EQ(plan(problem(32, 28672, 8192), kHopper, without_gemm()).gemv.tiles, 2);
}

// By default M = 9..16 takes one row group of the line-load GEMV (no workspace) below 128
// Mi weights, float16 on 64 Mi or more up to 12 rows; the fused GEMM elsewhere, and
// wherever forced (gemm=1 or its own keys).
TEST(Fp8Plan, RowGroupInTheFusedGemmsPlaceToSixteenRows) {
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const int64_t m : {9, 12, 13, 16}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m);
      const Fp8MatMulPlan small = plan(problem(m, 14336, 4096, 128, t));  // 56 Mi
      EXPECT_EQ(small.path, Fp8Path::kGemvMma);
      EXPECT_EQ(small.gemv.row_groups, 1);
      EXPECT_EQ(small.gemv.tiles, 1);
      EXPECT_TRUE(small.gemv.lines);
      EXPECT_EQ(small.workspace_bytes, 0u);
      EXPECT_NE(printed(small).find("; row_groups=1;"), std::string::npos) << printed(small);
      const bool group = t == DType::kBFloat16 || m <= 12;
      EXPECT_EQ(path(problem(m, 8192, 8192, 128, t)),  // 64 Mi
                group ? Fp8Path::kGemvMma : Fp8Path::kFusedGemm);
      EXPECT_EQ(path(problem(m, 28672, 8192, 128, t)), Fp8Path::kFusedGemm);  // 224 Mi
      for (const char* o : {"gemm=1", "wgmma=0", "tile_m=16", "gemm_k_split=2"})
        EXPECT_EQ(path(problem(m, 14336, 4096, 128, t), kHopper, parsed(o)), Fp8Path::kFusedGemm) << o;
    }
  EXPECT_EQ(path(problem(17, 4096, 4096)), Fp8Path::kFusedGemm);
  EXPECT_EQ(path(problem(17, 4096, 4096), kHopper, parsed("gemm=0")), Fp8Path::kGemvMma);
}

// ------------------------------------------------------------------ fused GEMM
// M <= 8 is the decode GEMV's, 8 < M <= kGemmMaxRows (128) the fused GEMM's, on every
// SM80+ device, but with bfloat16 activations from 96 rows where its tiles fill 3/4 of the
// SMs the mixed-input GEMM's where it is built on SM90; above 128 rows, without it,
// dequant + cuBLAS. It needs none of the GEMV's K or block multiples of 64 or
// 128, so the GEMV's keys leave it alone.
TEST(Fp8Plan, FusedGemmAboveTheDecodeRows) {
  EXPECT_EQ(kGemmMaxRows, 128);
  for (const DeviceInfo& d : {kHopper, kAmpere}) {
    const bool mixed = d.sm == 90 && mixed_gemm_built();  // tests/cpu/mixed_plan_test.cc
    EXPECT_EQ(path(problem(8, 4096, 4096), d), Fp8Path::kGemvMma);
    for (int64_t m : {17, 32, 33, 64, 80}) {
      EXPECT_EQ(path(problem(m, 4096, 4096), d), Fp8Path::kFusedGemm) << m;
      EXPECT_EQ(path(problem(m, 4096, 4096, 128, DType::kBFloat16), d), Fp8Path::kFusedGemm) << m;
    }
    // From 96 rows, with bfloat16 activations and 112 tiles of 128 weight rows (N = 14336),
    // the mixed-input GEMM where built (tests/cpu/mixed_plan_test.cc), else the fused GEMM
    // to 128 rows; with 32 tiles (N = 4096) the fused GEMM.
    for (int64_t m : {100, 128}) {
      EXPECT_EQ(path(problem(m, 4096, 4096), d), Fp8Path::kFusedGemm) << m;
      EXPECT_EQ(path(problem(m, 4096, 4096, 128, DType::kBFloat16), d), Fp8Path::kFusedGemm) << m;
      EXPECT_EQ(path(problem(m, 14336, 4096), d), Fp8Path::kFusedGemm) << m;
      EXPECT_EQ(path(problem(m, 14336, 4096, 128, DType::kBFloat16), d),
                mixed ? Fp8Path::kMixedGemm : Fp8Path::kFusedGemm)
          << m;
    }
    EXPECT_EQ(path(problem(128, 4096, 4096), d, parsed("mixed=0")), Fp8Path::kFusedGemm);
    for (int64_t m : {129, 256, 4096, 65536}) {
      EXPECT_EQ(fp8_mixed_gemm_refusal(problem(m, 4096, 4096), d, {}) == nullptr, mixed) << m;
      EXPECT_EQ(path(problem(m, 4096, 4096), d), mixed ? Fp8Path::kMixedGemm : Fp8Path::kDequantGemm) << m;
      EXPECT_EQ(path(problem(m, 4096, 4096), d, parsed("mixed=0")), Fp8Path::kDequantGemm) << m;
    }
  }
  EXPECT_EQ(path(problem(9, 4096, 4160)), Fp8Path::kFusedGemm);     // K % 128 == 64
  EXPECT_EQ(path(problem(9, 4096, 4112, 16)), Fp8Path::kFusedGemm);  // blocks of 16
  EXPECT_EQ(path(problem(9, 4096, 4096, 32)), Fp8Path::kFusedGemm);
  EXPECT_EQ(path(problem(9, 37, 16, 16)), Fp8Path::kFusedGemm);     // one chunk per row
  for (const char* o : {"lines=0", "tma=1", "fma=1", "gemv=0", "gemm=1", "tile_m=16"})
    EXPECT_EQ(path(problem(16, 4096, 4096), kHopper, parsed(o)), Fp8Path::kFusedGemm) << o;
  const Fp8MatMulPlan pl = plan(problem(17, 4096, 4096));
  EXPECT_EQ(pl.gemv.k_split, 0);  // GEMV and dequant parts stay empty
  EXPECT_EQ(pl.dequant.n_tile, 0);
  EXPECT_FALSE(pl.dequant.qdq_activation);
}

// What sends M > 8 to dequant + cuBLAS instead: below SM80, K % 16 != 0 (rows of B not
// whole 16-byte chunks; K % 8 != 0 too), block sizes not a multiple of 16, pointers not
// 16-byte aligned; fp8_fused_gemm_refusal names the first condition that fails.
TEST(Fp8Plan, FusedGemmConditions) {
  const auto refusal = [](const Fp8MatMulProblem& p, const DeviceInfo& d = kHopper,
                          const PlanOverride& o = {}) -> std::string {
    const char* why = fp8_fused_gemm_refusal(p, d, o);
    return why == nullptr ? "" : why;
  };
  EXPECT_EQ(refusal(problem(17, 4096, 4096)), "");
  EXPECT_EQ(path(problem(17, 4096, 4096), kTuring), Fp8Path::kDequantGemm);
  EXPECT_EQ(path(problem(17, 4096, 4096), DeviceInfo{80, 108}), Fp8Path::kFusedGemm);
  EXPECT_EQ(refusal(problem(17, 4096, 4096), kTuring), "tensor cores need SM80+");
  EXPECT_EQ(path(problem(17, 4096, 4104)), Fp8Path::kDequantGemm);
  EXPECT_EQ(refusal(problem(17, 4096, 4104)), "K % 16 != 0 (rows of B not whole 16-byte chunks)");
  EXPECT_EQ(path(problem(17, 4096, 4100)), Fp8Path::kDequantGemm);
  EXPECT_EQ(refusal(problem(17, 4096, 4100)), "K % 8 != 0");
  // Blocks of whole chunks take it, powers of two or not (48: three chunks a scale).
  for (int64_t block : {16, 48, 80, 4096})
    EXPECT_EQ(path(problem(17, 4096, 4096, block)), Fp8Path::kFusedGemm) << block;
  for (int64_t block : {8, 24, 40, 100}) {
    EXPECT_EQ(path(problem(17, 4096, 4096, block)), Fp8Path::kDequantGemm) << block;
    EXPECT_EQ(refusal(problem(17, 4096, 4096, block)),
              "block_size % 16 != 0 (a chunk would span two scales)")
        << block;
  }
  for (int align : {1, 2, 4, 8}) {
    Fp8MatMulProblem p = problem(17, 4096, 4096);
    p.alignment = align;
    EXPECT_EQ(path(p), Fp8Path::kDequantGemm) << align;
    EXPECT_EQ(refusal(p), "pointers not 16-byte aligned") << align;
  }
  // The trivial paths and the decode rows, and the override, say so.
  EXPECT_EQ(refusal(problem(0, 4096, 4096)), "empty output");
  EXPECT_EQ(refusal(problem(17, 4096, 0)), "K == 0: Y = bias");
  EXPECT_EQ(refusal(problem(8, 4096, 4096)), "M <= 8 (the decode GEMV's rows)");
  EXPECT_EQ(refusal(problem(129, 4096, 4096)),
            "M > 128 (kGemmMaxRows): dequant + cuBLAS is faster there");
  EXPECT_EQ(refusal(problem(17, 4096, 4096), kHopper, parsed("gemm=0")), "gemm=0 (plan override)");
  EXPECT_EQ(refusal(problem(16, 4096, 4096)),
            "M <= 16 below 128 Mi weights (float16 from 64 Mi: M <= 12): the GEMV's row group "
            "of 16 is faster there");
  EXPECT_EQ(refusal(problem(16, 28672, 8192)), "");
  EXPECT_EQ(refusal(problem(16, 4096, 4096), kHopper, parsed("gemm=1")), "");
  EXPECT_EQ(refusal(problem(8, 4096, 4096), kHopper, parsed("gemm=1")), "");
}

// mma.sync tile_m: the smallest instantiated tile (16, 32, 64) holding M; blocks of 128
// columns; the stages two blocks per SM90 SM hold (8-bit rows: 4 at 16 and 32 rows, 3 at
// 64). On SM90 the wgmma mainloop takes these tiles (6 stages), so it is forced off here.
TEST(Fp8Plan, FusedGemmTileM) {
  const std::pair<int64_t, int> cases[] = {{9, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64}, {64, 64}};
  for (const auto& [m, tile_m] : cases) {
    const Fp8MatMulPlan pl = plan(problem(m, 4096, 4096), kHopper, parsed("wgmma=0"));
    ASSERT_EQ(pl.path, Fp8Path::kFusedGemm) << m;
    EXPECT_FALSE(pl.gemm.wgmma) << m;
    EXPECT_EQ(pl.gemm.tile_m, tile_m) << m;
    EXPECT_EQ(pl.gemm.tile_n, 128) << m;
    EXPECT_EQ(pl.gemm.stages, tile_m == 64 ? 3 : 4) << m;
  }
}

// The wgmma mainloop (SM90 builds on SM90): the smallest of tiles 16, 32 and 64 holding M
// to 64 rows, tile 128 above (float16 activations: where 64-row tiles are more than one
// wave), block_size a multiple of 128 (one scale block per slab); mma.sync for FP8 block 64.
TEST(Fp8Plan, FusedGemmWgmma) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  for (const int64_t m : {9, 16, 17, 32, 33, 64, 65, 100, 128}) {
    const Fp8MatMulPlan pl =
        plan(problem(m, 4096, 4096, 128, DType::kBFloat16), kHopper, parsed("mixed=0,gemm=1"));
    ASSERT_EQ(pl.path, Fp8Path::kFusedGemm) << m;
    EXPECT_TRUE(pl.gemm.wgmma) << m;
    const int small = m <= 16 ? 16 : m <= 32 ? 32 : 64;
    EXPECT_EQ(pl.gemm.tile_m, m > 64 ? 128 : small) << m;
    EXPECT_EQ(pl.gemm.stages, m > 64 ? 4 : 6) << m;
    // float16: 64 rows of 4096 are 32 tiles of 64 rows, 28672 are 224 (two waves).
    EXPECT_EQ(plan(problem(m, 4096, 4096), kHopper, parsed("mixed=0,gemm=1")).gemm.tile_m, m > 64 ? 64 : small) << m;
    EXPECT_EQ(plan(problem(m, 28672, 4096), kHopper, parsed("mixed=0,gemm=1")).gemm.tile_m, m > 64 ? 128 : small)
        << m;
  }
  EXPECT_EQ(plan(problem(100, 4096, 4096), kHopper, parsed("mixed=0,tile_m=128")).gemm.tile_m, 128);
  EXPECT_EQ(plan(problem(100, 28672, 4096), kHopper, parsed("mixed=0,tile_m=64")).gemm.tile_m, 64);
  EXPECT_TRUE(plan(problem(64, 4096, 4096, 256)).gemm.wgmma);
  EXPECT_FALSE(plan(problem(64, 4096, 4096, 64)).gemm.wgmma);
  EXPECT_FALSE(plan(problem(64, 4096, 4096), kAmpere).gemm.wgmma);
}

// The K split (core/gemm_plan.h): the power of two with the least waves x (slabs per
// block + stages), waves of SMs x resident blocks (two per SM90 SM at these tiles, one on
// SM80); measured on the H200 it is the fastest of 1, 2, 4, 8 at FP8 8192 x 8192 M = 16
// and 64 (split 4) and 4096 x 14336 M = 16 (split 8).
TEST(Fp8Plan, FusedGemmKSplit) {
  // mma.sync's tiles (two blocks per SM90 SM); M = 16 would take the GEMV's row group.
  const PlanOverride gemm_on = parsed("gemm=1,wgmma=0");
  // M = 16, K = 8192 (64 slabs). N = 8192: 64 blocks; 264 resident: split 4 is one wave
  // of 16 + 4 slabs, 8 one of 8 + 4... but 512 blocks take two: 2 x 12 = 24 > 20.
  EXPECT_EQ(plan(problem(16, 8192, 8192), kHopper, gemm_on).gemm.k_split, 4);
  EXPECT_EQ(plan(problem(64, 8192, 8192), kHopper, parsed("wgmma=0")).gemm.k_split, 4);
  // N = 4096: 32 blocks, 256 at split 8 in one wave (8 + 4 slabs).
  EXPECT_EQ(plan(problem(16, 4096, 8192), kHopper, gemm_on).gemm.k_split, 8);
  // 108 SMs of one block each: 256 blocks are 3 waves (3 x 20 = 60 > 2 waves of 32 + 4 at
  // split 2... and one of 64 + 4 at 1): split 4 costs 60, 2 costs 2 x 36 = 72, 1 costs 68.
  EXPECT_EQ(plan(problem(16, 8192, 8192), kAmpere, gemm_on).gemm.k_split, 4);
  // M = 64 x N = 28672 is 224 blocks, one wave unsplit.
  EXPECT_EQ(plan(problem(64, 28672, 8192)).gemm.k_split, 1);
  // Short K: 8 slabs (K = 1024) of 32 blocks, split 8 (one slab each, 1 + 4 against 2 + 4);
  // 7 slabs (K = 896) at most... the same rule: 4.
  EXPECT_EQ(plan(problem(16, 4096, 1024), kHopper, gemm_on).gemm.k_split, 8);
  EXPECT_EQ(plan(problem(16, 4096, 896), kHopper, gemm_on).gemm.k_split, 4);
  // At most 16: one block of 512 slabs.
  EXPECT_EQ(plan(problem(16, 128, 65536), kHopper, gemm_on).gemm.k_split, kGemmMaxKSplit);
  // An unknown SM count is one SM: no split.
  EXPECT_EQ(plan(problem(16, 4096, 8192), DeviceInfo{90, 0}, gemm_on).gemm.k_split, 1);
  // The planner's tiling is core/gemm_plan.h's rule for 8-bit rows.
  const GemmConfig rule = plan_gemm_tiles(GemmShape{33, 5000, 3072, 8, true, 128}, kHopper);
  const GemmConfig g = plan(problem(33, 5000, 3072)).gemm;
  EXPECT_EQ(std::make_tuple(g.wgmma, g.tile_m, g.tile_n, g.stages, g.k_split),
            std::make_tuple(rule.wgmma, rule.tile_m, rule.tile_n, rule.stages, rule.k_split));
}

// With a K split the float32 partial sums [k_split, M, N] are the workspace, 256-byte
// aligned; without one the fused GEMM needs none.
TEST(Fp8Plan, FusedGemmWorkspace) {
  // mma.sync's tiles; M <= 16 would take the GEMV's row group.
  const PlanOverride gemm_on = parsed("gemm=1,wgmma=0");
  const Fp8MatMulPlan split = plan(problem(16, 8192, 8192), kHopper, gemm_on);  // k_split 4
  EXPECT_EQ(split.regions.partial_offset, 0u);
  EXPECT_EQ(split.regions.partial_bytes, size_t{4} * 16 * 8192 * 4);
  EXPECT_EQ(split.workspace_bytes, size_t{4} * 16 * 8192 * 4);
  EXPECT_EQ(split.regions.act_bytes + split.regions.cublas_bytes + split.regions.scratch_bytes, 0u);
  // M = 9, N = 100, K = 4096: one block of 32 slabs, k_split 16; 57600 bytes (whole
  // 256-byte units) and M = 9, N = 99: 57024 padded to 57088.
  const Fp8MatMulPlan odd = plan(problem(9, 100, 4096), kHopper, gemm_on);
  EXPECT_EQ(odd.gemm.k_split, 16);
  EXPECT_EQ(odd.regions.partial_bytes, 57600u);
  EXPECT_EQ(odd.workspace_bytes, 57600u);
  EXPECT_EQ(plan(problem(9, 99, 4096), kHopper, gemm_on).workspace_bytes, 57088u);
  const Fp8MatMulPlan whole = plan(problem(64, 28672, 8192), kHopper, parsed("wgmma=0"));  // k_split 1
  EXPECT_EQ(whole.regions.partial_bytes, 0u);
  EXPECT_EQ(whole.workspace_bytes, 0u);
  // The Hopper mainloop reads A in its K order from the workspace: M rounded up to the
  // tile x K rounded up to 32.
  if (wgmma_built()) {
    const Fp8MatMulPlan hopper = plan(problem(64, 28672, 8192));
    ASSERT_TRUE(hopper.gemm.wgmma) << hopper;
    EXPECT_EQ(hopper.regions.act_order_offset, 0u);
    EXPECT_EQ(hopper.regions.act_order_bytes, size_t{64} * 8192 * 2);
    EXPECT_EQ(hopper.workspace_bytes, size_t{64} * 8192 * 2);
    const Fp8MatMulPlan tail = plan(problem(40, 1000, 4112));  // K 4112 -> 4128
    ASSERT_TRUE(tail.gemm.wgmma) << tail;
    EXPECT_EQ(tail.regions.act_order_bytes, size_t{64} * 4128 * 2);  // M 40 -> 64
    EXPECT_EQ(tail.regions.partial_offset % 256, 0u);
  }
}

// W8A8 takes the fused GEMM too: A' = QDQ(A) into the workspace's act region first (the
// dequant path's region), then the partial sums; act_bytes > 0 is what says so (the
// dequant part of the plan stays empty), printed as qdq_activation=yes.
// Dynamic activation quantization: A' is made into the act region first on every path,
// the decode GEMV's included (static W8A8 the GEMV fuses itself, with no workspace).
TEST(Fp8Plan, DynamicQuantizationQdqsIntoTheWorkspaceOnEveryPath) {
  Fp8MatMulProblem p = problem(4, 4096, 4096);
  p.dynamic_act_quant = true;
  for (const DeviceInfo d : {kHopper, kTuring}) {
    const Fp8MatMulPlan gemv = plan(p, d);
    ASSERT_TRUE(gemv.path == Fp8Path::kGemvMma || gemv.path == Fp8Path::kGemvFma) << gemv;
    EXPECT_EQ(gemv.regions.act_offset, 0u);
    EXPECT_EQ(gemv.regions.act_bytes, size_t{4} * 4096 * 2);
    EXPECT_EQ(gemv.workspace_bytes, size_t{4} * 4096 * 2);
    EXPECT_NE(printed(gemv).find(" dynamic_act_quant "), std::string::npos) << gemv;
  }
  Fp8MatMulProblem w8a8 = problem(4, 4096, 4096);
  w8a8.has_a_scale = true;
  EXPECT_EQ(plan(w8a8).workspace_bytes, 0u);
  EXPECT_EQ(plan(w8a8).regions.act_bytes, 0u);
  // The fused GEMM (where the W8A8 GEMM is not taken): A' first, then the partial sums
  // (M = 17: K split 2, in planes where no cluster sums it).
  p = problem(17, 8192, 8192);
  p.dynamic_act_quant = true;
  const Fp8MatMulPlan fused = plan(p, kHopper, parsed("w8a8=0,cluster_sum=0,k_halves=0"));
  ASSERT_EQ(fused.path, Fp8Path::kFusedGemm);
  EXPECT_GT(fused.gemm.k_split, 1);
  EXPECT_EQ(fused.regions.act_bytes, size_t{17} * 8192 * 2);
  // then A' in the Hopper mainloop's K order where it runs, then the partial sums
  const size_t ordered = fused.gemm.wgmma ? size_t{32} * 8192 * 2 : 0;  // M 17 -> tile 32
  EXPECT_EQ(fused.regions.act_order_bytes, ordered);
  EXPECT_EQ(fused.regions.partial_offset, size_t{17} * 8192 * 2 + ordered);
  // The GEMV's row group (M = 12): A' as at M <= 8.
  p.m = 12;
  const Fp8MatMulPlan group = plan(p, kHopper, parsed("w8a8=0"));
  ASSERT_EQ(group.path, Fp8Path::kGemvMma);
  EXPECT_EQ(group.workspace_bytes, size_t{12} * 8192 * 2);
  // Dequant + cuBLAS (M > 128): the QDQ pass, then the tiles.
  p = problem(300, 1000, 1000);
  p.dynamic_act_quant = true;
  const Fp8MatMulPlan dq = plan(p);
  ASSERT_EQ(dq.path, Fp8Path::kDequantGemm);
  EXPECT_TRUE(dq.dequant.qdq_activation);
  EXPECT_EQ(dq.regions.act_bytes, size_t{300} * 1000 * 2);
}

// Where the W8A8 GEMM is not taken (forced off here; off SM90, or block_size % 128 != 0),
// W8A8 takes the fused GEMM on A' = QDQ(A).
TEST(Fp8Plan, FusedGemmW8A8QdqsIntoTheWorkspaceFirst) {
  // M = 16: not the GEMV's row group; mma.sync's tile 16 (its partial sums in planes).
  const PlanOverride no_w8a8 = parsed("w8a8=0,gemm=1,wgmma=0");
  Fp8MatMulProblem p = problem(16, 8192, 8192);
  p.has_a_scale = true;
  p.has_bias = true;
  const Fp8MatMulPlan pl = plan(p, kHopper, no_w8a8);
  ASSERT_EQ(pl.path, Fp8Path::kFusedGemm);
  EXPECT_FALSE(pl.dequant.qdq_activation);
  EXPECT_EQ(pl.regions.act_offset, 0u);
  EXPECT_EQ(pl.regions.act_bytes, size_t{16} * 8192 * 2);
  EXPECT_EQ(pl.regions.partial_offset, size_t{16} * 8192 * 2);
  EXPECT_EQ(pl.regions.partial_bytes, size_t{4} * 16 * 8192 * 4);
  EXPECT_EQ(pl.workspace_bytes, size_t{16} * 8192 * 2 + size_t{4} * 16 * 8192 * 4);
  EXPECT_NE(printed(pl).find("qdq_activation=yes; mainloop=mma; tile_m=16; tile_n=128; stages=4; k_split=4; "
                             "workspace=2359296B (act 262144@0, partial 2097152@262144)}"),
            std::string::npos)
      << pl;
  // Odd sizes keep the partial sums 256-byte aligned: M = 9 x K = 4112 x 2 bytes.
  p = problem(9, 100, 4112, 16);
  p.has_a_scale = true;
  const Fp8MatMulPlan odd = plan(p);  // block 16: not the W8A8 GEMM's
  ASSERT_EQ(odd.path, Fp8Path::kFusedGemm);
  EXPECT_EQ(odd.regions.act_bytes, 9u * 4112 * 2);
  EXPECT_EQ(odd.regions.partial_offset, 74240u);  // 74016 padded
  EXPECT_EQ(odd.regions.partial_offset % 256, 0u);
  // Without a K split: the act region alone.
  p = problem(64, 28672, 8192);
  p.has_a_scale = true;
  const Fp8MatMulPlan whole = plan(p, kHopper, no_w8a8);
  EXPECT_EQ(whole.regions.partial_bytes, 0u);
  if (whole.gemm.wgmma) {  // and A' in the Hopper mainloop's K order
    EXPECT_EQ(whole.workspace_bytes, size_t{2} * 64 * 8192 * 2);
    EXPECT_NE(printed(whole).find("workspace=2097152B (act 1048576@0, act_order 1048576@1048576)}"),
              std::string::npos)
        << whole;
  } else {
    EXPECT_EQ(whole.workspace_bytes, size_t{64} * 8192 * 2);
    EXPECT_NE(printed(whole).find("workspace=1048576B (act 1048576@0)}"), std::string::npos) << whole;
  }
}

// The W8A8 GEMMs (FP8 tensor cores: the W8A8 GEMM, cuBLASLt's and CUTLASS's block-scaled
// GEMMs) need SM90 in the build: without it, checks that the planner refuses them for that
// reason and skips the test, saying so.
#define SKIP_WITHOUT_W8A8_GEMMS()                                                               \
  if (!wgmma_built()) {                                                                        \
    Fp8MatMulProblem w8a8_probe = problem(1024, 8192, 8192);                                   \
    w8a8_probe.has_a_scale = true;                                                              \
    EXPECT_STREQ(fp8_w8a8_gemm_refusal(w8a8_probe, kHopper, {}),                               \
                 "this build has no SM90 in CUDA_ARCHITECTURES");                              \
    EXPECT_NE(fp8_w8a8_cublaslt_refusal(w8a8_probe, kHopper, {}), nullptr);                     \
    const Fp8Path w8a8_path = plan(w8a8_probe).path;                                            \
    EXPECT_TRUE(w8a8_path != Fp8Path::kW8a8Gemm && w8a8_path != Fp8Path::kW8a8Cublaslt);       \
    GTEST_SKIP() << "this build has no SM90: checked that the W8A8 GEMMs are refused";          \
  }

// The W8A8 GEMM on FP8 tensor cores: M > 8 with A quantized (static or dynamic) on SM90,
// block_size % 128 == 0, K % 16 == 0; tiles 128 x 128, the K split in whole scale blocks
// by the wave model with the partial planes priced in; codes, dynamic scales, partial sums.
TEST(Fp8Plan, W8A8GemmWhereAIsQuantizedOnHopper) {
  SKIP_WITHOUT_W8A8_GEMMS();
  for (const bool dynamic : {false, true})
    for (const int64_t m : {9, 16, 32, 33, 65, 100, 129, 256, 512, 513, 4096}) {
      Fp8MatMulProblem p = problem(m, 8192, 8192);
      p.has_a_scale = !dynamic;
      p.dynamic_act_quant = dynamic;
      SCOPED_TRACE(::testing::Message() << "M=" << m << (dynamic ? " dynamic" : " static"));
      const Fp8MatMulPlan pl = plan(p, kHopper, parsed("w8a8_cublaslt=0"));
      ASSERT_EQ(pl.path, Fp8Path::kW8a8Gemm) << pl;
      EXPECT_EQ(fp8_w8a8_gemm_refusal(p, kHopper, {}), nullptr);
      EXPECT_TRUE(pl.gemm.wgmma);
      EXPECT_EQ(pl.gemm.tile_m, m <= 32 ? 32 : m <= 64 ? 64 : 128);  // the smallest of 32, 64, 128 holding M
      // Up to 64 rows the 128-row tiles would split K in two: K halves in 64-row tiles.
      EXPECT_EQ(pl.gemm.tile_n, m <= 64 ? kKHalvesTileN : kGemmTileN);
      EXPECT_EQ(pl.gemm.k_split, m <= 64 ? 1 : pl.gemm.k_split);
      EXPECT_EQ(pl.gemm.stages, w8a8_stages(pl.gemm.tile_m, pl.gemm.tile_n));
      EXPECT_EQ(pl.regions.act_bytes, 0u);  // no QDQ'd copy of A in T
      EXPECT_EQ(pl.regions.codes_offset, 0u);
      EXPECT_EQ(pl.regions.codes_bytes, static_cast<size_t>(m) * 8192);
      const size_t scales = dynamic ? size_t{64} * ((m + 127) / 128 * 128) * 4 : 0;
      EXPECT_EQ(pl.regions.act_scales_bytes, scales);
    }
  for (const int tile : {32, 64, 128}) EXPECT_EQ(w8a8_stages(tile), 6) << tile;
  Fp8MatMulProblem forced_tile = problem(40, 8192, 8192);
  forced_tile.has_a_scale = true;
  EXPECT_EQ(plan(forced_tile, kHopper, parsed("tile_m=128")).gemm.tile_m, 128);
  EXPECT_EQ(plan(forced_tile, kHopper, parsed("tile_m=32")).gemm.tile_m, 32);
  EXPECT_EQ(w8a8_tile_m(1), 32);
  EXPECT_EQ(w8a8_tile_m(32), 32);
  EXPECT_EQ(w8a8_tile_m(33), 64);
  EXPECT_EQ(w8a8_tile_m(64), 64);
  EXPECT_EQ(w8a8_tile_m(65), 128);
  EXPECT_EQ(w8a8_tile_m(100000), 128);
  for (const int tile : {32, 64}) EXPECT_EQ(w8a8_stages(tile, kKHalvesTileN), 6) << tile;
  // K split: 64 tiles of 64 one-slab blocks on 132 SMs: 1 -> 70, 2 -> 38, 4 -> 2 x 22.
  Fp8MatMulProblem p = problem(16, 8192, 8192);
  p.dynamic_act_quant = true;
  p.has_bias = true;
  // The split of 2 becomes K halves: 128 tiles of 64 weight rows, unsplit, nothing in the
  // workspace but the codes and scales.
  const Fp8MatMulPlan halves = plan(p, kHopper, parsed("w8a8=1"));
  EXPECT_EQ(halves.gemm.tile_n, kKHalvesTileN);
  EXPECT_EQ(halves.gemm.k_split, 1);
  EXPECT_FALSE(halves.gemm.cluster_reduce);
  EXPECT_EQ(halves.regions.partial_bytes, 0u);
  EXPECT_NE(printed(halves).find("; tile_m=32; tile_n=64; stages=6; k_split=1; dependent_launch=yes; "),
            std::string::npos)
      << halves;
  // A split of 4 of 128-row tiles (4096 x 14336 at M = 64) stays; forced, halves and a
  // split of 2, in planes (clusters sum 128-row tiles only).
  Fp8MatMulProblem narrow = problem(64, 4096, 14336);
  narrow.has_a_scale = true;
  const Fp8MatMulPlan narrow_plan = plan(narrow, kHopper);
  EXPECT_EQ(narrow_plan.gemm.tile_n, kGemmTileN);
  EXPECT_EQ(narrow_plan.gemm.k_split, 4);
  const Fp8MatMulPlan narrow_halves = plan(narrow, kHopper, parsed("k_halves=1"));
  EXPECT_EQ(narrow_halves.gemm.tile_n, kKHalvesTileN);
  EXPECT_EQ(narrow_halves.gemm.k_split, 2);
  EXPECT_FALSE(narrow_halves.gemm.cluster_reduce);
  EXPECT_GT(narrow_halves.regions.partial_bytes, 0u);
  // Never on tiles of 128 rows or one K block; forced wherever those allow; a forced split kept.
  EXPECT_EQ(plan(problem(16, 8192, 128), kHopper, parsed("w8a8=1")).gemm.tile_n, kGemmTileN);
  Fp8MatMulProblem tall = problem(100, 8192, 8192);
  tall.has_a_scale = true;
  EXPECT_EQ(plan(tall, kHopper, parsed("k_halves=1")).gemm.tile_n, kGemmTileN);
  Fp8MatMulProblem wide = problem(64, 28672, 8192);
  wide.has_a_scale = true;
  EXPECT_EQ(plan(wide, kHopper).gemm.tile_n, kGemmTileN);  // unsplit: 224 tiles
  const Fp8MatMulPlan wide_halves = plan(wide, kHopper, parsed("k_halves=1"));
  EXPECT_EQ(wide_halves.gemm.tile_n, kKHalvesTileN);
  EXPECT_EQ(wide_halves.gemm.k_split, 1);
  EXPECT_EQ(plan(p, kHopper, parsed("k_halves=1,gemm_k_split=2")).gemm.k_split, 2);
  // The 128-row tiles' split, where the override keeps them.
  const PlanOverride forced = parsed("w8a8=1,k_halves=0");
  const Fp8MatMulPlan split = plan(p, kHopper, forced);
  EXPECT_EQ(split.gemm.k_split, 2);
  // The split of 2 summed in a cluster of its blocks: no planes.
  EXPECT_TRUE(split.gemm.cluster_reduce);
  EXPECT_EQ(split.regions.act_scales_offset, size_t{16} * 8192);
  EXPECT_EQ(split.regions.partial_bytes, 0u);
  EXPECT_EQ(split.workspace_bytes, size_t{16} * 8192 + 64 * 128 * 4);
  EXPECT_NE(printed(split).find("path=w8a8_gemm; "), std::string::npos) << split;
  EXPECT_NE(printed(split).find("; act_scales=dynamic; mainloop=wgmma; tile_m=32; tile_n=128; stages=6; "
                                "k_split=2; k_reduce=cluster; dependent_launch=yes; workspace=163840B (codes "
                                "131072@0, act_scales 32768@131072)}"),
            std::string::npos)
      << split;
  // Without the cluster: float32 planes after the scales, added by the reduce kernel.
  const Fp8MatMulPlan planes = plan(p, kHopper, parsed("w8a8=1,k_halves=0,cluster_sum=0"));
  EXPECT_FALSE(planes.gemm.cluster_reduce);
  EXPECT_EQ(planes.regions.partial_offset, size_t{16} * 8192 + 64 * 128 * 4);
  EXPECT_EQ(planes.regions.partial_bytes, size_t{2} * 16 * 8192 * 4);
  EXPECT_EQ(planes.workspace_bytes, planes.regions.partial_offset + planes.regions.partial_bytes);
  EXPECT_NE(printed(planes).find("k_split=2; dependent_launch=yes; workspace=1212416B (codes 131072@0, act_scales "
                                 "32768@131072, partial 1048576@163840)}"),
            std::string::npos)
      << planes;
  // The dependent launch after the quantize pass: the planner's on 32-row tiles only; the
  // override forces it either way.
  EXPECT_TRUE(split.gemm.dependent_launch);
  const Fp8MatMulPlan off = plan(p, kHopper, parsed("w8a8=1,k_halves=0,w8a8_pdl=0"));
  EXPECT_FALSE(off.gemm.dependent_launch);
  EXPECT_NE(printed(off).find("; k_split=2; k_reduce=cluster; workspace="), std::string::npos) << off;
  for (const int64_t m : {33, 64, 65, 128}) {
    Fp8MatMulProblem q = p;
    q.m = m;
    EXPECT_FALSE(plan(q, kHopper, forced).gemm.dependent_launch) << m;
    EXPECT_TRUE(plan(q, kHopper, parsed("w8a8=1,w8a8_pdl=1")).gemm.dependent_launch) << m;
  }
  // Blocks of 256 K split in whole blocks: 32 units of 2 slabs, the same waves.
  p.block_size = 256;
  EXPECT_EQ(plan(p, kHopper, forced).gemm.k_split, 2);
  // 4096 rows: 2048 tiles, whole waves unsplit; no partial sums.
  p = problem(4096, 8192, 8192);
  p.has_a_scale = true;
  const PlanOverride own = parsed("w8a8_cublaslt=0");  // the W8A8 GEMM's rules
  EXPECT_EQ(plan(p, kHopper, own).gemm.k_split, 1);
  EXPECT_EQ(plan(p, kHopper, own).regions.partial_bytes, 0u);
  EXPECT_EQ(plan(p, kHopper, own).workspace_bytes, size_t{4096} * 8192);
  // The partial planes' price: 28672 x 8192 at M = 256 is 448 tiles of 64 slabs, 4 waves
  // of 70 unsplit (280), 7 of 38 split in two (266) plus two 29 MB planes at 0.9 MB a slab
  // (2 x 32): unsplit. At M = 128 (224 tiles, 2 waves) a split never pays either; at
  // 4096 x 14336 M = 256 (64 tiles of 112 slabs: 1 x 118; 2: 1 x 62 + 2 x 4) it does.
  p = problem(256, 28672, 8192);
  p.has_a_scale = true;
  EXPECT_EQ(gemm_split_cost(448, 64, 1, 132, 6, 2), 266);
  EXPECT_EQ(plan(p, kHopper, parsed("w8a8_cublaslt=0")).gemm.k_split, 1);
  p = problem(256, 4096, 14336);
  p.has_a_scale = true;
  EXPECT_EQ(plan(p, kHopper, parsed("w8a8_cublaslt=0")).gemm.k_split, 2);
  // K % 128 != 0 (a partial last block), odd N: rows of K codes.
  p = problem(333, 1001, 8208);
  p.has_a_scale = true;
  EXPECT_EQ(plan(p).regions.codes_bytes, size_t{333} * 8208);
  EXPECT_EQ(plan(p).path, Fp8Path::kW8a8Gemm);
}

// cuBLASLt's block-scaled FP8 GEMM ahead of the other W8A8 GEMMs from 256 rows (static
// with per-row weight scales: 512; forced: from 9), both modes and both weight-scale forms,
// block_size 128, N % 8 == 0; its
// workspace: codes and scales for M rounded up to 4 rows, the weight's scales in its
// layout (128 x 128 blocks, or per row unless prepacked), Y's padded rows where M % 4 != 0
// and cuBLASLt's own workspace.
TEST(Fp8Plan, W8A8CublasltFrom128Rows) {
  SKIP_WITHOUT_W8A8_GEMMS();
  const auto w8a8 = [](int64_t m, int64_t n, int64_t k, bool dynamic, int64_t rows, int64_t bs = 128) {
    Fp8MatMulProblem p = problem(m, n, k, bs);
    p.has_a_scale = !dynamic;
    p.dynamic_act_quant = dynamic;
    p.b_scale_block_rows = rows;
    return p;
  };
  const auto why = [](const Fp8MatMulProblem& p, const DeviceInfo& d = kHopper, const char* ov = "") {
    const char* r = fp8_w8a8_cublaslt_refusal(p, d, parsed(ov));
    return std::string(r == nullptr ? "" : r);
  };
  for (const bool dynamic : {false, true})
    for (const int64_t rows : {1, 64, 128, 192, 256})
      for (const int64_t m : {9, 255, 256, 257, 511, 512, 1024, 4097}) {
        // K % 128 != 0: 65 blocks, padded to 68 in the 128 x 128 layout.
        const Fp8MatMulProblem p = w8a8(m, 8192, 8208, dynamic, rows);
        SCOPED_TRACE(::testing::Message() << "M=" << m << (dynamic ? " dynamic" : " static") << " rows=" << rows);
        const int scale_rows = rows % 128 == 0 ? 128 : 1;  // 128 x 128 blocks where rows promise them
        const bool static_per_row = !dynamic && scale_rows == 1;
        const bool taken = m >= (static_per_row ? kW8a8CublasltStaticPerRowMinRows : kW8a8CublasltMinRows);
        const Fp8MatMulPlan pl = plan(p);
        ASSERT_EQ(pl.path == Fp8Path::kW8a8Cublaslt, taken) << pl;
        if (m < 256)
          EXPECT_EQ(why(p), "M < 256: the W8A8 GEMMs' tiles are faster there");
        else if (static_per_row && m < 512)
          EXPECT_EQ(why(p), "static a_scale, per-row weight scales and M < 512: the W8A8 GEMM's one activation "
                            "scale is faster");
        else
          EXPECT_EQ(why(p), "");
        const Fp8MatMulPlan forced = plan(p, kHopper, parsed("w8a8_cublaslt=1"));
        ASSERT_EQ(forced.path, Fp8Path::kW8a8Cublaslt) << forced;
        EXPECT_EQ(forced.gemm.scale_rows, scale_rows);
        const size_t padded = static_cast<size_t>((m + 3) / 4 * 4);
        const WorkspaceRegions& r = forced.regions;
        EXPECT_EQ(r.act_bytes, 0u);
        EXPECT_EQ(r.codes_offset, 0u);
        EXPECT_EQ(r.codes_bytes, padded * 8208);
        EXPECT_EQ(r.act_scales_bytes, size_t{65} * padded * 4);
        EXPECT_EQ(r.scales_bytes, scale_rows == 128 ? size_t{64} * 68 * 4 : size_t{65} * 8192 * 4);
        EXPECT_EQ(r.scratch_bytes, m % 4 != 0 ? padded * 8192 * 2 : 0u);
        EXPECT_EQ(r.cublas_bytes, size_t{32} << 20);
        EXPECT_EQ(r.partial_bytes, 0u);
        EXPECT_EQ(forced.workspace_bytes, r.cublas_offset + r.cublas_bytes);
        Fp8MatMulProblem prepacked = p;
        prepacked.has_prepacked = true;  // per-row scales read from the prepacked input
        EXPECT_EQ(plan(prepacked, kHopper, parsed("w8a8_cublaslt=1")).regions.scales_bytes,
                  scale_rows == 128 ? size_t{64} * 68 * 4 : 0u);
      }
  EXPECT_EQ(w8a8_cublaslt_rows(1), 4);
  EXPECT_EQ(w8a8_cublaslt_rows(4), 4);
  EXPECT_EQ(w8a8_cublaslt_rows(4097), 4100);
  EXPECT_EQ(w8a8_cublaslt_block_scales(8192, 64), 64 * 64);
  EXPECT_EQ(w8a8_cublaslt_block_scales(8200, 65), 65 * 68);  // a partial last group
  // The plan as printed: per-row scales say where they come from.
  std::ostringstream os;
  os << plan(w8a8(1024, 8192, 8192, true, 1));
  EXPECT_NE(os.str().find("path=w8a8_cublaslt; "), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("; act_scales=dynamic; weight_scales=per_row; lt_algo=0; scales=per_run; workspace="),
            std::string::npos)
      << os.str();
  os.str("");
  os << plan(w8a8(1026, 8192, 8192, false, 128));
  EXPECT_NE(os.str().find("; act_scales=static; weight_scales=per_128_rows; lt_algo=0; "
                          "workspace=59098112B (cublas 33554432@25543680, "
                          "scratch 16842752@8700928, codes 8421376@0, act_scales 263168@8421376, "
                          "scales 16384@8684544)}"),
            std::string::npos)
      << os.str();
  // The override picks the heuristic's algorithm.
  EXPECT_EQ(plan(w8a8(1024, 8192, 8192, true, 1), kHopper, parsed("lt_algo=2")).gemm.lt_algo, 2);
  // Where it is not taken, and why; the W8A8 GEMM's refusals come first.
  EXPECT_EQ(why(w8a8(1024, 8192, 8192, true, 1, 256)), "block_size != 128 (cuBLASLt's scale blocks are 128 K)");
  EXPECT_EQ(plan(w8a8(1024, 8192, 8192, true, 1, 256)).path, Fp8Path::kW8a8Gemm);
  EXPECT_EQ(why(w8a8(1024, 8188, 8192, false, 1)), "N % 8 != 0 (rows of Y not whole 16-byte units)");
  EXPECT_EQ(plan(w8a8(1024, 8188, 8192, false, 1)).path, Fp8Path::kW8a8Gemm);
  EXPECT_EQ(why(w8a8(1024, 8192, 8192, true, 1), kAmpere), "not an SM90 device (wgmma code is sm_90a only)");
  EXPECT_EQ(why(w8a8(1024, 8192, 8192, true, 1), kHopper, "w8a8_cublaslt=0"), "w8a8_cublaslt=0 (plan override)");
  EXPECT_EQ(why(w8a8(1024, 8192, 8192, true, 1), kHopper, "tile_m=64"),
            "tile_m / gemm_k_split / k_halves forced (the W8A8 GEMM's keys)");
  EXPECT_EQ(why(problem(1024, 8192, 8192)), "A is not quantized (no a_scale, no dynamic_act_quant)");
  EXPECT_NE(plan(problem(1024, 8192, 8192)).path, Fp8Path::kW8a8Cublaslt);
  // Off Hopper no W8A8 GEMM applies: QDQ, then the weight-only paths (here dequant + cuBLAS).
  EXPECT_EQ(plan(w8a8(1024, 8192, 8192, true, 1), kAmpere).path, Fp8Path::kDequantGemm);
}

// Where the W8A8 GEMM is not taken, and why (fp8_w8a8_gemm_refusal, printed by --explain).
TEST(Fp8Plan, W8A8GemmRefusals) {
  SKIP_WITHOUT_W8A8_GEMMS();
  const auto refusal = [](Fp8MatMulProblem p, const DeviceInfo& d, const char* ov = "") {
    if (!p.dynamic_act_quant) p.has_a_scale = true;
    const char* why = fp8_w8a8_gemm_refusal(p, d, parsed(ov));
    const Fp8Path path = plan(p, d, parsed(std::string(ov) + ",w8a8_cublaslt=0")).path;
    EXPECT_EQ(why == nullptr, path == Fp8Path::kW8a8Gemm);
    return std::string(why == nullptr ? "" : why);
  };
  EXPECT_EQ(fp8_w8a8_gemm_refusal(problem(64, 8192, 8192), kHopper, {}),
            std::string("A is not quantized (no a_scale, no dynamic_act_quant)"));
  EXPECT_EQ(refusal(problem(8, 8192, 8192), kHopper), "M <= 8 (the decode GEMV's rows)");
  EXPECT_EQ(refusal(problem(8, 8192, 8192), kHopper, "w8a8=1"), "");
  EXPECT_EQ(refusal(problem(9, 8192, 8192), kHopper), "");
  EXPECT_EQ(refusal(problem(32, 8192, 8192), kHopper), "");
  EXPECT_EQ(refusal(problem(33, 8192, 8192), kHopper), "");
  EXPECT_EQ(refusal(problem(4096, 8192, 8192), kHopper), "");
  EXPECT_EQ(refusal(problem(100, 8192, 8192), kHopper, "w8a8=0"), "w8a8=0 (plan override)");
  EXPECT_EQ(refusal(problem(100, 8192, 8192), kHopper, "tile_m=16"),
            "tile_m=16 or 256 (plan override): its tiles are 32, 64 and 128 rows");
  EXPECT_EQ(refusal(problem(100, 8192, 8192), kAmpere), "not an SM90 device (wgmma code is sm_90a only)");
  EXPECT_EQ(refusal(problem(100, 8192, 8192, 64), kHopper),
            "block_size % 128 != 0 (a 128-K slab would span two scales)");
  EXPECT_EQ(refusal(problem(100, 8192, 8192, 64), kHopper, "w8a8=1"),
            "block_size % 128 != 0 (a 128-K slab would span two scales)");
  EXPECT_EQ(refusal(problem(100, 8192, 8200), kHopper), "K % 16 != 0 (rows of B not whole 16-byte chunks)");
  Fp8MatMulProblem unaligned = problem(100, 8192, 8192);
  unaligned.alignment = 8;
  EXPECT_EQ(refusal(unaligned, kHopper), "pointers not 16-byte aligned");
  EXPECT_EQ(refusal(problem(0, 8192, 8192), kHopper), "empty output");
  EXPECT_EQ(refusal(problem(100, 8192, 0), kHopper), "K == 0: Y = bias");
  // Refused: the fused GEMM's QDQ path up to 128 rows, the mixed-input GEMM's above (where
  // built) or dequant + cuBLAS.
  Fp8MatMulProblem small_block = problem(100, 8192, 8192, 64);
  small_block.has_a_scale = true;
  EXPECT_EQ(plan(small_block).path, Fp8Path::kFusedGemm);
  small_block.m = 200;
  EXPECT_EQ(plan(small_block).path, mixed_gemm_built() ? Fp8Path::kMixedGemm : Fp8Path::kDequantGemm);
  EXPECT_EQ(plan(small_block, kHopper, parsed("mixed=0")).path, Fp8Path::kDequantGemm);
  // Every M above the GEMV's: the W8A8 GEMM, its 32-row tile from 9 rows up.
  Fp8MatMulProblem rows = problem(9, 8192, 8192);
  rows.has_a_scale = true;
  EXPECT_EQ(plan(rows).path, Fp8Path::kW8a8Gemm);
  EXPECT_EQ(plan(rows).gemm.tile_m, 32);
  rows.m = 8;
  EXPECT_EQ(plan(rows).path, Fp8Path::kGemvMma);
  // gemm_k_split forces the W8A8 GEMM's split too.
  Fp8MatMulProblem forced = problem(100, 8192, 8192);
  forced.has_a_scale = true;
  EXPECT_EQ(plan(forced, kHopper, parsed("gemm_k_split=8")).gemm.k_split, 8);
  // Splits other than 2 in planes, forced cluster_sum=1 or not; a forced split of 2 in a
  // cluster unless cluster_sum=0.
  EXPECT_FALSE(plan(forced, kHopper, parsed("gemm_k_split=4")).gemm.cluster_reduce);
  EXPECT_EQ(plan(forced, kHopper, parsed("gemm_k_split=8")).regions.partial_bytes, size_t{8} * 100 * 8192 * 4);
  EXPECT_FALSE(plan(forced, kHopper, parsed("gemm_k_split=8,cluster_sum=1")).gemm.cluster_reduce);
  EXPECT_EQ(plan(forced, kHopper, parsed("gemm_k_split=8,cluster_sum=1")).regions.partial_bytes,
            size_t{8} * 100 * 8192 * 4);
  EXPECT_TRUE(plan(forced, kHopper, parsed("gemm_k_split=2")).gemm.cluster_reduce);
  EXPECT_EQ(plan(forced, kHopper, parsed("gemm_k_split=2")).regions.partial_bytes, 0u);
  EXPECT_FALSE(plan(forced, kHopper, parsed("gemm_k_split=2,cluster_sum=0")).gemm.cluster_reduce);
  EXPECT_EQ(plan(forced, kHopper, parsed("gemm_k_split=2,cluster_sum=0")).regions.partial_bytes,
            size_t{2} * 100 * 8192 * 4);
}

TEST(Fp8Plan, KNotMultipleOf16LeavesTheGemv) {
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 16 * 256 + 8));
  EXPECT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_FALSE(pl.dequant.vector);  // a 16-byte chunk would straddle rows of B
}

TEST(Fp8Plan, BlockNotMultipleOf16LeavesTheGemv) {
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 4096, 24));
  EXPECT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_TRUE(pl.dequant.vector);  // the dequant kernel handles any block size
}

TEST(Fp8Plan, UnalignedPointersFallBack) {
  for (int align : {1, 2, 4, 8}) {
    Fp8MatMulProblem p = problem(1, 4096, 4096);
    p.alignment = align;
    const Fp8MatMulPlan pl = plan(p);
    EXPECT_EQ(pl.path, Fp8Path::kDequantGemm) << align;
    EXPECT_FALSE(pl.dequant.vector) << align;
  }
  Fp8MatMulProblem p = problem(100, 4096, 4096);
  EXPECT_TRUE(plan(p, kHopper, without_gemm()).dequant.vector);
  p.alignment = 8;
  EXPECT_FALSE(plan(p).dequant.vector);
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

TEST(Fp8Plan, OverrideDisablesGemvPaths) {
  PlanOverride o;
  o.fma = 1;
  const Fp8MatMulPlan pl = plan(problem(4, 4096, 4096), kHopper, o);
  EXPECT_EQ(pl.path, Fp8Path::kGemvFma);
  EXPECT_EQ(pl.gemv.rows, 4);
  o.gemv = 0;
  EXPECT_EQ(path(problem(1, 4096, 4096), kHopper, o), Fp8Path::kDequantGemm);
  for (int64_t m : {1, 4, 8})
    EXPECT_EQ(path(problem(m, 4096, 4096), kHopper, parsed("gemv=0")), Fp8Path::kDequantGemm) << m;
  EXPECT_EQ(path(problem(1, 4096, 4096), kTuring, parsed("gemv=0")), Fp8Path::kDequantGemm);
  // The trivial paths stay.
  EXPECT_EQ(path(problem(0, 4096, 4096), kHopper, parsed("gemv=0")), Fp8Path::kEmpty);
  EXPECT_EQ(path(problem(1, 4096, 0), kHopper, parsed("gemv=0")), Fp8Path::kBiasOnly);
  testing::expect_override_rejects(problem(1, 4096, 4096), PlanOverride{}, &PlanOverride::gemv,
                                   "gemv", {1, -2});
}

TEST(Fp8Plan, RowsPerWarpCoverM) {
  const int expected[9] = {0, 1, 2, 4, 4, 8, 8, 8, 8};
  for (int64_t m = 1; m <= 8; ++m) {
    const Fp8MatMulPlan pl = plan(problem(m, 4096, 4096), kTuring);
    ASSERT_EQ(pl.path, Fp8Path::kGemvFma);
    EXPECT_EQ(pl.gemv.rows, expected[m]) << "M=" << m;
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
// M = 100 with the fused GEMM forced off (it takes these problems by default).
TEST(Fp8Plan, NTilesOfTheScratchLimit) {
  // Row of B in bf16: 8192 * 2 = 16 KiB; 256 MiB holds exactly 16384 rows.
  const Fp8MatMulPlan pl =
      plan(problem(100, 262144, 8192, 128, DType::kBFloat16), kHopper, without_gemm());
  ASSERT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_FALSE(pl.dequant.qdq_activation);
  EXPECT_TRUE(pl.dequant.vector);
  EXPECT_EQ(pl.dequant.n_tile, 16384);
  EXPECT_EQ(pl.dequant.num_n_tiles, 16);
  EXPECT_EQ(pl.regions.act_bytes, 0u);
  EXPECT_EQ(pl.regions.cublas_offset, 0u);
  EXPECT_EQ(pl.regions.cublas_bytes, size_t{32} << 20);  // Hopper
  EXPECT_EQ(pl.regions.scratch_offset, size_t{32} << 20);
  EXPECT_EQ(pl.regions.scratch_bytes, size_t{256} << 20);
  EXPECT_EQ(pl.workspace_bytes, size_t{288} << 20);
}

TEST(Fp8Plan, CublasWorkspaceBeforeHopperIsSmaller) {
  const Fp8MatMulPlan pl = plan(problem(100, 4096, 4096), kAmpere, without_gemm());
  EXPECT_EQ(pl.regions.cublas_bytes, size_t{4} << 20);
  EXPECT_EQ(pl.dequant.n_tile, 4096);
  EXPECT_EQ(pl.dequant.num_n_tiles, 1);
  EXPECT_EQ(pl.regions.scratch_bytes, size_t{4096} * 4096 * 2);
  EXPECT_EQ(pl.workspace_bytes, (size_t{4} << 20) + size_t{4096} * 4096 * 2);
}

TEST(Fp8Plan, LargeTilesAreWholeMultiplesOf256Rows) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 1000 * 8192;  // 1000 rows of K = 4096 float16
  const Fp8MatMulPlan pl = plan(problem(100, 4096, 4096), kHopper, o, without_gemm());
  EXPECT_EQ(pl.dequant.n_tile, 768);
  EXPECT_EQ(pl.dequant.num_n_tiles, 6);  // 5 * 768 + 256
  EXPECT_EQ(pl.regions.scratch_bytes, size_t{768} * 8192);
}

TEST(Fp8Plan, SmallTilesAreNotRounded) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 100 * 8192 + 8191;
  const Fp8MatMulPlan pl = plan(problem(100, 4096, 4096), kHopper, o, without_gemm());
  EXPECT_EQ(pl.dequant.n_tile, 100);
  EXPECT_EQ(pl.dequant.num_n_tiles, 41);
  EXPECT_EQ(pl.regions.scratch_bytes, size_t{100} * 8192);
}

TEST(Fp8Plan, AtLeastOneRowPerTile) {
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 1000;  // less than one 8 KiB row
  const Fp8MatMulPlan pl = plan(problem(100, 37, 4096), kHopper, o, without_gemm());
  EXPECT_EQ(pl.dequant.n_tile, 1);
  EXPECT_EQ(pl.dequant.num_n_tiles, 37);
  EXPECT_EQ(pl.regions.scratch_bytes, 8192u);
}

TEST(Fp8Plan, TileNeverExceedsN) {
  const Fp8MatMulPlan pl = plan(problem(100, 300, 4096), kHopper, without_gemm());
  EXPECT_EQ(pl.dequant.n_tile, 300);
  EXPECT_EQ(pl.dequant.num_n_tiles, 1);
}

TEST(Fp8Plan, W8A8ReservesTheActivationFirst) {
  // M * K * 2 = 9 * 4104 * 2 = 73872 bytes, padded to 73984 (a multiple of 256).
  Fp8MatMulProblem p = problem(9, 4096, 4104);
  p.has_a_scale = true;
  const Fp8MatMulPlan pl = plan(p);
  ASSERT_EQ(pl.path, Fp8Path::kDequantGemm);
  EXPECT_TRUE(pl.dequant.qdq_activation);
  EXPECT_EQ(pl.regions.act_offset, 0u);
  EXPECT_EQ(pl.regions.act_bytes, 73872u);
  EXPECT_EQ(pl.regions.cublas_offset, 73984u);
  EXPECT_EQ(pl.regions.scratch_offset, 73984u + (size_t{32} << 20));
  EXPECT_EQ(pl.regions.scratch_bytes, size_t{4096} * 4104 * 2);
  // 4096 * 4104 * 2 is a multiple of 256 already.
  EXPECT_EQ(pl.workspace_bytes, pl.regions.scratch_offset + pl.regions.scratch_bytes);
  for (size_t off : {pl.regions.act_offset, pl.regions.cublas_offset, pl.regions.scratch_offset})
    EXPECT_EQ(off % 256, 0u);
}

TEST(Fp8Plan, OffsetsStay256AlignedForOddSizes) {
  Fp8MatMulProblem p = problem(13, 7, 4104, 8);
  p.has_a_scale = true;
  Fp8MatMulOptions o;
  o.dequant_scratch_bytes = 3 * 4104 * 2 + 1;
  const Fp8MatMulPlan pl = plan(p, kAmpere, o);
  EXPECT_EQ(pl.dequant.n_tile, 3);
  EXPECT_EQ(pl.dequant.num_n_tiles, 3);
  EXPECT_EQ(pl.regions.act_bytes, 13u * 4104 * 2);
  for (size_t off : {pl.regions.act_offset, pl.regions.cublas_offset, pl.regions.scratch_offset})
    EXPECT_EQ(off % 256, 0u) << off;
  EXPECT_GE(pl.regions.cublas_offset, pl.regions.act_offset + pl.regions.act_bytes);
  EXPECT_GE(pl.regions.scratch_offset, pl.regions.cublas_offset + pl.regions.cublas_bytes);
  EXPECT_GE(pl.workspace_bytes, pl.regions.scratch_offset + pl.regions.scratch_bytes);
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
  const Status s = plan_fp8_matmul(problem(100, 64, 64), kHopper, o, &pl);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dequant_scratch_bytes"), std::string::npos) << s.message();
}

// The keys of NBitsMatMul's kernels do not apply: the planner rejects them, naming the key
// and the operator, even on problems that take no GEMV.
TEST(Fp8Plan, RejectsOverrideKeysOfNBitsMatMul) {
  for (const char* text : {"algo=0", "algo=2", "window=1", "window=0", "k_split=4,window=1"}) {
    SCOPED_TRACE(text);
    PlanOverride o;
    ASSERT_TRUE(parse_plan_override(text, &o).ok());
    const std::string t = text;
    const std::string key = t.find("algo") != std::string::npos ? "algo" : "window";
    for (const auto& p : {problem(2, 4096, 4096), problem(100, 4096, 4096), problem(0, 64, 64)})
      testing::expect_rejected(p, o, "plan override: " + key + " does not apply to Fp8WeightMatMul");
  }
}

TEST(Fp8Plan, PrintsPathAndTiles) {
  EXPECT_NE(printed(plan(problem(0, 64, 64))).find("path=empty"), std::string::npos);
  EXPECT_NE(printed(plan(problem(1, 64, 0))).find("path=bias_only"), std::string::npos);
  EXPECT_NE(printed(plan(problem(3, 64, 4096))).find("path=gemv_mma"), std::string::npos);
  const std::string fma = printed(plan(problem(3, 64, 4096), kTuring));
  EXPECT_NE(fma.find("path=gemv_fma"), std::string::npos) << fma;
  EXPECT_NE(fma.find("rows_per_warp=4"), std::string::npos) << fma;
  const std::string gemm = printed(
      plan(problem(100, 262144, 8192, 128, DType::kBFloat16), kHopper, without_gemm()));
  EXPECT_NE(gemm.find("path=dequant_gemm"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("qdq_activation=no; dequant=vec16; n_tile=16384 x 16;"), std::string::npos)
      << gemm;
  EXPECT_EQ(gemm.find("buffer"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("workspace=301989888B (cublas 33554432@0, scratch 268435456@33554432)"),
            std::string::npos)
      << gemm;
  EXPECT_NE(gemm.find("bfloat16"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("sm90"), std::string::npos) << gemm;
  // W8A8: the QDQ'd activation's region first (K % 16 != 0: the scalar dequant kernel).
  Fp8MatMulProblem w8a8 = problem(9, 4096, 4104);
  w8a8.has_a_scale = true;
  const std::string qdq = printed(plan(w8a8));
  EXPECT_NE(qdq.find("qdq_activation=yes; dequant=scalar; n_tile=4096 x 1;"), std::string::npos)
      << qdq;
  EXPECT_NE(qdq.find("(act 73872@0, cublas 33554432@73984, scratch "), std::string::npos) << qdq;
  // The fused GEMM: its tiling, and the partial sums of its K split.
  EXPECT_EQ(printed(plan(problem(16, 8192, 8192), kHopper, parsed("gemm=1,wgmma=0"))),
            "Fp8MatMulPlan{path=fused_gemm; fp8 float16 M=16 N=8192 K=8192 block_size=128 "
            "align=16; sm90/132SMs; qdq_activation=no; mainloop=mma; tile_m=16; tile_n=128; "
            "stages=4; k_split=4; workspace=2097152B (partial 2097152@0)}");
  const std::string whole = printed(plan(problem(64, 28672, 8192), kHopper, parsed("wgmma=0")));
  EXPECT_NE(whole.find("path=fused_gemm"), std::string::npos) << whole;
  EXPECT_NE(whole.find("; mainloop=mma; tile_m=64; tile_n=128; stages=3; k_split=1; workspace=0B}"),
            std::string::npos)
      << whole;
  if (wgmma_built()) {
    const std::string hopper = printed(plan(problem(64, 28672, 8192)));
    EXPECT_NE(hopper.find("; mainloop=wgmma; tile_m=64; tile_n=128; stages=6; k_split=1; "
                          "workspace=1048576B (act_order 1048576@0)}"),
              std::string::npos)
        << hopper;
  }
}

TEST(Fp8Plan, IsPure) {
  Fp8MatMulProblem p = problem(9, 5000, 4104, 8);
  p.has_a_scale = true;
  EXPECT_EQ(printed(plan(p)), printed(plan(p)));
}

// ------------------------------------------------------------------ plan override
// The kernel choices an override forces, parsed from the grammar of BQMM_PLAN_OVERRIDE;
// the tests above set them in the struct.

// k_split forces the tensor-core GEMV's K split (line loads, 8 by default here).
TEST(Fp8Override, GemvKSplit) {
  testing::expect_k_split_forced(problem(4, 4096, 4096));
  // 16 is NBitsMatMul's 4-bit window kernel's alone.
  testing::expect_rejected(problem(4, 4096, 14336), parsed("k_split=16"),
                           "the FP8 GEMVs take k_split up to 8, not 16");
}

// The CUDA-core kernel has none, and keeps the CUDA-core plan under any forced split.
TEST(Fp8Override, GemvKSplitLeavesTheFmaKernel) {
  const Fp8MatMulPlan pl = plan(problem(1, 4096, 4096), kHopper, parsed("k_split=4"));
  EXPECT_EQ(pl.path, Fp8Path::kGemvFma);
  EXPECT_EQ(pl.gemv.k_split, 0);
}

// The weight-stream switches: each parses 0 / 1 (malformed values rejected), and each
// flips a decision that is off by default on one problem and on by default on another.
TEST(Fp8Override, GemvSwitchOverrides) {
  const testing::PlanSwitch<Fp8MatMulProblem> switches[] = {
      {"tma", &PlanOverride::tma, &GemvConfig::tma, problem(8, 4096, 4096),
       problem(4, 28672, 8192 + 64)},
      {"fma", &PlanOverride::fma, &GemvConfig::fma, problem(2, 4096, 4096),
       problem(1, 4096, 4096)},
  };
  testing::expect_switch_overrides(switches);
  // Line loads are on wherever they apply: 0 turns them off, 1 keeps them.
  testing::expect_switch_parses("lines", &PlanOverride::lines);
  EXPECT_FALSE(plan(problem(2, 4096, 4096), kHopper, parsed("lines=0")).gemv.lines);
  EXPECT_TRUE(plan(problem(2, 4096, 4096), kHopper, parsed("lines=1")).gemv.lines);
  EXPECT_FALSE(plan(problem(2, 4096, 4160), kHopper, parsed("lines=1")).gemv.lines);
  // Keys combine: TMA tiles in place of line loads at a forced split.
  const Fp8MatMulPlan tma = plan(problem(2, 4096, 4096), kHopper, parsed("lines=0,tma=1,k_split=2"));
  EXPECT_TRUE(tma.gemv.tma);
  EXPECT_FALSE(tma.gemv.lines);
  EXPECT_EQ(tma.gemv.k_split, 2);
}

// gemm: 0 never the fused GEMM (the plans before it: row groups to 32 rows, then dequant
// + cuBLAS), 1 wherever it applies, the decode rows included (tile_m 16).
TEST(Fp8Override, Gemm) {
  testing::expect_switch_parses("gemm", &PlanOverride::gemm);
  for (int64_t m : {9, 32}) {
    const Fp8MatMulPlan groups = plan(problem(m, 4096, 4096), kHopper, parsed("gemm=0"));
    EXPECT_EQ(groups.path, Fp8Path::kGemvMma) << m;
    EXPECT_EQ(groups.gemv.row_groups, (m + 15) / 16) << m;
    EXPECT_EQ(groups.gemm.tile_m, 0) << m;
  }
  EXPECT_EQ(path(problem(33, 4096, 4096), kHopper, parsed("gemm=0")), Fp8Path::kDequantGemm);
  // From 65 rows the mixed-input GEMM takes what the fused GEMM would have kept.
  EXPECT_EQ(path(problem(100, 4096, 4096), kHopper, parsed("gemm=0")),
            mixed_gemm_built() ? Fp8Path::kMixedGemm : Fp8Path::kDequantGemm);
  for (int64_t m : {1, 4, 8}) {
    const Fp8MatMulPlan forced = plan(problem(m, 4096, 4096), kHopper, parsed("gemm=1"));
    EXPECT_EQ(forced.path, Fp8Path::kFusedGemm) << m;
    EXPECT_EQ(forced.gemm.tile_m, 16) << m;
    EXPECT_EQ(forced.gemv.k_split, 0) << m;
  }
  // Only where it applies: below SM80 and on K % 16 != 0 the decode GEMV all the same.
  EXPECT_EQ(path(problem(4, 4096, 4096), kTuring, parsed("gemm=1")), Fp8Path::kGemvFma);
  EXPECT_EQ(path(problem(4, 4096, 4104), kHopper, parsed("gemm=1")), Fp8Path::kDequantGemm);
  EXPECT_EQ(path(problem(16, 4096, 4096), kHopper, parsed("gemm=1")), Fp8Path::kFusedGemm);
  testing::expect_switch_rejects_out_of_range(problem(16, 4096, 4096), PlanOverride{},
                                              &PlanOverride::gemm, "gemm");
}

// tile_m and gemm_k_split force the fused GEMM's tiling: the stages and the K split follow
// a forced tile_m; a forced K split sizes the partial sums. Ignored off the fused GEMM.
TEST(Fp8Override, GemmTileMAndKSplit) {
  // M = 64, N = 4096, K = 8192 on mma.sync: 32 blocks of 64 rows (k_split 8, 3 stages);
  // 128 of 16 rows (k_split 2, 4 stages).
  EXPECT_EQ(plan(problem(64, 4096, 8192), kHopper, parsed("wgmma=0")).gemm.k_split, 8);
  const Fp8MatMulPlan t16 = plan(problem(64, 4096, 8192), kHopper, parsed("tile_m=16,wgmma=0"));
  EXPECT_EQ(t16.gemm.tile_m, 16);
  EXPECT_EQ(t16.gemm.stages, 4);
  EXPECT_EQ(t16.gemm.k_split, 2);
  EXPECT_EQ(t16.workspace_bytes, size_t{2} * 64 * 4096 * 4);
  EXPECT_EQ(plan(problem(9, 4096, 8192), kHopper, parsed("tile_m=64")).gemm.tile_m, 64);
  const Fp8MatMulPlan k16 = plan(problem(64, 4096, 8192), kHopper, parsed("gemm_k_split=16"));
  EXPECT_EQ(k16.gemm.k_split, 16);
  EXPECT_EQ(k16.gemm.tile_m, 64);
  EXPECT_EQ(k16.regions.partial_bytes, size_t{16} * 64 * 4096 * 4);
  const Fp8MatMulPlan k1 = plan(problem(16, 8192, 8192), kHopper, parsed("gemm_k_split=1,wgmma=0"));
  EXPECT_EQ(k1.gemm.k_split, 1);
  EXPECT_EQ(k1.workspace_bytes, 0u);
  const Fp8MatMulPlan both = plan(problem(16, 8192, 8192), kHopper, parsed("tile_m=32,gemm_k_split=2"));
  EXPECT_EQ(std::make_pair(both.gemm.tile_m, both.gemm.k_split), std::make_pair(32, 2));
  // Off the fused GEMM: the decode GEMV's plan, its own k_split untouched.
  const Fp8MatMulPlan decode = plan(problem(4, 4096, 4096), kHopper, parsed("tile_m=64,gemm_k_split=2"));
  EXPECT_EQ(decode.path, Fp8Path::kGemvMma);
  EXPECT_EQ(decode.gemv.k_split, plan(problem(4, 4096, 4096)).gemv.k_split);
  EXPECT_EQ(decode.gemm.tile_m, 0);
  testing::expect_parse_rejects("tile_m", {"0", "8", "48", "512", "-1", "x", ""});
  testing::expect_parse_rejects("gemm_k_split", {"0", "3", "32", "-1", "x", ""});
  testing::expect_override_rejects(problem(16, 4096, 4096), PlanOverride{}, &PlanOverride::tile_m,
                                   "tile_m", {-1, 8, 48, 512});
  testing::expect_override_rejects(problem(16, 4096, 4096), PlanOverride{},
                                   &PlanOverride::gemm_k_split, "gemm_k_split", {-1, 3, 32});
}

// tiles: 1 or 2 tiles per warp of line loads.
TEST(Fp8Override, GemvTiles) {
  testing::expect_tiles_overridden(problem(2, 4096, 4096), problem(2, 28672, 8192));
}

// registers: 128 or 168 forces the two-tile kernel's register bound.
TEST(Fp8Override, GemvRegisters) {
  testing::expect_registers_overridden(problem(2, 20480, 8192), problem(2, 28672, 8192));
}

// ------------------------------------------------------------------ environment
class Fp8EnvTest : public ::testing::Test {
 protected:
  testing::EnvGuard env_{"BQMM_DEQUANT_SCRATCH_MIB", "BQMM_GEMV_DEPENDENT_LAUNCH"};
};

// BQMM_GEMV_DEPENDENT_LAUNCH sets the option gemv_dependent_launch; malformed values name it.
TEST_F(Fp8EnvTest, GemvDependentLaunch) {
  testing::expect_dependent_launch_from_env(fp8_matmul_options_from_env);
}

// BQMM_DEQUANT_SCRATCH_MIB bounds the dequant scratch; malformed values name it.
TEST_F(Fp8EnvTest, ScratchMib) {
  testing::expect_scratch_mib_from_env(fp8_matmul_options_from_env, "BQMM_DEQUANT_SCRATCH_MIB");
  setenv("BQMM_DEQUANT_SCRATCH_MIB", "64", 1);
  Fp8MatMulOptions o;
  ASSERT_TRUE(fp8_matmul_options_from_env(&o).ok());
  EXPECT_EQ(plan(problem(100, 262144, 8192, 128, DType::kBFloat16), kHopper, o, without_gemm())
                .dequant.n_tile,
            4096);
}

}  // namespace
}  // namespace bqmm
