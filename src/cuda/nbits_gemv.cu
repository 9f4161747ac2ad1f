// Fused decode GEMV of NBitsMatMul, for 0 < M <= 8:
//
//   Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//             + bias[n]
//
// At these M the op is a stream over the packed weight: N * K * bits / 8 bytes (plus the
// scales and zero points) against M * K activations that stay in L1/L2. Every weight byte
// is read exactly once, 16 bytes per load, with several loads in flight per lane, and the
// dequantized weight never goes to memory.
//
// Work split. A warp owns a tile of 16 output columns (weight rows) n0 .. n0 + 15 and all
// M <= 8 activation rows; the kKSplit warps of a block split the tile's K range and reduce
// through shared memory. Lane (g, t) = (lane / 4, lane % 4) reads weight rows n0 + g ("lo")
// and n0 + g + 8 ("hi"): 16-byte chunks of a row, 4 lanes of a quad covering 4 adjacent
// chunks (a "window" of 64 bytes per row); window w gives lane t chunk 4w + t.
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
//     Blocks smaller than a window (8-bit: 64 codes, 4-bit: 128): w = round_T((q - zp) *
//     scale), the same single rounding as the dequant + cuBLAS path's weights, then
//     exact products and FP32 sums in the mma. Blocks of a window or more (MmaTile's
//     kResultScale): every chunk an mma takes shares one block, so the mma multiplies the
//     exact q - zp and the block scale multiplies each chunk's FP32 partial sum (float16
//     4-bit decodes the high nibbles in place as 16 (q - zp), scaled by scale / 16).
//   float32: CUDA cores, w = (q - zp) * scale in float32 (one rounding), FMA into FP32 sums;
//     float32 must stay true FP32 (SPEC tolerance 1e-5), which TF32 mma would not be.
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
// K loop. A warp's loads for a window are its chunk of both rows (two 16-byte streaming
// loads) and, per chunk, the raw scales and zero points; activations are re-read by every
// warp of the grid and stay in L1, so they are loaded where used. A GEMV at these sizes
// is bound by how many bytes are in flight, not by arithmetic: the loads of the next
// stage are issued before the current one is decoded (double buffering in registers), so
// a warp always has one to two stages of loads outstanding.
//
// K-loop algorithms (the original design's three, a template parameter, chosen per block
// size by the planner from measurements, docs/PERF.md):
//   0 unrolled:  stages of kStage windows, double-buffered, scales and zero points per
//                chunk loaded with the weights.
//   1 loop:      one window per iteration, its loads then its math: no unrolling and no
//                prefetch, the original "simple loop".
//   2 per block: stages are quantization blocks (or kStage-window parts of larger ones),
//                double-buffered; a block's scale and zero point are loaded once per row
//                and decoded once for all its windows. A block smaller than a window
//                cannot be iterated alone (a quad's lanes straddle blocks): there the
//                window is the unit and this is algorithm 0.
//
// NBitsGemvTmaKernel (SM90+, float16 / bfloat16, blocks of half a 128-byte tile or more;
// the planner's choice for large weights, core/gemv_split.h): the same tensor-core math
// with the weights copied as 16-row x 128-byte TMA tiles (cuda/tma.cuh), the loop of
// Fp8GemvTmaKernel.
//
// NBitsGemvWindowKernel (float16 / bfloat16, algorithm 0, blocks of a window or more, rows
// of whole windows; for 4-bit the planner's choice where the grid has more warps than the
// 128-register tiles hold, for 8-bit only with line loads): MmaTile's math on a loop with
// nothing partial, at 64-128 registers (kWindowMinBlocks; two tiles also at 168, kWide).
// kLines (rows of whole 128-byte lines; the planner's choice for 4-bit on large weights
// and for 8-bit wherever the tensor cores run): its weights loaded as whole lines and
// staged through shared memory (cuda/line_loads.cuh), with kTiles = 2 two 16-column tiles
// per warp; with line loads it also takes blocks down to a 16-byte chunk (the weights
// scaled before the mma).
//
// GemvFmaKernel (cuda/gemv_fma.cuh, FP8's CUDA-core kernel; 8-bit, float16 / bfloat16,
// the planner's choice at M = 1 and, in bfloat16, M = 2): a warp per two output columns,
// lanes along K, with the integer codec NBits8FmaCodec below.
//
// File layout, top-down: constants and parameters, code decoding, the scale-on-result
// steps, the two warp tiles (tensor-core and FMA), the shared epilogue and tile rows, the
// register-load kernel, the window kernel, the TMA kernel, the CUDA-core kernel's codec,
// then the launchers and their instantiated configurations.
#include <string>
#include <type_traits>

#include "bqmm/nbits_matmul.h"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/gemv_fma.cuh"
#include "cuda/line_loads.cuh"
#include "cuda/tma.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

// ----------------------------------------------------------------- constants, parameters
constexpr int kTileCols = 16;     // output columns per warp tile: the mma M extent
constexpr int kChunkBytes = 16;   // one 16-byte weight load per lane per row
constexpr int kWindowChunks = 4;  // a lane quad covers 4 adjacent chunks of a row
constexpr int kMaxKSplit = 8;     // warps per block
// Windows per pipeline stage (algorithms 0 and 2). Two stages in registers: a window
// costs a lane 8 registers of weights and 4 to 6 of raw scales and zero points. The FMA
// tile's decoded chunk (64 floats for 4-bit) leaves room for one window per stage.
template <typename T>
constexpr int kStage = std::is_same_v<T, float> ? 1 : 2;
// Tensor-core tiles: two blocks of kMaxKSplit warps per SM at least (128 registers per
// thread at most). The FMA tile (float32, not a bandwidth target: its kRows * 2 sums and
// per-row activations need more) may take 255.
template <typename T>
constexpr int kMinBlocksPerSm = std::is_same_v<T, float> ? 1 : 2;

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

// Everything the kernel reads. Sizes that multiply N are 64-bit; per-row counters are
// 32-bit (the launcher checks K < 2^31).
template <typename T>
struct GemvParams {
  const T* a;               // [M, K]
  const uint8_t* b;         // [N, row_bytes]
  const T* scales;          // [N, k_blocks]
  const uint8_t* zp;        // [N, zp_row_bytes] packed, or nullptr (default zero point)
  const T* bias;            // [N] or nullptr
  T* y;                     // [M, N]
  int m;
  int64_t n;
  int64_t k;
  int64_t row_bytes;
  int64_t k_blocks;
  int64_t zp_row_bytes;
  uint32_t chunks;             // 16-byte chunks per row
  uint32_t windows;            // ceil(chunks / 4)
  uint32_t block_shift;        // log2(block_size)
  uint32_t windows_per_block;  // block_size / codes per window, 0 if below one
};

// ----------------------------------------------------------------- code decoding
// The scales and zero-point byte of one chunk of one row as loaded, decoded only where
// used so that a stage's loads never wait on each other. scale[1] is the second half of
// a 4-bit chunk (another block only for block_size 16).
template <typename T, int kBits>
struct RawQuant {
  T scale[Codes<kBits>::kGroups];
  uint32_t zp_byte;
};

// The constants of one (row, block) in the form the word decoder takes (bit patterns):
//   scale: T pair (float16 / bfloat16) or float32;
//   zero:  magic + zp as a T pair (float16; bfloat16 4-bit), or float32 2^23 + zp.
struct BlockConsts {
  uint32_t scale;
  uint32_t zero;
  uint32_t zero_hi;  // float16 4-bit, scale-on-result decode: (0x6400 | zp << 4) pairs
};

// Row `row`'s scales and zero point of the block `blk` (and, when `split`, blk + 1: the
// second half of a 4-bit chunk). Every address is valid (the caller clamps rows and
// chunks), so the loads need no predicate and no branch.
template <typename T, int kBits>
__device__ __forceinline__ RawQuant<T, kBits> load_quant(const T* s_row, const uint8_t* zp_row,
                                                         uint32_t blk, bool split) {
  RawQuant<T, kBits> r;
  r.scale[0] = __ldg(s_row + blk);
  if constexpr (Codes<kBits>::kGroups == 2) r.scale[1] = __ldg(s_row + blk + (split ? 1 : 0));
  // Packed zero points: one byte per block (8-bit), two blocks per byte (4-bit), even
  // block in the low nibble: blocks blk and blk + 1 of a split chunk share the byte.
  r.zp_byte = zp_row == nullptr ? Codes<kBits>::kDefaultZeroPoint * (kBits == 4 ? 0x11u : 1u)
                                : __ldg(zp_row + (kBits == 8 ? blk : blk >> 1));
  return r;
}

// The T (float16 / bfloat16) whose bit pattern is the low 16 bits of `bits`.
template <typename T>
__device__ __forceinline__ T half_bits_as(uint32_t bits) {
  const uint16_t low = static_cast<uint16_t>(bits);
  T v;
  memcpy(&v, &low, sizeof(v));
  return v;
}

