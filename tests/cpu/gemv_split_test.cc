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

}  // namespace
}  // namespace bqmm
