// The fused GEMM's geometry and tiling rule (core/gemm_plan.h), pure functions both
// planners and the kernel share: stage counts and residency from shared memory, tile
// heights, and the K split's wave model on its own numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "common/plan_testing.h"
#include "core/gemm_plan.h"

namespace bqmm {
namespace {

constexpr DeviceInfo kHopper{90, 132};
constexpr DeviceInfo kAmpere{80, 108};

// A stage: 128 rows x 128 weight bytes and the activation tile (slab halves + the pad).
TEST(GemmPlan, StageBytes) {
  EXPECT_EQ(gemm_slab_k(8), 128);
  EXPECT_EQ(gemm_slab_k(4), 256);
  EXPECT_EQ(gemm_act_pitch_bytes(8), 288);  // 128 halves + 32
  EXPECT_EQ(gemm_act_pitch_bytes(4), 576);  // 256 halves + 64
  EXPECT_EQ(gemm_stage_bytes(16, 8), 16384 + 16 * 288);
  EXPECT_EQ(gemm_stage_bytes(64, 4), 16384 + 64 * 576);
}

// Two blocks per SM90 SM wherever three stages fit twice in 228 KB; else one block of up
// to 160 KB (4-bit at 64 rows: 52 KB stages, 3 of them).
TEST(GemmPlan, StagesAndResidency) {
  struct Case { int tile_m, bits, stages, sm90_blocks; };
  for (const Case c : {Case{16, 8, 4, 2}, Case{32, 8, 4, 2}, Case{64, 8, 3, 2},
                       Case{16, 4, 4, 2}, Case{32, 4, 3, 2}, Case{64, 4, 3, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.tile_m << " rows, " << c.bits << "-bit");
    EXPECT_EQ(gemm_stages(c.tile_m, c.bits), c.stages);
    EXPECT_EQ(gemm_blocks_per_sm(c.tile_m, c.bits, 90), c.sm90_blocks);
    EXPECT_EQ(gemm_blocks_per_sm(c.tile_m, c.bits, 80), 1);  // 164 KB per SM
    EXPECT_LE(gemm_smem_bytes(c.tile_m, c.bits), kGemmOneBlockSmemBytes);
    EXPECT_GE(gemm_stages(c.tile_m, c.bits), kGemmMinStages);
  }
  EXPECT_EQ(gemm_two_block_stages(64, 4), 0);
}

TEST(GemmPlan, TileHeight) {
  EXPECT_EQ(gemm_tile_m(9), 16);
  EXPECT_EQ(gemm_tile_m(16), 16);
  EXPECT_EQ(gemm_tile_m(17), 32);
  EXPECT_EQ(gemm_tile_m(32), 32);
  EXPECT_EQ(gemm_tile_m(33), 64);
  EXPECT_EQ(gemm_tile_m(128), 64);
}

// cost(split) = waves x (slabs per block + stages), the least wins.
TEST(GemmPlan, KSplitWaveModel) {
  // 64 blocks of 64 slabs on 264 resident: 1 -> 68, 2 -> 36, 4 -> 20, 8 -> 2 waves x 12.
  EXPECT_EQ(gemm_split_cost(64, 64, 1, 264, 4, 4), 20);
  EXPECT_EQ(gemm_split_cost(64, 64, 1, 264, 4, 8), 24);
  EXPECT_EQ(choose_gemm_k_split(64, 64, 264, 4), 4);
  // A grid of a whole wave is not split.
  EXPECT_EQ(choose_gemm_k_split(264, 64, 264, 4), 1);
  // Never more splits than slabs, never more than kGemmMaxKSplit.
  EXPECT_EQ(choose_gemm_k_split(1, 2, 264, 4), 2);
  EXPECT_EQ(choose_gemm_k_split(1, 4096, 264, 4), kGemmMaxKSplit);
  // Splitting that only adds waves loses: 2 blocks of 8 slabs on one resident block cost
  // 2 x 12 = 24 unsplit, 4 x 8 = 32 split in two.
  EXPECT_EQ(gemm_split_cost(2, 8, 1, 1, 4, 1), 24);
  EXPECT_EQ(gemm_split_cost(2, 8, 1, 1, 4, 2), 32);
  EXPECT_EQ(choose_gemm_k_split(2, 8, 1, 4), 1);
}

// plan_gemm_tiles: the rule for a problem and a device, forced values kept.
TEST(GemmPlan, Tiles) {
  const GemmConfig g = plan_gemm_tiles(GemmShape{16, 8192, 8192, 8, true, 128}, kHopper, GemmForced{0, 0, 0});
  EXPECT_FALSE(g.wgmma);
  EXPECT_EQ(g.tile_m, 16);
  EXPECT_EQ(g.tile_n, kGemmTileN);
  EXPECT_EQ(g.stages, 4);
  EXPECT_EQ(g.k_split, 4);
  // 4-bit rows of 4096 bytes are 32 slabs; on SM80 one block per SM.
  EXPECT_EQ(plan_gemm_tiles(GemmShape{16, 8192, 4096, 4, false, 128}, kAmpere).k_split, 1);
  const GemmConfig forced =
      plan_gemm_tiles(GemmShape{100, 4096, 8192, 8, false, 128}, kHopper, GemmForced{0, 16, 2});
  EXPECT_FALSE(forced.wgmma);
  EXPECT_EQ(forced.tile_m, 16);
  EXPECT_EQ(forced.stages, 4);
  EXPECT_EQ(forced.k_split, 2);
}

// The wgmma mainloop's block constants by the blocks a stage holds: 1, 2 or 4 loaded as
// stored; 4 or 8 (the 64-row tile's whole slabs) as vectors where the launcher finds them
// aligned; 8 unaligned, and blocks under a chunk, where used.
TEST(GemmPlan, WgmmaConstants) {
  const auto tile = [](int tile_m, bool halves = false) {
    GemmConfig g;
    g.wgmma = true;
    g.tile_m = tile_m;
    g.tile_n = halves ? kKHalvesTileN : kGemmTileN;
    return g;
  };
  // Tile 64's whole slabs: 4-bit 256 K (chunks of 32), 8-bit 128 K (chunks of 16); tiles
  // 16 and 32 hold the same K.
  for (const int small : {16, 32}) {
    EXPECT_EQ(wgmma_consts(tile(small), 4, 64, true), 4 | kWgmmaVectorConsts) << small;
    EXPECT_EQ(wgmma_consts(tile(small), 8, 16, true), 8 | kWgmmaVectorConsts) << small;
    EXPECT_EQ(wgmma_consts(tile(small), 8, 128, false), 1) << small;
    EXPECT_EQ(wgmma_consts(tile(small, true), 4, 64, true), 2) << small;
  }
  for (const bool vectors : {true, false}) {
    EXPECT_EQ(wgmma_consts(tile(64), 4, 256, vectors), 1);
    EXPECT_EQ(wgmma_consts(tile(64), 4, 128, vectors), 2);
    EXPECT_EQ(wgmma_consts(tile(64), 4, 64, vectors), vectors ? 4 | kWgmmaVectorConsts : 4);
    EXPECT_EQ(wgmma_consts(tile(64), 4, 32, vectors), vectors ? 8 | kWgmmaVectorConsts : 0);
    EXPECT_EQ(wgmma_consts(tile(64), 4, 16, vectors), 0);
    EXPECT_EQ(wgmma_consts(tile(64), 8, 128, vectors), 1);
    EXPECT_EQ(wgmma_consts(tile(64), 8, 64, vectors), 2);
    EXPECT_EQ(wgmma_consts(tile(64), 8, 32, vectors), vectors ? 4 | kWgmmaVectorConsts : 4);
    EXPECT_EQ(wgmma_consts(tile(64), 8, 16, vectors), vectors ? 8 | kWgmmaVectorConsts : 0);
  }
  EXPECT_EQ(wgmma_stage_blocks(tile(64), 4, 16), 0);  // half a chunk
  // Half-slab stages (4-bit K halves, tile 128: no vectors) and tile 256's 64 K.
  EXPECT_EQ(wgmma_consts(tile(64, true), 4, 64, true), 2);
  EXPECT_EQ(wgmma_consts(tile(64, true), 4, 32, true), 4);
  EXPECT_EQ(wgmma_consts(tile(128), 4, 64, true), 2);
  EXPECT_EQ(wgmma_consts(tile(128), 8, 64, true), 2);
  EXPECT_EQ(wgmma_consts(tile(256), 4, 64, true), 1);
  EXPECT_EQ(wgmma_consts(tile(256), 8, 128, true), 1);
}

// The Hopper mainloop's stages: as many of its unpadded stages as 200 KB holds, up to 6;
// 4-bit at tile 128 in half slabs (64 bytes of each weight row, 128 K).
TEST(GemmPlan, WgmmaStages) {
  EXPECT_EQ(wgmma_slab_bytes(64, 4), 128);
  EXPECT_EQ(wgmma_slab_bytes(128, 8), 128);
  EXPECT_EQ(wgmma_slab_bytes(128, 4), 64);
  EXPECT_EQ(wgmma_slab_k(128, 4), 128);
  EXPECT_EQ(wgmma_stage_bytes(64, 8), 16384 + 64 * 256);
  EXPECT_EQ(wgmma_stage_bytes(128, 8), 16384 + 128 * 256);
  EXPECT_EQ(wgmma_stage_bytes(64, 4), 16384 + 64 * 512);
  EXPECT_EQ(wgmma_stage_bytes(128, 4), 8192 + 128 * 256);
  EXPECT_EQ(wgmma_stages(64, 8), 6);
  EXPECT_EQ(wgmma_stages(128, 8), 4);
  EXPECT_EQ(wgmma_stages(64, 4), 4);
  EXPECT_EQ(wgmma_stages(128, 4), 5);
  // Tile 256: 64 K a stage, one 32 KB panel of activation rows.
  EXPECT_EQ(wgmma_slab_bytes(256, 4), 32);
  EXPECT_EQ(wgmma_slab_bytes(256, 8), 64);
  EXPECT_EQ(wgmma_slab_k(256, 4), 64);
  EXPECT_EQ(wgmma_slab_k(256, 8), 64);
  EXPECT_EQ(wgmma_stage_bytes(256, 4), 4096 + 256 * 128);
  EXPECT_EQ(wgmma_stage_bytes(256, 8), 8192 + 256 * 128);
  EXPECT_EQ(wgmma_stages(256, 4), 5);
  EXPECT_EQ(wgmma_stages(256, 8), 5);
  for (const int bits : {4, 8})
    for (const int tile_m : {16, 32, 64, 128, 256})
      if (wgmma_tile_supported(tile_m, bits, false, 128)) {
        EXPECT_GE(wgmma_stages(tile_m, bits), kWgmmaMinStages);
        EXPECT_LE(wgmma_smem_bytes(tile_m, bits), 227 * 1024);  // SM90's per-block limit
      }
}

// Which tiles the wgmma kernels instantiate.
TEST(GemmPlan, WgmmaTiles) {
  EXPECT_TRUE(wgmma_tile_supported(64, 8, true, 128));
  EXPECT_TRUE(wgmma_tile_supported(64, 8, true, 384));
  EXPECT_FALSE(wgmma_tile_supported(64, 8, true, 64));   // FP8: one scale block per slab
  EXPECT_TRUE(wgmma_tile_supported(128, 8, true, 128));
  EXPECT_TRUE(wgmma_tile_supported(128, 8, true, 256));
  EXPECT_FALSE(wgmma_tile_supported(128, 8, true, 64));  // FP8: one scale block per slab
  EXPECT_TRUE(wgmma_tile_supported(64, 8, false, 16));
  EXPECT_TRUE(wgmma_tile_supported(128, 8, false, 64));
  EXPECT_FALSE(wgmma_tile_supported(128, 8, false, 32));
  EXPECT_TRUE(wgmma_tile_supported(64, 4, false, 16));
  EXPECT_TRUE(wgmma_tile_supported(128, 4, false, 256));
  EXPECT_TRUE(wgmma_tile_supported(128, 4, false, 64));   // two blocks per half-slab stage
  EXPECT_FALSE(wgmma_tile_supported(128, 4, false, 32));
  for (const int small : {16, 32}) {  // as tile 64: the same stages' K
    EXPECT_TRUE(wgmma_tile_supported(small, 8, false, 128)) << small;
    EXPECT_TRUE(wgmma_tile_supported(small, 4, false, 16)) << small;
    EXPECT_TRUE(wgmma_tile_supported(small, 8, true, 128)) << small;
    EXPECT_FALSE(wgmma_tile_supported(small, 8, true, 64)) << small;
  }
  EXPECT_FALSE(wgmma_tile_supported(48, 8, false, 128));
  // Tile 256: N-bit codes in blocks of a stage's 64 K or more.
  EXPECT_FALSE(wgmma_tile_supported(256, 8, true, 128));  // FP8's partial sums do not fit
  EXPECT_TRUE(wgmma_tile_supported(256, 8, false, 64));
  EXPECT_TRUE(wgmma_tile_supported(256, 4, false, 64));
  EXPECT_TRUE(wgmma_tile_supported(256, 4, false, 256));
  EXPECT_FALSE(wgmma_tile_supported(256, 8, false, 32));
  EXPECT_FALSE(wgmma_tile_supported(256, 4, false, 32));
}

// wgmma_refusal: the reasons in order, nullptr where wgmma is taken.
TEST(GemmPlan, WgmmaRefusal) {
  const GemmShape fp8{64, 8192, 8192, 8, true, 128};
  const auto why = [](const GemmShape& s, DeviceInfo d = kHopper, GemmForced f = {}) {
    const char* r = wgmma_refusal(s, d, f);
    return std::string(r == nullptr ? "" : r);
  };
  EXPECT_EQ(why(fp8, kHopper, GemmForced{0, 0, 0}), "wgmma=0 (plan override)");
  EXPECT_EQ(why(fp8, kAmpere), "not an SM90 device (wgmma code is sm_90a only)");
  if (!wgmma_built()) {
    EXPECT_EQ(why(fp8), "this build has no SM90 in CUDA_ARCHITECTURES");
    return;
  }
  EXPECT_EQ(why(fp8), "");
  EXPECT_EQ(why(GemmShape{64, 8192, 8192, 8, true, 64}),
            "FP8 block_size % 128 != 0 (the wgmma tile scales one block per 128-K slab)");
  EXPECT_EQ(why(GemmShape{64, int64_t{1} << 31, 8192, 8, true, 128}),
            "N or the rows' bytes beyond TMA's 32-bit coordinates");
  EXPECT_EQ(why(GemmShape{64, 8192, int64_t{1} << 30, 8, true, 128}),  // activations 2^31 bytes
            "N or the rows' bytes beyond TMA's 32-bit coordinates");
  EXPECT_EQ(why(GemmShape{64, 8192, (int64_t{1} << 30) - 128, 8, true, 128}), "");
  EXPECT_EQ(why(fp8, kHopper, GemmForced{-1, 32, 0}), "");
  EXPECT_EQ(why(GemmShape{9, 8192, 8192, 8, true, 128}), "");  // every M

}

// The mainloop: wgmma on SM90, on its smallest tile holding M up to 64 rows, tile 128 above
// 64 rows where it exists; mma.sync on SM80, for FP8 blocks under a slab, and where forced.
TEST(GemmPlan, WgmmaMainloop) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  const auto plan = [](int64_t m, int bits, bool fp8, int64_t block, DeviceInfo d = kHopper,
                       GemmForced f = {}) {
    return plan_gemm_tiles(GemmShape{m, 8192, 8192 * bits / 8, bits, fp8, block}, d, f);
  };
  EXPECT_TRUE(plan(9, 8, true, 128).wgmma);
  EXPECT_EQ(plan(9, 8, true, 128).tile_m, 16);
  EXPECT_EQ(plan(16, 4, false, 16).tile_m, 16);
  EXPECT_TRUE(plan(17, 8, true, 128).wgmma);
  EXPECT_EQ(plan(17, 8, true, 128).tile_m, 32);
  EXPECT_EQ(plan(17, 8, true, 128).stages, 6);
  EXPECT_EQ(plan(32, 8, true, 128).tile_m, 32);
  EXPECT_EQ(plan(32, 4, false, 32).tile_m, 32);
  EXPECT_EQ(plan(33, 8, true, 128).tile_m, 64);
  EXPECT_EQ(plan(33, 8, true, 128).stages, 6 - 2 * (plan(33, 8, true, 128).tile_n == kKHalvesTileN));
  // FP8: float16 on 8192 rows (128 tiles of 64 rows, one wave) tile 64, bfloat16 128.
  EXPECT_EQ(plan(128, 8, true, 128).tile_m, 64);
  const auto fp8_bf16 = [](int64_t m, int64_t n) {
    return plan_gemm_tiles(GemmShape{m, n, 8192, 8, true, 128, /*bf16=*/true}, kHopper, {});
  };
  EXPECT_EQ(fp8_bf16(64, 8192).tile_m, 64);
  EXPECT_EQ(fp8_bf16(65, 8192).tile_m, 128);
  EXPECT_EQ(fp8_bf16(128, 8192).tile_m, 128);
  EXPECT_EQ(fp8_bf16(128, 8192).stages, 4);
  EXPECT_EQ(plan_gemm_tiles(GemmShape{65, 14336, 8192, 8, true, 128}, kHopper, {}).tile_m, 128);
  // The reasons --explain prints (wgmma_tile_128_refusal), in order.
  const GemmShape fp8_f16{100, 8192, 8192, 8, true, 128};
  EXPECT_STREQ(wgmma_tile_128_refusal(fp8_f16, kHopper, {}),
               "FP8 float16 and the 64-row tiles one wave of SMs: they are faster there");
  EXPECT_EQ(wgmma_tile_128_refusal(fp8_f16, kHopper, GemmForced{-1, 128, 0}), nullptr);
  EXPECT_STREQ(wgmma_tile_128_refusal(GemmShape{100, 8192, 8192, 8, true, 128, true}, kHopper,
                                      GemmForced{-1, 64, 0}),
               "tile_m <= 64 (plan override)");
  EXPECT_EQ(wgmma_tile_128_refusal(GemmShape{100, 8192, 8192, 8, true, 128, true}, kHopper, {}), nullptr);
  EXPECT_STREQ(wgmma_tile_128_refusal(GemmShape{100, 8192, 4096, 4, false, 32}, kHopper, GemmForced{-1, 128, 0}),
               "N-bit blocks under 64 codes (beside tile 128's accumulators their per-word constants do not fit)");
  EXPECT_STREQ(wgmma_tile_128_refusal(GemmShape{64, 8192, 4096, 4, false, 128}, kHopper, {}),
               "M <= 64: one 64-row tile holds it");
  EXPECT_EQ(plan(65, 8, false, 128).tile_m, 128);
  EXPECT_EQ(plan(65, 8, false, 128).stages, 4);
  EXPECT_EQ(plan(64, 8, false, 128).tile_m, 64);
  EXPECT_EQ(plan(128, 8, false, 32).tile_m, 64);    // blocks under half a slab
  EXPECT_EQ(plan(128, 4, false, 128).tile_m, 128);
  EXPECT_EQ(plan(128, 4, false, 128).stages, 5);
  EXPECT_EQ(plan(128, 4, false, 32).tile_m, 64);
  EXPECT_FALSE(plan(64, 8, true, 64).wgmma);        // FP8 block 64: mma.sync
  EXPECT_EQ(plan(64, 8, true, 64).tile_m, 64);
  EXPECT_FALSE(plan(64, 8, false, 128, kAmpere).wgmma);
  EXPECT_FALSE(plan(64, 8, false, 128, DeviceInfo{100, 148}).wgmma);
  EXPECT_FALSE(plan(64, 8, false, 128, kHopper, GemmForced{0, 0, 0}).wgmma);
  // A forced tile of 64 rows or fewer keeps the rule's mainloop (wgmma= picks it).
  EXPECT_TRUE(plan(64, 8, false, 128, kHopper, GemmForced{-1, 32, 0}).wgmma);
  EXPECT_EQ(plan(64, 8, false, 128, kHopper, GemmForced{-1, 32, 0}).tile_m, 32);
  EXPECT_EQ(plan(100, 8, true, 128, kHopper, GemmForced{-1, 16, 0}).tile_m, 16);
  EXPECT_FALSE(plan(64, 8, false, 128, kHopper, GemmForced{0, 32, 0}).wgmma);
  EXPECT_EQ(plan(64, 8, false, 128, kHopper, GemmForced{0, 32, 0}).tile_m, 32);
  EXPECT_TRUE(plan(16, 8, false, 128, kHopper, GemmForced{-1, 32, 0}).wgmma);
  EXPECT_EQ(plan(16, 8, false, 128, kHopper, GemmForced{-1, 32, 0}).tile_m, 32);
  EXPECT_EQ(plan(64, 8, false, 128, kHopper, GemmForced{-1, 128, 0}).tile_m, 128);
  // tile_m 128 where there is none: the rule's own choice (wgmma tile 64; mma.sync's 64 on
  // SM80).
  const GemmConfig no_tall = plan(100, 4, false, 32, kHopper, GemmForced{-1, 128, 0});
  EXPECT_TRUE(no_tall.wgmma);
  EXPECT_EQ(no_tall.tile_m, 64);
  const GemmConfig ampere = plan(100, 8, false, 128, kAmpere, GemmForced{-1, 128, 0});
  EXPECT_FALSE(ampere.wgmma);
  EXPECT_EQ(ampere.tile_m, 64);
  // One block per SM: M = 64 x N = 8192 is 64 blocks of 64 slabs on 132 SMs, split 2
  // (one wave of 32 + 6 against 64 + 6), which K halves then take.
  EXPECT_EQ(plan(64, 8, true, 128, kHopper, GemmForced{-1, 0, 0, -1, 0}).k_split, 2);
  // 4-bit tile 128: 64 blocks of 32 slabs (8192 x 4096 bytes), split 2 (one wave of 16 +
  // 3 slabs of fill, five half-slab stages, against 32 + 3).
  EXPECT_EQ(plan(128, 4, false, 128).k_split, 2);
}

// The 256-row tile: N-bit codes in blocks of 64 or more above 128 rows (and forced at any
// M), which gemm_max_rows lets the fused GEMM take to 256 rows; FP8 and smaller blocks
// stop at 128.
TEST(GemmPlan, WgmmaTile256) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  const auto shape = [](int64_t m, int bits, bool fp8, int64_t block) {
    return GemmShape{m, 8192, 8192 * bits / 8, bits, fp8, block};
  };
  for (const int bits : {4, 8}) {
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 128), kHopper, {}), 256);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 64), kHopper, {}), 256);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 32), kHopper, {}), 128);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 128), kAmpere, {}), 128);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 128), kHopper, GemmForced{0, 0, 0}), 128);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 128), kHopper, GemmForced{-1, 128, 0}), 128);
    EXPECT_EQ(gemm_max_rows(shape(200, bits, false, 128), kHopper, GemmForced{-1, 256, 0}), 256);
    EXPECT_TRUE(wgmma_takes_tile_256(shape(129, bits, false, 128), {}));
    EXPECT_FALSE(wgmma_takes_tile_256(shape(128, bits, false, 128), {}));
    EXPECT_TRUE(wgmma_takes_tile_256(shape(100, bits, false, 128), GemmForced{-1, 256, 0}));
    const GemmConfig g = plan_gemm_tiles(shape(256, bits, false, 128), kHopper, {});
    EXPECT_TRUE(g.wgmma);
    EXPECT_EQ(g.tile_m, 256);
    EXPECT_EQ(g.stages, 5);
    // 64 blocks on 132 SMs: split 2 (the fill counts 5 stages of a quarter or half slab).
    EXPECT_EQ(g.k_split, 2);
    EXPECT_EQ(plan_gemm_tiles(shape(160, bits, false, 128), kHopper, {}).tile_m, 256);
    EXPECT_EQ(plan_gemm_tiles(shape(128, bits, false, 128), kHopper, {}).tile_m, 128);
    EXPECT_EQ(plan_gemm_tiles(shape(100, bits, false, 128), kHopper, GemmForced{-1, 256, 0}).tile_m, 256);
    // Forced where it does not exist: the rule's own tile.
    EXPECT_EQ(plan_gemm_tiles(shape(100, bits, false, 32), kHopper, GemmForced{-1, 256, 0}).tile_m, 64);
  }
  EXPECT_EQ(gemm_max_rows(shape(200, 8, true, 128), kHopper, {}), 128);
  EXPECT_EQ(plan_gemm_tiles(GemmShape{100, 8192, 8192, 8, true, 128, /*bf16=*/true}, kHopper,
                            GemmForced{-1, 256, 0}).tile_m,
            128);
}

