// The staged row tile (M = 9..16, SM90) of both operators' weights, StagedRowsKernel: the
// activation rows staged once in shared memory as the mma's A operand, the weight decoded
// into its B operand straight from the stored layout (no prepack). Weight formats (below):
// NBitsMatMul's 4- and 8-bit codes (gemv/nbits_codes.cuh decodes them) and
// Fp8WeightMatMul's e4m3; core/gemv_split.h has the geometry the planners share
// (kGemvStaged*).
//
//   Y[m, n] = sum_k A[m, k] * W[n, k] * scale[n, k / block_size] + bias[n],
//   W = q - zp (N-bit) or e4m3(B) (FP8)
//
// Why. The row group of 16 (the line-load and window kernels' kRowGroups) keeps the decode
// kernels' orientation, the weight as the mma's A operand and the activations as B: each
// lane loads its activations from L1 and pairs them with PRMTs for every 16-column tile,
// and at M = 9..16 those loads, not the weight stream, pace it (Nsight Compute, 4-bit
// 8192 x 8192 M = 16: 60 % of the stall samples on loads, 30 % on the pairing PRMTs).
// Here the 16 activation rows are the mma's M extent: a block stages its K slice of them
// once, and one ldmatrix.x4 per 16 k is the A fragment of every 8-row weight subtile a
// warp owns.
//
// Work split. A block of kWarps = 8 warps owns kBlockCols = 256 weight rows (Y columns),
// 32 a warp in kSubtiles = 4 subtiles of 8 rows, over one K slice; gridDim.z blocks (the
// planner's k_split, at most 8) split K and form one thread-block cluster along z, which
// sums their partial tiles through distributed shared memory in rank order (deterministic)
// and stores Y. Lane (g, t) = (lane / 4, lane % 4) reads, for each subtile, row g's 16
// bytes t of every 64-byte window (the GEMVs' window): 4 words of codes, each decoded
// (exactly, in T) into the B fragment of one mma (8-bit codes and e4m3: pairs (0, 1),
// (2, 3)) or two (4-bit: pairs (i, i + 4), i = 0..3, as the lop3 decode produces them).
// Blocks of a window or more (4-bit 128 codes, 8-bit and e4m3 64): every mma's k lie in
// one block, so the block scale multiplies the FP32 mma result (the scales of the two
// columns 2t, 2t + 1 a lane's result fragment holds), as the decode GEMVs' scale-on-result
// tiles do.
//
// K order. K is a reduction axis, so any permutation applied to both operands keeps the
// sum: the staging puts each activation where the decode puts the weight it multiplies.
// Per activation row and window, shared memory holds 16-byte groups of 8 T:
//   4-bit (16 groups): group 4w + i = the codes 32t + 8w + i + 4e (word w of lane t's
//     16 bytes, its pair P_i), at T index 2t + e (t = 0..3, e = 0..1). Word w's two mma
//     take A fragments X = groups (4w, 4w + 1) with b = (P_0, P_1) and Y = groups (4w + 2,
//     4w + 3) with b = (P_2, P_3).
//   8-bit (4 groups of 16 T): group w's T 2t + e = codes 16t + 4w + e (pair (0, 1)) and
//     T 8 + 2t + e = codes 16t + 4w + 2 + e (pair (2, 3)): word w's A fragment.
// ldmatrix.x4's four 8 x 8 matrices are rows 0-7 and 8-15 of the first group of the
// fragment, then of the second (a[0..3] of mma.m16n8k16: A[g][2t..], A[g + 8][2t..],
// A[g][2t + 8..], A[g + 8][2t + 8..]). Rows are padded by 16 bytes so that the 8 rows of a
// matrix fall in 8 different bank groups.
//
// Pipeline. Each warp keeps the next window's weights, scales and zero points in registers
// while it multiplies one (two buffers, the loop unrolled by two). Rows past N read row
// N - 1 (valid addresses) and are not stored; activation rows past M are staged as zeros.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/line_loads.cuh"
#include "cuda/gemv/nbits_tiles.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kWarps = kGemvStagedWarps;
constexpr int kSubtiles = 4;  // 8-row weight subtiles a warp
constexpr int kBlockCols = kWarps * 8 * kSubtiles;
static_assert(kBlockCols == kGemvStagedCols, "the planner's columns a block");
constexpr int kRows = static_cast<int>(kGemvGroupRows);  // the mma M extent
constexpr int kPadBytes = static_cast<int>(kGemvStagedPadBytes);
// Two blocks per SM (16 warps): at most 128 registers a thread.
constexpr int kBlocksPerSm = 2;
static_assert(kBlockCols % kGemvStagedMaxSplit == 0 && kBlockCols / kGemvStagedMaxSplit % 4 == 0,
              "each rank of the cluster sums whole float4 columns of the tile");

