// NBitsMatMul's window kernel, NBitsGemvWindowKernel (decode GEMV, 0 < M <= 8, with line
// loads up to kGemvMaxGroupRows in row groups of 16, gemv/common.cuh; the
// operator, the tile geometry and the code decoding: nbits_gemv.cu, gemv/common.cuh,
// gemv/nbits_codes.cuh):
//
// float16 / bfloat16, algorithm 0 on whole windows: every row is a whole number of 64-byte
// windows and every window lies in one block (block_size >= a window's codes, 128 4-bit,
// 64 8-bit, so the scale goes on the mma result; kResultScale). With line loads, blocks
// down to a lane's 16-byte chunk (4-bit 32 codes, 8-bit 16) too: each lane's chunk lies
// in one block, whose scale multiplies each weight before the mma (kResultScale = false,
// MmaTile's decode for such blocks, mma_word_scaled): on the decode suite 6-32 % faster
// than the register tile on N x K >= 128 Mi and grids of many tiles (H200).
// Nothing in its loop is partial, so it has none of NBitsGemvKernel's clamps, masks and
// per-chunk address arithmetic. Nsight Compute on that
// kernel (4-bit, M = 1, 28672 x 8192, H200): ~200 instructions per window, of
// which ~100 decode and multiply; 127 registers, 3.3 warps per scheduler issuing 0.52
// instructions a cycle, 40 % of the stall samples on the selects that mask activations
// loaded at their point of use. Here a window costs its decode and multiply plus one
// address per row and stream, and the registers are bounded (kWindowBlocksPerSm) so that
// twice the warps fit an SM (the planner's k split counts on it: nbits_window_warps_per_sm).
// Each warp keeps the next window's weights, scales and zero points in flight while it
// multiplies one (two register buffers, the loop unrolled by two so that they need no
// moves); activations are loaded at the start of their window (L1 hits, covered by the
// window's decode), by the lanes of rows g < M only (MmaTile says why).
//
// kLines (the plan's `lines`): the same math, the weights read as whole
// 128-byte lines and staged through the warp's 2 KB of shared memory (gemv/line_loads.cuh
// says why): one pair of windows in flight, the same registers (8 bytes of spill at 64).
// Measured at M <= 2 17-19 % faster at 28672 x 8192 (float16; bfloat16 10-12 %), at M = 4
// 11 %, and within 4 % either way on the smaller decode shapes; at M = 8 slower with one
// tile, the round trip and the activations of more rows filling the L1 pipe (
// two tiles, below, halve the activations per weight byte).
//
// kTiles = 2 (line loads; the plan's `tiles`): the
// warp owns two 16-column tiles (n0 and n0 + 16), each with its own 2 KB buffer and pair
// in flight, and multiplies each activation load with both, as FP8's line-load tile
// (fp8_mma.cu says why): twice the bytes in flight per warp at 128 registers (16 warps
// per SM). Measured on the H200 at 28672 x 8192: 4-bit 9-17 %
// faster at M = 4, 8, 8-bit float16 2-9 % at M = 2..8 (against TMA tiles at M <= 4).
//
// 8-bit takes this kernel only with line loads: on this loop without them it was up to
// 30 % slower than NBitsGemvKernel at 64 registers and up to 58 % at 80 (H200).
// An 8-bit window decodes in about half the time of a 4-bit one, so one
// window in flight per warp hides less of the load latency than the general kernel's two
// stages of two windows; line loads' shape makes up for it.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/line_loads.cuh"
#include "cuda/gemv/nbits_tiles.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kWindowDepth = 2;  // register buffers: one window multiplied, one in flight
// The kernel's residency is the planner's (nbits_window_warps_per_sm, core/gemv_split.h),
// stated in the launch bounds as blocks of the largest split per SM (kWindowBlocksPerSm,
// below): 32 warps per SM (64 registers; 4-bit bfloat16 spills 16 bytes there, in the
// measured tables); 24 with packed zero points or 8-bit bfloat16 codes (80 registers: at
// 64 the zero points' row pointers spilled 84 bytes, 8-bit codes 8-40); 16 for 8-bit
// float16 (128 registers: with line loads 3-8 % faster than at 80, where they lost to the
// register tile by up to 23 %; H200) and for two tiles per warp (128 registers; ptxas
// spills 4-8 bytes there in 8-bit, 48-56 in 8-bit float16 with a pair in one block (row
// pointers, reloaded per pair), 14-20 in 4-bit with zero points; bounded to 96 they
// spilled 24-58 bytes and ran 30-45 % slower).
// kWide (two tiles per warp; the plan's `registers` = 168): blocks of at most
// kWideMaxKSplit = 4 warps, kWideBlocksPerSm = 3 of them per SM (gemv/common.cuh), i.e.
// up to 168 registers and 12 warps per SM. Hopper's (and Ampere's) register file is 16 K
// registers per scheduler: 129 to 168 registers per thread all give 3 warps per
// scheduler, so 168 costs no warp over the 159 ptxas took unbounded for 4-bit float16 and
// keeps the zero-point variants (199 unbounded) at 12; bounded, ptxas takes 135-168 and
// spills nothing. A warp streams 6-17 % faster than at 128 registers (no spill;
// unbounded, the next pair's loads issued mid-loop rather than at its end), which wins
// where the grid's waves fill at 12 warps per SM and loses where 16 hold it in fewer
// waves (the planner costs both; measured on the H200).
// The largest block (nbits_window_max_k_split, core/gemv_split.h): 16 warps for 4-bit
// without line loads or zero points (64 registers), 12 for one tile at 80 registers (8-bit
// bfloat16 codes, 4-bit zero points), two such blocks per SM: on grids of few tiles (N =
// 4096: 256 tiles) a split of 8 fills part of that residency.
template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles, bool kWide,
          bool kRowGroups>
