// The fused GEMM of both operators, for M above the decode GEMV (gemv/): block-quantized
// weights (FP8 e4m3, 8-bit or 4-bit codes, in the operators' own layout) read from HBM once
// per block column, decoded in registers and multiplied on tensor cores:
//
//   FP8:    Y[m, n] = sum_b (sum_{k in block b} A[m, k] * e4m3(W[n, k])) * scale[n, b] + bias[n]
//   N-bit:  Y[m, n] = sum_k A[m, k] * round_T((q[n, k] - zp[n, b]) * scale[n, b]) + bias[n]
//           typed (fractional) zero points: round_T(q * scale + round_T(-zp * scale))
//
// Numerics. FP8: e4m3 -> T is exact, so every product is exact and the block scale is
// applied in float32 to each block's float32 partial sum (the decode GEMV's numerics).
// N-bit: each weight is rounded to T once, exactly as the dequant kernel writes it (the
// magic-number decode of gemv/nbits_codes.cuh), then exact products; typed zero points
// (kTypedZp) as the decode GEMV and the mixed-input GEMM take them: -zp * scale rounded to
// T per block, added to the exact q * scale by one multiply-add (decode_word_pairs_typed). Sums are float32; the
// bias is added in float32 and Y rounded to T once (or, with a K split, after the split's
// float32 partial sums are added by FusedGemmReduceKernel).
//
// Tiling (core/gemm_plan.h holds the host's copy of every constant). A block owns kTileN =
// 128 weight rows (output columns) x kTileM activation rows (16, 32 or 64) and a range of
// K slabs. A slab is 128 bytes of each weight row (128 K of FP8 / 8-bit, 256 of 4-bit) and
// the matching [kTileM, slab K] activations; kStages slabs are in flight in a cp.async
// ring of shared memory. The block's 8 warps (GemmWarps): warp wn of 4 along N owns weight
// rows 32 wn .. 32 wn + 31 (two 16-row mma tiles); along M, tile 64 has 2 warps of 32
// activation rows (kGroups = 4 groups of 8, the mma N extent), tiles 16 and 32 one warp of
// all rows, and there the two warps of a column (wk = 0, 1) take the first and second half
// of every slab's K, their sums added at the end.
//
// Fragments. Y^T = W * A^T with mma.m16n8k16: the weight is the A operand (16 rows =
// output columns), the activation the B operand (8 rows). ldmatrix.x4 on the weight bytes
// gives lane (g, t) = (lane / 4, lane % 4) the 4 bytes 4t .. 4t + 3 of a 16-byte chunk of
// rows g and g + 8 (a "word"). K is a reduction axis, so the mma's logical k order may be
// any permutation applied to both operands; each word is used in its own order:
//   8-bit (FP8, int8): a chunk is 16 K, one mma step; word bytes (0, 1) are logical
//     (2t, 2t + 1), bytes (2, 3) are (2t + 8, 2t + 9). The lane's activations are the
//     4 halves at the same K (4t .. 4t + 3 of the chunk): one 8-byte shared load.
//   4-bit: a chunk is 32 K, two mma steps; the word's 8 codes decode as pairs (i, i + 4)
//     (gemv/nbits_codes.cuh), the activations at K 8t .. 8t + 7 of the chunk are one
//     16-byte shared load paired the same way (pair_act4).
//
// Shared memory, per stage: the weight tile [128 rows][128 bytes], chunk c of row r at
// 16 (c ^ (r % 8)) (an ldmatrix matrix's 8 rows hit 8 different bank groups); then the
// activation tile [kTileM rows][pitch], pitch = slab halves + 32 bytes (8-bit: the 16
// lanes of a half-warp's 8-byte loads cover 4 rows x 32 bytes, 32 bytes apart mod 128)
// or + 64 (4-bit: a quarter-warp's 16-byte loads cover 2 rows x 64 bytes).
//
// Edges: weight rows past N and activation rows past M are zero-filled (neither is
// stored; a lane's scale lookups clamp to row N - 1); bytes past a weight row's end and K
// past the activation's end are zero-filled, so a partial last slab (and a partial last
// block) adds nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/gemm_plan.h"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/gemv/nbits_codes.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {

// ----------------------------------------------------------------- geometry
template <GemmWeights kW>
struct GemmFormat {
  static constexpr int kBits = gemm_weight_bits(kW);
  static constexpr int kSlabK = static_cast<int>(gemm_slab_k(kBits));  // K per stage
  static constexpr int kChunks = static_cast<int>(kGemmSlabBytes / 16);  // per row per slab
  static constexpr int kChunkK = 16 * 8 / kBits;                    // K per 16-byte chunk
  static constexpr int kWordK = kChunkK / 4;                        // K per lane word
  static constexpr int kSteps = kChunkK / 16;                       // mma steps per word
  static constexpr int kActPitch = static_cast<int>(gemm_act_pitch_bytes(kBits));
};

// kGemmWarps warps per block: 4 along N (32 weight rows each); along M, 2 warps of 4
// groups for 64 rows, else 1 warp of all the rows, and then the block's K halves: warp
// (wn, wk) takes chunks 4 wk .. 4 wk + 3 of every slab, the halves added at the end.
template <int kTileM>
struct GemmWarps {
  static constexpr int kN = kGemmTileN / 32;
  static constexpr int kGroups = kTileM >= 32 ? 4 : kTileM / 8;  // 8-row groups per warp
  static constexpr int kM = kTileM / (8 * kGroups);
  static constexpr int kK = kGemmWarps / (kN * kM);
  static constexpr int kThreads = 32 * kGemmWarps;
  static_assert(kM * kGroups * 8 == kTileM, "tile_m is whole warps of 8-row groups");
  static_assert(kN * kM * kK == kGemmWarps && (kK == 1 || kK == 2), "the block's warps");
};

