// N-bit code decoding for the decode GEMVs of NBitsMatMul (0 < M <= 8):
//
//   Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//             + bias[n]
//
// Inner product, by T1:
//   float16 / bfloat16: tensor cores (mma.m16n8k16, FP32 accumulators). The weight is the
//     mma's A operand (16 columns = mma M), the activation its B operand (up to 8 rows =
//     mma N; rows >= M are zero fragments, never loaded). Codes are decoded straight into
//     packed T pairs with the magic-number trick (no int -> float conversion unit):
//       float16:  half(0x6400 | c) = 1024 + c exactly for c < 1024, so
//                 (1024 + q) - (1024 + zp) = q - zp is exact, and one multiply by the
//                 float16 scale rounds w once.
//       bfloat16, 4-bit: bf16(0x4300 | c) = 128 + c for c < 128, likewise.
//       bfloat16, 8-bit: bfloat16 has 8 significant bits, too few for 128 + c, c < 256:
//                 float(0x4B000000 | c) = 2^23 + c, minus 2^23 + zp in float32, packs
//                 exactly to bfloat16 (|q - zp| <= 255), then one bfloat16 multiply.
//       float16, 4-bit high nibbles: taken where they lie (one shift a word, not three,
//                 as in Marlin's dequantization), half(0x6400 | c << 4) = 1024 + 16 c, and
//                 one multiply-add makes them exact too: (1024 + 16 q) / 16 - (64 + zp)
//                 = q - zp (division by 16 exact: a power of two); (1024 + 16 q) -
//                 (1024 + 16 zp) = 16 (q - zp) where the scale is applied later.
//     Blocks smaller than a window (8-bit: 64 codes, 4-bit: 128): w = round_T((q - zp) *
//     scale), the same single rounding as the dequant + cuBLAS path's weights, then
//     exact products and FP32 sums in the mma. Blocks of a window or more (MmaTile's
//     kResultScale): every chunk an mma takes shares one block, so the mma multiplies the
//     exact q - zp and the block scale multiplies each chunk's FP32 partial sum (float16
//     4-bit's high nibbles decoded as 16 (q - zp), that sum scaled by scale / 16).
//     Typed (fractional) zero points: q - zp is not exact in T, so each weight is
//     q * scale + zero, zero = -zp * scale rounded to T (exact q by the magic number, one
//     multiply-add; bfloat16 8-bit in float32, then rounded), as the mixed-input GEMM
//     takes a typed zero point (decode_word_pairs_typed).
//   float32: CUDA cores, w = (q - zp) * scale in float32 (one rounding), FMA into FP32 sums;
//     float32 must stay true FP32 (the contract's tolerance 1e-5), which TF32 mma would not be.
//
// K permutation (tensor cores). K is a reduction axis: any permutation applied to both
// operands leaves the sum unchanged, so each lane feeds the mma the codes of its own
// 16-byte chunk in decode order and the activations at the same k:
//   8-bit: word j (codes 4j .. 4j+3 of the chunk) decodes to pairs (4j, 4j+1), (4j+2, 4j+3)
//          = one mma k16 step: a[0], a[2] from row lo, a[1], a[3] from row hi, b[0], b[1]
//          the activation words (4j, 4j+1), (4j+2, 4j+3). 4 mma per chunk.
//   4-bit: word j (codes 8j .. 8j+7) decodes, one lop3 per pair, to (8j+i, 8j+i+4),
//          i = 0..3; the activations are paired the same way with one prmt per pair.
//          Two mma per word (pairs 0, 1 and 2, 3; with kResultScale 0, 2 and 1, 3, so
//          the float16 high-nibble pairs get their own accumulator), 8 per chunk.
// Logical mma k 2t, 2t+1, 2t+8, 2t+9 then always maps, for every lane with the same t, to
// the same physical k of the same chunk, which is all the mma needs.
//
// This header: the code geometry (Codes), the raw and decoded block constants, the word
// decoders, and the scale-on-result steps that every tensor-core N-bit kernel shares.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/gemv/common.cuh"