constexpr int kWindowMaxSplit = nbits_window_max_k_split(
    kBits, kZeroPoints, std::is_same_v<T, __half>, kLines, kTiles, kWide, kRowGroups);
// Row groups (kRowGroups, two halves of 8 rows per warp) hold twice the activations and
// sums of their decode twin: 128 registers (16 warps per SM, nbits_window_warps_per_sm's
// row_groups) unless wide; at the one-tile twin's 64 or 80 ptxas spilled 100-250 bytes.
template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles, bool kWide,
          bool kRowGroups>
constexpr int kWindowBlocksPerSm =
    kWide ? kWideBlocksPerSm
          : static_cast<int>(nbits_window_warps_per_sm(kBits, kZeroPoints, std::is_same_v<T, __half>,
                                                       kTiles, kRowGroups)) /
                kWindowMaxSplit<T, kBits, kZeroPoints, kLines, kTiles, kWide, kRowGroups>;
static_assert(kWindowBlocksPerSm<__half, 4, false, false, 1, false, false> == 2 &&
                  kWindowBlocksPerSm<__nv_bfloat16, 4, true, false, 1, false, false> == 2 &&
                  kWindowBlocksPerSm<__nv_bfloat16, 8, false, true, 1, false, false> == 2 &&
                  kWindowBlocksPerSm<__half, 8, false, true, 1, false, false> == 2 &&
                  kWindowBlocksPerSm<__half, 4, false, true, 1, false, false> == 4 &&
                  kWindowBlocksPerSm<__half, 4, false, true, 2, false, false> == 2 &&
                  kWindowBlocksPerSm<__half, 4, false, true, 1, false, true> == 2,
              "blocks of the largest split fill the planner's residency (nbits_window_warps_per_sm)");
static_assert(kTensorCoreBlocksPerSm * kMaxKSplit ==
                  nbits_window_warps_per_sm(4, false, true, 1, /*row_groups=*/true),
              "the planner's residency of the row-group kernels");

