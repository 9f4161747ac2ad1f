// The N-bit GEMVs' warp tiles (a warp's accumulators and its multiply of one decoded
// chunk), the rows a tile reads, and their epilogue; shared by the register-load kernel
// (nbits_gemv.cu), the window kernel (nbits_window.cu) and the TMA kernel (nbits_tma.cu).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/gemv/nbits_codes.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {

// Tensor-core tiles: kTensorCoreBlocksPerSm blocks of kMaxKSplit warps per SM at least
// (128 registers per thread at most, the planner's kGemvTensorCoreWarpsPerSm). The FMA
// tile (float32, not a bandwidth target: its kRows * 2 sums and per-row activations need
// more) may take 255.
template <typename T>
constexpr int kMinBlocksPerSm = std::is_same_v<T, float> ? 1 : kTensorCoreBlocksPerSm;

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
// kTyped: typed (fractional) zero points, each weight decoded as q * scale - zp * scale
// (decode_word_pairs_typed); never with kResultScale (q - zp is not exact in T).
template <typename T, int kBits, bool kResultScale, bool kTyped = false>
struct MmaTile {
  static_assert(!(kTyped && kResultScale), "typed zero points scale each weight");
  using C = Codes<kBits>;
  static constexpr int kActVecs = C::kPerChunk * static_cast<int>(sizeof(T)) / 16;
  static constexpr int kValues = 4;

  float acc[4] = {};
  // Activation row g (clamped to M - 1, an in-bounds address). Lanes of rows g >= M load
  // nothing (one predicated load: zeros into output rows that are never stored): at M = 1
  // seven eighths of the warp's activation traffic through L1 (H200: 1-4 %
  // faster on the 4-bit N = 4096 decode shapes and on 8-bit float16).
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
        mma_word_scaled<T, kBits, kTyped>(lo[j], hi[j], q[0][group], q[1][group], pa, acc);
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

// The end of every N-bit tensor-core and FMA-tile kernel: the K-split reduction
// (reduce_k_split, gemv/common.cuh), then warp 0 adds the bias in float32 and rounds to T
// once (store_output); rows >= M and columns past N (row_ok) are not stored. kMaxSplit:
// the kernel's largest block, in warps.
template <typename Tile, int kMaxSplit = kMaxKSplit, typename T, int kColumnRows>
__device__ __forceinline__ void reduce_and_store(const GemvParams<T>& p, float (&v)[Tile::kValues],
                                                 uint32_t warp, int lane, uint32_t k_split,
                                                 int64_t n0, const bool (&row_ok)[kColumnRows]) {
  if (!reduce_k_split<Tile::kValues, kMaxSplit>(v, warp, lane, k_split)) return;
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

// kHalves 8-row halves of the same columns (row groups of 16, gemv/common.cuh): values
// h * Inner::kValues .. are half h's, whose rows are the inner tile's rows + 8 h.
template <class Inner, int kHalves>
struct RowHalves {
  static constexpr int kValues = kHalves * Inner::kValues;
  template <typename Store>
  __device__ static void store(const float (&v)[kValues], int t, Store&& out) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      float w[Inner::kValues];
#pragma unroll
      for (int i = 0; i < Inner::kValues; ++i) w[i] = v[h * Inner::kValues + i];
      Inner::store(w, t, [&](int row, int r, float value) { out(row + 8 * h, r, value); });
    }
  }
};

// ----------------------------------------------------------------- host side
// The kernels' parameters of an N-bit GEMV (gemv/common.cuh).
template <typename T>
GemvParams<T> make_nbits_params(const NBitsGemvArgs& args) {
  const int64_t k_blocks = args.k / args.block_size;
  GemvParams<T> p = make_gemv_params<T>(args.a, args.b, static_cast<const T*>(args.scales),
                                        args.bias, args.y, args.m, args.n, args.k, k_blocks);
  p.row_bytes = k_blocks * args.block_size * args.bits / 8;
  if (args.zp_typed != nullptr) {  // [N, k_blocks] of T, read as the scales are
    p.zp = static_cast<const uint8_t*>(args.zp_typed);
    p.zp_row_bytes = k_blocks * static_cast<int64_t>(sizeof(T));
  } else {
    p.zp = args.zp_packed;
    p.zp_row_bytes = (k_blocks * args.bits + 7) / 8;
  }
  p.chunks = static_cast<uint32_t>(p.row_bytes / kChunkBytes);
  p.windows = (p.chunks + kWindowChunks - 1) / kWindowChunks;
  p.block_shift = 0;
  while ((int64_t{1} << p.block_shift) < args.block_size) ++p.block_shift;
  const int64_t per_window = args.bits == 8 ? Codes<8>::kPerWindow : Codes<4>::kPerWindow;
  p.windows_per_block = static_cast<uint32_t>(args.block_size / per_window);
  return p;
}

// The planner only asks for what the kernel takes; a violation is a bug, reported here
// rather than run out of bounds. row_groups: M up to kGemvMaxGroupRows in groups of 16,
// `rows` = 8 (the window kernel's line loads; the caller checks that it is that kernel).
inline Status check_nbits_gemv_args(const NBitsGemvArgs& args, int rows, int k_split,
                                    bool row_groups = false) {
  const auto fail = [](const std::string& what) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv: " + what);
  };
  if (args.bits != 4 && args.bits != 8) return fail("bits " + std::to_string(args.bits));
  if (row_groups ? (args.m > kGemvMaxGroupRows || rows != kMmaRows)
                 : (args.m > rows || rows > kMmaRows))
    return fail("M = " + std::to_string(args.m) + " > rows " + std::to_string(rows) +
                (row_groups ? " in row groups of up to " + std::to_string(kGemvMaxGroupRows)
                            : std::string()));
  if (k_split != 1 && k_split != 2 && k_split != 4 && k_split != 8 &&
      k_split != kNBitsWindow80MaxKSplit && k_split != kNBitsWindowMaxKSplit)
    return fail("k_split " + std::to_string(k_split));
  if (args.block_size < 16 || args.k % args.block_size != 0 || args.k > 0x7fffffff)
    return fail("K = " + std::to_string(args.k) + " with block_size " + std::to_string(args.block_size));
  if ((args.k * args.bits / 8) % kChunkBytes != 0) return fail("rows of B are not 16-byte multiples");
  if ((args.n + kTileCols - 1) / kTileCols > 0x7fffffff) return fail("N = " + std::to_string(args.n));
  return Status::Ok();
}

// The launchers of launch_nbits_gemv's kernels other than the register-load one (which
// checks the arguments first): the window kernel (nbits_window.cu) and the TMA kernel
// (nbits_tma.cu), float16 / bfloat16.
Status launch_nbits_gemv_window(const NBitsGemvArgs& args, int k_split, bool lines, int tiles,
                                int registers, cudaStream_t stream);
Status launch_nbits_gemv_tma(const NBitsGemvArgs& args, int k_split, cudaStream_t stream);

}  // namespace bqmm::cuda