namespace bqmm::cuda {

template <int kBits>
struct Codes {
  static constexpr int kPerWord = 32 / kBits;                // codes per 32-bit word
  static constexpr int kPerChunk = kChunkBytes * 8 / kBits;  // 16 or 32
  static constexpr int kPerWindow = kPerChunk * kWindowChunks;
  static constexpr uint32_t kMask = (1u << kBits) - 1;
  static constexpr uint32_t kDefaultZeroPoint = 1u << (kBits - 1);
  // Scale groups per chunk: the smallest block (16 codes) is half a 4-bit chunk.
  static constexpr int kGroups = kPerChunk / 16;
};

// The T (float16 / bfloat16) whose bit pattern is the low 16 bits of `bits`.
template <typename T>
__device__ __forceinline__ T half_bits_as(uint32_t bits) {
  const uint16_t low = static_cast<uint16_t>(bits);
  T v;
  memcpy(&v, &low, sizeof(v));
  return v;
}

// The bit pattern of a T (float16 / bfloat16) in the low 16 bits (half_bits_as's inverse).
template <typename T>
__device__ __forceinline__ uint32_t half_bits_of(T v) {
  uint16_t bits;
  memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// ----------------------------------------------------------------- code decoding
// The scales and zero points of one chunk of one row as loaded, decoded only where used so
// that a stage's loads never wait on each other. scale[1] is the second half of a 4-bit
// chunk (another block only for block_size 16). zp_bits: the packed zero-point byte (or
// the default zero point's), or typed zero points' T bits, the second group's in the high
// half (one 32-bit field either way: a wider struct changed the window kernel's register
// allocation).
template <typename T, int kBits>
struct RawQuant {
  T scale[Codes<kBits>::kGroups];
  uint32_t zp_bits;
};

// The constants of one (row, block) in the form the word decoder takes (bit patterns):
//   scale: T pair (float16 / bfloat16) or float32;
//   zero:  magic + zp as a T pair (float16; bfloat16 4-bit), or float32 2^23 + zp; with
//          typed zero points the magic alone (the decode subtracts it exactly to q);
//   offset: typed zero points only, -zp * scale rounded to T (a T pair; bfloat16 8-bit:
//          float32), added to q * scale by one multiply-add (decode_word_pairs_typed).
struct BlockConsts {
  uint32_t scale;
  uint32_t zero;
  uint32_t zero_hi;  // float16 4-bit, for the high nibbles: (0x6400 | zp << 4) pairs, 1024 + 16 zp
                     // (typed: 1024)
  uint32_t offset;
};

// Row `row`'s scales and zero point of the block `blk` (and, when `split`, blk + 1: the
// second half of a 4-bit chunk). Every address is valid (the caller clamps rows and
// chunks), so the loads need no predicate and no branch.
// kTyped: zp_row is the row's typed zero points ([k_blocks] of T, as bytes), loaded as the
// scales are.
template <typename T, int kBits, bool kTyped = false>
__device__ __forceinline__ RawQuant<T, kBits> load_quant(const T* s_row, const uint8_t* zp_row,
                                                         uint32_t blk, bool split) {
  RawQuant<T, kBits> r;
  r.scale[0] = __ldg(s_row + blk);
  if constexpr (Codes<kBits>::kGroups == 2) r.scale[1] = __ldg(s_row + blk + (split ? 1 : 0));
  if constexpr (kTyped) {
    const T* zp_typed = reinterpret_cast<const T*>(zp_row);
    r.zp_bits = half_bits_of(__ldg(zp_typed + blk));
    if constexpr (Codes<kBits>::kGroups == 2)
      r.zp_bits |= half_bits_of(__ldg(zp_typed + blk + (split ? 1 : 0))) << 16;
  } else {
    // Packed zero points: one byte per block (8-bit), two blocks per byte (4-bit), even
    // block in the low nibble: blocks blk and blk + 1 of a split chunk share the byte.
    r.zp_bits = zp_row == nullptr ? Codes<kBits>::kDefaultZeroPoint * (kBits == 4 ? 0x11u : 1u)
                                  : __ldg(zp_row + (kBits == 8 ? blk : blk >> 1));
  }
  return r;
}

template <typename T>
__device__ __forceinline__ uint32_t pack_pair(T v) {
  return half_bits_of(v) * 0x10001u;
}

// Typed zero points (float16 / bfloat16): w = q * scale + offset, offset = -zp * scale
// rounded to T (float32 for bfloat16 8-bit), as the mixed-input GEMM takes a typed zero
// point (rounded to T first; within the contract's bounds), and the magic the decode
// subtracts to get q exactly.
template <typename T, int kBits>
__device__ __forceinline__ BlockConsts make_typed_consts(T scale, T zp) {
  static_assert(!std::is_same_v<T, float>, "typed zero points on the tensor-core tiles");
  const float offset = -to_float(zp) * to_float(scale);
  BlockConsts c{};
  c.scale = pack_pair(scale);
  if constexpr (kBits == 8 && std::is_same_v<T, __nv_bfloat16>) {
    c.zero = 0x4B000000u;  // 2^23
    c.offset = __float_as_uint(offset);
  } else {
    c.zero = std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u;
    if constexpr (kBits == 4 && std::is_same_v<T, __half>) c.zero_hi = c.zero;
    c.offset = pack_pair(from_float<T>(offset));
  }
  return c;
}

// The zero-point constants of an integer zero point zp (BlockConsts::zero, zero_hi; scale
// and offset left 0): T pair constants as one multiply-add each (zp < 16 or 256: no carry
// between the halves), in C so that the default zero point folds to constants.
template <typename T, int kBits>
__device__ __forceinline__ BlockConsts make_zero_consts(uint32_t zp) {
  BlockConsts c{};
  if constexpr (std::is_same_v<T, __half>) {
    c.zero = zp * 0x10001u + 0x64006400u;
    if constexpr (kBits == 4) c.zero_hi = zp * 0x100010u + 0x64006400u;
  } else if constexpr (kBits == 4 && !std::is_same_v<T, float>) {
    c.zero = zp * 0x10001u + 0x43004300u;
  } else {
    c.zero = 0x4B000000u | zp;
  }
  return c;
}

// Group `group` of a chunk whose first block is `blk` (split: the group is its own block).
template <typename T, int kBits, bool kTyped = false>
__device__ __forceinline__ BlockConsts make_consts(const RawQuant<T, kBits>& r, uint32_t blk,
                                                   int group, bool split) {
  const bool second = Codes<kBits>::kGroups == 2 && group == 1 && split;
  if constexpr (kTyped)
    return make_typed_consts<T, kBits>(second ? r.scale[Codes<kBits>::kGroups - 1] : r.scale[0],
                                       half_bits_as<T>(second ? r.zp_bits >> 16 : r.zp_bits));
  const uint32_t zp_shift = kBits == 8 ? 0 : ((blk + (second ? 1 : 0)) & 1) * 4;
  const uint32_t zp = (r.zp_bits >> zp_shift) & Codes<kBits>::kMask;
  const T scale = second ? r.scale[Codes<kBits>::kGroups - 1] : r.scale[0];
  BlockConsts c = make_zero_consts<T, kBits>(zp);
  if constexpr (std::is_same_v<T, float>) {
    c.scale = __float_as_uint(scale);
  } else {
    c.scale = pack_pair(scale);
  }
  return c;
}

// Packed T pair arithmetic on bit patterns (T = __half or __nv_bfloat16).
template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Pair<T> as_pair(uint32_t bits) {
  Pair<T> v;
  memcpy(&v, &bits, 4);
  return v;
}

template <typename T>
__device__ __forceinline__ uint32_t pair_bits(Pair<T> v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return bits;
}

// x * scale: one rounding to T.
template <typename T>
__device__ __forceinline__ uint32_t mul_pair(uint32_t x, uint32_t scale) {
  return pair_bits<T>(__hmul2(as_pair<T>(x), as_pair<T>(scale)));
}

// (x - zero) * scale: the subtraction of two magic-biased small integers is exact, the
// multiplication rounds once.
template <typename T>
__device__ __forceinline__ uint32_t sub_mul_pair(uint32_t x, uint32_t zero, uint32_t scale) {
  return pair_bits<T>(__hmul2(__hsub2(as_pair<T>(x), as_pair<T>(zero)), as_pair<T>(scale)));
}
// Typed zero points: (x - zero) * scale + offset, x - zero the exact code (zero the magic
// alone), one multiply-add rounding once.
template <typename T>
__device__ __forceinline__ uint32_t sub_fma_pair(uint32_t x, uint32_t zero, uint32_t scale,
                                                 uint32_t offset) {
  return pair_bits<T>(__hfma2(__hsub2(as_pair<T>(x), as_pair<T>(zero)), as_pair<T>(scale),
                              as_pair<T>(offset)));
}

// 2^23 + c (c < 256 in the low byte of the word's byte `i`) as float32.
__device__ __forceinline__ float magic_byte_float(uint32_t word, int i) {
  return __uint_as_float(__byte_perm(word, 0x4B00u, 0x5440u + i));
}

// (x & kMask) | kMagic in one lop3: written in C, the two immediates make it an and and an
// or (ptxas does not fuse them; SASS of the 4-bit tile: 160 LOP3 per 16 mma,
// two per nibble pair). With both in one lop3, ptxas keeps one in a register.
template <uint32_t kMask, uint32_t kMagic>
__device__ __forceinline__ uint32_t and_or(uint32_t x) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "n"(kMask), "n"(kMagic));  // (a & b) | c
  return r;
}