// ================================================================= kernel
// Template parameters:
//   T             T1: __half or __nv_bfloat16.
//   kBits         8 or 4.
//   kZeroPoints   packed zero points given (else 2^(bits - 1)).
//   kLines        the weights by line loads (gemv/line_loads.cuh; rows of whole 128-byte
//                 lines; dynamic shared memory: k_split x kTiles x 2 KB).
//   kTiles        16-column tiles per warp: 1, or 2 with line loads.
//   kResultScale  blocks of a window or more: the block scale on the mma result; false
//                 (line loads only): blocks of a chunk or more, each weight scaled.
//   kPairBlock    line loads, blocks of two windows or more: a pair of windows lies in one
//                 block (below).
//   kWide         two tiles at up to 168 registers (above).
//   kRowGroups    M > 8 (line loads only): the block's row group and column block from
//                 its index (RowGroup, gemv/common.cuh), the tile below on the group's
//                 up to 16 rows (kHalves = 2: each decoded word multiplied with the
//                 activation pairs of rows g and g + 8 of the group, into sums of their
//                 own); 128 registers unless wide (kWindowBlocksPerSm).
//
// kPairBlock (line loads, blocks of two windows or more: 8-bit 128 codes, 4-bit 256): a
// pair of windows lies in one block (pairs start at even windows), so its second window
// takes the first's scales and zero points: no loads, and the same decoded constants.
// A template parameter, not a run-time test: with a warp-uniform branch ptxas merged the
// two paths with moves and selects (8-bit float16 two tiles: a 343-instruction loop grew
// to 412 with both paths; as a parameter, 304).
//
// window_tile is the kernel's body, p's rows (at most 8 kHalves) at column block
// column_block; inlined into each kernel, so the decode instantiations compile as if it
// were the kernel.
template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles, bool kResultScale,
          bool kPairBlock, bool kWide, int kHalves = 1>