template <typename T>
__device__ __forceinline__ uint32_t pack_pair(T v) {
  uint16_t bits;
  memcpy(&bits, &v, sizeof(bits));
  return static_cast<uint32_t>(bits) * 0x10001u;
}

// Group `group` of a chunk whose first block is `blk` (split: the group is its own block).
template <typename T, int kBits>
__device__ __forceinline__ BlockConsts make_consts(const RawQuant<T, kBits>& r, uint32_t blk,
                                                   int group, bool split) {
  const bool second = Codes<kBits>::kGroups == 2 && group == 1 && split;
  const uint32_t zp_shift = kBits == 8 ? 0 : ((blk + (second ? 1 : 0)) & 1) * 4;
  const uint32_t zp = (r.zp_byte >> zp_shift) & Codes<kBits>::kMask;
  const T scale = second ? r.scale[Codes<kBits>::kGroups - 1] : r.scale[0];
  // T pair constants as one multiply-add each (zp < 16 or 256: no carry between the
  // halves), in C so that the default zero point folds to constants.
  BlockConsts c{};
  if constexpr (std::is_same_v<T, float>) {
    c.scale = __float_as_uint(scale);
    c.zero = 0x4B000000u | zp;
  } else {
    c.scale = pack_pair(scale);
    if constexpr (std::is_same_v<T, __half>) {
      c.zero = zp * 0x10001u + 0x64006400u;
      if constexpr (kBits == 4) c.zero_hi = zp * 0x100010u + 0x64006400u;
    } else if constexpr (kBits == 4) {
      c.zero = zp * 0x10001u + 0x43004300u;
    } else {
      c.zero = 0x4B000000u | zp;
    }
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

// 2^23 + c (c < 256 in the low byte of the word's byte `i`) as float32.
__device__ __forceinline__ float magic_byte_float(uint32_t word, int i) {
  return __uint_as_float(__byte_perm(word, 0x4B00u, 0x5440u + i));
}

// (x & kMask) | kMagic in one lop3: written in C, the two immediates make it an and and an
// or (ptxas does not fuse them; SASS of the 4-bit tile, 2026-11-29: 160 LOP3 per 16 mma,
// two per nibble pair). With both in one lop3, ptxas keeps one in a register.
template <uint32_t kMask, uint32_t kMagic>
__device__ __forceinline__ uint32_t and_or(uint32_t x) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "n"(kMask), "n"(kMagic));  // (a & b) | c
  return r;
}

// One 32-bit word of codes -> packed T pairs of weights (float16 / bfloat16):
//   8-bit: pairs (0, 1), (2, 3) of the word's 4 codes;
//   4-bit: pairs (i, i + 4), i = 0..3, of its 8 codes.
template <typename T, int kBits>
__device__ __forceinline__ void decode_word_pairs(uint32_t q, const BlockConsts& c,
                                                  uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  if constexpr (kBits == 4) {
    constexpr uint32_t kMagic = std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[i] = sub_mul_pair<T>(and_or<0x000F000Fu, kMagic>(q >> (4 * i)), c.zero, c.scale);
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

// As decode_word_pairs without the scale, for the scale-on-result tile: q - zp exactly,
// packed in T, the block scale applied to the float32 mma result instead. Same pair order
// (i, i + 4) for 4-bit. float16 4-bit takes the high nibbles where they lie (one lop3 per
// pair, one shift per word, as in Marlin's dequantization): pairs 1 and 3 come out as
// 16 (q - zp), exact in float16 (|16 (q - zp)| <= 240), and the caller scales their mma
// by scale / 16 (exact: a power of two in float32).
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

template <typename T, int kBits>
__device__ __forceinline__ void mma_word_unscaled(uint32_t lo, uint32_t hi, const BlockConsts& c_lo,
                                                  const BlockConsts& c_hi,
                                                  const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                  float (&part)[4], float (&part16)[4]) {
  uint32_t pl[Codes<kBits>::kPerWord / 2], ph[Codes<kBits>::kPerWord / 2];
  decode_word_pairs_unscaled<T, kBits>(lo, c_lo, pl);
  decode_word_pairs_unscaled<T, kBits>(hi, c_hi, ph);
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

// Blocks smaller than a window (no scale on the result): one 32-bit word of codes of rows
// lo and hi decoded with their block constants, scaled and rounded to T
// (decode_word_pairs), times the matching activation pairs `pa`, into acc. Shared by
// MmaTile and the window kernel's line loads.
template <typename T, int kBits>
__device__ __forceinline__ void mma_word_scaled(uint32_t lo, uint32_t hi, const BlockConsts& c_lo,
                                                const BlockConsts& c_hi,
                                                const uint32_t (&pa)[Codes<kBits>::kPerWord / 2],
                                                float (&acc)[4]) {
  uint32_t pl[Codes<kBits>::kPerWord / 2], ph[Codes<kBits>::kPerWord / 2];
  decode_word_pairs<T, kBits>(lo, c_lo, pl);
  decode_word_pairs<T, kBits>(hi, c_hi, ph);
#pragma unroll
  for (int s = 0; s < Codes<kBits>::kPerWord / 4; ++s) {
    const uint32_t a[4] = {pl[2 * s], ph[2 * s], pl[2 * s + 1], ph[2 * s + 1]};
    const uint32_t b[2] = {pa[2 * s], pa[2 * s + 1]};
    mma_m16n8k16<T>(acc, a, b, acc);
  }
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

// ================================================================= warp tiles
// A tile holds one warp's accumulators and multiplies one decoded chunk (both rows) with
// the activations at the chunk's k, which it loads itself: activations are re-read by
// every warp of the grid and stay in L1 (plain read-only loads; the weights, read once,
// take load_stream_u4 past L1 instead). After the K loop, values()
// hands its partial sums to the K-split reduction and store() writes the owned outputs
// of the reduced sums.

// Tensor cores: D[16 columns][8 rows] += W[16][k16] * A^T[k16][8] per mma step.
// kResultScale: every chunk of a window lies in one quantization block (block_size >= the
// window's codes: 64 for 8-bit, 128 for 4-bit), so the mma of a chunk can run on q - zp
// and the block scale multiply its float32 result: fewer instructions per code (the
// decode was the 4-bit kernel's limit) and exact products of the unrounded weights.
// Otherwise each weight is scaled (and rounded to T) before the mma.
template <typename T, int kBits, bool kResultScale>
struct MmaTile {
  using C = Codes<kBits>;
  static constexpr int kActVecs = C::kPerChunk * static_cast<int>(sizeof(T)) / 16;
  static constexpr int kValues = 4;

  float acc[4] = {};
  // Activation row g (clamped to M - 1, an in-bounds address). Lanes of rows g >= M load
  // nothing (one predicated load: zeros into output rows that are never stored): at M = 1
  // seven eighths of the warp's activation traffic through L1 (H200, 2026-11-29: 1-4 %
  // faster on the 4-bit N = 4096 decode shapes and on 8-bit float16, docs/PERF.md).
  const T* a_row;
  const bool row_ok;

  __device__ MmaTile(const GemvParams<T>& p, int g)
      : a_row(p.a + static_cast<int64_t>(g < p.m ? g : p.m - 1) * p.k), row_ok(g < p.m) {}

  // Activation pairs matching decode_word_pairs's weight pairs for word j of the chunk.
  __device__ static void act_pairs(const uint4 (&act)[kActVecs], int j,
                                   uint32_t (&out)[C::kPerWord / 2]) {
    if constexpr (kBits == 8) {
      const uint4 v = act[j / 2];
      pair_act8(j % 2 == 0 ? v.x : v.z, j % 2 == 0 ? v.y : v.w, out);
    } else {
      pair_act4(act[j], out);  // activations 8j .. 8j+7
    }
  }

  // w[0], w[1]: chunk `chunk` of rows lo and hi (an in-bounds chunk); q[r][group]: their
  // block constants. masked (warp-uniform): some lanes' chunks lie outside the warp's
  // range, and those (!chunk_ok) multiply zero activations.
  __device__ void multiply(const uint4 (&w)[2], uint32_t chunk, bool masked, bool chunk_ok,
                           const BlockConsts (&q)[2][C::kGroups]) {
    const T* src = a_row + static_cast<size_t>(chunk) * C::kPerChunk;
    const uint32_t lo[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
    const uint32_t hi[4] = {w[1].x, w[1].y, w[1].z, w[1].w};
    // kResultScale: the chunk's unscaled sums (part16: the float16 4-bit high nibbles).
    float part[4] = {}, part16[4] = {};
    uint4 act[kActVecs];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // Each activation vector is loaded just before its first word (L1 hits): the
      // 4-bit chunk's 64 bytes of activations are never all live at once. Chunks outside
      // a masked stage's range load zeros (the predicate, not a select after the load).
      if (j * kActVecs % 4 == 0) {
        act[j * kActVecs / 4] = load_cached_u4_if(reinterpret_cast<const uint4*>(src) + j * kActVecs / 4,
                                                  row_ok && (!masked || chunk_ok));
      }
      const int group = j * C::kGroups / 4;
      uint32_t pa[C::kPerWord / 2];
      act_pairs(act, j, pa);
      if constexpr (kResultScale)
        mma_word_unscaled<T, kBits>(lo[j], hi[j], q[0][0], q[1][0], pa, part, part16);
      else
        mma_word_scaled<T, kBits>(lo[j], hi[j], q[0][group], q[1][group], pa, acc);
    }
    if constexpr (kResultScale) apply_block_scales<T, kBits>(acc, part, part16, q[0][0], q[1][0]);
  }

  __device__ void values(float (&v)[kValues]) const {
#pragma unroll
    for (int i = 0; i < kValues; ++i) v[i] = acc[i];
  }

  // D fragment: d[0], d[1] = rows 2t, 2t+1 of column lo; d[2], d[3] the same of hi.
  template <typename Store>
  __device__ static void store(const float (&v)[kValues], int t, Store&& out) {
    out(2 * t, 0, v[0]);
    out(2 * t + 1, 0, v[1]);
    out(2 * t, 1, v[2]);
    out(2 * t + 1, 1, v[3]);
  }
};

// CUDA cores (float32): each lane sums its chunks of rows lo and hi against kRows rows.
template <int kBits, int kRows>
struct FmaTile {
  using C = Codes<kBits>;
  static constexpr int kValues = 2 * kRows;

  float acc[kRows][2] = {};
  const float* a;
  int m;
  int64_t k;

  __device__ FmaTile(const GemvParams<float>& p, int) : a(p.a), m(p.m), k(p.k) {}

  // Each half of the chunk (two words) is decoded once for both rows, then each
  // activation row is loaded (2 or 4 vectors) and multiplied in turn: only one half's
  // weights and one row's activations are live at a time.
  // As MmaTile::multiply. Rows >= M read row M - 1 into sums that are never stored.
  __device__ void multiply(const uint4 (&w)[2], uint32_t chunk, bool masked, bool chunk_ok,
                           const BlockConsts (&q)[2][C::kGroups]) {
    constexpr int kHalf = 2 * C::kPerWord;  // codes in two words
    const uint32_t words[2][4] = {{w[0].x, w[0].y, w[0].z, w[0].w}, {w[1].x, w[1].y, w[1].z, w[1].w}};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float wf[2][kHalf];
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float f[C::kPerWord];
          decode_word_floats<kBits>(words[r][2 * h + j], q[r][(2 * h + j) * C::kGroups / 4], f);
#pragma unroll
          for (int i = 0; i < C::kPerWord; ++i) wf[r][j * C::kPerWord + i] = f[i];
        }
      const float* src = a + static_cast<int64_t>(chunk) * C::kPerChunk + h * kHalf;
#pragma unroll
      for (int row = 0; row < kRows; ++row) {
        float x[kHalf];
#pragma unroll
        for (int i = 0; i < kHalf / 4; ++i) {
          uint4 v = __ldg(reinterpret_cast<const uint4*>(src + (row < m ? row : m - 1) * k) + i);
          if (masked && !chunk_ok) v = make_uint4(0, 0, 0, 0);
          x[4 * i] = __uint_as_float(v.x);
          x[4 * i + 1] = __uint_as_float(v.y);
          x[4 * i + 2] = __uint_as_float(v.z);
          x[4 * i + 3] = __uint_as_float(v.w);
        }
#pragma unroll
        for (int e = 0; e < kHalf; ++e) {
          acc[row][0] = fmaf(x[e], wf[0][e], acc[row][0]);
          acc[row][1] = fmaf(x[e], wf[1][e], acc[row][1]);
        }
      }
    }
  }

  // Sums over the quad (its 4 lanes hold different chunks of the same rows).
  __device__ void values(float (&v)[kValues]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[2 * r] = acc[r][0];
      v[2 * r + 1] = acc[r][1];
    }
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      v[i] += __shfl_xor_sync(0xffffffffu, v[i], 1);
      v[i] += __shfl_xor_sync(0xffffffffu, v[i], 2);
    }
  }

  // Every lane of the quad holds every sum; lane t stores rows r with r % 4 == t.
  template <typename Store>
  __device__ static void store(const float (&v)[kValues], int t, Store&& out) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r % 4 == t) {
        out(r, 0, v[2 * r]);
        out(r, 1, v[2 * r + 1]);
      }
  }
};