// float16 4-bit: one word's pairs (i, i + 4), i = 0..3, as exact q - zero in float16 (zero:
// the zero point, or 0 with typed zero points' constants). Pairs 0 and 2 from the low
// nibbles (1024 + q) - (1024 + zp); pairs 1 and 3 from the high nibbles where they lie,
// (1024 + 16 q) / 16 - (64 + zp), one multiply-add; q >> 8 once for pairs 2 and 3.
__device__ __forceinline__ void f16_nibble_pairs(uint32_t q, const BlockConsts& c, uint32_t (&d)[4]) {
  const __half2 sixteenth = as_pair<__half>(0x2C002C00u);  // 1/16
  // -(64 + zp) = half(0xD400 | zp << 4): zero_hi's sign and exponent moved (no carry
  // between the halves), once per constant where the constants are shared.
  const uint32_t neg_zero16 = c.zero_hi + 0x70007000u;
  const uint32_t q_hi = q >> 8;
  const auto low = [&](uint32_t x) {
    return pair_bits<__half>(__hsub2(as_pair<__half>(and_or<0x000F000Fu, 0x64006400u>(x)), as_pair<__half>(c.zero)));
  };
  const auto high = [&](uint32_t x) {
    return pair_bits<__half>(
        __hfma2(as_pair<__half>(and_or<0x00F000F0u, 0x64006400u>(x)), sixteenth, as_pair<__half>(neg_zero16)));
  };
  d[0] = low(q);
  d[1] = high(q);
  d[2] = low(q_hi);
  d[3] = high(q_hi);
}