// Everything the kernel reads (GemmParams<T, S>: S the scales' type, float for FP8).
template <typename T, typename S>
struct GemmParams {
  const T* a;
  T* a_ordered;       // the Hopper mainloop: A in its K order (workspace, gemm_act_order_bytes)
  const uint8_t* b;
  const S* scales;
  const uint8_t* zp;  // N-bit zero points: packed bytes, typed T values (kTypedZp) or nullptr
                      // (the default zero point); zp_row_bytes per weight row
  const T* bias;
  T* y;
  float* partials;    // k_split > 1: [k_split, M, N]
  int m;
  int64_t n, k;
  int64_t row_bytes, k_blocks, zp_row_bytes;
  uint32_t block_shift;  // N-bit: log2(block_size)
  FastDivU32 block_div;  // FP8: 16-element chunk -> block index (block_size / 16 chunks)
  int slabs_per_split;   // K slabs of each blockIdx.z
};

// ----------------------------------------------------------------- primitives
// 16 bytes global -> shared, bypassing L1; zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
// 4 bytes global -> shared, cached in L1 (a warp's 32 copies of consecutive words are one
// 128-byte line); zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

template <typename T>
__device__ __forceinline__ void gemm_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_m16n8k16<T>(d, a, b, d);
}

// ----------------------------------------------------------------- block constants
// What one weight row needs per scale block to decode a word: FP8 the float32 scale; N-bit
// the raw scale (T bits) and zero point (its byte, or a typed one's T bits), turned into
// BlockConsts where used. Which block a word falls in: FP8 by division (any multiple of
// 16), N-bit by shift.
template <GemmWeights kW, typename T>
struct RawConsts {
  float scale;      // FP8
  uint32_t bits;    // N-bit: scale's T bits | (zp byte or typed zp's T bits) << 16
};

template <typename T, typename S>
__device__ __forceinline__ uint32_t clamp_block(const GemmParams<T, S>& p, uint32_t b) {
  const uint32_t last = static_cast<uint32_t>(p.k_blocks - 1);
  return b < last ? b : last;  // K past the end (zero activations) reads the last block
}
// FP8: the block of 16-element chunk `chunk` (k / 16).
template <typename T, typename S>
__device__ __forceinline__ uint32_t fp8_chunk_block(const GemmParams<T, S>& p, uint32_t chunk) {
  return clamp_block(p, p.block_div.div(chunk));
}
template <GemmWeights kW, typename T, typename S>
__device__ __forceinline__ uint32_t block_of(const GemmParams<T, S>& p, int64_t k) {
  if constexpr (kW == GemmWeights::kFp8) {
    return fp8_chunk_block(p, static_cast<uint32_t>(k >> 4));  // a word never straddles a chunk
  } else {
    return clamp_block(p, static_cast<uint32_t>(k >> p.block_shift));
  }
}

// A weight row's constants: its row of scales and of zero points (nullptr: the default
// zero point). Loops that load a row's constants on every slab keep these rather
// than the row (a 64-bit multiply per row and load).
template <typename S>
struct ConstRow {
  const S* scales;
  const uint8_t* zp;
};

template <typename T, typename S>
__device__ __forceinline__ ConstRow<S> const_row(const GemmParams<T, S>& p, int64_t row) {
  return {p.scales + row * p.k_blocks, p.zp == nullptr ? nullptr : p.zp + row * p.zp_row_bytes};
}

// Pulls into L2 the 32-byte sectors of weight row `row`'s constants for K in [k_begin,
// k_end): its scales and, where stored, zero points (typed: T values; packed: bytes of
// 8 / bits codes' zero points each). Nothing is loaded into registers.
template <GemmWeights kW, bool kTypedZp, typename T, typename S>
__device__ __forceinline__ void prefetch_row_consts(const GemmParams<T, S>& p, int64_t row, int64_t k_begin,
                                                    int64_t k_end) {
  if (k_end <= k_begin) return;
  const int64_t b0 = block_of<kW>(p, k_begin), b1 = block_of<kW>(p, k_end - 1);
  const auto sectors = [](const uint8_t* first, const uint8_t* last) {
    const auto lo = reinterpret_cast<uintptr_t>(first) & ~uintptr_t{31};
    for (uintptr_t a = lo; a <= reinterpret_cast<uintptr_t>(last); a += 32)
      prefetch_l2(reinterpret_cast<const void*>(a));
  };
  const auto* scales = reinterpret_cast<const uint8_t*>(p.scales + row * p.k_blocks);
  sectors(scales + b0 * sizeof(S), scales + b1 * sizeof(S));
  if (p.zp == nullptr) return;
  const uint8_t* zp = p.zp + row * p.zp_row_bytes;
  if constexpr (kTypedZp) {
    sectors(zp + b0 * sizeof(T), zp + b1 * sizeof(T));
  } else {
    constexpr int kShift = GemmFormat<kW>::kBits == 4 ? 1 : 0;  // two 4-bit zero points a byte
    sectors(zp + (b0 >> kShift), zp + (b1 >> kShift));
  }
}

// kTypedZp: r.zp is the row's typed zero points (k_blocks values of T).
template <GemmWeights kW, typename T, bool kTypedZp, typename S>
__device__ __forceinline__ RawConsts<kW, T> load_consts(const ConstRow<S>& r, uint32_t blk) {
  RawConsts<kW, T> c{};
  if constexpr (kW == GemmWeights::kFp8) {
    c.scale = __ldg(r.scales + blk);
  } else if constexpr (kTypedZp) {
    const uint32_t s = half_bits_of(__ldg(r.scales + blk));
    c.bits = s | (half_bits_of(__ldg(reinterpret_cast<const T*>(r.zp) + blk)) << 16);
  } else {
    constexpr int kBits = GemmFormat<kW>::kBits;
    uint16_t s;
    const T v = __ldg(r.scales + blk);
    memcpy(&s, &v, 2);
    const uint32_t zp = r.zp == nullptr ? Codes<kBits>::kDefaultZeroPoint * (kBits == 4 ? 0x11u : 1u)
                                        : __ldg(r.zp + (kBits == 8 ? blk : blk >> 1));
    c.bits = s | (zp << 16);
  }
  return c;
}

