// The order in which the dequant + GEMM paths enqueue their work, as plain data, so that
// the CPU tests can check it for hazards (src/cuda/tiled_dequant_gemm.cc executes it).
//
// Without overlap every step runs on the caller's stream. With overlap, tile t's
// dequantization runs on the handle's second stream into buffer t % 2 and its GEMM on the
// caller's stream: events order each GEMM after its dequantization (dequantized[b]) and
// each dequantization after the GEMM that last read its buffer (consumed[b]); the second
// stream forks from the caller's stream first and is joined back by the GEMMs' waits.
#pragma once

#include <cstdint>
#include <vector>

namespace bqmm {

struct TileStep {
  enum Kind {
    kRecordFork,          // caller's stream: record `fork`
    kWaitFork,            // second stream: wait for `fork`
    kWaitConsumed,        // second stream: wait for consumed[buffer]
    kDequant,             // dequantize `tile` into `buffer` (second stream with overlap)
    kRecordDequantized,   // second stream: record dequantized[buffer]
    kWaitDequantized,     // caller's stream: wait for dequantized[buffer]
    kGemm,                // caller's stream: GEMM of `tile` reading `buffer`
    kRecordConsumed,      // caller's stream: record consumed[buffer]
  };
  Kind kind;
  int64_t tile = -1;  // kDequant, kGemm
  int buffer = -1;    // every step but the fork's
  bool second_stream = false;
};

std::vector<TileStep> tile_schedule(int64_t num_tiles, bool overlap);

}  // namespace bqmm