// ================================================================= weight formats
// What the tile asks of a weight format F: Params (the kernel's parameters), Scale (the
// block scales' type), kCodeBits (4 or 8: the staging's K order), kWindowCodes (codes in
// a 64-byte window), kPairs (B-fragment pairs a 32-bit word decodes to), kZeroPoints (a
// zero-point byte loaded per row and block, RowZp::load); block(p, window), the scale
// block of a window; consts(zp byte, block), a subtile's block constants; decode(word,
// consts, pairs), the word's weights exactly in T, in the order the staging assumes.

// One word of N-bit codes -> its pairs as exact q - zp in T (the order of
// decode_word_pairs). float16 4-bit takes f16_nibble_pairs, whose high-nibble pairs come
// out exact too (the unscaled decode leaves them as 16 (q - zp) for a second accumulator,
// which this tile's result fragments, shared by both mma of a word, do not have).
template <typename T, int kBits, bool kPacked>
struct NBitsFormat {
  using Params = GemvParams<T>;
  using Scale = T;
  using Consts = BlockConsts;
  static constexpr int kCodeBits = kBits;
  static constexpr int kWindowCodes = Codes<kBits>::kPerWindow;
  static constexpr int kPairs = Codes<kBits>::kPerWord / 2;
  static constexpr bool kZeroPoints = kPacked;

  // Blocks are powers of two of a window or more.
  __device__ static uint32_t block(const Params& p, uint32_t window) {
    return (window * kWindowCodes) >> p.block_shift;
  }
  // Row n's packed zero points: the byte holding block blk's.
  struct RowZp {
    const uint8_t* row = nullptr;
    RowZp() = default;
    __device__ RowZp(const Params& p, int64_t n) : row(kPacked ? p.zp + n * p.zp_row_bytes : nullptr) {}
    __device__ uint32_t load(uint32_t blk) const { return __ldg(row + (kBits == 8 ? blk : blk >> 1)); }
  };
  __device__ static Consts consts(uint32_t zp_byte, uint32_t blk) {
    uint32_t zp = Codes<kBits>::kDefaultZeroPoint;
    if constexpr (kPacked) zp = kBits == 8 ? zp_byte : (zp_byte >> ((blk & 1) * 4)) & Codes<kBits>::kMask;
    return make_zero_consts<T, kBits>(zp);
  }
  __device__ static void decode(uint32_t q, const Consts& c, uint32_t (&out)[kPairs]) {
    if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
      f16_nibble_pairs(q, c, out);
    } else {
      decode_word_pairs_unscaled<T, kBits>(q, c, out);
    }
  }
};

// e4m3 codes (Fp8WeightMatMul's weight-only rows; a static W8A8 QDQ is not fused here)
// with float32 scales, blocks any multiple of a window: codes (0, 1) and (2, 3) of a word
// in T (e4m3 values are exact in float16 and bfloat16).
template <typename T>
struct Fp8Format {
  using Params = GemvParams<T, float>;
  using Scale = float;
  struct Consts {};
  static constexpr int kCodeBits = 8;
  static constexpr int kWindowCodes = kWindowBytes;
  static constexpr int kPairs = 2;
  static constexpr bool kZeroPoints = false;

  // p.slices_per_block: block_size / kWindowCodes (make_fp8_params with that slice).
  __device__ static uint32_t block(const Params& p, uint32_t window) { return p.slices_per_block.div(window); }
  struct RowZp {
    RowZp() = default;
    __device__ RowZp(const Params&, int64_t) {}
    __device__ uint32_t load(uint32_t) const { return 0; }
  };
  __device__ static Consts consts(uint32_t, uint32_t) { return {}; }
  __device__ static void decode(uint32_t q, const Consts&, uint32_t (&out)[kPairs]) {
    out[0] = e4m3x2_to_packed2<T>(q);
    out[1] = e4m3x2_hi_to_packed2<T>(q);
  }
};