// kBytes (2, 4, 8 or 16) at `src`, aligned to them, as 32-bit words (2 bytes: the low half
// of one): one load.
template <int kBytes, int kWords>
__device__ __forceinline__ void load_vector(const uint8_t* src, uint32_t (&w)[kWords]) {
  static_assert(kWords == (kBytes < 4 ? 1 : kBytes / 4), "the bytes fill the words");
  if constexpr (kBytes == 16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (kBytes == 8) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(src));
    w[0] = v.x, w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    w[0] = __ldg(reinterpret_cast<const uint32_t*>(src));
  } else {
    static_assert(kBytes == 2, "2, 4, 8 or 16 bytes");
    w[0] = __ldg(reinterpret_cast<const unsigned short*>(src));
  }
}

// N-bit: the decoder's constants of a raw (row, block) pair (kTypedZp: make_typed_consts).
template <GemmWeights kW, typename T, bool kTypedZp>
__device__ __forceinline__ BlockConsts nbits_consts(const RawConsts<kW, T>& c, uint32_t blk) {
  constexpr int kBits = GemmFormat<kW>::kBits;
  if constexpr (kTypedZp) {
    return make_typed_consts<T, kBits>(half_bits_as<T>(c.bits), half_bits_as<T>(c.bits >> 16));
  } else {
    RawQuant<T, kBits> r;
    r.scale[0] = half_bits_as<T>(c.bits);
    if constexpr (Codes<kBits>::kGroups == 2) r.scale[1] = r.scale[0];
    r.zp_bits = c.bits >> 16;
    return make_consts<T, kBits>(r, blk, 0, false);
  }
}

// One word of a 16-row tile's rows lo and hi -> the A fragments of its kSteps k16 steps
// (both mainloops' register A operand: a[s][0..3] = rows (g, g + 8) x logical k (2t,
// 2t + 1) and (2t + 8, 2t + 9)). FP8: bytes (0, 1) and (2, 3) of the word. N-bit: the
// word's pairs (decode_word_pairs: 8-bit (0, 1), (2, 3); 4-bit (i, i + 4)), pair 2s + h
// to step s, k half h. blk: the block the constants belong to (it picks a packed 4-bit
// zero point's nibble). kExact (N-bit without typed zero points): the weights as exact
// q - zp, unscaled (decode_word_pairs_exact), for a caller that scales the block's sums.
template <typename T, GemmWeights kW, bool kTypedZp, bool kExact = false>
__device__ __forceinline__ void decode_word_fragments(uint32_t lo, uint32_t hi, const RawConsts<kW, T>& c_lo,
                                                      const RawConsts<kW, T>& c_hi, uint32_t blk,
                                                      uint32_t (&a)[GemmFormat<kW>::kSteps][4]) {
  if constexpr (kW == GemmWeights::kFp8) {
    a[0][0] = e4m3x2_to_packed2<T>(lo);
    a[0][1] = e4m3x2_to_packed2<T>(hi);
    a[0][2] = e4m3x2_hi_to_packed2<T>(lo);
    a[0][3] = e4m3x2_hi_to_packed2<T>(hi);
  } else {
    constexpr int kBits = GemmFormat<kW>::kBits;
    uint32_t pl[Codes<kBits>::kPerWord / 2], ph[Codes<kBits>::kPerWord / 2];
    static_assert(!(kExact && kTypedZp), "typed zero points are not integers: no exact q - zp");
    if constexpr (kExact) {
      decode_word_pairs_exact<T, kBits>(lo, nbits_consts<kW, T, false>(c_lo, blk), pl);
      decode_word_pairs_exact<T, kBits>(hi, nbits_consts<kW, T, false>(c_hi, blk), ph);
    } else if constexpr (kTypedZp) {
      decode_word_pairs_typed<T, kBits>(lo, nbits_consts<kW, T, true>(c_lo, blk), pl);
      decode_word_pairs_typed<T, kBits>(hi, nbits_consts<kW, T, true>(c_hi, blk), ph);
    } else {
      decode_word_pairs<T, kBits>(lo, nbits_consts<kW, T, false>(c_lo, blk), pl);
      decode_word_pairs<T, kBits>(hi, nbits_consts<kW, T, false>(c_hi, blk), ph);
    }
#pragma unroll
    for (int s = 0; s < GemmFormat<kW>::kSteps; ++s) {
      a[s][0] = pl[2 * s];
      a[s][1] = ph[2 * s];
      a[s][2] = pl[2 * s + 1];
      a[s][3] = ph[2 * s + 1];
    }
  }
}