__device__ __forceinline__ void window_tile(const GemvParams<T>& p, uint32_t column_block) {
  static_assert(kTiles == 1 || kLines, "two tiles per warp only with line loads");
  static_assert(!kWide || kTiles == 2, "168 registers: the two-tile kernel only");
  static_assert(kResultScale || kLines, "blocks smaller than a window only with line loads");
  static_assert(!kPairBlock || (kLines && kResultScale), "pairs in one block: line loads");
  static_assert(kHalves == 1 || kLines, "16-row groups only with line loads");
  using C = Codes<kBits>;
  using Tile = MmaTile<T, kBits, kResultScale>;
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(column_block) * kTileCols * kTiles;

  // This warp's windows: a contiguous range (its requests to a DRAM page come together).
  // kLines: an even count (pairs of windows are its unit; p.windows is even there).
  uint32_t per_warp = (p.windows + k_split - 1) / k_split;
  if (kLines) per_warp = (per_warp + 1) & ~1u;
  const uint32_t u0 = min(warp * per_warp, p.windows);
  const uint32_t u1 = min(u0 + per_warp, p.windows);

  // Rows lo and hi (TileRows), lane t's chunk of each window; activation rows g + 8r of
  // the halves r (M - 1 where past M: loaded as zeros, never stored).
  // kTiles = 2: the second tile's rows (with one tile, the first's twin, unused).
  const TileRows<T> rows(p, n0, g, kZeroPoints);
  const TileRows<T> rows1(p, n0 + kTileCols * (kTiles - 1), g, kZeroPoints);
  const T* a_rows[kHalves];
#pragma unroll
  for (int r = 0; r < kHalves; ++r)
    a_rows[r] = p.a + static_cast<int64_t>(g + 8 * r < p.m ? g + 8 * r : p.m - 1) * p.k +
                t * C::kPerChunk;

  struct Loads {
    uint4 w[2];
    RawQuant<T, kBits> q[2];
  };
  // The block of window u (kResultScale: all of it), or of this lane's chunk of it (else:
  // blocks of a chunk or more, so that a chunk lies in one).
  auto block_of = [&](uint32_t u) {
    return (u * C::kPerWindow + (kResultScale ? 0 : t * C::kPerChunk)) >> p.block_shift;
  };
  constexpr bool kPairByte = kLines && kBits == 4 && kResultScale && kZeroPoints;
  // Scale pairs (line loads, blocks of exactly one window: 4-bit 128 codes, 8-bit 64): the
  // pair's two windows are blocks 2v and 2v + 1, adjacent in a row of scales, so one 4-byte
  // load per row brings both (ptxas also recomputed each 2-byte load's 64-bit address).
  // Measured (H200, same-machine A/B against a 2-byte load per row and
  // window): 4-bit two tiles at 28672 x 8192 2-9 % faster in float16 and
  // 2-8 % in bfloat16 (M = 1..8), with packed zero points 4-8 % (but 2 % slower at float16
  // M = 1, 2); 8-bit at block 64 1-10 % on line loads.
  constexpr bool kScalePair = kLines && kResultScale && !kPairBlock;
  // first_of_pair = false (line loads, the pair's second window): 4-bit blocks of a window
  // or more keep the zero-point byte of the first (q, loaded by it). Both windows' blocks
  // lie in one byte (block 128: blocks 2v and 2v + 1, the low and high nibble; larger: one
  // block), so one byte load per row serves the pair (make_consts picks the nibble).
  // with_scales = false: the caller loads the scales (scale pairs, below).
  auto load_quant_of = [&](const TileRows<T>& tr, uint32_t u, RawQuant<T, kBits> (&q)[2],
                           bool first_of_pair, bool with_scales = true) {
    const uint32_t blk = block_of(u);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (with_scales) {
        q[r].scale[0] = __ldg(tr.s[r] + blk);
        if constexpr (C::kGroups == 2) q[r].scale[1] = q[r].scale[0];  // one block
      }
      if (!kZeroPoints)
        q[r].zp_bits = C::kDefaultZeroPoint * (kBits == 4 ? 0x11u : 1u);
      else if (!kPairByte || first_of_pair)  // else: load_pair copies the first's
        q[r].zp_bits = __ldg(tr.zp[r] + (kBits == 8 ? blk : blk >> 1));
    }
  };
  auto load_quant = [&](uint32_t u, RawQuant<T, kBits> (&q)[2]) {
    load_quant_of(rows, u, q, true);
  };
  auto load = [&](uint32_t u, Loads& l) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
      l.w[r] = load_stream_u4(rows.w[r] + t * kChunkBytes +
                              static_cast<size_t>(u) * (kWindowChunks * kChunkBytes));
    load_quant(u, l.q);
  };
  // accs[r * kTiles + j]: half r's sums of tile j.
  float accs[kHalves * kTiles][4] = {};
  auto load_act = [&](uint32_t u, uint4 (&act)[kHalves][Tile::kActVecs]) {
#pragma unroll
    for (int r = 0; r < kHalves; ++r) {
      const T* src = a_rows[r] + static_cast<size_t>(u) * C::kPerWindow;
#pragma unroll
      for (int i = 0; i < Tile::kActVecs; ++i)
        act[r][i] = load_cached_u4_if(reinterpret_cast<const uint4*>(src) + i, g + 8 * r < p.m);
    }
  };
  // Window u of tile `tile`: each word decoded once, multiplied with every half's pairs.
  auto multiply_act = [&](const uint4 (&act)[kHalves][Tile::kActVecs], uint32_t u,
                          const Loads& l, int tile) {
    const uint32_t blk = block_of(u);
    const BlockConsts c_lo = make_consts<T, kBits>(l.q[0], blk, 0, false);
    const BlockConsts c_hi = make_consts<T, kBits>(l.q[1], blk, 0, false);
    const uint32_t lo[4] = {l.w[0].x, l.w[0].y, l.w[0].z, l.w[0].w};
    const uint32_t hi[4] = {l.w[1].x, l.w[1].y, l.w[1].z, l.w[1].w};
    float part[kHalves][4] = {}, part16[kHalves][4] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t pa[kHalves][C::kPerWord / 2];
#pragma unroll
      for (int r = 0; r < kHalves; ++r) Tile::act_pairs(act[r], j, pa[r]);
      uint32_t pl[C::kPerWord / 2], ph[C::kPerWord / 2];
      if constexpr (kResultScale) {
        decode_word_pairs_unscaled<T, kBits>(lo[j], c_lo, pl);
        decode_word_pairs_unscaled<T, kBits>(hi[j], c_hi, ph);
      } else {
        decode_word_pairs<T, kBits>(lo[j], c_lo, pl);
        decode_word_pairs<T, kBits>(hi[j], c_hi, ph);
      }
#pragma unroll
      for (int r = 0; r < kHalves; ++r) {
        if constexpr (kResultScale)
          mma_pairs_unscaled<T, kBits>(pl, ph, pa[r], part[r], part16[r]);
        else
          mma_pairs_scaled<T, kBits>(pl, ph, pa[r], accs[r * kTiles + tile]);
      }
    }
    if constexpr (kResultScale) {
#pragma unroll
      for (int r = 0; r < kHalves; ++r)
        apply_block_scales<T, kBits>(accs[r * kTiles + tile], part[r], part16[r], c_lo, c_hi);
    }
  };
  auto multiply = [&](uint32_t u, const Loads& l) {
    uint4 act[kHalves][Tile::kActVecs];
    load_act(u, act);
    multiply_act(act, u, l, 0);
  };

  if constexpr (kLines) {
    // Line loads (gemv/line_loads.cuh): a pair of windows per stage, one pair per tile in
    // flight; kTiles = 2: each activation load multiplies both tiles.
    extern __shared__ uint4 window_lines[];
    const LineTiles<kTiles> lines(window_lines + warp * kTiles * (kLineBufferBytes / 16), p.b,
                                  n0, p.n, p.row_bytes, lane);
    auto tile_rows = [&](int j) -> const TileRows<T>& { return j == 0 ? rows : rows1; };
    // This warp's pairs: first, first + stride, ... below end (the last one `last`).
    // 8-bit float16 one tile takes the interleaved order of FP8's line-load tile (warp w:
    // pairs w, w + k_split, ...: the block's warps read adjacent 128 bytes of each row
    // together); the rest keep the contiguous range above. Measured on the H200
    // (same-run A/B of the decode suites at blocks 32, 64 and
    // 128, with and without packed zero points): 8-bit float16 one tile 1-5 % faster at
    // 14336 x 4096, 4096 x 14336 and 8192 x 8192, 0-5 % slower at 4096 x 4096 (4 pairs
    // per warp); bfloat16 -5 % to +8 %; two tiles (both widths) 2-9 % slower but for 8-bit
    // float16 28672 x 8192.
    constexpr bool kInterleave = kBits == 8 && kTiles == 1 && std::is_same_v<T, __half>;
    const uint32_t pairs = p.windows / 2;  // p.windows is even with line loads
    const uint32_t first = kInterleave ? warp : u0 / 2;
    const uint32_t end = kInterleave ? pairs : u1 / 2;
    const uint32_t stride = kInterleave ? k_split : 1;
    if (first < end) {
      const uint32_t last = kInterleave ? first + (end - 1 - first) / stride * stride : end - 1;
      uint4 raw[kTiles][4];
      RawQuant<T, kBits> q[kTiles][2][2];
      auto load_pair = [&](uint32_t v) {
#pragma unroll
        for (int j = 0; j < kTiles; ++j) lines[j].load(raw[j], static_cast<size_t>(v) * kLinePairBytes);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          load_quant_of(tile_rows(j), 2 * v, q[j][0], true, !kScalePair);
          if constexpr (kPairBlock) {
            q[j][1][0] = q[j][0][0];
            q[j][1][1] = q[j][0][1];
          } else {
            load_quant_of(tile_rows(j), 2 * v + 1, q[j][1], false, !kScalePair);
            if constexpr (kPairByte) {
#pragma unroll
              for (int r = 0; r < 2; ++r) q[j][1][r].zp_bits = q[j][0][r].zp_bits;
            }
          }
          if constexpr (kScalePair) {
            // Blocks 2v and 2v + 1 of each row: one 4-byte load (4-byte aligned: the
            // launcher checks the scales pointer, and a row's k_blocks is even).
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const uint32_t both = __ldg(reinterpret_cast<const uint32_t*>(tile_rows(j).s[r]) + v);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                q[j][h][r].scale[0] = half_bits_as<T>(both >> (16 * h));
                if constexpr (C::kGroups == 2) q[j][h][r].scale[1] = q[j][h][r].scale[0];
              }
            }
          }
        }
      };
      load_pair(first);
