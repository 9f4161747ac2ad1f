// The K split of the tensor-core decode GEMVs (Fp8WeightMatMul's gemv_mma and
// NBitsMatMul's gemv), one rule for both planners.
//
// Both kernels give a warp one 16-column tile and a k_split-th of its rows' 64-byte
// windows (Fp8WeightMatMul's every k_split-th, NBitsMatMul's a contiguous range); the
// k_split warps of a block reduce through shared memory. The time is about
//     (waves of resident warps) x (windows per warp + pipeline fill):
// more warps hide more load latency until they no longer fit in one wave, and a partial
// last wave costs a whole one. The cheapest power of two up to max_k_split (and up to the
// window count) wins, the larger on a tie.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "bqmm/device.h"
#include "bqmm/status.h"

namespace bqmm {

// Register bounds per thread of the two-tile kernels (GemvConfig::registers): 128 holds
// 16 of their warps per SM (Hopper's and Ampere's 16 K registers per scheduler); 168
// holds 12, and each warp streams faster.
constexpr int kGemvTwoTileRegisters = 128;
constexpr int kGemvWideRegisters = 168;

// The geometry both kernels share.
constexpr int64_t kGemvMaxRows = 8;       // activation rows of a GEMV (the mma N extent)
// The line-load kernels also take M up to kGemvMaxGroupRows as row groups of
// kGemvGroupRows: each warp multiplies a decoded weight fragment with two 8-row halves of
// the group; a grid of ceil(M / 16) blocks per column block, the group varying fastest so
// that the groups of a column block read its weight bytes from HBM once and from L2 after.
constexpr int64_t kGemvGroupRows = 2 * kGemvMaxRows;
constexpr int64_t kGemvMaxGroupRows = 64;
constexpr int64_t gemv_row_groups(int64_t m) { return (m + kGemvGroupRows - 1) / kGemvGroupRows; }
// The most rows both planners give the row groups; above, the dequant + cuBLAS path. Each
// group costs about an M = 8 GEMV (the decode, not the HBM stream, paces it). On the H200,
// against dequant + cuBLAS on the four prefill shapes: M = 16 and 32 1.3-2.8x faster (FP8)
// and 1.7-4.7x (8-bit, 4-bit); M = 64 FP8 1.2-1.6x slower, N-bit between 1.4x faster and
// 5 % slower.
constexpr int64_t kGemvFusedMaxRows = 32;
static_assert(kGemvFusedMaxRows <= kGemvMaxGroupRows, "the kernels' row groups");
constexpr int64_t kGemvChunkBytes = 16;   // one 16-byte weight load per lane per row
constexpr int64_t kGemvTileCols = 16;     // output columns per warp tile (the mma M extent)
constexpr int64_t kGemvWindowBytes = 64;  // K bytes of a row per lane quad and window
constexpr int64_t kGemvTmaTileBytes = 128;  // K bytes of a row per TMA tile (SM90+)
constexpr int kGemvMaxKSplit = 8;         // the largest instantiated k_split
// NBitsMatMul's 4-bit window kernel without line loads or zero points (64 registers, 32
// warps per SM) also takes blocks of 16 warps, and its one-tile kernels at 80 registers (24
// warps per SM) blocks of 12: on grids of few tiles (N = 4096) a split of 8 leaves part of
// their residency unused (nbits_window_max_k_split, below).
constexpr int kNBitsWindowMaxKSplit = 16;
constexpr int kNBitsWindow80MaxKSplit = 12;
// Warps of a tensor-core GEMV an SM holds at once (the kernels' launch bounds: <= 128
// registers per thread), and the windows a warp's pipeline needs to fill (its first
// loads' latency, paid once per warp).
constexpr int64_t kGemvTensorCoreWarpsPerSm = 16;
constexpr int64_t kGemvPipelineFill = 2;
// NBitsMatMul's 4-bit window kernel with two tiles per warp (line loads): measured across
// N at K = 8192 on the H200.
constexpr int64_t kNBitsTwoTilePipelineFill = 6;
// The two-tile kernels at 168 registers (the plans' `registers`, kGemvWideRegisters;
// cuda/gemv/nbits_window.cu and fp8_mma.cu, kWide): blocks of up to 4 warps, 12 warps per SM.
// Each warp streams faster than at 128 registers: the model weighs its cost by
// kGemvWideCostPercent (each warp 4-17 % faster, measured on the H200).
constexpr int64_t kGemvWideWarpsPerSm = 12;
constexpr int kGemvWideMaxKSplit = 4;
constexpr int64_t kGemvWideCostPercent = 90;
// NBitsMatMul's window kernel (cuda/gemv/nbits_window.cu, kWindowBlocksPerSm, derived from
// this function; constexpr for it), line loads or not:
// 64 registers per thread, 32 warps per SM; 80 with packed zero points or 8-bit bfloat16
// codes, 24; 128 for 8-bit float16 codes, two tiles per warp or row groups (M > 8: each
// word multiplied with two halves of 8 rows), 16.
constexpr int64_t nbits_window_warps_per_sm(int bits, bool zero_points, bool float16,
                                         int tiles_per_warp = 1, bool row_groups = false) {
  if (tiles_per_warp == 2 || row_groups) return 16;
  return bits == 8 ? (float16 ? 16 : 24) : zero_points ? 24 : 32;
}

// The largest K split (warps per block) of a window kernel configuration, two blocks of it
// filling the SM's residency above: 16 for 4-bit without zero points or line loads (64
// registers), 12 for one tile at 80 registers (8-bit bfloat16 codes, 4-bit packed zero
// points), kGemvWideMaxKSplit at 168 registers (`wide`), else kGemvMaxKSplit.
constexpr int nbits_window_max_k_split(int bits, bool zero_points, bool float16, bool lines,
                                       int tiles_per_warp, bool wide, bool row_groups) {
  if (wide) return kGemvWideMaxKSplit;
  if (tiles_per_warp != 1 || row_groups) return kGemvMaxKSplit;
  if (bits == 4 && !zero_points && !lines) return kNBitsWindowMaxKSplit;
  if (nbits_window_warps_per_sm(bits, zero_points, float16) == 2 * kNBitsWindow80MaxKSplit)
    return kNBitsWindow80MaxKSplit;
  return kGemvMaxKSplit;
}

// SM90's TMA tile stream (cuda/gemv/tma.cuh) can carry an [n, row_bytes] weight: the copy
// engine exists, and the tiles' box coordinates (bytes into a row, row) are 32-bit.
inline bool gemv_tma_fits(int sm, int64_t n, int64_t row_bytes) {
  return sm >= 90 && n < (int64_t{1} << 31) && row_bytes < (int64_t{1} << 31);
}

// Where the TMA weight stream beats register loads on the H200: a
// long stream per warp amortizes its start (barriers, the first tiles' latency), so the
// rule is a size of N x K codes (one byte each for FP8, half a byte for 4-bit, whose
// tile holds twice the codes and twice the math). Measured: FP8 M = 2..8 and
// NBits 8-bit M <= 4 / 4-bit M = 1..8 at 28672 x 8192 (224 Mi codes) 5-15 % faster;
// 8192 x 8192 (64 Mi) and below mixed or up to 31 % slower.
constexpr int64_t kGemvTmaMinCodes = int64_t{128} << 20;
inline bool gemv_tma_pays(int64_t n, int64_t k) { return n * k >= kGemvTmaMinCodes; }

// The 128-byte TMA tiles of a row of `row_bytes` bytes that warp `warp` of a block's
// `k_split` warps takes: warp, warp + k_split, ... (`count` of them). A row that is not a
// whole number of tiles ends in a partial tile: `partial` is its index in this warp's
// sequence, or -1 where the warp does not have it. constexpr: the TMA kernels build it on
// the device (cuda/gemv/tma.cuh, WarpTiles), the CPU tests on the host.
struct GemvWarpTiles {
  int count = 0;
  int partial = -1;