// ================================================================= the kernel
// Template parameters:
//   T        float16 / bfloat16 (activations, bias, Y; N-bit scales).
//   kW       the weight format.
//   kTileM   activation rows per block (16, 32, 64).
//   kConsts  scale blocks per weight row per slab as the lane sees them: 1 (block_size >=
//            slab K), 2 (= slab K / 2), 8 (smaller: one per word). 1 and 2 are loaded a
//            slab ahead into registers; 8 are loaded where used (L1 hits after the first).
//   kTypedZp N-bit typed (fractional) zero points (p.zp: T values), else packed or the
//            default.
template <typename T, GemmWeights kW, int kTileM, int kConsts, bool kTypedZp>
struct FusedGemmTile {
  using F = GemmFormat<kW>;
  using Warps = GemmWarps<kTileM>;
  using S = std::conditional_t<kW == GemmWeights::kFp8, float, T>;
  using Params = GemmParams<T, S>;
  static constexpr bool kFp8 = kW == GemmWeights::kFp8;
  static constexpr int kStages = gemm_stages(kTileM, F::kBits);
  static constexpr int kWeightBytes = kGemmTileN * static_cast<int>(kGemmSlabBytes);
  static constexpr int kStageBytes = static_cast<int>(gemm_stage_bytes(kTileM, F::kBits));
  static constexpr int kWordsPerConst = F::kChunks / kConsts;
  static constexpr int kWordsPerWarp = F::kChunks / Warps::kK;  // the warp's K part of a slab
  static constexpr bool kPrefetch = kConsts <= 2;
  // Prefetched consts of the warp's words: one per const group it touches.
  static constexpr int kWarpConsts = kPrefetch ? (kConsts * kWordsPerWarp + F::kChunks - 1) / F::kChunks : 1;
  static constexpr int kWordsPerWarpConst = kWordsPerWarp / kWarpConsts;
  // FP8 folds a const group's products at the group's (or the warp's part's) last word.
  static constexpr int kFoldWords = kWordsPerConst < kWordsPerWarp ? kWordsPerConst : kWordsPerWarp;
  static constexpr int kGroups = Warps::kGroups;
  static_assert(kConsts == 1 || kConsts == 2 || kConsts == 8, "consts per slab");
  static_assert(!kFp8 || !kTypedZp, "typed zero points are N-bit's");
  static_assert(kStages >= 3, "the ring refills a stage one iteration after it is consumed");
  static_assert(kWeightBytes + kTileM * F::kActPitch == kStageBytes, "host stage size");

  const Params& p;
  uint8_t* smem;
  int warp_n, warp_m, warp_k, lane, g, t;
  int64_t n0, m0;
  ConstRow<S> crow[2][2];  // [tile][lo, hi]: the lane's weight rows' constants (rows clamped to N - 1)