#pragma unroll 1
      for (uint32_t v = first; v < end; v += stride) {
#pragma unroll
        for (int j = 0; j < kTiles; ++j) lines[j].stage(raw[j]);
        Loads l[kTiles][2];
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            l[j][h].q[0] = q[j][h][0];
            l[j][h].q[1] = q[j][h][1];
          }
        // The next pair's loads (past the range: the last pair again, never multiplied).
        load_pair(min(v + stride, last));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // The order of the staged reads and the activation loads is the measured one:
          // with one tile the activations after (before, ptxas spilled 8-24 bytes at 80
          // registers), with two before.
          uint4 act[kHalves][Tile::kActVecs];
          if constexpr (kTiles == 2) load_act(2 * v + h, act);
#pragma unroll
          for (int j = 0; j < kTiles; ++j) {
            l[j][h].w[0] = lines[j].lo(h);
            l[j][h].w[1] = lines[j].hi(h);
          }
          if constexpr (kTiles == 1) load_act(2 * v + h, act);
#pragma unroll
          for (int j = 0; j < kTiles; ++j) multiply_act(act, 2 * v + h, l[j][h], j);
        }
        lines.release();
      }
    }
  } else if (u0 < u1) {
    Loads ring[kWindowDepth];
#pragma unroll
    for (int j = 0; j < kWindowDepth; ++j) load(min(u0 + j, u1 - 1), ring[j]);
#pragma unroll 1
    for (uint32_t u = u0; u < u1; u += kWindowDepth) {
#pragma unroll
      for (int j = 0; j < kWindowDepth; ++j) {
        if (u + j >= u1) break;  // warp-uniform
        multiply(u + j, ring[j]);
        // Refills past the range reload the last window (in bounds, never multiplied).
        load(min(u + j + kWindowDepth, u1 - 1), ring[j]);
      }
    }
  }

  // Values (r * kTiles + j) * 4 + i: half r, tile j, fragment entry i.
  using Tiles = std::conditional_t<kTiles == 1, Tile, TilePair<Tile>>;
  using Halves = RowHalves<Tiles, kHalves>;
  float v[Halves::kValues];