// One window's loads of a lane: its 16 bytes of each subtile's row g, the block scales of
// the columns 2t, 2t + 1 of each subtile (its result fragment's), and (F::kZeroPoints) row
// g's zero-point byte of the block.
template <typename F>
struct WindowLoads {
  uint4 w[kSubtiles];
  typename F::Scale s[kSubtiles][2];
  uint32_t zp[F::kZeroPoints ? kSubtiles : 1];
};

// Stages the block's K slice of the activations (windows [win0, win0 + windows) of every
// row), 8 T at a time: 4-bit unit u = 4t' + w' of a window (codes 8u .. 8u + 7 = word w' of
// lane t') goes to groups 4w' + j at slot t' as its pairs (j, j + 4); 8-bit unit u =
// 2t' + h (words 2h, 2h + 1 of lane t') to groups 2h and 2h + 1, T 2t' and 8 + 2t'.
template <typename F>
__device__ __forceinline__ void stage_activations(const typename F::Params& p, uint8_t* smem,
                                                  uint32_t win0, uint32_t windows, int row_bytes) {
  constexpr int kWindowCodes = F::kWindowCodes;
  constexpr int kUnits = kWindowCodes / 8;
  const int units = static_cast<int>(windows) * kUnits;
  for (int i = threadIdx.x; i < kRows * units; i += kWarps * kWarpSize) {
    const int row = i / units, c8 = i % units;
    const int win = c8 / kUnits, u = c8 % kUnits;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < p.m)
      v = *reinterpret_cast<const uint4*>(p.a + static_cast<int64_t>(row) * p.k +
                                          static_cast<int64_t>(win0) * kWindowCodes + 8 * c8);
    uint8_t* window = smem + row * row_bytes + win * kWindowCodes * 2;
    if constexpr (F::kCodeBits == 4) {
      uint32_t* dst = reinterpret_cast<uint32_t*>(window + (u % 4) * 64 + (u / 4) * 4);
      dst[0] = __byte_perm(v.x, v.z, 0x5410u);   // (0, 4)
      dst[4] = __byte_perm(v.x, v.z, 0x7632u);   // (1, 5)
      dst[8] = __byte_perm(v.y, v.w, 0x5410u);   // (2, 6)
      dst[12] = __byte_perm(v.y, v.w, 0x7632u);  // (3, 7)
    } else {
      uint32_t* dst = reinterpret_cast<uint32_t*>(window + (u % 2) * 64 + (u / 2) * 4);
      dst[0] = v.x;   // (0, 1) of word 2h
      dst[4] = v.y;   // (2, 3)
      dst[8] = v.z;   // (0, 1) of word 2h + 1
      dst[12] = v.w;  // (2, 3)
    }
  }
}

// The K split's sum: each block's [kRows][kBlockCols] FP32 tile goes to its shared memory
// (over the staged activations, no longer read); rank r of the cluster's S blocks then adds
// columns [r, r + 1) * kBlockCols / S of every rank's tile in rank order, adds the bias and
// stores them. The second barrier keeps every block's tile alive until all have read it.
template <typename Params>
__device__ __forceinline__ void cluster_sum_store(const Params& p, uint8_t* smem,
                                                  const float (&acc)[kSubtiles][4], int64_t n_block,
                                                  int c_warp, int g, int t) {
  float* sums = reinterpret_cast<float*>(smem);
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kSubtiles; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      sums[(g + 8 * (e / 2)) * kBlockCols + c_warp + 8 * s + 2 * t + e % 2] = acc[s][e];
  cluster_sync();
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);
  const int per = kBlockCols / ranks, vecs = per / 4;
  const uint32_t base = smem_addr(sums);
  for (int i = threadIdx.x; i < p.m * vecs; i += kWarps * kWarpSize) {
    const int row = i / vecs, c = rank * per + 4 * (i % vecs);
    const uint32_t offset = static_cast<uint32_t>(row * kBlockCols + c) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int q = 0; q < ranks; ++q) {
      const float4 part = load_cluster_f32x4(map_cluster_addr(base + offset, static_cast<uint32_t>(q)));
      v.x += part.x;
      v.y += part.y;
      v.z += part.z;
      v.w += part.w;
    }
    const float out[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (n_block + c + e < p.n) store_output(p, row, n_block + c + e, out[e]);
  }
  cluster_sync();
}