  __device__ FusedGemmTile(const Params& params, uint8_t* shared, int64_t n_begin, int64_t m_begin)
      : p(params), smem(shared), n0(n_begin), m0(m_begin) {
    const int warp = threadIdx.x / 32;
    warp_n = warp % Warps::kN;
    warp_m = (warp / Warps::kN) % Warps::kM;
    warp_k = warp / (Warps::kN * Warps::kM);
    lane = threadIdx.x % 32;
    g = lane / 4;
    t = lane % 4;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = n0 + 32 * warp_n + 16 * j + 8 * h + g;
        crow[j][h] = const_row(p, r < p.n ? r : p.n - 1);
        // Opaque from here: otherwise the compiler folds the row's offset back into every
        // slab's load address (a 64-bit multiply-add per row and slab).
        asm("" : "+l"(crow[j][h].scales), "+l"(crow[j][h].zp));
      }
  }

  // ---------------------------------------------------------------- producer
  // Each thread copies the same 16-byte column (chunk) of its rows every slab: weight rows
  // r0 + 32 pass, chunk wc; activation rows a0 + kActRowsPerPass pass, piece ac. Their
  // addresses are computed once (Loader); a slab adds its offset. Weight rows past N and
  // activation rows past M are zero-filled; so are bytes past a row's end.
  static constexpr int kWeightPasses = kGemmTileN * F::kChunks / Warps::kThreads;
  static constexpr int kActChunks = F::kSlabK * 2 / 16;  // 16-byte pieces of an activation row
  static constexpr int kActPasses = kTileM * kActChunks / Warps::kThreads;
  static constexpr int kActRowsPerPass = Warps::kThreads / kActChunks;
  static_assert(kWeightPasses * Warps::kThreads == kGemmTileN * F::kChunks &&
                    Warps::kThreads % F::kChunks == 0 && (Warps::kThreads / F::kChunks) % 8 == 0,
                "whole weight passes, each thread one chunk column, the swizzle per pass alike");
  static_assert(kActPasses * Warps::kThreads == kTileM * kActChunks &&
                    Warps::kThreads % kActChunks == 0, "whole activation passes");

  struct Loader {
    const uint8_t* w_src;   // weight row r0, chunk wc (row 0 of B where r0 >= N)
    const T* a_src;         // activation row a0, piece ac
    int64_t w_stride, a_stride;  // one pass: 32 weight rows, kActRowsPerPass activation rows
    uint32_t w_dst, a_dst;  // shared-memory offsets in a stage
    uint32_t w_rows_ok, a_rows_ok;  // bit pass: the pass's row exists
    int wc, ac;
  };

  __device__ Loader make_loader() const {
    Loader l;
    const int r0 = threadIdx.x / F::kChunks;
    l.wc = threadIdx.x % F::kChunks;
    l.w_dst = r0 * kGemmSlabBytes + 16 * (l.wc ^ (r0 % 8));
    l.w_stride = (Warps::kThreads / F::kChunks) * p.row_bytes;
    l.w_src = p.b + (n0 + r0 < p.n ? (n0 + r0) * p.row_bytes : 0) + 16 * l.wc;
    l.w_rows_ok = 0;
#pragma unroll
    for (int pass = 0; pass < kWeightPasses; ++pass)
      if (n0 + r0 + pass * (Warps::kThreads / F::kChunks) < p.n) l.w_rows_ok |= 1u << pass;
    const int a0 = threadIdx.x / kActChunks;
    l.ac = threadIdx.x % kActChunks;
    l.a_dst = kWeightBytes + a0 * F::kActPitch + 16 * l.ac;
    l.a_stride = kActRowsPerPass * p.k;
    l.a_src = p.a + (m0 + a0 < p.m ? (m0 + a0) * p.k : 0) + 8 * l.ac;
    l.a_rows_ok = 0;
#pragma unroll
    for (int pass = 0; pass < kActPasses; ++pass)
      if (m0 + a0 + pass * kActRowsPerPass < p.m) l.a_rows_ok |= 1u << pass;
    return l;
  }

  // Slab `slab`'s weight and activation tiles into stage `stage` (every thread, cp.async).
  // Where the block's weight rows all exist and the slab lies inside the rows, the weight
  // copies need no predicates (a pointer step per pass); the same for the activations
  // where every row of the tile exists and the slab lies inside K.
  __device__ __forceinline__ void load_stage(const Loader& l, int stage, int64_t slab) const {
    const uint32_t base = smem_addr(smem + stage * kStageBytes);
    const int64_t w_off = slab * kGemmSlabBytes;
    const uint32_t w_dst = base + l.w_dst;
    constexpr uint32_t kWeightPassBytes = (Warps::kThreads / F::kChunks) * kGemmSlabBytes;
    if (n0 + kGemmTileN <= p.n && w_off + kGemmSlabBytes <= p.row_bytes) {
      const uint8_t* src = l.w_src + w_off;
#pragma unroll
      for (int pass = 0; pass < kWeightPasses; ++pass, src += l.w_stride)
        cp_async16(w_dst + pass * kWeightPassBytes, src, true);
    } else {
      const bool w_in_row = w_off + 16 * l.wc < p.row_bytes;
#pragma unroll
      for (int pass = 0; pass < kWeightPasses; ++pass) {
        const bool ok = w_in_row && ((l.w_rows_ok >> pass) & 1u) != 0;
        cp_async16(w_dst + pass * kWeightPassBytes, ok ? l.w_src + pass * l.w_stride + w_off : p.b, ok);
      }
    }
    const int64_t a_off = slab * F::kSlabK;
    const uint32_t a_dst = base + l.a_dst;
    constexpr uint32_t kActPassBytes = kActRowsPerPass * F::kActPitch;
    if (m0 + kTileM <= p.m && a_off + F::kSlabK <= p.k) {
      const T* src = l.a_src + a_off;
#pragma unroll
      for (int pass = 0; pass < kActPasses; ++pass, src += l.a_stride)
        cp_async16(a_dst + pass * kActPassBytes, src, true);
    } else {
      const bool a_in_row = a_off + 8 * l.ac < p.k;
#pragma unroll
      for (int pass = 0; pass < kActPasses; ++pass) {
        const bool ok = a_in_row && ((l.a_rows_ok >> pass) & 1u) != 0;
        cp_async16(a_dst + pass * kActPassBytes, ok ? l.a_src + pass * l.a_stride + a_off : p.a, ok);
      }
    }
  }

  // ---------------------------------------------------------------- block constants
  // The lane's block of word w of slab `slab` (the same for both rows of a tile).
  __device__ __forceinline__ uint32_t word_block(int64_t slab, int w) const {
    return block_of<kW>(p, slab * F::kSlabK + w * F::kChunkK + t * F::kWordK);
  }
  // Prefetched constants (kConsts 1, 2): slot ci holds the block of the warp's word
  // ci * kWordsPerWarpConst, which all the slot's words share. Decoding each word with that
  // block (the same expression for all of them) lets the compiler make the decoder's
  // constants once a slot rather than once a word (4-bit: the zero point's nibble).
  __device__ __forceinline__ uint32_t slot_block(int64_t slab, int wl) const {
    return word_block(slab, warp_k * kWordsPerWarp + wl / kWordsPerWarpConst * kWordsPerWarpConst);
  }
  __device__ __forceinline__ void prefetch_consts(int64_t slab,
                                                  RawConsts<kW, T> (&c)[2][2][kWarpConsts]) const {
    if constexpr (kPrefetch) {
#pragma unroll
      for (int ci = 0; ci < kWarpConsts; ++ci) {
        const uint32_t blk = slot_block(slab, ci * kWordsPerWarpConst);
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) c[j][h][ci] = load_consts<kW, T, kTypedZp>(crow[j][h], blk);
      }
    }
  }

  // ---------------------------------------------------------------- consumer
  // Word w of both tiles' rows (lo, hi) from the staged weight tile: chunks 2q, 2q + 1 by
  // one ldmatrix per tile (w = 2q + i -> words[j][i][lo, hi]).
  __device__ __forceinline__ void load_words(uint32_t wbase, int q, uint32_t (&words)[2][2][2]) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = 32 * warp_n + 16 * j + (lane % 8) + 8 * ((lane / 8) % 2);
      const int chunk = 2 * q + lane / 16;
      uint32_t r[4];
      ldmatrix_x4(wbase + row * kGemmSlabBytes + 16 * (chunk ^ (row % 8)), r);
      words[j][0][0] = r[0];
      words[j][0][1] = r[1];
      words[j][1][0] = r[2];
      words[j][1][1] = r[3];
    }
  }

  // The B fragments of activation group gi for word w: 8-bit one step (b[0][0..1]), 4-bit
  // two (b[s][0..1]).
  __device__ __forceinline__ void load_act(uint32_t abase, int gi, int w,
                                           uint32_t (&b)[F::kSteps][2]) const {
    const int row = 8 * (kGroups * warp_m + gi) + g;
    const uint32_t addr = abase + row * F::kActPitch + 2 * (w * F::kChunkK + t * F::kWordK);
    if constexpr (F::kBits == 8) {
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(b[0][0]), "=r"(b[0][1]) : "r"(addr));
    } else {
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(addr));
      uint32_t pa[4];
      pair_act4(v, pa);
      b[0][0] = pa[0];
      b[0][1] = pa[1];
      b[1][0] = pa[2];
      b[1][1] = pa[3];
    }
  }

  // The slab in stage `stage`: every word of both tiles times every activation group.
  // FP8 sums each scale block's products in `part` and folds them into acc, scaled, at the
  // block's last word of the slab (blocks never straddle a word: block_size % 16 == 0).
  __device__ __forceinline__ void compute(int stage, int64_t slab,
                                          const RawConsts<kW, T> (&pre)[2][2][kWarpConsts],
                                          float (&acc)[2][kGroups][4],
                                          float (&part)[2][kGroups][4]) const {
    const uint32_t wbase = smem_addr(smem + stage * kStageBytes);
    const uint32_t abase = wbase + kWeightBytes;
#pragma unroll
    for (int qq = 0; qq < kWordsPerWarp / 2; ++qq) {
      const int q = warp_k * (kWordsPerWarp / 2) + qq;
      uint32_t words[2][2][2];
      load_words(wbase, q, words);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int wl = 2 * qq + i;  // the word within the warp's part (compile time)
        const int w = warp_k * kWordsPerWarp + wl;
        // N-bit: the block the word decodes with (prefetched: its slot's, slot_block).
        const uint32_t blk = kFp8 ? 0u : kPrefetch ? slot_block(slab, wl) : word_block(slab, w);
        RawConsts<kW, T> c[2][2];
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if constexpr (kPrefetch) {
              c[j][h] = pre[j][h][wl / kWordsPerWarpConst];
            } else {
              c[j][h] = load_consts<kW, T, kTypedZp>(crow[j][h], blk_or_word(slab, w, blk));
            }
          }
        uint32_t a[2][F::kSteps][4];
#pragma unroll
        for (int j = 0; j < 2; ++j)
          decode_word_fragments<T, kW, kTypedZp>(words[j][i][0], words[j][i][1], c[j][0], c[j][1], blk, a[j]);
#pragma unroll
        for (int gi = 0; gi < kGroups; ++gi) {
          uint32_t b[F::kSteps][2];
          load_act(abase, gi, w, b);
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int s = 0; s < F::kSteps; ++s) {
              if constexpr (kFp8) {
                gemm_mma<T>(part[j][gi], a[j][s], b[s]);
              } else {
                gemm_mma<T>(acc[j][gi], a[j][s], b[s]);
              }
            }
        }
        if constexpr (kFp8) {
          if ((wl + 1) % kFoldWords == 0) fold(c, acc, part);
        }
      }
    }
  }

  // The block of word w: N-bit has it already (blk), FP8 looks it up here.
  __device__ __forceinline__ uint32_t blk_or_word(int64_t slab, int w, uint32_t blk) const {
    return kFp8 ? word_block(slab, w) : blk;
  }

  // FP8: acc += part * the rows' block scales, part = 0.
  __device__ __forceinline__ void fold(const RawConsts<kW, T> (&c)[2][2], float (&acc)[2][kGroups][4],
                                       float (&part)[2][kGroups][4]) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float s_lo = c[j][0].scale, s_hi = c[j][1].scale;