#pragma unroll
  for (int i = 0; i < kHalves * kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) v[4 * i + e] = accs[i][e];
  if constexpr (kTiles == 1) {
    constexpr int kMaxSplit =
        kWindowMaxSplit<T, kBits, kZeroPoints, kLines, kTiles, kWide, kHalves == 2>;
    reduce_and_store<Halves, kMaxSplit>(p, v, warp, lane, k_split, n0, rows.ok);
  } else {
    const bool ok[4] = {rows.ok[0], rows.ok[1], rows1.ok[0], rows1.ok[1]};
    reduce_and_store<Halves>(p, v, warp, lane, k_split, n0, ok);
  }
}

template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles,
          bool kResultScale = true, bool kPairBlock = false, bool kWide = false,
          bool kRowGroups = false>
__global__ void __launch_bounds__(
    kWindowMaxSplit<T, kBits, kZeroPoints, kLines, kTiles, kWide, kRowGroups> * kWarpSize,
    kWindowBlocksPerSm<T, kBits, kZeroPoints, kLines, kTiles, kWide, kRowGroups>)
    NBitsGemvWindowKernel(const GemvParams<T> p) {
  if constexpr (kRowGroups) {
    static_assert(kLines, "row groups only with line loads");
    const RowGroup<T, T> group(p);
    window_tile<T, kBits, kZeroPoints, kLines, kTiles, kResultScale, kPairBlock, kWide,
                kGroupHalves>(group.p, group.column_block);
  } else {
    window_tile<T, kBits, kZeroPoints, kLines, kTiles, kResultScale, kPairBlock, kWide>(
        p, blockIdx.x);
  }
}

