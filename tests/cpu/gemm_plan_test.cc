// The fused GEMM's geometry and tiling rule (core/gemm_plan.h), pure functions both
// planners and the kernel share: stage counts and residency from shared memory, tile
// heights, and the K split's wave model on its own numbers.
#include <gtest/gtest.h>

#include <cstdint>

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
  EXPECT_EQ(gemm_split_cost(64, 64, 264, 4, 4), 20);
  EXPECT_EQ(gemm_split_cost(64, 64, 264, 4, 8), 24);
  EXPECT_EQ(choose_gemm_k_split(64, 64, 264, 4), 4);
  // A grid of a whole wave is not split.
  EXPECT_EQ(choose_gemm_k_split(264, 64, 264, 4), 1);
  // Never more splits than slabs, never more than kGemmMaxKSplit.
  EXPECT_EQ(choose_gemm_k_split(1, 2, 264, 4), 2);
  EXPECT_EQ(choose_gemm_k_split(1, 4096, 264, 4), kGemmMaxKSplit);
  // Splitting that only adds waves loses: 2 blocks of 8 slabs on one resident block cost
  // 2 x 12 = 24 unsplit, 4 x 8 = 32 split in two.
  EXPECT_EQ(gemm_split_cost(2, 8, 1, 4, 1), 24);
  EXPECT_EQ(gemm_split_cost(2, 8, 1, 4, 2), 32);
  EXPECT_EQ(choose_gemm_k_split(2, 8, 1, 4), 1);
}

// plan_gemm_tiles: the rule for a problem and a device, forced values kept.
TEST(GemmPlan, Tiles) {
  const GemmConfig g = plan_gemm_tiles(16, 8192, 8192, 8, kHopper);
  EXPECT_EQ(g.tile_m, 16);
  EXPECT_EQ(g.tile_n, kGemmTileN);
  EXPECT_EQ(g.stages, 4);
  EXPECT_EQ(g.k_split, 4);
  // 4-bit rows of 4096 bytes are 32 slabs; on SM80 one block per SM.
  EXPECT_EQ(plan_gemm_tiles(16, 8192, 4096, 4, kAmpere).k_split, 1);
  const GemmConfig forced = plan_gemm_tiles(100, 4096, 8192, 8, kHopper, 16, 2);
  EXPECT_EQ(forced.tile_m, 16);
  EXPECT_EQ(forced.stages, 4);
  EXPECT_EQ(forced.k_split, 2);
}

}  // namespace
}  // namespace bqmm