// The loads of one pipeline stage: up to kWindows windows of this lane's chunk of both
// rows, with the chunks' raw scales and zero points (per-chunk quantization) or the
// stage's block's (per-block, in q[0]).
template <typename T, int kBits, int kWindows>
struct StageLoads {
  uint4 w[kWindows][2];
  RawQuant<T, kBits> q[kWindows][2];
};

// Rows lo = n0 + g and hi = n0 + g + 8 of a warp tile: whether each exists, and its rows of
// weights, scales and (with zero points) packed zero points. A row past N points at row
// N - 1: its sums are never stored, so no load needs a predicate (nor the branch around it).
template <typename T>
struct TileRows {
  bool ok[2];
  const uint8_t* w[2];
  const T* s[2];
  const uint8_t* zp[2];

  __device__ TileRows(const GemvParams<T>& p, int64_t n0, int g, bool zero_points) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      ok[r] = n0 + g + 8 * r < p.n;
      const int64_t col = ok[r] ? n0 + g + 8 * r : p.n - 1;
      w[r] = p.b + col * p.row_bytes;
      s[r] = p.scales + col * p.k_blocks;
      zp[r] = zero_points ? p.zp + col * p.zp_row_bytes : nullptr;
    }
  }
};

// The end of both kernels: the K-split reduction (warps 1.. hand their partial sums to
// warp 0 through shared memory, same lane, same ownership), then warp 0 adds the bias in
// float32 and rounds to T once; rows >= M and columns past N (row_ok) are not stored.
template <typename Tile, typename T, int kColumnRows>
__device__ __forceinline__ void reduce_and_store(const GemvParams<T>& p, float (&v)[Tile::kValues],
                                                 uint32_t warp, int lane, uint32_t k_split,
                                                 int64_t n0, const bool (&row_ok)[kColumnRows]) {
  __shared__ float partials[kMaxKSplit - 1][Tile::kValues][kWarpSize];
  if (k_split > 1) {
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < Tile::kValues; ++i) partials[warp - 1][i][lane] = v[i];
    }
    __syncthreads();
    if (warp > 0) return;
    for (uint32_t w = 0; w < k_split - 1; ++w)
#pragma unroll
      for (int i = 0; i < Tile::kValues; ++i) v[i] += partials[w][i][lane];
  }
  const int g = lane / 4;
  Tile::store(v, lane % 4, [&](int row, int r, float value) {
    if (row >= p.m || !row_ok[r]) return;
    store_output(p, row, n0 + g + 8 * r, value);
  });
}

// Two MmaTiles side by side (the window kernel's kTiles = 2): values 4j .. 4j + 3 are tile
// j's, whose rows lo and hi are columns n0 + 16 j + g and n0 + 16 j + g + 8, i.e. column
// rows r = 2 j and 2 j + 1 of n0 + g + 8 r.
template <class Tile>
struct TilePair {
  static constexpr int kValues = 2 * Tile::kValues;
  template <typename Store>
  __device__ static void store(const float (&v)[kValues], int t, Store&& out) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float w[Tile::kValues] = {v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]};
      Tile::store(w, t, [&](int row, int r, float value) { out(row, 2 * j + r, value); });
    }
  }
};