// ================================================================= launcher
// The instantiated configurations (T, bits, kZeroPoints, kLines, kTiles, kResultScale,
// kPairBlock, kWide): every one a plan can reach. Without line loads, blocks of a window
// or more; with them, blocks below a window (each weight scaled), of one window, or of
// two or more (kPairBlock), one or two tiles per warp, two at 128 or 168 registers.
#define BQMM_WINDOW_DECODES(X, T, B, ZP, TILES, WIDE) \
  X(T, B, ZP, true, TILES, false, false, WIDE)       \
  X(T, B, ZP, true, TILES, true, false, WIDE)        \
  X(T, B, ZP, true, TILES, true, true, WIDE)
#define BQMM_WINDOW_SHAPES(X, T, B, ZP)              \
  X(T, B, ZP, false, 1, true, false, false)          \
  BQMM_WINDOW_DECODES(X, T, B, ZP, 1, false)         \
  BQMM_WINDOW_DECODES(X, T, B, ZP, 2, false)         \
  BQMM_WINDOW_DECODES(X, T, B, ZP, 2, true)
#define BQMM_WINDOW_CONFIGS(X, T)                                            \
  BQMM_WINDOW_SHAPES(X, T, 4, false) BQMM_WINDOW_SHAPES(X, T, 4, true)       \
  BQMM_WINDOW_SHAPES(X, T, 8, false) BQMM_WINDOW_SHAPES(X, T, 8, true)

// One configuration of the table: its decode kernel, or (row_groups, M > 8) its row-group
// twin, instantiated for the line-load configurations only (launch_nbits_gemv refuses
// M > 8 without line loads before it gets here).
template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles, bool kResultScale,
          bool kPairBlock, bool kWide>
Status launch_window_config(const GemvParams<T>& p, dim3 grid, dim3 block, int smem,
                            bool row_groups, cudaStream_t stream) {
  if constexpr (kLines) {
    if (row_groups) {
      NBitsGemvWindowKernel<T, kBits, kZeroPoints, kLines, kTiles, kResultScale, kPairBlock,
                            kWide, true><<<grid, block, smem, stream>>>(p);
      return check_launch("NBitsGemvWindowKernel (row groups)");
    }
  }
  if (row_groups)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: row groups without line loads");
  NBitsGemvWindowKernel<T, kBits, kZeroPoints, kLines, kTiles, kResultScale, kPairBlock, kWide>
      <<<grid, block, smem, stream>>>(p);
  return check_launch("NBitsGemvWindowKernel");
}