#pragma unroll
      for (int gi = 0; gi < kGroups; ++gi) {
        acc[j][gi][0] = fmaf(part[j][gi][0], s_lo, acc[j][gi][0]);
        acc[j][gi][1] = fmaf(part[j][gi][1], s_lo, acc[j][gi][1]);
        acc[j][gi][2] = fmaf(part[j][gi][2], s_hi, acc[j][gi][2]);
        acc[j][gi][3] = fmaf(part[j][gi][3], s_hi, acc[j][gi][3]);
#pragma unroll
        for (int e = 0; e < 4; ++e) part[j][gi][e] = 0.0f;
      }
    }
  }

  // The block's K halves (kK == 2): warps of the second half hand their sums to the first
  // through the (drained) pipeline's shared memory; returns whether this warp stores.
  __device__ __forceinline__ bool add_k_halves(float (&acc)[2][kGroups][4]) const {
    if constexpr (Warps::kK == 1) {
      return true;
    } else {
      constexpr int kValues = 2 * kGroups * 4;
      static_assert(Warps::kN * kValues * 32 * 4 <= kStageBytes, "the halves fit a stage");
      float* buf = reinterpret_cast<float*>(smem) + warp_n * kValues * 32 + lane;
      __syncthreads();  // every warp is done with the pipeline's shared memory
      if (warp_k == 1) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
            for (int e = 0; e < 4; ++e) buf[((j * kGroups + gi) * 4 + e) * 32] = acc[j][gi][e];
      }
      __syncthreads();
      if (warp_k == 1) return false;
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][gi][e] += buf[((j * kGroups + gi) * 4 + e) * 32];
      return true;
    }
  }

  // ---------------------------------------------------------------- epilogue
  // D fragment (j, gi): d[0..1] = rows 2t, 2t + 1 of column lo, d[2..3] of column hi. One
  // split: bias in float32, one rounding to T. K split: the float32 sums to this split's
  // partial plane, added by FusedGemmReduceKernel.
  __device__ __forceinline__ void store(const float (&acc)[2][kGroups][4]) const {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t col = n0 + 32 * warp_n + 16 * j + 8 * h + g;
        if (col >= p.n) continue;
        const float bias = p.bias != nullptr && p.partials == nullptr ? to_float(p.bias[col]) : 0.0f;
#pragma unroll
        for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t row = m0 + 8 * (kGroups * warp_m + gi) + 2 * t + e;
            if (row >= p.m) continue;
            const float v = acc[j][gi][2 * h + e];
            if (p.partials != nullptr) {
              p.partials[(static_cast<int64_t>(blockIdx.z) * p.m + row) * p.n + col] = v;
            } else {
              p.y[row * p.n + col] = from_float<T>(v + bias);
            }
          }
      }
  }

  // ---------------------------------------------------------------- main loop
  __device__ __forceinline__ void run(int64_t slab_begin, int64_t slab_end) const {
    float acc[2][kGroups][4] = {};
    float part[2][kGroups][4] = {};
    RawConsts<kW, T> pre[2][2][kWarpConsts];
    const int64_t count = slab_end - slab_begin;
    const Loader loader = make_loader();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < count) load_stage(loader, s, slab_begin + s);
      cp_async_commit();
    }
    if (count > 0) prefetch_consts(slab_begin, pre);
#pragma unroll 1
    for (int64_t i = 0; i < count; ++i) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // slab i landed for every thread; stage (i - 1) % kStages is free
      const int64_t next = i + kStages - 1;
      if (next < count) load_stage(loader, static_cast<int>(next % kStages), slab_begin + next);
      cp_async_commit();
      RawConsts<kW, T> cur[2][2][kWarpConsts];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int ci = 0; ci < kWarpConsts; ++ci) cur[j][h][ci] = pre[j][h][ci];
      if (i + 1 < count) prefetch_consts(slab_begin + i + 1, pre);
      compute(static_cast<int>(i % kStages), slab_begin + i, cur, acc, part);
    }
    cp_async_wait<0>();
    if (add_k_halves(acc)) store(acc);
  }
};