// ================================================================= kernel
// Template parameters:
//   T      T1: __half, __nv_bfloat16 (tensor-core tile) or float (FMA tile).
//   kBits  8 or 4.
//   kAlgo  the K-loop algorithm (file comment): 0 unrolled, 1 loop, 2 per block.
//   kRows  activation rows of the FMA tile (1, 2, 4, 8 >= M); the mma tile always has 8.
// Block: k_split = blockDim.x / 32 warps on one 16-column tile, warp w taking the
// windows w, w + k_split, ...; grid.x: the column tiles.
template <typename T, int kBits, int kAlgo, int kRows, bool kResultScale = false>
__global__ void __launch_bounds__(kMaxKSplit * kWarpSize, kMinBlocksPerSm<T>)
    NBitsGemvKernel(const GemvParams<T> p) {
  using C = Codes<kBits>;
  using Tile = std::conditional_t<std::is_same_v<T, float>, FmaTile<kBits, kRows>,
                                  MmaTile<T, kBits, kResultScale>>;
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols;

  const TileRows<T> rows(p, n0, g, p.zp != nullptr);
  // The second half of a 4-bit chunk is another block only for block_size 16.
  const bool split = C::kGroups == 2 && p.block_shift == 4;

  Tile tile(p, g);

  // Chunk `chunk` (< p.chunks) of both rows into slot u of a stage and, with
  // per_chunk_quant, its scales and zero points.
  auto load_chunk = [&](auto& l, int u, uint32_t chunk, bool per_chunk_quant) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l.w[u][r] = load_stream_u4(rows.w[r] + static_cast<size_t>(chunk) * kChunkBytes);
      if (per_chunk_quant)
        l.q[u][r] = load_quant<T, kBits>(rows.s[r], rows.zp[r], (chunk * C::kPerChunk) >> p.block_shift, split);
    }
  };
  // Multiplies slot u of a stage (chunk `chunk`) with the block constants of q: the
  // chunk's own (first block blk) or the stage's block blk. masked / ok: see MmaTile.
  auto multiply_chunk = [&](const auto& l, int u, uint32_t chunk, bool masked, bool ok,
                            const RawQuant<T, kBits> (&q)[2], uint32_t blk) {
    BlockConsts c[2][C::kGroups];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int grp = 0; grp < C::kGroups; ++grp) c[r][grp] = make_consts<T, kBits>(q[r], blk, grp, split);
    tile.multiply(l.w[u], chunk, masked, ok, c);
  };
  auto first_block = [&](uint32_t chunk) { return (chunk * C::kPerChunk) >> p.block_shift; };

  if constexpr (kAlgo == kNBitsGemvAlgoLoop) {
    // Warp w: windows w, w + k_split, ...; lane t: chunk t of each. Only a row's last
    // window can be partial.
#pragma unroll 1
    for (uint32_t win = warp; win < p.windows; win += k_split) {
      const uint32_t chunk = win * kWindowChunks + t;
      const bool masked = (win + 1) * kWindowChunks > p.chunks;
      const uint32_t in_row = min(chunk, p.chunks - 1);
      StageLoads<T, kBits, 1> l;
      load_chunk(l, 0, in_row, true);
      multiply_chunk(l, 0, in_row, masked, chunk < p.chunks, l.q[0], first_block(in_row));
    }
  } else {
    // A warp streams a contiguous range of each row (so its requests to a DRAM page come
    // together), in stages of `width` windows: lane t takes chunk t of each window u of
    // the stage, first + 4u + t (each load of the quad reads a window's 64 contiguous
    // bytes of a row, and each mma takes one window, so with block_size >= the window's
    // codes its chunks share one block and the scale can go on the mma result). Unrolled: the warp's share of the windows, width kStage. Per block: the
    // warp's share of the blocks, a stage being one block (or a kStage-window part of a
    // larger one) whose scale and zero point are loaded once per row; blocks hold whole
    // windows, so those stages are never partial.
    constexpr int kS = kStage<T>;
    const bool per_block = kAlgo == kNBitsGemvAlgoPerBlock && p.windows_per_block > 0;
    const uint32_t wpb = per_block ? p.windows_per_block : 1;
    const uint32_t width = per_block && wpb < kS ? wpb : kS;
    const uint32_t parts = per_block ? wpb / width : 1;
    const uint32_t units = per_block ? p.windows / wpb : p.windows;  // blocks or windows
    const uint32_t per_warp = (units + k_split - 1) / k_split;
    const uint32_t unit_begin = min(warp * per_warp, units);
    const uint32_t unit_end = min(unit_begin + per_warp, units);
    const uint32_t stages = per_block ? (unit_end - unit_begin) * parts
                                      : (unit_end - unit_begin + kS - 1) / kS;
    const uint32_t end_chunk = min(unit_end * wpb * kWindowChunks, p.chunks);
    auto block_of = [&](uint32_t s) { return unit_begin + s / parts; };
    auto first_window = [&](uint32_t s) {
      return per_block ? block_of(s) * wpb + (s % parts) * width : unit_begin + s * kS;
    };
    using Loads = StageLoads<T, kBits, kS>;
    // Whether stage s has lanes past the warp's range (warp-uniform): only those stages
    // clamp their chunk indices, so the others address slot u as c0 + 4u (an immediate).
    auto partial = [&](uint32_t s) { return (first_window(s) + width) * kWindowChunks > end_chunk; };
    auto load_stage = [&](uint32_t s, Loads& l) {
      const uint32_t c0 = first_window(s) * kWindowChunks + t;
      const uint32_t last = partial(s) ? p.chunks - 1 : UINT32_MAX;
#pragma unroll
      for (int u = 0; u < kS; ++u) {
        if (u >= width) break;  // warp-uniform
        load_chunk(l, u, min(c0 + kWindowChunks * u, last), !per_block);
      }
      if (per_block) {
#pragma unroll
        for (int r = 0; r < 2; ++r) l.q[0][r] = load_quant<T, kBits>(rows.s[r], rows.zp[r], block_of(s), false);
      }
    };
    auto multiply_stage = [&](uint32_t s, const Loads& l) {
      const uint32_t c0 = first_window(s) * kWindowChunks + t;
      const bool masked = partial(s);
      const uint32_t last = masked ? p.chunks - 1 : UINT32_MAX;
#pragma unroll
      for (int u = 0; u < kS; ++u) {
        if (u >= width) break;  // warp-uniform: mma.sync needs all lanes
        const uint32_t in_row = min(c0 + kWindowChunks * u, last);
        const bool ok = c0 + kWindowChunks * u < end_chunk;
        if (per_block) {
          multiply_chunk(l, u, in_row, false, true, l.q[0], block_of(s));
        } else {
          multiply_chunk(l, u, in_row, masked, ok, l.q[u], first_block(in_row));
        }
      }
    };
    // Double buffering: stage s + 1's loads are in flight while stage s is multiplied.
    Loads buf[2];
    if (stages > 0) load_stage(0, buf[0]);
#pragma unroll 1
    for (uint32_t s = 0; s < stages; s += 2) {
      if (s + 1 < stages) load_stage(s + 1, buf[1]);
      multiply_stage(s, buf[0]);
      if (s + 1 >= stages) break;
      if (s + 2 < stages) load_stage(s + 2, buf[0]);
      multiply_stage(s + 1, buf[1]);
    }
  }

  float v[Tile::kValues];
  tile.values(v);
  reduce_and_store<Tile>(p, v, warp, lane, k_split, n0, rows.ok);
}

// ================================================================= window kernel
// float16 / bfloat16, algorithm 0 on whole windows: every row is a whole number of 64-byte
// windows and every window lies in one block (block_size >= a window's codes, 128 4-bit,
// 64 8-bit, so the scale goes on the mma result; kResultScale). With line loads, blocks
// down to a lane's 16-byte chunk (4-bit 32 codes, 8-bit 16) too: each lane's chunk lies
// in one block, whose scale multiplies each weight before the mma (kResultScale = false,
// MmaTile's decode for such blocks, mma_word_scaled): on the decode suite 6-32 % faster
// than the register tile on N x K >= 128 Mi and grids of many tiles (H200, docs/PERF.md).
// Nothing in its loop is partial, so it has none of NBitsGemvKernel's clamps, masks and
// per-chunk address arithmetic. Nsight Compute on that
// kernel (4-bit, M = 1, 28672 x 8192, H200, 2026-11-29): ~200 instructions per window, of
// which ~100 decode and multiply; 127 registers, 3.3 warps per scheduler issuing 0.52
// instructions a cycle, 40 % of the stall samples on the selects that mask activations
// loaded at their point of use. Here a window costs its decode and multiply plus one
// address per row and stream, and the registers are bounded (kWindowMinBlocks) so that
// twice the warps fit an SM (the planner's k split counts on it: kNBitsWindowWarpsPerSm).
// Each warp keeps the next window's weights, scales and zero points in flight while it
// multiplies one (two register buffers, the loop unrolled by two so that they need no
// moves); activations are loaded at the start of their window (L1 hits, covered by the
// window's decode), by the lanes of rows g < M only (MmaTile says why).
//
// kLines (NBitsMatMulOptions::gemv_lines): the same math, the weights read as whole
// 128-byte lines and staged through the warp's 2 KB of shared memory (cuda/line_loads.cuh
// says why): one pair of windows in flight, the same registers (8 bytes of spill at 64).
// Measured at M <= 2 17-19 % faster at 28672 x 8192 (float16; bfloat16 10-12 %), at M = 4
// 11 %, and within 4 % either way on the smaller decode shapes; at M = 8 slower with one
// tile, the round trip and the activations of more rows filling the L1 pipe (docs/PERF.md;
// two tiles, below, halve the activations per weight byte).
//
// kTiles = 2 (line loads; NBitsMatMulOptions::gemv_tiles_per_warp): the
// warp owns two 16-column tiles (n0 and n0 + 16), each with its own 2 KB buffer and pair
// in flight, and multiplies each activation load with both, as FP8's line-load tile
// (fp8_gemv.cu says why): twice the bytes in flight per warp at 128 registers (16 warps
// per SM). Measured on the H200 at 28672 x 8192 (docs/PERF.md, 2026-11-30b): 4-bit 9-17 %
// faster at M = 4, 8, 8-bit float16 2-9 % at M = 2..8 (against TMA tiles at M <= 4).
//
// 8-bit takes this kernel only with line loads: on this loop without them it was up to
// 30 % slower than NBitsGemvKernel at 64 registers and up to 58 % at 80 (H200,
// docs/PERF.md). An 8-bit window decodes in about half the time of a 4-bit one, so one
// window in flight per warp hides less of the load latency than the general kernel's two
// stages of two windows; line loads' shape makes up for it.
constexpr int kWindowDepth = 2;  // register buffers: one window multiplied, one in flight
// At least 4 blocks of kMaxKSplit warps per SM: 64 registers (4-bit bfloat16 spills 16
// bytes there, in the measured tables); 3 with packed zero points or 8-bit bfloat16 codes
// (80 registers: at 64 the zero points' row pointers spilled 84 bytes, 8-bit codes 8-40);
// 2 for 8-bit float16 (128 registers: with line loads 3-8 % faster than at 80, where they
// lost to the register tile by up to 23 %; H200, docs/PERF.md) and for two tiles per warp
// (128 registers; ptxas spills 4-8 bytes there in 8-bit, 48-56 in 8-bit float16 with a
// pair in one block (row pointers, reloaded per pair), 14-20 in 4-bit with zero points;
// bounded to 96 they spilled 24-58 bytes and ran 30-45 % slower, docs/PERF.md).
template <typename T, int kBits, bool kZeroPoints, int kTiles = 1>
constexpr int kWindowMinBlocks =
    kTiles == 2 ? 2 : kBits == 8 ? (std::is_same_v<T, __half> ? 2 : 3) : kZeroPoints ? 3 : 4;
