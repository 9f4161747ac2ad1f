// The dequant + GEMM schedule, checked for hazards by simulating its two streams with
// vector clocks: a step happens-before another when every stream position it depends on
// is covered. Events behave as in CUDA: a wait depends on the most recent record of the
// event at the time the wait is enqueued (host order = schedule order).
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <vector>

#include "core/tile_schedule.h"

namespace bqmm {
namespace {

using Clock = std::array<int64_t, 2>;  // steps of [caller's stream, second stream] covered

bool covers(const Clock& later, const Clock& earlier) {
  return later[0] >= earlier[0] && later[1] >= earlier[1];
}

struct Simulated {
  std::vector<TileStep> steps;
  std::vector<Clock> done;  // clock of each step once it has run
};

Simulated simulate(int64_t tiles, bool overlap) {
  Simulated sim;
  sim.steps = tile_schedule(tiles, overlap);
  Clock stream_clock[2] = {{0, 0}, {0, 0}};
  std::map<std::pair<int, int>, Clock> recorded;  // (event kind, buffer) -> clock
  auto merge = [](Clock& c, const Clock& e) {
    c[0] = std::max(c[0], e[0]);
    c[1] = std::max(c[1], e[1]);
  };
  for (const TileStep& s : sim.steps) {
    const int st = s.second_stream ? 1 : 0;
    Clock& c = stream_clock[st];
    switch (s.kind) {
      case TileStep::kWaitFork:
        merge(c, recorded.at({TileStep::kRecordFork, -1}));
        break;
      case TileStep::kWaitConsumed:
        merge(c, recorded.at({TileStep::kRecordConsumed, s.buffer}));
        break;
      case TileStep::kWaitDequantized:
        merge(c, recorded.at({TileStep::kRecordDequantized, s.buffer}));
        break;
      default:
        break;
    }
    ++c[st];
    sim.done.push_back(c);
    if (s.kind == TileStep::kRecordFork || s.kind == TileStep::kRecordConsumed ||
        s.kind == TileStep::kRecordDequantized)
      recorded[{s.kind, s.buffer}] = c;
  }
  return sim;
}

// Index of the step of `kind` for `tile`.
size_t find(const Simulated& sim, TileStep::Kind kind, int64_t tile) {
  for (size_t i = 0; i < sim.steps.size(); ++i)
    if (sim.steps[i].kind == kind && sim.steps[i].tile == tile) return i;
  ADD_FAILURE() << "no step " << kind << " for tile " << tile;
  return 0;
}

void expect_no_hazards(int64_t tiles, bool overlap) {
  SCOPED_TRACE(::testing::Message() << tiles << " tiles, overlap=" << overlap);
  const Simulated sim = simulate(tiles, overlap);
  for (int64_t t = 0; t < tiles; ++t) {
    const size_t dq = find(sim, TileStep::kDequant, t);
    const size_t gemm = find(sim, TileStep::kGemm, t);
    // RAW: the GEMM reads what its tile's dequantization wrote.
    EXPECT_TRUE(covers(sim.done[gemm], sim.done[dq])) << "tile " << t;
    EXPECT_EQ(sim.steps[gemm].buffer, sim.steps[dq].buffer);
    EXPECT_EQ(sim.steps[gemm].buffer, overlap ? t % 2 : 0);
    EXPECT_FALSE(sim.steps[gemm].second_stream);
    // WAR: a dequantization overwrites its buffer only after every earlier GEMM that read
    // that buffer has finished.
    for (int64_t u = 0; u < t; ++u) {
      const size_t earlier = find(sim, TileStep::kGemm, u);
      if (sim.steps[earlier].buffer != sim.steps[dq].buffer) continue;
      EXPECT_TRUE(covers(sim.done[dq], sim.done[earlier])) << "tile " << t << " after " << u;
    }
  }
  // The second stream's work is joined back: the last step on the caller's stream
  // covers every step of the call.
  size_t last_main = 0;
  for (size_t i = 0; i < sim.steps.size(); ++i)
    if (!sim.steps[i].second_stream) last_main = i;
  for (size_t i = 0; i < sim.steps.size(); ++i)
    EXPECT_TRUE(covers(sim.done[last_main], sim.done[i])) << "step " << i << " not joined";
  // The second stream starts after the caller's earlier work (the fork).
  for (size_t i = 0; i < sim.steps.size(); ++i) {
    if (sim.steps[i].second_stream) {
      EXPECT_GE(sim.done[i][0], 1) << "step " << i;
    }
  }
}

TEST(TileSchedule, NoHazardsWithOrWithoutOverlap) {
  for (int64_t tiles : {1, 2, 3, 4, 5, 11, 32})
    for (bool overlap : {false, true}) expect_no_hazards(tiles, overlap);
}

TEST(TileSchedule, OverlapRunsTheNextDequantizationBesideTheGemm) {
  // Tile 1's dequantization must not wait for tile 0's GEMM (it uses the other buffer):
  // that is the overlap. Tile 2's must wait for tile 0's GEMM (same buffer).
  const Simulated sim = simulate(4, true);
  const size_t gemm0 = find(sim, TileStep::kGemm, 0);
  EXPECT_FALSE(covers(sim.done[find(sim, TileStep::kDequant, 1)], sim.done[gemm0]));
  EXPECT_TRUE(covers(sim.done[find(sim, TileStep::kDequant, 2)], sim.done[gemm0]));
  for (int64_t t = 0; t < 4; ++t)
    EXPECT_TRUE(sim.steps[find(sim, TileStep::kDequant, t)].second_stream);
}

TEST(TileSchedule, WithoutOverlapEverythingIsOnTheCallersStreamInOrder) {
  const std::vector<TileStep> steps = tile_schedule(3, false);
  ASSERT_EQ(steps.size(), 6u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_FALSE(steps[i].second_stream);
    EXPECT_EQ(steps[i].kind, i % 2 == 0 ? TileStep::kDequant : TileStep::kGemm);
    EXPECT_EQ(steps[i].tile, static_cast<int64_t>(i / 2));
  }
}

}  // namespace
}  // namespace bqmm