// Grid: x = M tiles x N tiles, the M tile varying fastest (the blocks that share a weight
// strip run together: it comes from HBM once, from L2 after, while the activation, small
// at these M, stays in L2); z = the K split, slabs_per_split slabs each. Both mainloops
// (this file's and fused_wgmma.cuh's) take their block's tile from it. kGroupM > 0 (the
// W8A8 GEMM, whose M runs to thousands) orders the M tiles in groups of kGroupM, each
// group's tiles fastest, then its N tiles: a wave's blocks then share few activation tiles
// as well as few weight strips.
struct GemmBlockTile {
  int64_t m0, n0;                 // first activation row, first weight row
  int64_t slab_begin, slab_end;   // the K slabs [begin, end)
};
template <int kTileM, int kGroupM = 0, int kTileN = kGemmTileN, typename Params>
__device__ __forceinline__ GemmBlockTile gemm_block_tile(const Params& p) {
  GemmBlockTile b;
  const int64_t m_tiles = (p.m + kTileM - 1) / kTileM;
  int64_t t = blockIdx.x, first = 0, group = m_tiles;
  if constexpr (kGroupM > 0) {
    const int64_t n_tiles = (p.n + kTileN - 1) / kTileN;
    const int64_t g = t / (kGroupM * n_tiles);
    first = g * kGroupM;
    group = m_tiles - first < kGroupM ? m_tiles - first : kGroupM;
    t -= g * kGroupM * n_tiles;
  }
  b.m0 = (first + t % group) * kTileM;
  b.n0 = (t / group) * kTileN;
  const int64_t slabs = (p.row_bytes + kGemmSlabBytes - 1) / kGemmSlabBytes;
  b.slab_begin = static_cast<int64_t>(blockIdx.z) * p.slabs_per_split;
  b.slab_end = b.slab_begin + p.slabs_per_split < slabs ? b.slab_begin + p.slabs_per_split : slabs;
  return b;
}

// Launch bounds: two blocks per SM (128 registers) where the stages fit twice
// (core/gemm_plan.h, gemm_two_block_stages), else one.
template <typename T, GemmWeights kW, int kTileM, int kConsts, bool kTypedZp>
__global__ void __launch_bounds__(GemmWarps<kTileM>::kThreads,
                                  gemm_two_block_stages(kTileM, GemmFormat<kW>::kBits) > 0 ? 2 : 1)
    FusedGemmKernel(const GemmParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>> p) {
  extern __shared__ __align__(128) uint8_t gemm_smem[];
  const GemmBlockTile b = gemm_block_tile<kTileM>(p);
  const FusedGemmTile<T, kW, kTileM, kConsts, kTypedZp> tile(p, gemm_smem, b.n0, b.m0);
  tile.run(b.slab_begin, b.slab_end);
}

// k_split > 1: Y = round_T(sum of the partial planes + bias), the planes added in split
// order, then the bias. Where it is launched as a dependent of the kernel that writes the
// planes (launch_k_split_reduce), it waits for that kernel first (else the wait is a
// no-op). kVec consecutive outputs of one row per thread (kVec 4: float4 reads of every
// plane, where N % 4 == 0).
template <typename T, int kVec>
__global__ void FusedGemmReduceKernel(const float* partials, const T* bias, T* y, int64_t m,
                                      int64_t n, int k_split) {
  wait_for_prior_grid();
  const int64_t total = m * n;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * kVec) {
    float v[kVec] = {};
    for (int s = 0; s < k_split; ++s) {
      const float* plane = partials + s * total + i;
      if constexpr (kVec == 4) {
        const float4 q = *reinterpret_cast<const float4*>(plane);
        v[0] += q.x;
        v[1] += q.y;
        v[2] += q.z;
        v[3] += q.w;
      } else {
        v[0] += plane[0];
      }
    }
    const int64_t col = i % n;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (bias != nullptr) v[e] += to_float(bias[col + e]);
      y[i + e] = from_float<T>(v[e]);
    }
  }
}

// The K split's reduction after the kernel that wrote the partial planes. dependent: as a
// programmatic dependent launch, four outputs per thread (where N % 4 == 0): its blocks
// are scheduled while the GEMM's last blocks run (each GEMM block calls
// allow_dependent_launch on entry), which takes the second launch's latency off the
// critical path. Measured on the H200 (same run, back to back): the wgmma kernels' split
// of 2 at M = 64 on 8192 x 8192 3-4 % less time per call, their split of 4 at 4096 x 14336
// unchanged; the mma.sync kernel's splits of 4 and 8 at M = 16 (two blocks per SM) 1-6 %
// more, so it keeps the plain launch, one output per thread. partials: 16-byte aligned
// (a workspace region).
template <typename T>
Status launch_k_split_reduce(const float* partials, const T* bias, T* y, int64_t m, int64_t n,
                             int k_split, bool dependent, cudaStream_t stream) {
  const bool vec = dependent && n % 4 == 0;
  const dim3 grid(grid_for(vec ? m * n / 4 : m * n, 256));
  return vec ? launch_kernel(FusedGemmReduceKernel<T, 4>, grid, dim3(256), 0, stream, dependent,
                             "FusedGemmReduceKernel", partials, bias, y, m, n, k_split)
             : launch_kernel(FusedGemmReduceKernel<T, 1>, grid, dim3(256), 0, stream, dependent,
                             "FusedGemmReduceKernel", partials, bias, y, m, n, k_split);
}