// One 32-bit word of codes -> packed T pairs of weights (float16 / bfloat16):
//   8-bit: pairs (0, 1), (2, 3) of the word's 4 codes;
//   4-bit: pairs (i, i + 4), i = 0..3, of its 8 codes.
template <typename T, int kBits>
__device__ __forceinline__ void decode_word_pairs(uint32_t q, const BlockConsts& c,
                                                  uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
    f16_nibble_pairs(q, c, out);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = mul_pair<T>(out[i], c.scale);
  } else if constexpr (kBits == 4) {  // bfloat16: 16 q does not fit its 8 significant bits
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[i] = sub_mul_pair<T>(and_or<0x000F000Fu, 0x43004300u>(q >> (4 * i)), c.zero, c.scale);
  } else if constexpr (std::is_same_v<T, __half>) {
    out[0] = sub_mul_pair<T>(__byte_perm(q, 0x64646464u, 0x4140u), c.zero, c.scale);
    out[1] = sub_mul_pair<T>(__byte_perm(q, 0x64646464u, 0x4342u), c.zero, c.scale);
  } else {
    const float zero = __uint_as_float(c.zero);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_bfloat162 d = __floats2bfloat162_rn(magic_byte_float(q, 2 * h) - zero,
                                                     magic_byte_float(q, 2 * h + 1) - zero);
      out[h] = mul_pair<T>(pair_bits<T>(d), c.scale);
    }
  }
}