// The wgmma mainloop's K split of 2 summed in the tile's cluster: every format and tile but
// 4-bit codes on tiles of 64 rows or fewer (measured slower on 64), unless forced; never
// another split or mma.sync.
TEST(GemmPlan, ClusterSumsTheSplitOfTwo) {
  const auto shape = [](int64_t m, int bits, bool fp8) { return GemmShape{m, 8192, 8192 * bits / 8, bits, fp8, 128}; };
  GemmConfig g;
  g.wgmma = true;
  g.k_split = 2;
  for (const int tile_m : {16, 32, 64, 128, 256}) {
    g.tile_m = tile_m;
    EXPECT_EQ(fused_gemm_cluster_sums(shape(64, 4, false), g, {}), tile_m > 64) << tile_m;
    EXPECT_TRUE(fused_gemm_cluster_sums(shape(64, 8, false), g, {})) << tile_m;
    EXPECT_TRUE(fused_gemm_cluster_sums(shape(64, 8, true), g, {})) << tile_m;
    EXPECT_TRUE(fused_gemm_cluster_sums(shape(64, 4, false), g, GemmForced{-1, 0, 0, 1})) << tile_m;
    EXPECT_FALSE(fused_gemm_cluster_sums(shape(64, 8, false), g, GemmForced{-1, 0, 0, 0})) << tile_m;
  }
  g.k_split = 3;
  EXPECT_FALSE(fused_gemm_cluster_sums(shape(64, 8, false), g, GemmForced{-1, 0, 0, 1}));
  g.k_split = 2;
  g.wgmma = false;
  EXPECT_FALSE(fused_gemm_cluster_sums(shape(64, 8, false), g, GemmForced{-1, 0, 0, 1}));
  if (!wgmma_built()) return;
  // Through the planner: 8192 x 8192 M = 256 (tile 256, split 2) and 4-bit M = 64 (tile 64);
  // 8-bit codes at M = 64 take K halves instead, unless forced off.
  EXPECT_TRUE(plan_gemm_tiles(shape(256, 4, false), kHopper, {}).cluster_reduce);
  EXPECT_FALSE(plan_gemm_tiles(shape(64, 4, false), kHopper, {}).cluster_reduce);
  EXPECT_FALSE(plan_gemm_tiles(shape(64, 8, true), kHopper, {}).cluster_reduce);
  EXPECT_TRUE(plan_gemm_tiles(shape(64, 8, true), kHopper, GemmForced{-1, 0, 0, -1, 0}).cluster_reduce);
}

