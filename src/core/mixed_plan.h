// The mixed-input GEMM's part of planning, one for both planners (Fp8WeightMatMul and
// NBitsMatMul) and for its launcher (cuda/gemm/mixed_gemm.cuh): which rows it takes from
// the fused GEMM (core/gemm_plan.h), its schedule and tile order, its workspace, and why it
// does not take a problem (mixed_gemm_refusal).
#pragma once

#include <algorithm>
#include <cstdint>

#include "bqmm/device.h"
#include "bqmm/tensor.h"
#include "core/gemm_plan.h"

namespace bqmm {

// The mixed-input GEMM (cuda/gemm/mixed_gemm.cuh: CUTLASS 4.2's SM90 mixed-input
// collective, TMA and wgmma, the weight dequantized in registers): tiles of kMixedTileN
// weight rows x tile_m (128 or 256) activation rows x kMixedTileK of K, on a persistent
// grid or stream-K (CUTLASS's stream-K tile scheduler; blocks that share an output tile
// add their float32 partial tiles through the workspace), as the schedule model below
// chooses.
// Where it is built (CUTLASS headers and SM90 in CUDA_ARCHITECTURES; gemm_plan.cc).
bool mixed_gemm_built();
constexpr int kMixedTileN = 128;  // weight rows per tile
constexpr int kMixedTileK = 64;   // K per stage: its scale groups (block_size) are whole tiles
// The fewest activation rows where the planner takes it. At M = 64 the fused GEMM was
// faster on all four prefill shapes (H200, float16, back to back, one run: 28672 x 8192
// FP8 119.4 against 133.4 us, 14336 x 4096 33.3 against 39.0).
constexpr int64_t kMixedMinRows = 65;
// From 65 to 128 rows both apply; the fused GEMM keeps the rows where it was the faster
// (fused_gemm_keeps_rows). Its Hopper tile decides: where the tile holds fewer rows than
// M, each weight strip is decoded once per tile row, and where the grid of unsplit tiles
// is more than one wave of SMs, it runs in two. Measured back to back, block 128, both
// GEMMs in one run, the prefill suite's shapes at M = 65 to 128 (fused / mixed us):
// * the 128-row tile (wgmma_tile_128_refusal) is the faster at every M to 128, one wave or
//   two: H200 8-bit 8192 x 8192 M = 128 45.6 / 48.8, 4096 x 14336
//   40.0 / 49.4, 28672 x 8192 M = 65 126.3 / 148.6 (with A by TMA M = 96 117.7 / 140.4,
//   128 122.5 / 137.6); H100 4-bit (half-slab stages) 28672 x 8192 M = 128 110.5 /
//   130.8, 8192 x 8192 37.3 / 47.6; H100 FP8 float16 28672 x 8192 M = 65 114.3 / 142.9,
//   128 120.1 / 128.9, 8192 x 8192 M = 128 42.7 / 45.4, 4096 x 14336 40.8 / 45.9
//   (14336 x 4096 M = 128 35.0 / 34.5, the one float16 case within 2 %);
// * but FP8 with bfloat16 activations (a longer decode) from kFusedKeepsRowsBelow rows
//   where the tiles fill 3/4 of the SMs or more (H100: 14336 x 4096, 112 tiles, M = 96
//   37.5 / 34.2, 128 38.1 / 34.2; 28672 x 8192 130.2 / 126.7, 132.6 / 127.0); with fewer
//   tiles the fused GEMM's K split fills the SMs the mixed-input GEMM leaves idle (8192 x
//   8192 M = 96 44.0 / 47.9, 4096 x 14336 M = 128 43.5 / 45.4; 8192 x 8192 M = 128 46.7 /
//   45.3 the one case that loses, by 3 %), and below 96 rows fused is faster on every shape
//   (14336 x 4096 M = 65 37.3 / 39.5, 28672 x 8192 128.5 / 142.9);
// * 64-row tiles (N-bit blocks of 16 and 32; FP8 float16 where they are one wave) in one
//   wave are the faster to 128 rows (H200: FP8 float16 8192 x 8192 M = 128 43.0 / 44.7,
//   4096 x 14336 41.5 / 45.5); in two waves they lose from 65 rows (H200, before the
//   128-row tiles: 14336 x 4096 4-bit M = 65 51.6 / 41.9, 28672 x 8192 188.7 / 148.4;
//   FP8 181.0 / 142.4).
constexpr int64_t kFusedKeepsRowsBelow = 96;
// Above 128 rows, on the fused GEMM's 256-row tile (N-bit codes in blocks of 64 or more;
// wgmma_takes_tile_256): measured on the H200 (float16 unless said, block 128, back to
// back, one run; fused / mixed us):
// * at M = 129 the tile is faster on all four shapes (4-bit 8192 x 8192 55.8 / 73.0,
//   14336 x 4096 50.9 / 52.7, 4096 x 14336 53.2 / 80.3, 28672 x 8192 178.9 / 215.2;
//   8-bit 54.8 / 76.1, 50.1 / 61.1, 51.8 / 80.8, 218.1 / 224.7), where the mixed-input
//   GEMM multiplies a second, nearly empty row of tiles;
// * from 192 rows only where its tiles are at most half the SMs, which its K split then
//   fills (N <= 8192 on 132 SMs: 4-bit 8192 x 8192 M = 192 57.8 / 66.3, 256 62.1 / 66.6,
//   bfloat16 60.7 / 64.4; 4096 x 14336 54.6 / 69.6, 57.8 / 67.6; 8-bit 8192 x 8192 M =
//   192 57.8 / 60.2, bfloat16 M = 256 62.7 / 71.1; 4096 x 14336 53.8 / 61.7, 58.1 / 65.5);
//   on more tiles the mixed-input GEMM is (14336 x 4096 4-bit M = 192 52.0 / 49.9, 8-bit
//   51.6 / 47.4; 28672 x 8192 4-bit 183.5 / 179.7, 8-bit 236.1 / 173.6);
// * 8-bit codes with float16 activations (the shortest decode) too since the wgmma
//   epilogue stores a column at a time (DESIGN, "Epilogue"; before it, 8192 x 8192 M =
//   256 62.9 / 59.0): H200 8192 x 8192 M = 256 56.6 / 59.9 (one sweep); H100, both trees
//   of one A/B (scripts/ab_cases/tile256_8bit_f16.txt), 8192 x 8192 M = 224 55.9 / 58.7,
//   256 57.6 / 59.5, 4096 x 14336 M = 256 56.2 / 64.8.
// M = 130..191 was not measured: the bound below is the one measured row count.
constexpr int64_t kTallKeepsRowsBelow = 130;
// Why the fused GEMM keeps the rows of `s` from the mixed-input GEMM (the reason --explain
// prints), or nullptr where it does not. Its mainloop and tile are the planner's own
// (choose_gemm_mainloop).
inline const char* fused_gemm_keeps_rows_why(const GemmShape& s, const DeviceInfo& d) {
  static_assert(kMixedMinRows == 65 && kFusedKeepsRowsBelow == 96 && kGemmMaxRows == 128,
                "the reasons below name the bounds");
  if (s.m < kMixedMinRows) return "M <= 64: the fused GEMM is faster there";
  GemmConfig g;
  choose_gemm_mainloop(s, d, {}, &g);
  // Without the Hopper mainloop (not built; FP8 blocks of part of a slab), mma.sync's
  // 64-row tiles: below 128 rows, as measured before the wgmma mainloop existed.
  if (!g.wgmma)
    return s.m < kGemmMaxRows ? "M < 128 on the fused GEMM's mma.sync tiles: it is faster there"
                              : nullptr;
  const int64_t tiles = gemm_tiles(s.m, s.n, g.tile_m);
  const int sms = std::max(1, d.num_sms);
  const bool one_wave = tiles <= sms;
  if (s.m < kFusedKeepsRowsBelow && one_wave)
    return "M < 96 and the fused GEMM's tiles one wave of SMs: it is faster there";
  if (s.fp8 && s.bf16 && s.m >= kFusedKeepsRowsBelow && 4 * tiles >= 3 * int64_t{sms})
    return nullptr;  // FP8 bfloat16 from 96 rows on 3/4 of the SMs or more: mixed is faster
  if (g.tile_m == 256) {
    static_assert(kTallKeepsRowsBelow == 130, "the reasons below name the bound");
    if (s.m < kTallKeepsRowsBelow) return "M = 129 on the fused GEMM's 256-row tile: it is faster there";
    if (2 * tiles > sms) return nullptr;  // more 256-row tiles than half the SMs: mixed is faster
    return "M <= 256 and the fused GEMM's 256-row tiles at most half the SMs (its K split fills them): it is "
           "faster there";
  }
  if (g.tile_m >= s.m) return "M within the fused GEMM's 128-row tile: it is faster there";
  if (one_wave) return "M <= 128 and the fused GEMM's 64-row tiles one wave of SMs: it is faster there";
  return nullptr;
}
inline bool fused_gemm_keeps_rows(const GemmShape& s, const DeviceInfo& d) {
  return fused_gemm_keeps_rows_why(s, d) != nullptr;
}

// Its kernels: 128 or 256 activation rows per tile, on a persistent grid (one block per
// SM walking whole tiles: time by whole waves of tiles) or stream-K (the K tiles of all
// output tiles dealt out evenly over the SMs: time by the fraction of a wave, plus the
// fix-up of the split tiles, a float32 tile written and read whatever K). The planner
// takes the one of least modelled time:
//   persistent:  ceil(tiles / SMs) * t(tile_m)
//   stream-K:    (tiles / SMs + 25.6 / k_tiles) * t(tile_m),  where it saves 5 % or more
// with t(128) = 1, t(256) = 1.44 and k_tiles = K / 64, fitted to standalone CUTLASS builds
// on the H200 (FP8 and 4-bit, float16, 8 rotating weight copies in a CUDA graph, the four
// prefill shapes at M = 128..1024): a 256-row tile took 1.44x the time of a 128-row one
// (8192 x 8192, one wave each: 79.4 against 55.3 us); stream-K's fix-up came to about 0.2
// of a wave at K = 8192 (8192 x 8192 M = 128: 38.9 against 54.0 persistent; M = 768 on
// 256-row tiles 127.6 against 158.3; 28672 x 8192 M = 512 287.6 against 331.5), 0.1 at
// K = 14336 (4096 x 14336 M = 512: 79.9 against 91.9) and 0.4 at K = 4096 (14336 x 4096
// M = 384: 84.9 against 82.9), and it lost near whole waves (8192 x 8192 M = 1024: 171.5
// against 156.4). Stream-K on 256-row tiles only where M fills them: with a half-empty
// last row of tiles (M = 384) it was 12-35 % slower than its persistent grid on all four
// shapes.
struct MixedSchedule {
  int tile_m = 128;
  bool stream_k = false;
};
constexpr int kMixedTileCost128 = 100, kMixedTileCost256 = 144;  // t(tile_m), per cent
constexpr int64_t kMixedStreamKFixup = 2560;  // per cent of a wave times K tiles
constexpr int kMixedStreamKMinSaving = 5;     // per cent
// Output tiles of kMixedTileN x tile_m for M x N.
inline int64_t mixed_tiles(int64_t m, int64_t n, int tile_m) {
  return (n + kMixedTileN - 1) / kMixedTileN * ((m + tile_m - 1) / tile_m);
}
// The model's time of schedule `s` for M x N x K on `num_sms` SMs, in 1/10000 of a 128-row
// tile's time; stream-K on 256-row tiles that M does not fill: not a candidate (-1).
inline int64_t mixed_schedule_cost(const MixedSchedule& s, int64_t m, int64_t n, int64_t k, int num_sms) {
  const int64_t sms = std::max(1, num_sms), tiles = mixed_tiles(m, n, s.tile_m);
  const int64_t tile_cost = s.tile_m == 256 ? kMixedTileCost256 : kMixedTileCost128;
  if (!s.stream_k) return (tiles + sms - 1) / sms * 100 * tile_cost;
  if (s.tile_m == 256 && m % 256 != 0) return -1;
  const int64_t k_tiles = std::max<int64_t>(1, (k + kMixedTileK - 1) / kMixedTileK);
  return (tiles * 100 / sms + kMixedStreamKFixup / k_tiles) * tile_cost;
}
// The mixed-input GEMM's choices as the plan override forces them.
struct MixedForced {
  int stream_k = -1;  // -1: the planner's rule; 0 / 1
  int tile_m = 0;     // 0: the planner's rule; 128 / 256
  int swizzle = -1;   // -1: the planner's rule; 0 (CUTLASS's order), 2, 4, 8
};
// The planner's schedule for M x N x K: the least modelled time among the candidates that
// `forced` leaves (a forced stream-K takes 256-row tiles that M does not fill too).
inline MixedSchedule choose_mixed_schedule(int64_t m, int64_t n, int64_t k, int num_sms,
                                           const MixedForced& forced = {}) {
  MixedSchedule best_persistent, best_stream_k;
  int64_t persistent_cost = -1, stream_k_cost = -1;
  for (const int tile_m : {128, 256}) {
    if (forced.tile_m > 0 && forced.tile_m != tile_m) continue;
    const int64_t p = mixed_schedule_cost({tile_m, false}, m, n, k, num_sms);
    if (persistent_cost < 0 || p < persistent_cost) persistent_cost = p, best_persistent = {tile_m, false};
    int64_t sk = mixed_schedule_cost({tile_m, true}, m, n, k, num_sms);
    if (sk < 0 && forced.stream_k == 1) sk = p;
    if (sk >= 0 && (stream_k_cost < 0 || sk < stream_k_cost)) stream_k_cost = sk, best_stream_k = {tile_m, true};
  }
  if (forced.stream_k == 0 || stream_k_cost < 0) return best_persistent;
  if (forced.stream_k == 1) return best_stream_k;
  return 100 * stream_k_cost <= (100 - kMixedStreamKMinSaving) * persistent_cost ? best_stream_k : best_persistent;
}
// The persistent grid's tile order. CUTLASS walks the swapped problem's output tiles with
// the activation tiles first where there are no more of them than weight tiles: at M = 4096
// (16 tiles of 256 rows) a wave of 132 blocks then spans 8 weight tiles and every
// activation row, 64 MB of float16 at K = 8192, more than the 50 MB L2, so each wave reads
// the activations again from HBM. Weight tiles first in bands of kMixedSwizzle activation
// tiles (CUTLASS's raster along M with that swizzle) spans 33 weight tiles and 4
// activation tiles a wave. Measured in the library (H200, b2b, the planner against
// mixed_swizzle=0 in one build, three interleaved runs each, medians):
// M = 4096 8192 x 8192 FP8 float16 and bfloat16 0.89x the time, 4096 x 14336 0.92x,
// 14336 x 4096 0.95x, 28672 x 8192 0.96x, 8-bit 8192 x 8192 0.95x, 4-bit (forced onto
// it) 0.96x; M = 2048 0.98x; M = 1024 (4 tiles) 1.00x. Taken from kMixedSwizzleMinTiles
// activation tiles. With a swizzle CUTLASS's scheduler rounds both tile counts up to
// whole bands and its blocks run the padding tiles' main loops too (zero-filled loads, no
// stores), so the rule takes it only where both counts are whole bands. Stream-K keeps
// CUTLASS's order: its workspace (mixed_stream_k_bytes) counts the tiles unpadded, and
// the order is unmeasured there.
constexpr int kMixedSwizzle = 4;
constexpr int64_t kMixedSwizzleMinTiles = 8;
// The tile order of schedule `s` for M x N (GemmConfig::swizzle): weight tiles first in
// bands of kMixedSwizzle activation tiles on a persistent grid of at least
// kMixedSwizzleMinTiles activation tiles, both tile counts multiples of kMixedSwizzle;
// else CUTLASS's order (0). Forced: as given on the persistent grid, 0 on stream-K.
inline int mixed_swizzle(int64_t m, int64_t n, const MixedSchedule& s, const MixedForced& forced = {}) {
  if (s.stream_k) return 0;
  if (forced.swizzle >= 0) return forced.swizzle;
  const int64_t act_tiles = (m + s.tile_m - 1) / s.tile_m, weight_tiles = (n + kMixedTileN - 1) / kMixedTileN;
  const bool whole_bands = act_tiles % kMixedSwizzle == 0 && weight_tiles % kMixedSwizzle == 0;
  return act_tiles >= kMixedSwizzleMinTiles && whole_bands ? kMixedSwizzle : 0;
}
// The type of its N-bit scales and zeros (-zp * scale), activation type t, `bits` wide
// codes: t, so that the collective converts a code to t and takes q * scale + zero in one
// t multiply-add (ptxas fuses the two; the GPU tests pin it bit for bit: with the default
// zero point 2^(bits - 1), -zp * scale is exact in t, and the weight is round_t((q - zp) *
// scale), as the dequant path writes it). Float32 for bfloat16 with 8-bit codes, whose
// conversion CUTLASS runs through float32 anyway (uint8 -> float -> bfloat16): there the
// float32 fma was the faster (H200, 8192 x 8192 M = 1024: 182.8 us against 186.9); and
// float32 for float32 activations (which take the dequant path; a prepack of their scales
// is float32). FP8's scales are float32 always.
constexpr DType mixed_nbits_scales_dtype(DType t, int bits) {
  return t == DType::kBFloat16 && bits == 8 ? DType::kFloat32 : t;
}
// Its workspace: the scales as [k_blocks, N] of `dtype` (the collective's layout), N-bit's
// zeros (-zp * scale) after them.
inline int64_t mixed_scales_bytes(int64_t n, int64_t k_blocks, DType dtype, bool zeros) {
  return n * k_blocks * static_cast<int64_t>(dtype_size(dtype)) * (zeros ? 2 : 1);
}
// Stream-K's workspace, a bound on what CUTLASS's scheduler asks for (the run checks it):
// a float32 partial tile for each output tile it splits (at most all of them), then a
// 32-bit flag per consumer warpgroup (2) of each, each part rounded up to 128 bytes and
// the whole to 16.
inline int64_t mixed_stream_k_bytes(int64_t m, int64_t n, int tile_m) {
  const int64_t tiles = mixed_tiles(m, n, tile_m);
  return tiles * kMixedTileN * tile_m * static_cast<int64_t>(sizeof(float)) + tiles * 2 * 4 + 3 * 128;
}

// Why the mixed-input GEMM does not take either operator's problem `p` (codes of `bits`,
// rows of W of `row_bytes`) on `d`, or nullptr. `forced`: the plan override's mixed key
// (-1 unset, 0 never, 1 at every M above the GEMV's); `fused`: the fused GEMM's view of
// `p` where the fused GEMM applies, else nullptr (then the mixed-input GEMM takes the
// rows the fused GEMM would keep). Each operator checks its own inputs first (g_idx).
template <typename Problem>
const char* mixed_gemm_refusal(const Problem& p, int bits, int64_t row_bytes, const DeviceInfo& d,
                               int forced, const GemmShape* fused) {
  if (p.m == 0 || p.n == 0) return "empty output";
  if (p.k == 0) return "K == 0: Y = bias";
  if (forced == 0) return "mixed=0 (plan override)";
  if (p.m <= kGemvMaxRows) return "M <= 8 (the decode GEMV's rows)";
  static_assert(kMixedMinRows == 65, "the reason below names the bound");
  if (p.m < kMixedMinRows && forced != 1) return "M <= 64: the fused GEMM is faster there";
  if (fused != nullptr && forced != 1)
    if (const char* why = fused_gemm_keeps_rows_why(*fused, d)) return why;
  if (d.sm != 90) return "not an SM90 device (CUTLASS's mixed-input collective is sm_90a)";
  if (!mixed_gemm_built()) return "not built (no CUTLASS headers or no SM90 in CUDA_ARCHITECTURES)";
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "float32 activations (tensor cores take float16 / bfloat16)";
  static_assert(kMixedTileK == 64, "the reason below names the tile");
  if (p.block_size % kMixedTileK != 0) return "block_size % 64 != 0 (scale groups of whole 64-K tiles)";
  // TMA: K of whole 16-byte units of W (its extent, not only its row pitch) and of A, rows
  // of Y likewise, 16-byte aligned pointers.
  if (p.k * bits % 128 != 0)
    return bits == 4 ? "K % 32 != 0 (TMA of whole 16-byte units of B)" : "K % 16 != 0 (TMA of whole 16-byte units of B)";
  if (p.n % 8 != 0) return "N % 8 != 0 (rows of Y not whole 16-byte units)";
  if (p.alignment < 16) return "pointers not 16-byte aligned";
  // CUTLASS's problem shape is int.
  if (p.m >= (int64_t{1} << 31) || p.n >= (int64_t{1} << 31) || row_bytes * 2 >= (int64_t{1} << 31))
    return "M, N or K beyond 2^31";
  return nullptr;
}

}  // namespace bqmm
