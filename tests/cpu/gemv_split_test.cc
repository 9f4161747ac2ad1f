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

}  // namespace
}  // namespace bqmm