// kWide (two tiles per warp; NBitsMatMulOptions::gemv_registers = 168): blocks of at most
// 4 warps, 3 of them per SM, i.e. up to 168 registers and 12 warps per SM. Hopper's (and
// Ampere's) register file is 16 K registers per scheduler: 129 to 168 registers per
// thread all give 3 warps per scheduler, so 168 costs no warp over the 159 ptxas took
// unbounded for 4-bit float16 and keeps the zero-point variants (199 unbounded) at 12;
// bounded, ptxas takes 135-168 and spills nothing. A warp streams 6-17 % faster than at
// 128 registers (no spill; unbounded, the next pair's loads issued mid-loop rather than at
// its end, docs/PERF.md 2026-11-30g), which wins where the grid's waves fill at 12 warps
// per SM and loses where 16 hold it in fewer waves (the planner costs both; H200,
// docs/PERF.md 2026-11-30h).
constexpr int kWideMaxKSplit = kGemvWideMaxKSplit;  // core/gemv_split.h, the planner's model
constexpr int kWideBlocksPerSm = static_cast<int>(kGemvWideWarpsPerSm) / kWideMaxKSplit;
static_assert(kWideBlocksPerSm * kWideMaxKSplit == kGemvWideWarpsPerSm,
              "the planner's 12 warps per SM are whole blocks of kWideMaxKSplit warps");
template <bool kWide>
constexpr int kWindowMaxThreads = (kWide ? kWideMaxKSplit : kMaxKSplit) * kWarpSize;
template <typename T, int kBits, bool kZeroPoints, int kTiles, bool kWide>
constexpr int kWindowBlocksPerSm =
    kWide ? kWideBlocksPerSm : kWindowMinBlocks<T, kBits, kZeroPoints, kTiles>;

// kPairBlock (line loads, blocks of two windows or more: 8-bit 128 codes, 4-bit 256): a
// pair of windows lies in one block (pairs start at even windows), so its second window
// takes the first's scales and zero points: no loads, and the same decoded constants.
// A template parameter, not a run-time test: with a warp-uniform branch ptxas merged the
// two paths with moves and selects (8-bit float16 two tiles: a 343-instruction loop grew
// to 412 with both paths; as a parameter, 304). Measured: docs/PERF.md, 2026-11-30d.
template <typename T, int kBits, bool kZeroPoints, bool kLines, int kTiles,
          bool kResultScale = true, bool kPairBlock = false, bool kWide = false>
__global__ void __launch_bounds__(kWindowMaxThreads<kWide>,
                                  kWindowBlocksPerSm<T, kBits, kZeroPoints, kTiles, kWide>)
    NBitsGemvWindowKernel(const GemvParams<T> p) {
  static_assert(kTiles == 1 || kLines, "two tiles per warp only with line loads");
  static_assert(!kWide || kTiles == 2, "168 registers: the two-tile kernel only");
  static_assert(kResultScale || kLines, "blocks smaller than a window only with line loads");
  static_assert(!kPairBlock || (kLines && kResultScale), "pairs in one block: line loads");
  using C = Codes<kBits>;
  using Tile = MmaTile<T, kBits, kResultScale>;
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols * kTiles;

  // This warp's windows: a contiguous range (its requests to a DRAM page come together).
  // kLines: an even count (pairs of windows are its unit; p.windows is even there).
  uint32_t per_warp = (p.windows + k_split - 1) / k_split;
  if (kLines) per_warp = (per_warp + 1) & ~1u;
  const uint32_t u0 = min(warp * per_warp, p.windows);
  const uint32_t u1 = min(u0 + per_warp, p.windows);

  // Rows lo and hi (TileRows), lane t's chunk of each window; activation row g (M - 1 for
  // g >= M, never stored).
  // kTiles = 2: the second tile's rows (with one tile, the first's twin, unused).
  const TileRows<T> rows(p, n0, g, kZeroPoints);
  const TileRows<T> rows1(p, n0 + kTileCols * (kTiles - 1), g, kZeroPoints);
  const T* a_row = p.a + static_cast<int64_t>(g < p.m ? g : p.m - 1) * p.k + t * C::kPerChunk;

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
  // Measured (H200, 2026-11-30f, same-machine A/B against a 2-byte load per row and
  // window, docs/PERF.md): 4-bit two tiles at 28672 x 8192 2-9 % faster in float16 and
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
        q[r].zp_byte = C::kDefaultZeroPoint * (kBits == 4 ? 0x11u : 1u);
      else if (!kPairByte || first_of_pair)  // else: load_pair copies the first's
        q[r].zp_byte = __ldg(tr.zp[r] + (kBits == 8 ? blk : blk >> 1));
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
  float accs[kTiles][4] = {};
  auto load_act = [&](uint32_t u, uint4 (&act)[Tile::kActVecs]) {
    const T* src = a_row + static_cast<size_t>(u) * C::kPerWindow;
#pragma unroll
    for (int i = 0; i < Tile::kActVecs; ++i)
      act[i] = load_cached_u4_if(reinterpret_cast<const uint4*>(src) + i, g < p.m);
  };
  auto multiply_act = [&](const uint4 (&act)[Tile::kActVecs], uint32_t u, const Loads& l,
                          float (&acc)[4]) {
    const uint32_t blk = block_of(u);
    const BlockConsts c_lo = make_consts<T, kBits>(l.q[0], blk, 0, false);
    const BlockConsts c_hi = make_consts<T, kBits>(l.q[1], blk, 0, false);
    const uint32_t lo[4] = {l.w[0].x, l.w[0].y, l.w[0].z, l.w[0].w};
    const uint32_t hi[4] = {l.w[1].x, l.w[1].y, l.w[1].z, l.w[1].w};
    float part[4] = {}, part16[4] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t pa[C::kPerWord / 2];
      Tile::act_pairs(act, j, pa);
      if constexpr (kResultScale)
        mma_word_unscaled<T, kBits>(lo[j], hi[j], c_lo, c_hi, pa, part, part16);
      else
        mma_word_scaled<T, kBits>(lo[j], hi[j], c_lo, c_hi, pa, acc);
    }
    if constexpr (kResultScale) apply_block_scales<T, kBits>(acc, part, part16, c_lo, c_hi);
  };
  auto multiply = [&](uint32_t u, const Loads& l) {
    uint4 act[Tile::kActVecs];
    load_act(u, act);
    multiply_act(act, u, l, accs[0]);
  };

  if constexpr (kLines) {
    // Line loads (cuda/line_loads.cuh): a pair of windows per stage, one pair per tile in
    // flight; kTiles = 2: each activation load multiplies both tiles.
    extern __shared__ uint4 window_lines[];
    const LineTiles<kTiles> lines(window_lines + warp * kTiles * (kLineBufferBytes / 16), p.b,
                                  n0, p.n, p.row_bytes, lane);
    auto tile_rows = [&](int j) -> const TileRows<T>& { return j == 0 ? rows : rows1; };
    // This warp's pairs: first, first + stride, ... below end (the last one `last`).
    // 8-bit float16 one tile takes the interleaved order of FP8's line-load tile (warp w:
    // pairs w, w + k_split, ...: the block's warps read adjacent 128 bytes of each row
    // together); the rest keep the contiguous range above. Measured on the H200
    // (docs/PERF.md, 2026-11-30i, same-run A/B of the decode suites at blocks 32, 64 and
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
              for (int r = 0; r < 2; ++r) q[j][1][r].zp_byte = q[j][0][r].zp_byte;
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
          uint4 act[Tile::kActVecs];
          if constexpr (kTiles == 2) load_act(2 * v + h, act);
#pragma unroll
          for (int j = 0; j < kTiles; ++j) {
            l[j][h].w[0] = lines[j].lo(h);
            l[j][h].w[1] = lines[j].hi(h);
          }
          if constexpr (kTiles == 1) load_act(2 * v + h, act);
#pragma unroll
          for (int j = 0; j < kTiles; ++j) multiply_act(act, 2 * v + h, l[j][h], accs[j]);
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

  if constexpr (kTiles == 1) {
    float v[Tile::kValues] = {accs[0][0], accs[0][1], accs[0][2], accs[0][3]};
    reduce_and_store<Tile>(p, v, warp, lane, k_split, n0, rows.ok);
  } else {
    float v[TilePair<Tile>::kValues] = {accs[0][0], accs[0][1], accs[0][2], accs[0][3],
                                        accs[1][0], accs[1][1], accs[1][2], accs[1][3]};
    const bool ok[4] = {rows.ok[0], rows.ok[1], rows1.ok[0], rows1.ok[1]};
    reduce_and_store<TilePair<Tile>>(p, v, warp, lane, k_split, n0, ok);
  }
}

