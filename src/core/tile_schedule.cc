#include "core/tile_schedule.h"

namespace bqmm {

std::vector<TileStep> tile_schedule(int64_t num_tiles, bool overlap) {
  std::vector<TileStep> steps;
  auto add = [&](TileStep::Kind kind, int64_t tile, int buffer, bool second) {
    steps.push_back(TileStep{kind, tile, buffer, second});
  };
  // The second stream starts after everything enqueued before the call (the weights, the
  // QDQ'd activation).
  if (overlap) {
    add(TileStep::kRecordFork, -1, -1, false);
    add(TileStep::kWaitFork, -1, -1, true);
  }
  for (int64_t t = 0; t < num_tiles; ++t) {
    const int b = overlap ? static_cast<int>(t % 2) : 0;
    if (overlap) {
      // Buffer b was last read by the GEMM of tile t - 2.
      if (t >= 2) add(TileStep::kWaitConsumed, -1, b, true);
      add(TileStep::kDequant, t, b, true);
      add(TileStep::kRecordDequantized, -1, b, true);
      add(TileStep::kWaitDequantized, -1, b, false);
    } else {
      add(TileStep::kDequant, t, b, false);
    }
    add(TileStep::kGemm, t, b, false);
    if (overlap) add(TileStep::kRecordConsumed, -1, b, false);
  }
  return steps;
}

}  // namespace bqmm