// K halves on the wgmma mainloop's tiles of up to 64 rows (8-bit codes in blocks of whole slabs;
// 4-bit blocks of 64 where k_blocks % 4 != 0) in place of a K split of 2: 64-row tiles,
// unsplit, no cluster; forced on wherever the tile and K allow, off never.
TEST(GemmPlan, KHalvesReplaceTheSplitOfTwo) {
  if (!wgmma_built()) GTEST_SKIP() << "this build has no SM90: the wgmma mainloop is never planned";
  const auto shape = [](int64_t m, int64_t n, int bits, bool fp8, int64_t block = 128, int64_t k = 8192) {
    return GemmShape{m, n, k * bits / 8, bits, fp8, block};
  };
  for (const int bits : {8, 4})
    for (const bool fp8 : {true, false})
      for (const int64_t m : {17, 32, 64}) {
        if (fp8 && bits == 4) continue;
        // 4-bit: blocks of 64, two a half-slab stage; 129 of them a row (K = 8256), so that
        // the split's slabs of four cannot load as vectors.
        const int64_t block = bits == 4 ? 64 : 128;
        const int64_t k = bits == 4 ? 8256 : 8192;
        SCOPED_TRACE(::testing::Message() << (fp8 ? "fp8" : "int") << bits << " M=" << m);
        const GemmConfig g = plan_gemm_tiles(shape(m, 8192, bits, fp8, block, k), kHopper, {});
        GemmShape bf16 = shape(m, 8192, bits, fp8, block, k);
        bf16.bf16 = true;  // FP8 with bfloat16 activations keeps the split (measured slower)
        EXPECT_EQ(plan_gemm_tiles(bf16, kHopper, {}).tile_n, fp8 ? kGemmTileN : kKHalvesTileN);
        ASSERT_TRUE(g.wgmma);
        const int tile_m = m <= 32 ? 32 : 64;
        EXPECT_EQ(g.tile_m, tile_m);
        EXPECT_EQ(g.tile_n, kKHalvesTileN);
        EXPECT_EQ(g.k_split, 1);
        EXPECT_FALSE(g.cluster_reduce);
        EXPECT_EQ(g.stages, wgmma_stages(tile_m, bits, true));
        EXPECT_EQ(gemm_stage_row_bytes(g, bits), bits == 4 ? 64 : 128);  // 4-bit: half slabs
        const GemmConfig off =
            plan_gemm_tiles(shape(m, 8192, bits, fp8, block, k), kHopper, GemmForced{-1, 0, 0, -1, 0});
        EXPECT_EQ(off.tile_n, kGemmTileN);
        EXPECT_EQ(off.k_split, 2);
        EXPECT_EQ(gemm_stage_row_bytes(off, bits), 128);
        if (bits == 4) {
          // K = 8192: 128 blocks, the split's slabs of four as vectors (measured faster),
          // but forced.
          const GemmConfig split = plan_gemm_tiles(shape(m, 8192, 4, false, 64), kHopper, {});
          EXPECT_EQ(split.tile_n, kGemmTileN);
          EXPECT_EQ(split.k_split, 2);
          EXPECT_EQ(wgmma_consts(split, 4, 64, true), 4 | kWgmmaVectorConsts);
          EXPECT_EQ(plan_gemm_tiles(shape(m, 8192, 4, false, 64), kHopper, GemmForced{-1, 0, 0, -1, 1}).tile_n,
                    kKHalvesTileN);
        }
      }
  EXPECT_EQ(wgmma_stages(64, 8, true), 4);  // 16 KB of weight and 2 x 16 KB of activations a stage
  EXPECT_EQ(wgmma_slab_bytes(64, 4, true), 64);
  EXPECT_EQ(wgmma_stage_bytes(64, 4, true), 8192 + 2 * 64 * 256);
  EXPECT_EQ(wgmma_stages(64, 4, true), 5);
  // Not on other blocks (4-bit: but 64; 8-bit: under a slab), even forced; nor on tile 128,
  // or a split other than 2 (unless forced).
  for (const int64_t block : {32, 128, 256})
    EXPECT_EQ(plan_gemm_tiles(shape(64, 8192, 4, false, block), kHopper, GemmForced{-1, 0, 0, -1, 1}).tile_n,
              kGemmTileN);
  EXPECT_EQ(plan_gemm_tiles(shape(64, 8192, 8, false, 64), kHopper, GemmForced{-1, 0, 0, -1, 1}).tile_n, kGemmTileN);
  EXPECT_EQ(plan_gemm_tiles(shape(100, 4096, 8, false), kHopper, {}).tile_n, kGemmTileN);
  EXPECT_EQ(plan_gemm_tiles(shape(64, 28672, 8, true), kHopper, {}).tile_n, kGemmTileN);  // unsplit
  const GemmConfig forced = plan_gemm_tiles(shape(64, 28672, 8, true), kHopper, GemmForced{-1, 0, 0, -1, 1});
  EXPECT_EQ(forced.tile_n, kKHalvesTileN);
  EXPECT_EQ(forced.k_split, 1);
  const GemmConfig forced_split = plan_gemm_tiles(shape(64, 8192, 8, true), kHopper, GemmForced{-1, 0, 4, -1, 1});
  EXPECT_EQ(forced_split.tile_n, kKHalvesTileN);
  EXPECT_EQ(forced_split.k_split, 4);
  EXPECT_FALSE(forced_split.cluster_reduce);
}