// ================================================================= kernel
// F: the weight format (above). kLines: the weights by line loads (below; rows of whole
// 128-byte lines). Grid: (ceil(N / kBlockCols), 1, S), S blocks of one cluster along z
// splitting the rows' windows into slices of ceil(windows / S) (the last ones shorter, or
// empty). Dynamic shared memory: gemv_staged_smem_bytes (core/gemv_split.h).
template <typename T, typename F, bool kLines>
__global__ void __launch_bounds__(kWarps * kWarpSize, kBlocksPerSm) StagedRowsKernel(const typename F::Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kActBytes = F::kWindowCodes * 2;  // a window's activations of one row
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  uint32_t slice = (p.windows + gridDim.z - 1) / gridDim.z;
  if (kLines) slice = (slice + 1) & ~1u;  // whole pairs of windows (p.windows is even)
  const uint32_t win0 = min(blockIdx.z * slice, p.windows);
  const uint32_t windows = min(slice, p.windows - win0);
  const int row_bytes = static_cast<int>(slice) * kActBytes + kPadBytes;
  const int64_t n_block = static_cast<int64_t>(blockIdx.x) * kBlockCols;
  const int c_warp = warp * 8 * kSubtiles;

  // Row pointers (rows past N clamped to N - 1): codes of row g of each subtile at lane t's
  // 16 bytes of window win0; its zero points; the scales of columns 2t, 2t + 1.
  const uint8_t* w_row[kSubtiles];
  typename F::RowZp zp_row[kSubtiles];
  const typename F::Scale* s_row[kSubtiles][2];
#pragma unroll
  for (int s = 0; s < kSubtiles; ++s) {
    const int64_t n = min(n_block + c_warp + 8 * s + g, p.n - 1);
    w_row[s] = p.b + n * p.row_bytes + static_cast<int64_t>(win0) * kWindowBytes + kChunkBytes * t;
    zp_row[s] = typename F::RowZp(p, n);
#pragma unroll
    for (int e = 0; e < 2; ++e)
      s_row[s][e] = p.scales + min(n_block + c_warp + 8 * s + 2 * t + e, p.n - 1) * p.k_blocks;
  }
  const auto load_consts = [&](uint32_t i, WindowLoads<F>& l) {
    const uint32_t blk = F::block(p, win0 + i);
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      l.s[s][0] = s_row[s][0][blk];
      l.s[s][1] = s_row[s][1][blk];
      if constexpr (F::kZeroPoints) l.zp[s] = zp_row[s].load(blk);
    }
  };
  const auto load = [&](uint32_t i, WindowLoads<F>& l) {
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) l.w[s] = load_stream_u4(w_row[s] + static_cast<size_t>(i) * kWindowBytes);
    load_consts(i, l);
  };
  // kLines: the warp's 32 rows as two 16-row line-load tiles (gemv/line_loads.cuh), each
  // pair of windows read as whole 128-byte lines into the warp's 4 KB after the
  // activations (and the cluster's sums), then read back in fragment order: tile j's rows
  // g and g + 8 are subtiles 2j and 2j + 1.
  const int act_region =
      max(kRows * row_bytes, gridDim.z > 1 ? kRows * kBlockCols * static_cast<int>(sizeof(float)) : 0);
  const LineTiles<2> lines(reinterpret_cast<uint4*>(smem + act_region) + warp * 2 * (kLineBufferBytes / 16),
                           p.b, n_block + c_warp, p.n, p.row_bytes, lane);
  uint4 raw[2][4];
  const auto load_pair = [&](uint32_t i) {
#pragma unroll
    for (int tile = 0; tile < 2; ++tile) lines[tile].load(raw[tile], static_cast<size_t>(win0 + i) * kWindowBytes);
  };

  WindowLoads<F> buf[2];
  if (windows > 0) {  // in flight while the activations are staged
    if constexpr (kLines) {
      load_pair(0);
    } else {
      load(0, buf[0]);
    }
  }
  stage_activations<F>(p, smem, win0, windows, row_bytes);
  __syncthreads();

  // Lane's ldmatrix row address: matrix j = lane / 8 reads rows 8 (j % 2) + lane % 8 of
  // the fragment's group j / 2.
  const int j = lane / 8;
  const uint32_t a_lane = smem_addr(smem) + ((j % 2) * 8 + lane % 8) * row_bytes + (j / 2) * 16;

  float acc[kSubtiles][4] = {};
  const auto multiply = [&](uint32_t i, const WindowLoads<F>& l) {
    const uint32_t blk = F::block(p, win0 + i);
    typename F::Consts c[kSubtiles];
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) c[s] = F::consts(F::kZeroPoints ? l.zp[s] : 0u, blk);
    float part[kSubtiles][4] = {};
    const uint32_t a_window = a_lane + i * kActBytes;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const auto word = [&](int s) {
        return w == 0 ? l.w[s].x : w == 1 ? l.w[s].y : w == 2 ? l.w[s].z : l.w[s].w;
      };
      if constexpr (F::kCodeBits == 4) {
        uint32_t ax[4], ay[4];
        ldmatrix_x4(a_window + w * 64, ax);
        ldmatrix_x4(a_window + w * 64 + 32, ay);
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          uint32_t pr[4];
          F::decode(word(s), c[s], pr);
          mma_m16n8k16<T>(part[s], ax, {pr[0], pr[1]}, part[s]);
          mma_m16n8k16<T>(part[s], ay, {pr[2], pr[3]}, part[s]);
        }
      } else {
        uint32_t a[4];
        ldmatrix_x4(a_window + w * 32, a);
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          uint32_t pr[2];
          F::decode(word(s), c[s], pr);
          mma_m16n8k16<T>(part[s], a, pr, part[s]);
        }
      }
    }
    // Result fragment: rows g, g + 8 (activations), columns 2t, 2t + 1 of the subtile.
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      const float s0 = to_float(l.s[s][0]), s1 = to_float(l.s[s][1]);
      acc[s][0] = fmaf(part[s][0], s0, acc[s][0]);
      acc[s][1] = fmaf(part[s][1], s1, acc[s][1]);
      acc[s][2] = fmaf(part[s][2], s0, acc[s][2]);
      acc[s][3] = fmaf(part[s][3], s1, acc[s][3]);
    }
  };
  if constexpr (kLines) {
    // The pair i, i + 1 staged and the next pair's loads in flight while it is multiplied.
#pragma unroll 1
    for (uint32_t i = 0; i < windows; i += 2) {
      lines[0].stage(raw[0]);
      lines[1].stage(raw[1]);
      if (i + 2 < windows) load_pair(i + 2);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        load_consts(i + h, buf[h]);  // a row's scales share few lines: mostly L1 hits
        buf[h].w[0] = lines[0].lo(h);
        buf[h].w[1] = lines[0].hi(h);
        buf[h].w[2] = lines[1].lo(h);
        buf[h].w[3] = lines[1].hi(h);
        multiply(i + h, buf[h]);
      }
      lines.release();
    }
  } else {
    // Two buffers: window i + 1's loads in flight while window i is multiplied.
#pragma unroll 1
    for (uint32_t i = 0; i < windows; i += 2) {
      if (i + 1 < windows) load(i + 1, buf[1]);
      multiply(i, buf[0]);
      if (i + 1 >= windows) break;
      if (i + 2 < windows) load(i + 2, buf[0]);
      multiply(i + 1, buf[1]);
    }
  }

  if (gridDim.z > 1) {
    cluster_sum_store(p, smem, acc, n_block, c_warp, g, t);
    return;
  }