// ================================================================= launch
// The bytes of `blocks` zero points (typed: T values; packed: `bits` bits each).
constexpr int wgmma_zp_bytes(int blocks, int bits, bool typed_zp) {
  return typed_zp ? 2 * blocks : blocks * bits / 8;
}
// Whether each weight row's scales and zero points of `blocks` blocks a stage are aligned
// vectors within the row (wgmma_consts in core/gemm_plan.h; vectors are its forms of 4 and
// 8 blocks): k_blocks % blocks == 0, the rows and stages aligned to the vectors' bytes.
template <typename T, typename S>
bool wgmma_vector_consts(const GemmParams<T, S>& p, int bits, bool typed_zp, int blocks) {
  if (blocks != 4 && blocks != 8) return false;
  const auto aligned = [](const void* q, int64_t bytes) { return reinterpret_cast<uintptr_t>(q) % bytes == 0; };
  const int64_t zp_bytes = wgmma_zp_bytes(blocks, bits, typed_zp);
  return p.k_blocks % blocks == 0 && aligned(p.scales, 2 * blocks) &&
         (p.zp == nullptr || (aligned(p.zp, zp_bytes) && p.zp_row_bytes % zp_bytes == 0));
}

template <typename T, GemmWeights kW, int kTileM, int kConsts, bool kTypedZp, typename Params>
Status launch_gemm_tile(const Params& p, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(gemm_smem_bytes(kTileM, GemmFormat<kW>::kBits));
  const auto kernel = FusedGemmKernel<T, kW, kTileM, kConsts, kTypedZp>;
  BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem));
  kernel<<<grid, GemmWarps<kTileM>::kThreads, kSmem, stream>>>(p);
  return check_launch("FusedGemmKernel");
}

// The Hopper mainloop's launch of one format (fused_wgmma.cuh; defined and instantiated in
// fp8_wgmma.cu, int8_wgmma.cu, int4_wgmma.cu, built for sm_90a).
template <typename T, GemmWeights kW, bool kTypedZp>
Status launch_wgmma_tile(const GemmParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>>& p,
                         const GemmKernelKey& key, dim3 grid, bool cluster_sum, cudaStream_t stream);

// One format's launch (T, kW and the zero points' form fixed): the parameters, the grid,
// the mainloop's (tile_m, kConsts) instantiation, then the K split's reduction. The caller
// checked the arguments.
template <typename T, GemmWeights kW, bool kTypedZp>
Status launch_gemm_format(const FusedGemmArgs& args, const GemmConfig& config, float* partials,
                          cudaStream_t stream) {
  using S = std::conditional_t<kW == GemmWeights::kFp8, float, T>;
  GemmParams<T, S> p{};
  p.a = static_cast<const T*>(args.a);
  p.a_ordered = static_cast<T*>(args.a_ordered);
  p.b = args.b;
  p.scales = static_cast<const S*>(args.scales);
  p.zp = kTypedZp ? static_cast<const uint8_t*>(args.zp_typed) : args.zp_packed;
  p.bias = static_cast<const T*>(args.bias);
  p.y = static_cast<T*>(args.y);
  p.partials = config.k_split > 1 && !config.cluster_reduce ? partials : nullptr;
  p.m = static_cast<int>(args.m);
  p.n = args.n;
  p.k = args.k;
  p.row_bytes = args.row_bytes;
  p.k_blocks = args.k_blocks;
  p.zp_row_bytes = kTypedZp ? args.k_blocks * static_cast<int64_t>(sizeof(T)) : args.zp_row_bytes;
  uint32_t shift = 0;
  while ((int64_t{1} << shift) < args.block_size) ++shift;
  p.block_shift = shift;
  p.block_div = FastDivU32(static_cast<uint32_t>(args.block_size / 16));
  const int64_t slabs = (args.row_bytes + kGemmSlabBytes - 1) / kGemmSlabBytes;
  p.slabs_per_split = static_cast<int>((slabs + config.k_split - 1) / config.k_split);

  const int64_t tiles = (args.m + config.tile_m - 1) / config.tile_m *
                        ((args.n + config.tile_n - 1) / config.tile_n);
  const dim3 grid(static_cast<unsigned>(tiles), 1, static_cast<unsigned>(config.k_split));
  constexpr int kBits = GemmFormat<kW>::kBits;
  const bool vectors =
      config.wgmma && wgmma_vector_consts(p, kBits, kTypedZp, wgmma_stage_blocks(config, kBits, args.block_size));
  const GemmKernelKey key = gemm_kernel_key(config, kBits, args.block_size, vectors);
  // mma.sync: every entry of kMmaGemmKernels instantiated here (core/gemm_plan.h).
  Status launched = Status::Ok();
  if (config.wgmma) {
    set_status(launched, launch_wgmma_tile<T, kW, kTypedZp>(p, key, grid, config.cluster_reduce, stream));
  } else if (!visit_gemm_kernel<kMmaGemmKernels>(key, [&](auto i) {
               constexpr GemmKernelKey k = kMmaGemmKernels[decltype(i)::value];
               set_status(launched, launch_gemm_tile<T, kW, k.tile_m, k.consts, kTypedZp>(p, grid, stream));
             })) {
    set_status(launched, Status(StatusCode::kInternal, "launch_fused_gemm: no kernel for " + gemm_kernel_name(key)));
  }
  BQMM_RETURN_IF_ERROR(launched);
  if (config.k_split == 1 || config.cluster_reduce) return Status::Ok();
  return launch_k_split_reduce<T>(partials, p.bias, p.y, args.m, args.n, config.k_split,
                                  /*dependent=*/config.wgmma, stream);
}

// The per-format launchers (fp8_gemm.cu, nbits_gemm.cu), after launch_fused_gemm's checks.
Status launch_fused_gemm_fp8(const FusedGemmArgs& args, const GemmConfig& config,
                             float* partials, cudaStream_t stream);
Status launch_fused_gemm_nbits(const FusedGemmArgs& args, const GemmConfig& config,
                               float* partials, cudaStream_t stream);

}  // namespace bqmm::cuda
