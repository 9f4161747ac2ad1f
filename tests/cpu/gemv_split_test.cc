// choose_gemv_k_split (src/core/gemv_split.h), the K split both tensor-core GEMV planners
// take: cost = waves x (windows per warp + fill), cheapest wins, the larger on a tie,
// powers of two up to max_k_split and up to the window count.
#include <gtest/gtest.h>

#include "core/gemv_split.h"

namespace bqmm {
namespace {

GemvSplitModel model(int64_t tiles, int64_t windows, int64_t resident, int max_k_split = 8,
                     int64_t fill = 2) {
  GemvSplitModel m;
  m.tiles = tiles;
  m.windows = windows;
  m.resident_warps = resident;
  m.pipeline_fill = fill;
  m.max_k_split = max_k_split;
  return m;
}

TEST(GemvSplit, SplitsUntilTheWaveIsFull) {
  // 100 tiles, 2000 resident warps: every k_split up to 8 is one wave; the most warps win.
  EXPECT_EQ(choose_gemv_k_split(model(100, 128, 2000)), 8);
  // 1000 tiles: k_split 2 fills one wave (64 + 2); 4 needs two (2 x 34).
  EXPECT_EQ(choose_gemv_k_split(model(1000, 128, 2000)), 2);
}

TEST(GemvSplit, TiesGoToTheLargerSplit) {
  // 2 tiles, 4 resident warps, 8 windows, no fill: k_split 1 costs 1 x 8, 2 costs 1 x 4,
  // 4 costs 2 x 2, 8 costs 4 x 1: 2, 4 and 8 tie at 4; the largest wins.
  EXPECT_EQ(choose_gemv_k_split(model(2, 8, 4, 8, 0)), 8);
}

TEST(GemvSplit, BoundedByWindowsAndMaximum) {
  EXPECT_EQ(choose_gemv_k_split(model(1, 3, 1000)), 2);  // 3 windows: no k_split 4
  EXPECT_EQ(choose_gemv_k_split(model(1, 1, 1000)), 1);
  EXPECT_EQ(choose_gemv_k_split(model(1, 4096, 1000, 4)), 4);
  EXPECT_EQ(choose_gemv_k_split(model(1, 4096, 1000, 1)), 1);
}

TEST(GemvSplit, NoResidencyInformationIsOneWarp) {
  // resident_warps <= 0 counts as 1 (a DeviceInfo without an SM count): never divides by 0.
  EXPECT_EQ(choose_gemv_k_split(model(16, 64, 0)), 1);
  EXPECT_EQ(choose_gemv_k_split(model(16, 64, -5)), 1);
}

TEST(GemvSplit, NoWindowsIsOne) { EXPECT_EQ(choose_gemv_k_split(model(16, 0, 1000)), 1); }

// The K units both planners deal out: 64-byte windows, or 128-byte TMA tiles (a partial
// last one counts).
TEST(GemvSplit, KUnits) {
  EXPECT_EQ(gemv_k_units(8192, false), 128);
  EXPECT_EQ(gemv_k_units(8192, true), 64);
  EXPECT_EQ(gemv_k_units(320, true), 3);
  EXPECT_EQ(gemv_k_units(48, false), 1);
  EXPECT_EQ(gemv_k_units(0, true), 0);
}

// TMA tiles need SM90 and 32-bit box coordinates.
TEST(GemvSplit, TmaFits) {
  const int64_t k2g = int64_t{1} << 31;
  EXPECT_TRUE(gemv_tma_fits(90, 28672, 8192));
  EXPECT_TRUE(gemv_tma_fits(100, k2g - 1, k2g - 1));
  EXPECT_FALSE(gemv_tma_fits(89, 28672, 8192));
  EXPECT_FALSE(gemv_tma_fits(90, k2g, 8192));
  EXPECT_FALSE(gemv_tma_fits(90, 16, k2g));
}

// Where the TMA rule starts: N x K of 128 Mi codes.
TEST(GemvSplit, TmaPays) {
  EXPECT_TRUE(gemv_tma_pays(28672, 8192));
  EXPECT_TRUE(gemv_tma_pays(8192, 16384));
  EXPECT_FALSE(gemv_tma_pays(8192, 16384 - 1));
  EXPECT_FALSE(gemv_tma_pays(8192, 8192));
}

// A warp's TMA tiles against an enumeration of the row's tiles: tile j of a row of T
// tiles goes to warp j % k_split, and only the last (tile T - 1) can be partial.
TEST(GemvSplit, WarpTilesMatchEnumeration) {
  for (const int64_t row_bytes : {16, 64, 128, 144, 256, 320, 1024, 4096 + 64, 8192, 14336}) {
    const int64_t tiles = (row_bytes + 127) / 128;
    for (const uint32_t k_split : {1u, 2u, 4u, 8u}) {
      int covered = 0;
      for (uint32_t warp = 0; warp < k_split; ++warp) {
        int count = 0, partial = -1;
        for (int64_t j = warp; j < tiles; j += k_split, ++count)
          if (j == tiles - 1 && row_bytes % 128 != 0) partial = count;
        const GemvWarpTiles t(row_bytes, warp, k_split);
        EXPECT_EQ(t.count, count) << row_bytes << " " << warp << "/" << k_split;
        EXPECT_EQ(t.partial, partial) << row_bytes << " " << warp << "/" << k_split;
        covered += t.count;
      }
      EXPECT_EQ(covered, tiles) << row_bytes << " k_split " << k_split;
    }
  }
  // A warp past the row's tiles has none.
  EXPECT_EQ(GemvWarpTiles(256, 5, 8).count, 0);
  EXPECT_EQ(GemvWarpTiles(256, 5, 8).partial, -1);
}

// One partial wave of at least 3/4 of the resident warps: 750 / 1000 and 999 / 1000 are,
// 749 (less) and 1000 (a whole wave) are not.
TEST(GemvSplit, PartialWaveOfThreeQuarters) {
  EXPECT_TRUE(gemv_split_partial_wave(model(375, 64, 1000), 2));
  EXPECT_TRUE(gemv_split_partial_wave(model(999, 64, 1000), 1));
  EXPECT_FALSE(gemv_split_partial_wave(model(749, 64, 1000), 1));
  EXPECT_FALSE(gemv_split_partial_wave(model(500, 64, 1000), 2));
  EXPECT_FALSE(gemv_split_partial_wave(model(1000, 64, 1000), 2));
  // The planner's geometry: 28672 columns, two tiles per warp, 132 SMs x 16 warps.
  const GemvSplitModel m = gemv_split_model(28672, 64, 132, 16, 2);
  EXPECT_EQ(m.tiles, 896);
  EXPECT_EQ(m.resident_warps, 2112);
  EXPECT_TRUE(gemv_split_partial_wave(m, 2));
  EXPECT_FALSE(gemv_split_partial_wave(m, 4));
}

// The two-tile kernels' register bound: 168 (12 warps per SM, k_split <= 4) where its
// cheapest split, its cost weighed by 90 %, beats the 128-register (16-warp) model's.
// Two-tile models of K = 8192 at a start of 6 windows on 132 SMs.
GemvSplitModel two_tile_model(int64_t n) { return gemv_split_model(n, 64, 132, 16, 2, 6); }

struct Registers {
  Status status;
  int registers = -1;
  int k_split = -1;  // left as is unless 168 is taken
};

Registers registers_for(int64_t n, int option, int option_k_split = 0, int wide_min_k_split = 1) {
  Registers r;
  r.status = choose_gemv_registers(two_tile_model(n), 132, option, option_k_split, &r.registers,
                                   &r.k_split, wide_min_k_split);
  return r;
}

TEST(GemvSplit, RegistersWideWhereCheaper) {
  EXPECT_EQ(kGemvTwoTileRegisters, 128);
  EXPECT_EQ(kGemvWideRegisters, 168);
  // 640 two-tile warps' columns: k_split 2 is one wave of either (32 + 6 = 38): 0.9 x 38.
  Registers r = registers_for(20480, -1);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.registers, kGemvWideRegisters);
  EXPECT_EQ(r.k_split, 2);
  // 896: one wave of 2 at 16 warps per SM (38), at 12 the best is 3 waves of 4 (66).
  r = registers_for(28672, -1);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.registers, kGemvTwoTileRegisters);
  EXPECT_EQ(r.k_split, -1);
  // 1408: one wave of 1 at 12 (0.9 x 70) against 3 of 4 at 16 (66); from k_split 2 at 12
  // the best is 2 waves of 2 (0.9 x 76): 128.
  r = registers_for(45056, -1);
  EXPECT_EQ(r.registers, kGemvWideRegisters);
  EXPECT_EQ(r.k_split, 1);
  r = registers_for(45056, -1, 0, 2);
  EXPECT_EQ(r.registers, kGemvTwoTileRegisters);
  EXPECT_EQ(r.k_split, -1);
}

TEST(GemvSplit, RegistersForced) {
  Registers r = registers_for(28672, kGemvWideRegisters);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.registers, kGemvWideRegisters);
  EXPECT_EQ(r.k_split, 4);  // the 12-warp model's split
  r = registers_for(20480, kGemvTwoTileRegisters);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.registers, kGemvTwoTileRegisters);
  EXPECT_EQ(r.k_split, -1);
  // A forced split above 4 keeps 128 where the choice is the model's.
  r = registers_for(20480, -1, 8);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.registers, kGemvTwoTileRegisters);
  r = registers_for(20480, -1, 4);
  EXPECT_EQ(r.registers, kGemvWideRegisters);
  // ... and is an error with 168 forced, naming both keys; nothing is written.
  r = registers_for(20480, kGemvWideRegisters, 8);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(),
            "plan override: registers=168 holds k_split up to 4, but k_split=8");
  EXPECT_EQ(r.registers, -1);
  EXPECT_EQ(r.k_split, -1);
}

}  // namespace
}  // namespace bqmm