// The launchers' dispatch over a kernel list: each entry reaches its own index, a key the
// list lacks reaches none.
TEST(GemmPlan, KernelListVisit) {
  for (size_t i = 0; i < std::size(kInt4WgmmaKernels); ++i) {
    size_t visited = 99;
    EXPECT_TRUE(visit_gemm_kernel<kInt4WgmmaKernels>(kInt4WgmmaKernels[i], [&](auto j) { visited = j; }));
    EXPECT_EQ(visited, i);
  }
  bool called = false;
  EXPECT_FALSE(visit_gemm_kernel<kFp8WgmmaKernels>(GemmKernelKey{true, 256, 1}, [&](auto) { called = true; }));
  EXPECT_FALSE(called);
  EXPECT_TRUE(gemm_kernel_built(GemmKernelKey{true, 64, 1, true}, 8, false));
  EXPECT_FALSE(gemm_kernel_built(GemmKernelKey{true, 64, 2, true}, 8, false));  // halves: 4-bit's form
  EXPECT_TRUE(gemm_kernel_built(GemmKernelKey{true, 64, 2, true}, 4, false));
  EXPECT_FALSE(gemm_kernel_built(GemmKernelKey{true, 256, 1}, 8, true));  // FP8 has no 256-row tile
  EXPECT_EQ(gemm_kernel_name(GemmKernelKey{true, 64, 4 | kWgmmaVectorConsts}),
            "wgmma tile_m 64, 4 scale blocks a stage as vectors");
  EXPECT_EQ(gemm_kernel_name(GemmKernelKey{true, 64, 2, true}), "wgmma tile_m 64, 2 scale blocks a stage, K halves");
  EXPECT_EQ(gemm_kernel_name(GemmKernelKey{false, 16, 8}), "mma.sync tile_m 16, 8 scale blocks a slab");
}