// As decode_word_pairs with typed zero points (make_typed_consts): q exactly (the magic
// subtracted), then q * scale + offset rounded to T once (float16 / bfloat16; bfloat16
// 8-bit in float32, then rounded). Same pair order as decode_word_pairs.
template <typename T, int kBits>
__device__ __forceinline__ void decode_word_pairs_typed(uint32_t q, const BlockConsts& c,
                                                        uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  const auto fma_pair = [&](uint32_t biased) { return sub_fma_pair<T>(biased, c.zero, c.scale, c.offset); };
  if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
    f16_nibble_pairs(q, c, out);  // q exactly (typed constants: zero the magic, zero_hi -64)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[i] = pair_bits<T>(__hfma2(as_pair<T>(out[i]), as_pair<T>(c.scale), as_pair<T>(c.offset)));
  } else if constexpr (kBits == 4) {  // bfloat16
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = fma_pair(and_or<0x000F000Fu, 0x43004300u>(q >> (4 * i)));
  } else if constexpr (std::is_same_v<T, __half>) {
    out[0] = fma_pair(__byte_perm(q, 0x64646464u, 0x4140u));
    out[1] = fma_pair(__byte_perm(q, 0x64646464u, 0x4342u));
  } else {
    const float zero = __uint_as_float(c.zero), offset = __uint_as_float(c.offset);
    const float scale = to_float(as_pair<T>(c.scale).x);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      out[h] = float2_to_packed2<T>(fmaf(magic_byte_float(q, 2 * h) - zero, scale, offset),
                                    fmaf(magic_byte_float(q, 2 * h + 1) - zero, scale, offset));
  }
}

// As decode_word_pairs without the scale, for the scale-on-result tile: q - zp exactly,
// packed in T, the block scale applied to the float32 mma result instead. Same pair order
// (i, i + 4) for 4-bit. float16 4-bit takes the high nibbles where they lie (one lop3 per
// pair, one shift per word): pairs 1 and 3 come out as 16 (q - zp), exact in float16
// (|16 (q - zp)| <= 240), and the caller scales their mma by scale / 16 (exact: a power
// of two in float32).
template <typename T, int kBits>
__device__ __forceinline__ void decode_word_pairs_unscaled(uint32_t q, const BlockConsts& c,
                                                           uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
    const uint32_t q_hi = q >> 8;
    out[0] = pair_bits<T>(__hsub2(as_pair<T>(and_or<0x000F000Fu, 0x64006400u>(q)), as_pair<T>(c.zero)));
    out[1] = pair_bits<T>(__hsub2(as_pair<T>(and_or<0x00F000F0u, 0x64006400u>(q)), as_pair<T>(c.zero_hi)));
    out[2] = pair_bits<T>(__hsub2(as_pair<T>(and_or<0x000F000Fu, 0x64006400u>(q_hi)), as_pair<T>(c.zero)));
    out[3] = pair_bits<T>(__hsub2(as_pair<T>(and_or<0x00F000F0u, 0x64006400u>(q_hi)), as_pair<T>(c.zero_hi)));
  } else if constexpr (kBits == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[i] = pair_bits<T>(__hsub2(as_pair<T>(and_or<0x000F000Fu, 0x43004300u>(q >> (4 * i))),
                                    as_pair<T>(c.zero)));
  } else if constexpr (std::is_same_v<T, __half>) {
    out[0] = pair_bits<T>(__hsub2(as_pair<T>(__byte_perm(q, 0x64646464u, 0x4140u)), as_pair<T>(c.zero)));
    out[1] = pair_bits<T>(__hsub2(as_pair<T>(__byte_perm(q, 0x64646464u, 0x4342u)), as_pair<T>(c.zero)));
  } else {
    const float zero = __uint_as_float(c.zero);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      out[h] = float2_to_packed2<T>(magic_byte_float(q, 2 * h) - zero,
                                    magic_byte_float(q, 2 * h + 1) - zero);
  }
}