template <typename T>
Status launch_window(const NBitsGemvArgs& args, int k_split, bool lines, int tiles,
                     int registers, cudaStream_t stream) {
  const GemvParams<T> p = make_nbits_params<T>(args);
  const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
  // Blocks of a window or more: the scale on the mma result; smaller (line loads only):
  // each weight scaled before the mma.
  const int chunk_codes = args.bits == 4 ? Codes<4>::kPerChunk : Codes<8>::kPerChunk;
  const bool result_scale = args.block_size >= window_codes;
  if ((args.bits != 4 && args.bits != 8) || (!result_scale && !lines) ||
      args.block_size < chunk_codes || p.chunks % kWindowChunks != 0)
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: the window kernel takes rows of whole windows in "
                  "blocks of a window or more (with line loads: of a chunk or more), not " +
                      std::to_string(args.bits) + "-bit K = " + std::to_string(args.k) +
                      " block_size " + std::to_string(args.block_size) +
                      (lines ? " with" : " without") + " line loads");
  if (tiles != 1 && !(tiles == 2 && lines))
    return Status(StatusCode::kInternal, "launch_nbits_gemv: " + std::to_string(tiles) +
                                             " tiles per warp (1, or 2 with line loads)");
  bool wide = false;
  BQMM_RETURN_IF_ERROR(check_line_tiles_registers("launch_nbits_gemv", registers,
                                                  lines && tiles == 2, k_split, &wide));
  const int max_split =
      nbits_window_max_k_split(args.bits, args.zp_packed != nullptr, args.dtype == DType::kFloat16,
                               lines, tiles, wide, args.m > kMmaRows);
  if (k_split > max_split)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: k_split " + std::to_string(k_split) +
                                             " exceeds this window kernel's blocks of " +
                                             std::to_string(max_split) + " warps");
  // M > 8: row groups, the group varying fastest (RowGroup, gemv/common.cuh).
  const bool row_groups = args.m > kMmaRows;
  if (row_groups && !lines)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: M = " + std::to_string(args.m) +
                                             " > 8 takes row groups, which only line loads have");
  const int64_t blocks =
      (args.n + kTileCols * tiles - 1) / (kTileCols * tiles) * gemv_row_groups(args.m);
  if (blocks > 0x7fffffff)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: grid too large for M = " +
                                             std::to_string(args.m) + ", N = " +
                                             std::to_string(args.n));
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(k_split * kWarpSize);
  if (lines && p.windows % 2 != 0)
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: line loads take rows of whole 128-byte lines, not K = " +
                      std::to_string(args.k));
  const int smem = lines ? k_split * tiles * kLineBufferBytes : 0;
  // Line loads: the block size picks the decode (without them: blocks of a window or
  // more, checked above) and whether a pair of windows shares one block.
  const bool pair_block = lines && args.block_size >= 2 * window_codes;
  if (lines && result_scale && !pair_block && reinterpret_cast<uintptr_t>(args.scales) % 4 != 0)
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: line loads on blocks of one window read the scales in "
                  "4-byte pairs; these are not 4-byte aligned");
  const bool zero_points = p.zp != nullptr;
#define BQMM_LAUNCH_IF(T_, B, ZP, LINES, TILES, RS, PB, WIDE)                             \
  if (args.bits == B && zero_points == ZP && lines == LINES && tiles == TILES &&         \
      result_scale == RS && pair_block == PB && wide == WIDE)                            \
    return launch_window_config<T_, B, ZP, LINES, TILES, RS, PB, WIDE>(p, grid, block, smem, \
                                                                       row_groups, stream);
  BQMM_WINDOW_CONFIGS(BQMM_LAUNCH_IF, T)
#undef BQMM_LAUNCH_IF
  return Status(StatusCode::kInternal,
                std::string("launch_nbits_gemv: no NBitsGemvWindowKernel for ") +
                    dtype_name(args.dtype) + ", " + std::to_string(args.bits) + "-bit" +
                    (zero_points ? ", zero points" : "") + (lines ? ", line loads" : "") +
                    ", " + std::to_string(tiles) + " tile(s)" +
                    (result_scale ? ", scale on the result" : "") +
                    (pair_block ? ", pairs in one block" : "") + (wide ? ", 168 registers" : "") +
                    (row_groups ? ", row groups" : ""));
}

}  // namespace

Status launch_nbits_gemv_window(const NBitsGemvArgs& args, int k_split, bool lines, int tiles,
                                int registers, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_nbits_gemv (window kernel)", [&](auto tag) -> Status {
    return launch_window<decltype(tag)>(args, k_split, lines, tiles, registers, stream);
  });
}

}  // namespace bqmm::cuda