// Commit groups a stage, and where N-bit codes' scales go to the groups' sums
// (FusedWgmmaTile::kFold): tiles up to 32 rows, one or two blocks a stage of at most one a
// group, integer zero points.
TEST(GemmPlan, WgmmaGroupsAndFoldedScales) {
  EXPECT_EQ(wgmma_stage_groups(16, 4), 2);   // 256 K
  EXPECT_EQ(wgmma_stage_groups(16, 8), 1);   // 128 K
  EXPECT_EQ(wgmma_stage_groups(64, 4, true), 1);  // K halves: half slabs
  EXPECT_EQ(wgmma_stage_groups(128, 4), 1);
  EXPECT_EQ(wgmma_stage_groups(256, 8), 1);  // 64 K: one group of 4 steps
  for (const int tile : {16, 32}) {
    EXPECT_TRUE(wgmma_folds_nbits_scales(tile, 4, 2, false)) << tile;   // blocks of 128
    EXPECT_TRUE(wgmma_folds_nbits_scales(tile, 4, 1, false)) << tile;   // 256 or more
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 4, false)) << tile;  // 64: two a group
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 4 | kWgmmaVectorConsts, false)) << tile;
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 0, false)) << tile;  // under a chunk
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 2, true)) << tile;   // typed zero points
    EXPECT_TRUE(wgmma_folds_nbits_scales(tile, 8, 1, false)) << tile;
    EXPECT_TRUE(wgmma_folds_nbits_scales(tile, 8, 1, false, true)) << tile;  // K halves
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 8, 2, false)) << tile;
    EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 2, false, true)) << tile;  // 4-bit halves: 64
  }
  for (const int tile : {64, 128, 256}) EXPECT_FALSE(wgmma_folds_nbits_scales(tile, 4, 1, false)) << tile;
}