#pragma unroll
  for (int s = 0; s < kSubtiles; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2);
      const int64_t col = n_block + c_warp + 8 * s + 2 * t + e % 2;
      if (row < p.m && col < p.n) store_output(p, row, col, acc[s][e]);
    }
#else
  __trap();  // SM90+ only (thread-block clusters); the planners never ask for it below
#endif
}

// ================================================================= launchers
// The checks both operators' launchers share, on the kernel's parameters (row_bytes and
// windows set): an empty string where the tile takes them.
template <typename Params>
std::string tile_misfit(const Params& p, int window_codes, int64_t block_size, int bits, int k_split, bool lines) {
  if (block_size < window_codes || block_size % window_codes != 0 || p.row_bytes % kWindowBytes != 0)
    return "takes rows of whole windows in blocks of whole windows, not K = " + std::to_string(p.k) +
           " block_size " + std::to_string(block_size);
  if (p.m < 1 || p.m > kRows) return "M = " + std::to_string(p.m) + " (1..16)";
  if (k_split < 1 || k_split > kGemvStagedMaxSplit || (k_split & (k_split - 1)) != 0 ||
      static_cast<uint32_t>(k_split) > p.windows)
    return "k_split " + std::to_string(k_split) + " for " + std::to_string(p.windows) + " windows";
  if (lines && p.windows % 2 != 0)
    return "line loads take rows of whole 128-byte lines, not K = " + std::to_string(p.k);
  if (gemv_staged_smem_bytes(bits, p.row_bytes, k_split, lines) > kGemvStagedMaxSmemBytes)
    return "K = " + std::to_string(p.k) + " per block too long";
  if ((p.n + kBlockCols - 1) / kBlockCols > 0x7fffffff) return "N = " + std::to_string(p.n);
  return "";
}