  constexpr GemvWarpTiles() = default;
  constexpr GemvWarpTiles(int64_t row_bytes, uint32_t warp, uint32_t k_split) {
    const auto tiles =
        static_cast<uint32_t>((row_bytes + kGemvTmaTileBytes - 1) / kGemvTmaTileBytes);
    if (warp >= tiles) return;
    count = static_cast<int>((tiles - warp + k_split - 1) / k_split);
    if (row_bytes % kGemvTmaTileBytes != 0 && (tiles - 1 - warp) % k_split == 0)
      partial = count - 1;
  }
};

// The units of K a GEMV's K split deals out per row of `row_bytes` bytes: 128-byte TMA
// tiles, or the register-load kernels' 64-byte windows.
inline int64_t gemv_k_units(int64_t row_bytes, bool tma) {
  const int64_t unit = tma ? kGemvTmaTileBytes : kGemvWindowBytes;
  return (row_bytes + unit - 1) / unit;
}

struct GemvSplitModel {
  int64_t tiles = 0;            // 16-column tiles: ceil(N / 16)
  int64_t windows = 0;          // 64-byte windows per weight row
  int64_t resident_warps = 0;   // warps of the kernel the whole GPU holds at once
  int64_t pipeline_fill = 0;    // windows' worth of time a warp's first loads cost
  int max_k_split = 1;          // the largest instantiated k_split (a power of two)
  int min_k_split = 1;          // the smallest the kernel may take (a power of two)
};

// The model's time at `k_split`, in windows' worth of a warp's time.
inline int64_t gemv_split_cost(const GemvSplitModel& m, int k_split) {
  const int64_t resident = std::max<int64_t>(1, m.resident_warps);
  const int64_t waves = (m.tiles * k_split + resident - 1) / resident;
  return waves * ((m.windows + k_split - 1) / k_split + m.pipeline_fill);
}

inline int choose_gemv_k_split(const GemvSplitModel& m) {
  int best = 1;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  for (int k_split = m.min_k_split; k_split <= m.max_k_split && k_split <= m.windows;
       k_split *= 2) {
    const int64_t cost = gemv_split_cost(m, k_split);
    if (cost <= best_cost) {
      best = k_split;
      best_cost = cost;
    }
  }
  return best;
}

// The model of an N-column GEMV with `windows` windows per row on `num_sms` SMs holding
// `warps_per_sm` of its warps each (an unknown SM count counts as one SM), each warp owning
// `tiles_per_warp` 16-column tiles (line loads' two tiles: ceil(N / 32) warps' columns).
// `pipeline_fill`: the windows' worth of time a warp's start costs (kGemvPipelineFill,
// or a kernel's own measured value).
inline GemvSplitModel gemv_split_model(int64_t n, int64_t windows, int num_sms,
                                       int64_t warps_per_sm, int tiles_per_warp = 1,
                                       int64_t pipeline_fill = kGemvPipelineFill) {
  GemvSplitModel m;
  const int64_t cols = kGemvTileCols * tiles_per_warp;
  m.tiles = (n + cols - 1) / cols;
  m.windows = windows;
  m.resident_warps = std::max<int64_t>(1, num_sms) * warps_per_sm;
  m.pipeline_fill = pipeline_fill;
  m.max_k_split = kGemvMaxKSplit;
  return m;
}

// The two-tile kernels' register bound (GemvConfig::registers, bqmm/plan_parts.h):
// `narrow` models the 128-register form (16 warps per SM); the 168-register form is the
// same model at kGemvWideWarpsPerSm and k_split up to kGemvWideMaxKSplit, its cost weighed
// by kGemvWideCostPercent. `option`: -1 (the cheaper), kGemvTwoTileRegisters or
// kGemvWideRegisters (forced); `option_k_split`: the forced split or 0. Sets *registers,
// and *k_split to the 12-warp model's split where 168 is taken (else leaves it); that
// model's splits start at `wide_min_k_split`. 168 with a forced split above
// kGemvWideMaxKSplit: InvalidArgument; a split forced that high keeps 128 otherwise.
inline Status choose_gemv_registers(const GemvSplitModel& narrow, int num_sms, int option,
                                    int option_k_split, int* registers, int* k_split,
                                    int wide_min_k_split = 1) {
  if (option == kGemvWideRegisters && option_k_split > kGemvWideMaxKSplit)
    return Status(StatusCode::kInvalidArgument,
                  "plan override: registers=" + std::to_string(kGemvWideRegisters) +
                      " holds k_split up to " + std::to_string(kGemvWideMaxKSplit) +
                      ", but k_split=" + std::to_string(option_k_split));
  GemvSplitModel wide = narrow;
  wide.resident_warps = std::max(1, num_sms) * kGemvWideWarpsPerSm;
  wide.max_k_split = kGemvWideMaxKSplit;
  wide.min_k_split = std::min(wide_min_k_split, kGemvWideMaxKSplit);
  const int wide_split = choose_gemv_k_split(wide);
  const bool wide_faster = option_k_split <= kGemvWideMaxKSplit &&
                           gemv_split_cost(wide, wide_split) * kGemvWideCostPercent <
                               gemv_split_cost(narrow, choose_gemv_k_split(narrow)) * 100;
  const bool take_wide = option == kGemvWideRegisters || (option < 0 && wide_faster);
  *registers = take_wide ? kGemvWideRegisters : kGemvTwoTileRegisters;
  if (take_wide) *k_split = wide_split;
  return Status::Ok();
}

// Whether `k_split` leaves the GPU one partial wave of at least 3/4 of its resident warps
// (NBitsMatMul's 4-bit two-tile rule doubles the split there).
inline bool gemv_split_partial_wave(const GemvSplitModel& m, int k_split) {
  const int64_t warps = m.tiles * k_split;
  return warps < m.resident_warps && 4 * warps >= 3 * m.resident_warps;
}

}  // namespace bqmm