// As decode_word_pairs without the scale, every pair as exact q - zp in T (the fused
// GEMM's folded tiles, which scale each block's float32 sums): float16 4-bit as
// f16_nibble_pairs (the high nibbles by a multiply-add by 1/16, exact), the rest as
// decode_word_pairs_unscaled. Same pair order as decode_word_pairs.
template <typename T, int kBits>
__device__ __forceinline__ void decode_word_pairs_exact(uint32_t q, const BlockConsts& c,
                                                        uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
    f16_nibble_pairs(q, c, out);
  } else {
    decode_word_pairs_unscaled<T, kBits>(q, c, out);
  }
}

// One 32-bit word of codes -> float32 weights in code order (the FMA tile).
template <int kBits>
__device__ __forceinline__ void decode_word_floats(uint32_t q, const BlockConsts& c,
                                                   float (&out)[Codes<kBits>::kPerWord]) {
  const float zero = __uint_as_float(c.zero);
  const float scale = __uint_as_float(c.scale);
#pragma unroll
  for (int i = 0; i < Codes<kBits>::kPerWord; ++i) {
    const float biased = kBits == 8 ? magic_byte_float(q, i)
                                    : __uint_as_float(((q >> (4 * i)) & 0xFu) | 0x4B000000u);
    out[i] = (biased - zero) * scale;
  }
}

// ----------------------------------------------------------------- scale-on-result steps
// Shared by MmaTile (register loads) and NBitsGemvTmaKernel (TMA tiles): one 32-bit word
// of codes of rows lo and hi, decoded without the scale (decode_word_pairs_unscaled), times
// the activation pairs `pa` that match it, into the unscaled sums part (and part16: the
// float16 4-bit high nibbles, 16 (q - zp)); then the block scales applied in float32.

// Activation pairs matching a word's weight pairs. 8-bit: the word's 4 activations as
// two packed words (x = (0, 1), y = (2, 3)); 4-bit: its 8 activations v (x = (0, 1),
// y = (2, 3), ...) paired (i, i + 4).
__device__ __forceinline__ void pair_act8(uint32_t x, uint32_t y, uint32_t (&out)[2]) {
  out[0] = x;
  out[1] = y;
}
__device__ __forceinline__ void pair_act4(const uint4& v, uint32_t (&out)[4]) {
  out[0] = __byte_perm(v.x, v.z, 0x5410u);  // (0, 4)
  out[1] = __byte_perm(v.x, v.z, 0x7632u);  // (1, 5)
  out[2] = __byte_perm(v.y, v.w, 0x5410u);  // (2, 6)
  out[3] = __byte_perm(v.y, v.w, 0x7632u);  // (3, 7)
}

// The mma of one word's weight pairs, decoded without the scale (pl: row lo, ph: row hi,
// decode_word_pairs_unscaled), with the activation pairs `pa` that match it, into the
// unscaled sums part (and part16 for 4-bit: pairs 1, 3, the float16 high nibbles).
template <typename T, int kBits>
__device__ __forceinline__ void mma_pairs_unscaled(const uint32_t (&pl)[Codes<kBits>::kPerWord / 2],
                                                   const uint32_t (&ph)[Codes<kBits>::kPerWord / 2],
                                                   const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                   float (&part)[4], float (&part16)[4]) {
  if constexpr (kBits == 4) {
    // Pairs 0, 2 into part, pairs 1, 3 (16 (q - zp) for float16) into part16.
    const uint32_t a0[4] = {pl[0], ph[0], pl[2], ph[2]}, b0[2] = {pa[0], pa[2]};
    const uint32_t a1[4] = {pl[1], ph[1], pl[3], ph[3]}, b1[2] = {pa[1], pa[3]};
    mma_m16n8k16<T>(part, a0, b0, part);
    mma_m16n8k16<T>(part16, a1, b1, part16);
  } else {
    const uint32_t a[4] = {pl[0], ph[0], pl[1], ph[1]}, b[2] = {pa[0], pa[1]};
    mma_m16n8k16<T>(part, a, b, part);
  }
}