// Both planners' fused GEMM plans over M = 9..256, both activation types, every weight
// format, zero-point form and block size from 16 to 256 (FP8 from 32), K with whole and
// partial slabs and N of one to hundreds of tiles, on SM90 (132 and 78 SMs) and SM80: the
// kernel each launch would take (with and without the constants' vector form) is built,
// and every built kernel is planned for some problem (the lists hold only what plans
// reach; the wgmma lists where this build has SM90).
TEST(GemmPlan, EveryPlannedFusedGemmKernelIsBuiltAndEveryBuiltOnePlanned) {
  using Reached = std::set<std::tuple<int, bool, int, int, bool>>;  // bits (FP8: 0) and the key
  Reached reached;
  const auto record = [&](const GemmConfig& g, int bits, bool fp8, int64_t block_size, const std::string& what) {
    for (const bool vectors : {false, true}) {
      const GemmKernelKey k = gemm_kernel_key(g, bits, block_size, vectors);
      EXPECT_TRUE(gemm_kernel_built(k, bits, fp8)) << gemm_kernel_name(k) << " for " << what;
      reached.insert({fp8 ? 0 : bits, k.wgmma, k.tile_m, k.consts, k.halves});
    }
  };
  const DeviceInfo devices[] = {testing::kHopper, DeviceInfo{90, 78}, testing::kAmpere};
  const int64_t rows[] = {9, 12, 16, 17, 24, 32, 33, 48, 64, 65, 96, 100, 128, 129, 192, 256};
  const int64_t cols[] = {256, 1000, 8192, 28672};
  const int64_t depths[] = {1024, 8192, 8224, 8256};
  for (const DeviceInfo& d : devices)
    for (const DType t : {DType::kFloat16, DType::kBFloat16})
      for (const int64_t m : rows)
        for (const int64_t n : cols)
          for (const int64_t k : depths) {
            for (const int64_t bs : {32, 64, 128, 256}) {
              Fp8MatMulProblem p = testing::fp8_problem(m, n, k, bs, t);
              Fp8MatMulPlan plan;
              ASSERT_TRUE(plan_fp8_matmul(p, d, Fp8MatMulOptions{}, &plan).ok()) << p;
              if (plan.path == Fp8Path::kFusedGemm) record(plan.gemm, 8, true, bs, ::testing::PrintToString(p));
            }
            for (const int bits : {4, 8})
              for (const int64_t bs : {16, 32, 64, 128, 256})
                for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
                  NBitsMatMulProblem p = testing::nbits_problem(m, n, k, bits, bs, t);
                  p.zero_points = zp;
                  NBitsMatMulPlan plan;
                  ASSERT_TRUE(plan_nbits_matmul(p, d, NBitsMatMulOptions{}, &plan).ok()) << p;
                  if (plan.path == NBitsPath::kFusedGemm) record(plan.gemm, bits, false, bs, ::testing::PrintToString(p));
                }
          }
  const auto expect_planned = [&](int bits, const auto& list) {
    for (const GemmKernelKey& k : list)
      if (!k.wgmma || wgmma_built())
        EXPECT_EQ(reached.count({bits, k.wgmma, k.tile_m, k.consts, k.halves}), 1u)
            << gemm_kernel_name(k) << " is built for " << (bits == 0 ? "FP8" : std::to_string(bits) + "-bit")
            << " codes but no plan takes it";
  };
  for (const int bits : {0, 8, 4}) expect_planned(bits, kMmaGemmKernels);
  expect_planned(0, kFp8WgmmaKernels);
  expect_planned(8, kInt8WgmmaKernels);
  expect_planned(4, kInt4WgmmaKernels);
}

}  // namespace
}  // namespace bqmm