// StagedRowsKernel<T, F, lines> on p: the grid of k_split-block clusters, its shared memory.
template <typename T, typename F>
Status launch_tile(const typename F::Params& p, int k_split, bool lines, cudaStream_t stream) {
  const int smem = static_cast<int>(gemv_staged_smem_bytes(F::kCodeBits, p.row_bytes, k_split, lines));
  const dim3 grid(static_cast<unsigned>((p.n + kBlockCols - 1) / kBlockCols), 1, static_cast<unsigned>(k_split));
  const auto launch = [&](auto kernel) {
    BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem));
    return launch_kernel_ex(kernel, grid, dim3(kWarps * kWarpSize), smem, stream, false,
                            static_cast<unsigned>(k_split), "StagedRowsKernel", p);
  };
  return lines ? launch(StagedRowsKernel<T, F, true>) : launch(StagedRowsKernel<T, F, false>);
}

template <typename T>
Status launch_nbits_staged(const NBitsGemvArgs& args, int k_split, bool lines, cudaStream_t stream) {
  const auto fail = [](const std::string& what) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv_staged: " + what);
  };
  if (args.bits != 4 && args.bits != 8) return fail(std::to_string(args.bits) + "-bit codes");
  if (args.zp_typed != nullptr) return fail("typed zero points");
  const GemvParams<T> p = make_nbits_params<T>(args);
  const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
  const std::string misfit = tile_misfit(p, window_codes, args.block_size, args.bits, k_split, lines);
  if (!misfit.empty()) return fail(misfit);
  const bool zp = args.zp_packed != nullptr;
  if (args.bits == 4)
    return zp ? launch_tile<T, NBitsFormat<T, 4, true>>(p, k_split, lines, stream)
              : launch_tile<T, NBitsFormat<T, 4, false>>(p, k_split, lines, stream);
  return zp ? launch_tile<T, NBitsFormat<T, 8, true>>(p, k_split, lines, stream)
            : launch_tile<T, NBitsFormat<T, 8, false>>(p, k_split, lines, stream);
}

template <typename T>
Status launch_fp8_staged(const Fp8KernelArgs& args, int k_split, bool lines, cudaStream_t stream) {
  const auto fail = [](const std::string& what) {
    return Status(StatusCode::kInternal, "launch_fp8_gemv_staged: " + what);
  };
  if (args.a_scale != nullptr) return fail("static W8A8 (the row group fuses its QDQ)");
  BQMM_RETURN_IF_ERROR(check_fp8_k_range(args, "launch_fp8_gemv_staged"));
  GemvParams<T, float> p = make_fp8_params<T>(args, kWindowBytes);
  p.row_bytes = args.k;
  p.chunks = static_cast<uint32_t>(args.k / kChunkBytes);
  p.windows = static_cast<uint32_t>(args.k / kWindowBytes);
  const std::string misfit = tile_misfit(p, kWindowBytes, args.block_size, 8, k_split, lines);
  if (!misfit.empty()) return fail(misfit);
  return launch_tile<T, Fp8Format<T>>(p, k_split, lines, stream);
}

}  // namespace

Status launch_nbits_gemv_staged(const NBitsGemvArgs& args, int k_split, bool lines, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_nbits_gemv_staged", [&](auto tag) -> Status {
    return launch_nbits_staged<decltype(tag)>(args, k_split, lines, stream);
  });
}

Status launch_fp8_gemv_staged(const Fp8KernelArgs& args, int k_split, bool lines, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_fp8_gemv_staged", [&](auto tag) -> Status {
    return launch_fp8_staged<decltype(tag)>(args, k_split, lines, stream);
  });
}

}  // namespace bqmm::cuda