// ================================================================= TMA kernel
// SM90+, float16 / bfloat16, blocks of at least half a tile's codes (8-bit: 64, 4-bit:
// 128): the tensor-core GEMV with the weight stream of cuda/tma.cuh, the loop of
// Fp8GemvTmaKernel (src/cuda/fp8_gemv.cu, which says why) with the N-bit decode. Warp w of
// the block takes the 128-byte tiles w, w + k_split, ... of its 16 rows (a tile: 8 chunks
// of 16 bytes, 128 8-bit or 256 4-bit codes per row); lane 0 keeps kNBitsTmaDepth of them
// in flight in the warp's shared-memory ring. ldmatrix_tile_chunks gives lane (g, t) word
// t of chunk c of rows g and g + 8: its codes are chunk c's 4t .. 4t + 3 (8-bit) or
// 8t .. 8t + 7 (4-bit), decoded and multiplied exactly as MmaTile's scale-on-result words
// (mma_word_unscaled) with the activations of the same codes, one 8- or 16-byte load.
// Chunks 0-3 and 4-7 of a tile each lie in one block: their unscaled sums take the block
// scale in float32 (apply_block_scales). A row's last tile may be partial (row_bytes
// % 128 != 0): its missing chunks arrive as zeros and are skipped (warp-uniform, on a
// code path of its own). The activations, scales and zero points of a tile are loaded
// one (4-bit) or two (8-bit) tiles ahead.
//
// H200 history (2026-11-29, M = 1, float16, 28672 x 8192, bqmm-profile): first version,
// operands loaded at the point of use, 151 us 8-bit / 133 us 4-bit (register loads: 75 /
// 63); operands tiles ahead 88 / 68; full tiles without chunk tests 71 / 60; one lop3 per
// nibble pair and each lane's own constants shared 68 / 55 (register loads then 75 / 56).
// ncu on the 4-bit tile: issue-bound at ~16 warps per SM (0.6 instructions per cycle per
// scheduler), ~300 SASS instructions per 16-row x 256-code tile.
constexpr int kNBitsTmaDepth = 4;  // tiles in flight per warp (16 warps x 4 x 2 KB per SM)
constexpr int kTileChunks = kTmaBoxBytes / kChunkBytes;  // 8

template <typename T, int kBits>
__global__ void __launch_bounds__(kMaxKSplit * kWarpSize, kMinBlocksPerSm<T>)
    NBitsGemvTmaKernel(const __grid_constant__ CUtensorMap map, const GemvParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using C = Codes<kBits>;
  using Tile = MmaTile<T, kBits, true>;
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  extern __shared__ uint8_t tma_smem[];
  __shared__ uint64_t full[kMaxKSplit][kNBitsTmaDepth];
  const TmaTileRing<kNBitsTmaDepth> ring(tma_smem, static_cast<int>(warp), full[warp]);

  // This warp's tiles: warp, warp + k_split, ... (`count` of them).
  const WarpTiles tiles(p.row_bytes, warp, k_split);
  const int count = tiles.count;
  const int32_t y0 = static_cast<int32_t>(n0);
  ring.start(&map, tiles, y0, lane);

  // Rows lo = n0 + g and hi = n0 + g + 8; rows past N read the scales and zero points of
  // row N - 1 into sums that are never stored. Activation row g, or M - 1 for g >= M.
  const bool row_ok[2] = {n0 + g < p.n, n0 + g + 8 < p.n};
  // Lane t of a quad loads the scale and zero point of row (t < 2 ? lo : hi), tile half
  // t % 2 (one load each instead of four), and the quad shares them by shuffles.
  const int64_t col_mine = (t < 2 ? row_ok[0] : row_ok[1]) ? n0 + g + 8 * (t / 2) : p.n - 1;
  const T* const s_mine = p.scales + col_mine * p.k_blocks;
  const uint8_t* const zp_mine = p.zp != nullptr ? p.zp + col_mine * p.zp_row_bytes : nullptr;
  const T* const a_row = p.a + static_cast<int64_t>(g < p.m ? g : p.m - 1) * p.k + t * C::kPerWord;
  // Only a row's last tile can be partial (row_bytes % 128 != 0): if this warp has it,
  // it is its tile `partial_i` with `partial_chunks` chunks of codes. Every other tile
  // takes the code path without chunk tests (kFull), whose loads and mma steps the
  // compiler can interleave freely (the tests' branches split them apart).
  const int partial_i = tiles.partial;
  const int partial_chunks = static_cast<int>((p.row_bytes % kTmaBoxBytes) / kChunkBytes);
  using Full = std::true_type;
  using Partial = std::false_type;

  // Tile i's operands in buffer i % kOperandBuffers, loaded kOperandBuffers - 1 tiles
  // ahead: at M = 8 the activations come from L2 and the scales from DRAM, as slowly as
  // the weights under a full stream, so a load at the point of use stalls the warp for
  // the whole latency once per tile (the first version did: half the speed of the
  // register-load kernel). Activations: the lane's word of each chunk, 4 codes (8-bit,
  // 8 bytes) or 8 (4-bit, 16 bytes); chunks past a partial tile's end are not loaded
  // (they lie past the activation row). 4-bit takes two buffers (its tile is twice the
  // math, and three would pass 128 registers).
  using ActVec = std::conditional_t<kBits == 8, uint2, uint4>;
  constexpr int kOperandBuffers = kBits == 8 ? 3 : 2;
  ActVec act[kOperandBuffers][kTileChunks];
  RawQuant<T, kBits> quant[kOperandBuffers];
  // The block of this lane's tile half t % 2 of the tile at byte0 (a half past the row's
  // end takes the last block's constants, never used).
  auto own_block = [&](uint32_t byte0) {
    const uint32_t byte = min(byte0 + (t % 2) * (kTmaBoxBytes / 2), static_cast<uint32_t>(p.row_bytes) - 1);
    return (byte * (8 / kBits)) >> p.block_shift;
  };
  auto load_operands_as = [&](auto full, int b, int i) {
    const uint32_t byte0 = tiles.x(i);
    const int chunks = decltype(full)::value ? kTileChunks : partial_chunks;
    const T* src = a_row + static_cast<int64_t>(byte0) * (8 / kBits);
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c)
      if (c < chunks) act[b][c] = __ldg(reinterpret_cast<const ActVec*>(src + c * C::kPerChunk));
    quant[b] = load_quant<T, kBits>(s_mine, zp_mine, own_block(byte0), false);
  };
  auto load_operands = [&](int b, int i) {
    if (i == partial_i)
      load_operands_as(Partial(), b, i);
    else
      load_operands_as(Full(), b, i);
  };
  // The block constants of the tile in buffer b (first byte byte0): each lane decodes its
  // own (row, half) once, and row r's (0: lo, 1: hi) constants of half h are then read
  // from quad lane 2r + h (decoding all four in every lane cost ~30 instructions a tile).
  auto own_consts = [&](int b, uint32_t byte0) {
    return make_consts<T, kBits>(quant[b], own_block(byte0), 0, false);
  };
  auto shared_consts = [&](const BlockConsts& own, int r, int h) {
    const int src = (lane & ~3) + 2 * r + h;
    BlockConsts c;
    c.scale = __shfl_sync(0xffffffffu, own.scale, src);
    c.zero = __shfl_sync(0xffffffffu, own.zero, src);
    c.zero_hi = kBits == 4 && std::is_same_v<T, __half> ? __shfl_sync(0xffffffffu, own.zero_hi, src) : 0u;
    return c;
  };

  float acc[4] = {};
  auto multiply_tile = [&](auto full, int b, int i, uint32_t slot) {
    const uint32_t byte0 = tiles.x(i);
    const int chunks = decltype(full)::value ? kTileChunks : partial_chunks;
    const BlockConsts own = own_consts(b, byte0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (4 * h >= chunks) break;  // warp-uniform
      const BlockConsts c_lo = shared_consts(own, 0, h);
      const BlockConsts c_hi = shared_consts(own, 1, h);
      float part[4] = {}, part16[4] = {};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        if (4 * h + 2 * q >= chunks) break;  // warp-uniform
        uint32_t w[4];
        ldmatrix_tile_chunks(slot, 4 * h + 2 * q, lane, w);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 4 * h + 2 * q + e;
          if (c >= chunks) break;  // warp-uniform
          uint32_t pa[C::kPerWord / 2];
          if constexpr (kBits == 8) {
            pair_act8(act[b][c].x, act[b][c].y, pa);
          } else {
            pair_act4(act[b][c], pa);
          }
          mma_word_unscaled<T, kBits>(w[2 * e], w[2 * e + 1], c_lo, c_hi, pa, part, part16);
        }
      }
      apply_block_scales<T, kBits>(acc, part, part16, c_lo, c_hi);
    }
  };
  auto consume = [&](int b, int i) {
    if (i + kOperandBuffers - 1 < count)
      load_operands((b + kOperandBuffers - 1) % kOperandBuffers, i + kOperandBuffers - 1);
    const uint32_t slot = ring.wait(i);
    if (i == partial_i)
      multiply_tile(Partial(), b, i, slot);
    else
      multiply_tile(Full(), b, i, slot);
    ring.refill(&map, tiles, i, y0, lane);
  };