template <typename T, int kBits>
__device__ __forceinline__ void mma_word_unscaled(uint32_t lo, uint32_t hi, const BlockConsts& c_lo,
                                                  const BlockConsts& c_hi,
                                                  const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                  float (&part)[4], float (&part16)[4]) {
  uint32_t pl[Codes<kBits>::kPerWord / 2], ph[Codes<kBits>::kPerWord / 2];
  decode_word_pairs_unscaled<T, kBits>(lo, c_lo, pl);
  decode_word_pairs_unscaled<T, kBits>(hi, c_hi, ph);
  mma_pairs_unscaled<T, kBits>(pl, ph, pa, part, part16);
}

// The mma of one word's weight pairs, scaled and rounded to T (decode_word_pairs), with
// the matching activation pairs `pa`, into acc.
template <typename T, int kBits>
__device__ __forceinline__ void mma_pairs_scaled(const uint32_t (&pl)[Codes<kBits>::kPerWord / 2],
                                                 const uint32_t (&ph)[Codes<kBits>::kPerWord / 2],
                                                 const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                 float (&acc)[4]) {
#pragma unroll
  for (int s = 0; s < Codes<kBits>::kPerWord / 4; ++s) {
    const uint32_t a[4] = {pl[2 * s], ph[2 * s], pl[2 * s + 1], ph[2 * s + 1]};
    const uint32_t b[2] = {pa[2 * s], pa[2 * s + 1]};
    mma_m16n8k16<T>(acc, a, b, acc);
  }
}

// Blocks smaller than a window (no scale on the result), and typed zero points (kTyped):
// one 32-bit word of codes of rows lo and hi decoded with their block constants, scaled
// and rounded to T (decode_word_pairs, decode_word_pairs_typed), times the matching
// activation pairs `pa`, into acc. Shared by MmaTile and the window kernel's line loads.
template <typename T, int kBits, bool kTyped = false>
__device__ __forceinline__ void mma_word_scaled(uint32_t lo, uint32_t hi, const BlockConsts& c_lo,
                                                const BlockConsts& c_hi,
                                                const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                float (&acc)[4]) {
  uint32_t pl[Codes<kBits>::kPerWord / 2], ph[Codes<kBits>::kPerWord / 2];
  if constexpr (kTyped) {
    decode_word_pairs_typed<T, kBits>(lo, c_lo, pl);
    decode_word_pairs_typed<T, kBits>(hi, c_hi, ph);
  } else {
    decode_word_pairs<T, kBits>(lo, c_lo, pl);
    decode_word_pairs<T, kBits>(hi, c_hi, ph);
  }
  mma_pairs_scaled<T, kBits>(pl, ph, pa, acc);
}

// acc += (part + part16 / 16) * scale, rows lo (d[0..1]) and hi (d[2..3]) by their own
// block scale, in float32 (the / 16 only for float16 4-bit, exact).
template <typename T, int kBits>
__device__ __forceinline__ void apply_block_scales(float (&acc)[4], const float (&part)[4],
                                                   const float (&part16)[4], const BlockConsts& c_lo,
                                                   const BlockConsts& c_hi) {
  const float s_lo = to_float(as_pair<T>(c_lo.scale).x);
  const float s_hi = to_float(as_pair<T>(c_hi.scale).x);
  constexpr float kHi = kBits == 4 && std::is_same_v<T, __half> ? 1.0f / 16.0f : 1.0f;
  float sum[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)  // 8-bit leaves part16 at zero (and x + 0 is not folded)
    sum[i] = kBits == 4 ? part[i] + part16[i] * kHi : part[i];
  acc[0] = fmaf(sum[0], s_lo, acc[0]);
  acc[1] = fmaf(sum[1], s_lo, acc[1]);
  acc[2] = fmaf(sum[2], s_hi, acc[2]);
  acc[3] = fmaf(sum[3], s_hi, acc[3]);
}

}  // namespace bqmm::cuda