#pragma unroll
  for (int u = 0; u < kOperandBuffers - 1; ++u)
    if (u < count) load_operands(u, u);
  int i = 0;
  for (; i + kOperandBuffers - 1 < count; i += kOperandBuffers) {
#pragma unroll
    for (int u = 0; u < kOperandBuffers; ++u) consume(u, i + u);
  }
#pragma unroll
  for (int u = 0; u < kOperandBuffers - 1; ++u)
    if (i + u < count) consume(u, i + u);

  float v[Tile::kValues] = {acc[0], acc[1], acc[2], acc[3]};
  reduce_and_store<Tile>(p, v, warp, lane, k_split, n0, row_ok);
#else
  __trap();  // SM90+ only; the planner never asks for it below
#endif
}

// ================================================================= CUDA-core kernel (8-bit)
// GemvFmaKernel (cuda/gemv_fma.cuh) on 8-bit integer codes, float16 / bfloat16 activations:
// the planner's kernel at M = 1 (and M = 2 in bfloat16), where its 512-byte warp loads
// stream faster than the tensor-core tiles' fragment-shaped ones. A chunk of 16 codes lies in one block
// (block_size >= 16, a power of two); q - zp is exact in float32 (2^23 + c minus
// 2^23 + zp, one prmt and one add per code), the block scale multiplies the chunk's float32
// partial sum. kZeroPoints: packed zero points given (else 2^(bits - 1)), a template
// parameter so that no select waits on a zero-point load.
template <typename T_, bool kZeroPoints>
struct NBits8FmaCodec {
  using T = T_;
  using Params = GemvParams<T>;
  struct Consts {
    uint32_t scale;  // the block scale's T bits
    uint32_t zp;     // the zero-point byte (packed zero points only)
  };

  __device__ static uint32_t block_of(const Params& p, uint32_t chunk) {
    return chunk >> (p.block_shift - 4);  // 16 codes per chunk
  }
  __device__ static Consts load_consts(const Params& p, int64_t col, uint32_t blk, bool ok) {
    Consts c;
    c.scale = load_u16_if(p.scales + col * p.k_blocks + blk, ok);
    c.zp = kZeroPoints ? load_u8_if(p.zp + col * p.zp_row_bytes + blk, ok) : 0;
    return c;
  }
  __device__ static void decode(const uint4& w, const Consts& c, float (&wf)[kFmaChunk]) {
    const uint32_t zp = kZeroPoints ? c.zp : Codes<8>::kDefaultZeroPoint;
    const float zero = __uint_as_float(0x4B000000u | zp);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) wf[4 * q + i] = magic_byte_float(word(w, q), i) - zero;
  }
  __device__ static float scale(const Consts& c) {
    const uint16_t bits = static_cast<uint16_t>(c.scale);
    T v;
    memcpy(&v, &bits, sizeof(v));
    return to_float(v);
  }
  struct Act {  // no activation transform
    __device__ explicit Act(const Params&) {}
    __device__ void operator()(uint32_t (&)[8]) const {}
  };
};

// ================================================================= launcher
template <typename T>
GemvParams<T> make_params(const NBitsGemvArgs& args) {
  GemvParams<T> p;
  p.a = static_cast<const T*>(args.a);
  p.b = args.b;
  p.scales = static_cast<const T*>(args.scales);
  p.zp = args.zp_packed;
  p.bias = static_cast<const T*>(args.bias);
  p.y = static_cast<T*>(args.y);
  p.m = static_cast<int>(args.m);
  p.n = args.n;
  p.k = args.k;
  p.k_blocks = args.k / args.block_size;
  p.row_bytes = p.k_blocks * args.block_size * args.bits / 8;
  p.zp_row_bytes = (p.k_blocks * args.bits + 7) / 8;
  p.chunks = static_cast<uint32_t>(p.row_bytes / kChunkBytes);
  p.windows = (p.chunks + kWindowChunks - 1) / kWindowChunks;
  p.block_shift = 0;
  while ((int64_t{1} << p.block_shift) < args.block_size) ++p.block_shift;
  const int64_t per_window = args.bits == 8 ? Codes<8>::kPerWindow : Codes<4>::kPerWindow;
  p.windows_per_block = static_cast<uint32_t>(args.block_size / per_window);
  return p;
}

template <typename T, int kBits, int kAlgo>
Status launch_config(const NBitsGemvArgs& args, int rows, int k_split, cudaStream_t stream) {
  const GemvParams<T> p = make_params<T>(args);
  const dim3 grid(static_cast<unsigned>((args.n + kTileCols - 1) / kTileCols));
  const dim3 block(k_split * kWarpSize);
  if constexpr (std::is_same_v<T, float>) {
    switch (rows) {
      case 1: NBitsGemvKernel<T, kBits, kAlgo, 1><<<grid, block, 0, stream>>>(p); break;
      case 2: NBitsGemvKernel<T, kBits, kAlgo, 2><<<grid, block, 0, stream>>>(p); break;
      case 4: NBitsGemvKernel<T, kBits, kAlgo, 4><<<grid, block, 0, stream>>>(p); break;
      case 8: NBitsGemvKernel<T, kBits, kAlgo, 8><<<grid, block, 0, stream>>>(p); break;
      default:
        return Status(StatusCode::kInternal, "launch_nbits_gemv: float32 rows " +
                                                 std::to_string(rows) +
                                                 " is not instantiated (1, 2, 4, 8)");
    }
  } else {
    if (rows != 8)
      return Status(StatusCode::kInternal, "launch_nbits_gemv: the tensor-core tile has 8 rows, not " +
                                               std::to_string(rows));
    // Scale on the mma result when a window's chunks share one block.
    if (args.block_size >= Codes<kBits>::kPerWindow)
      NBitsGemvKernel<T, kBits, kAlgo, 8, true><<<grid, block, 0, stream>>>(p);
    else
      NBitsGemvKernel<T, kBits, kAlgo, 8, false><<<grid, block, 0, stream>>>(p);
  }
  return check_launch("NBitsGemvKernel");
}

template <typename T, int kBits>
Status launch_tma(const NBitsGemvArgs& args, int k_split, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv: no TMA tile for float32");
  } else {
    if (args.block_size < Codes<kBits>::kPerWindow)
      return Status(StatusCode::kInternal, "launch_nbits_gemv: TMA tiles need blocks of " +
                                               std::to_string(Codes<kBits>::kPerWindow) +
                                               " codes or more, not " +
                                               std::to_string(args.block_size));
    const GemvParams<T> p = make_params<T>(args);
    CUtensorMap map;
    BQMM_RETURN_IF_ERROR(make_tile_tensor_map(args.b, args.n, p.row_bytes, &map));
    const int smem = tma_ring_smem_bytes(k_split, kNBitsTmaDepth);
    BQMM_RETURN_IF_ERROR(
        allow_dynamic_smem(reinterpret_cast<const void*>(NBitsGemvTmaKernel<T, kBits>), smem));
    const dim3 grid(static_cast<unsigned>((args.n + kTileCols - 1) / kTileCols));
    NBitsGemvTmaKernel<T, kBits><<<grid, k_split * kWarpSize, smem, stream>>>(map, p);
    return check_launch("NBitsGemvTmaKernel");
  }
}

template <typename T>
Status launch_window(const NBitsGemvArgs& args, int k_split, bool lines, int tiles,
                     int registers, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv: no window kernel for float32");
  } else {
    const GemvParams<T> p = make_params<T>(args);
    const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
    // Blocks of a window or more: the scale on the mma result; smaller (line loads only):
    // each weight scaled before the mma.
    const int chunk_codes = args.bits == 4 ? Codes<4>::kPerChunk : Codes<8>::kPerChunk;
    const bool result_scale = args.block_size >= window_codes;
    if ((args.bits != 4 && args.bits != 8) || (!result_scale && !lines) ||
        args.block_size < chunk_codes ||
        p.chunks % kWindowChunks != 0)
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
    const dim3 grid(static_cast<unsigned>((args.n + kTileCols * tiles - 1) / (kTileCols * tiles)));
    const dim3 block(k_split * kWarpSize);
    if (lines && p.windows % 2 != 0)
      return Status(StatusCode::kInternal,
                    "launch_nbits_gemv: line loads take rows of whole 128-byte lines, not K = " +
                        std::to_string(args.k));
    const int smem = lines ? k_split * tiles * kLineBufferBytes : 0;
    auto launch = [&](auto bits, auto zero_points, auto line_loads, auto n_tiles, auto scale,
                      auto pair_block) {
      auto with_bound = [&](auto wide_bound) {
        NBitsGemvWindowKernel<T, decltype(bits)::value, decltype(zero_points)::value,
                              decltype(line_loads)::value, decltype(n_tiles)::value,
                              decltype(scale)::value, decltype(pair_block)::value,
                              decltype(wide_bound)::value><<<grid, block, smem, stream>>>(p);
      };
      if constexpr (decltype(n_tiles)::value == 2) {
        if (wide) return with_bound(std::true_type());
      }
      with_bound(std::false_type());
    };
    // Line loads: the block size picks the decode (without them: blocks of a window or
    // more, checked above) and whether a pair of windows shares one block.
    const bool pair_block = args.block_size >= 2 * window_codes;
    if (lines && result_scale && !pair_block && reinterpret_cast<uintptr_t>(args.scales) % 4 != 0)
      return Status(StatusCode::kInternal,
                    "launch_nbits_gemv: line loads on blocks of one window read the scales in "
                    "4-byte pairs; these are not 4-byte aligned");
    auto go = [&](auto bits, auto zero_points, auto line_loads, auto n_tiles) {
      if constexpr (decltype(line_loads)::value) {
        if (!result_scale)
          launch(bits, zero_points, line_loads, n_tiles, std::false_type(), std::false_type());
        else if (pair_block)
          launch(bits, zero_points, line_loads, n_tiles, std::true_type(), std::true_type());
        else
          launch(bits, zero_points, line_loads, n_tiles, std::true_type(), std::false_type());
        return;
      }
      launch(bits, zero_points, line_loads, n_tiles, std::true_type(), std::false_type());
    };
    using One = std::integral_constant<int, 1>;
    using Two = std::integral_constant<int, 2>;
    auto with_bits = [&](auto bits) {
      if (tiles == 2) {  // line loads (checked above)
        if (p.zp != nullptr) go(bits, std::true_type(), std::true_type(), Two());
        else go(bits, std::false_type(), std::true_type(), Two());
      } else if (p.zp != nullptr) {
        if (lines) go(bits, std::true_type(), std::true_type(), One());
        else go(bits, std::true_type(), std::false_type(), One());
      } else {
        if (lines) go(bits, std::false_type(), std::true_type(), One());
        else go(bits, std::false_type(), std::false_type(), One());
      }
    };
    if (args.bits == 4) with_bits(std::integral_constant<int, 4>());
    else with_bits(std::integral_constant<int, 8>());
    return check_launch("NBitsGemvWindowKernel");
  }
}

template <typename T, int kBits>
Status launch_algo(const NBitsGemvArgs& args, int algo, int rows, int k_split,
                   cudaStream_t stream) {
  switch (algo) {
    case kNBitsGemvAlgoUnrolled:
      return launch_config<T, kBits, kNBitsGemvAlgoUnrolled>(args, rows, k_split, stream);
    case kNBitsGemvAlgoLoop:
      return launch_config<T, kBits, kNBitsGemvAlgoLoop>(args, rows, k_split, stream);
    case kNBitsGemvAlgoPerBlock:
      return launch_config<T, kBits, kNBitsGemvAlgoPerBlock>(args, rows, k_split, stream);
    default:
      return Status(StatusCode::kInternal,
                    "launch_nbits_gemv: unknown algo " + std::to_string(algo));
  }
}

template <typename T, int kRows>
Status launch_fma_rows(const NBitsGemvArgs& args, cudaStream_t stream) {
  const GemvParams<T> p = make_params<T>(args);
  constexpr const char* kName = "GemvFmaKernel<nbits8>";
  return args.zp_packed != nullptr
             ? launch_gemv_fma<NBits8FmaCodec<T, true>, kRows>(p, args.m, args.n, stream, kName)
             : launch_gemv_fma<NBits8FmaCodec<T, false>, kRows>(p, args.m, args.n, stream, kName);
}

// The planner only asks for what the kernel takes; a violation is a bug, reported here
// rather than run out of bounds.
Status check_gemv_args(const NBitsGemvArgs& args, int rows, int k_split) {
  const auto fail = [](const std::string& what) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv: " + what);
  };
  if (args.bits != 4 && args.bits != 8) return fail("bits " + std::to_string(args.bits));
  if (args.m > rows || rows > 8) return fail("M = " + std::to_string(args.m) + " > rows " + std::to_string(rows));
  if (k_split != 1 && k_split != 2 && k_split != 4 && k_split != 8)
    return fail("k_split " + std::to_string(k_split));
  if (args.block_size < 16 || args.k % args.block_size != 0 || args.k > 0x7fffffff)
    return fail("K = " + std::to_string(args.k) + " with block_size " + std::to_string(args.block_size));
  if ((args.k * args.bits / 8) % kChunkBytes != 0) return fail("rows of B are not 16-byte multiples");
  if ((args.n + kTileCols - 1) / kTileCols > 0x7fffffff) return fail("N = " + std::to_string(args.n));
  return Status::Ok();
}

}  // namespace

Status launch_nbits_gemv(const NBitsGemvArgs& args, int algo, int rows, int k_split, bool tma,
                         bool window, bool lines, int tiles_per_warp, int registers,
                         cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  BQMM_RETURN_IF_ERROR(check_gemv_args(args, rows, k_split));
  return dispatch_float_types(args.dtype, "launch_nbits_gemv", [&](auto tag) -> Status {
    using T = decltype(tag);
    if (window) return launch_window<T>(args, k_split, lines, tiles_per_warp, registers, stream);
    if (tma)
      return args.bits == 8 ? launch_tma<T, 8>(args, k_split, stream)
                            : launch_tma<T, 4>(args, k_split, stream);
    return args.bits == 8 ? launch_algo<T, 8>(args, algo, rows, k_split, stream)
                          : launch_algo<T, 4>(args, algo, rows, k_split, stream);
  });
}

Status launch_nbits_gemv_fma(const NBitsGemvArgs& args, int rows, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  BQMM_RETURN_IF_ERROR(check_gemv_args(args, rows, 1));
  if (args.bits != 8)
    return Status(StatusCode::kInternal, "launch_nbits_gemv_fma: 8-bit codes only, not " +
                                             std::to_string(args.bits));
  return dispatch_half_types(args.dtype, "launch_nbits_gemv_fma", [&](auto tag) -> Status {
    using T = decltype(tag);
    switch (rows) {
      case 1: return launch_fma_rows<T, 1>(args, stream);
      case 2: return launch_fma_rows<T, 2>(args, stream);
      default:
        return Status(StatusCode::kInternal, "launch_nbits_gemv_fma: rows " +
                                                 std::to_string(rows) +
                                                 " is not instantiated (1, 2)");
    }
  });
}

}  // namespace bqmm::cuda
