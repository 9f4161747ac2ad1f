// NBitsMatMul's staged row tile, NBitsStagedKernel (M = 9..16, SM90): the activation rows
// staged once in shared memory as the mma's A operand, the weight decoded into its B
// operand straight from the stored layout (no prepack). gemv/nbits_codes.cuh has the code
// decoding; core/gemv_split.h the geometry the planner shares (kGemvStaged*).
//
//   Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//             + bias[n]
//
// Why. The row group of 16 (the window kernel's kRowGroups) keeps the decode kernels'
// orientation, the weight as the mma's A operand and the activations as B: each lane loads
// its activations from L1 and pairs them with PRMTs for every 16-column tile, and at
// M = 9..16 those loads, not the weight stream, pace it (Nsight Compute, 4-bit 8192 x 8192
// M = 16: 60 % of the stall samples on loads, 30 % on the pairing PRMTs). Here the 16
// activation rows are the mma's M extent: a block stages its K slice of them once, and one
// ldmatrix.x4 per 16 k is the A fragment of every 8-row weight subtile a warp owns.
//
// Work split. A block of kWarps = 8 warps owns kBlockCols = 256 weight rows (Y columns),
// 32 a warp in kSubtiles = 4 subtiles of 8 rows, over one K slice; gridDim.z blocks (the
// planner's k_split, at most 8) split K and form one thread-block cluster along z, which
// sums their partial tiles through distributed shared memory in rank order (deterministic)
// and stores Y. Lane (g, t) = (lane / 4, lane % 4) reads, for each subtile, row g's 16
// bytes t of every 64-byte window (the GEMVs' window): 4 words of codes, each decoded
// (exact q - zp in T) into the B fragment of one mma (8-bit: pairs (0, 1), (2, 3)) or two
// (4-bit: pairs (i, i + 4), i = 0..3, as the lop3 decode produces them). Blocks of a window
// or more (4-bit 128 codes, 8-bit 64): every mma's k lie in one block, so the block scale
// multiplies the FP32 mma result (the scales of the two columns 2t, 2t + 1 a lane's
// result fragment holds), as the decode GEMVs' scale-on-result tiles do.
//
// K order. K is a reduction axis, so any permutation applied to both operands keeps the
// sum: the staging puts each activation where the lop3 decode puts the weight it
// multiplies. Per activation row and window, shared memory holds 16-byte groups of 8 T:
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

// One word of codes -> its pairs as exact q - zp in T (the order of decode_word_pairs).
// float16 4-bit takes f16_nibble_pairs, whose high-nibble pairs come out exact too (the
// unscaled decode leaves them as 16 (q - zp) for a second accumulator, which this tile's
// result fragments, shared by both mma of a word, do not have).
template <typename T, int kBits>
__device__ __forceinline__ void decode_exact(uint32_t q, const BlockConsts& c,
                                             uint32_t (&out)[Codes<kBits>::kPerWord / 2]) {
  if constexpr (kBits == 4 && std::is_same_v<T, __half>) {
    f16_nibble_pairs(q, c, out);
  } else {
    decode_word_pairs_unscaled<T, kBits>(q, c, out);
  }
}

// One window's loads of a lane: its 16 bytes of each subtile's row g, the block scales of
// the columns 2t, 2t + 1 of each subtile (its result fragment's), and (kZeroPoints) row g's
// packed zero-point byte of the block.
template <typename T, bool kZeroPoints>
struct WindowLoads {
  uint4 w[kSubtiles];
  T s[kSubtiles][2];
  uint32_t zp[kZeroPoints ? kSubtiles : 1];
};

// Stages the block's K slice of the activations (windows [win0, win0 + windows) of every
// row), 8 T at a time: 4-bit unit u = 4t' + w' of a window (codes 8u .. 8u + 7 = word w' of
// lane t') goes to groups 4w' + j at slot t' as its pairs (j, j + 4); 8-bit unit u =
// 2t' + h (words 2h, 2h + 1 of lane t') to groups 2h and 2h + 1, T 2t' and 8 + 2t'.
template <typename T, int kBits>
__device__ __forceinline__ void stage_activations(const GemvParams<T>& p, uint8_t* smem,
                                                  uint32_t win0, uint32_t windows, int row_bytes) {
  constexpr int kWindowCodes = Codes<kBits>::kPerWindow;
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
    if constexpr (kBits == 4) {
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
template <typename T>
__device__ __forceinline__ void cluster_sum_store(const GemvParams<T>& p, uint8_t* smem,
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
// kZeroPoints: packed zero points (else the default 2^(bits - 1), folded into constants).
// kLines: the weights by line loads (below; rows of whole 128-byte lines).
// Grid: (ceil(N / kBlockCols), 1, S), S blocks of one cluster along z splitting the rows'
// windows into slices of ceil(windows / S) (the last ones shorter, or empty). Dynamic
// shared memory: gemv_staged_smem_bytes (core/gemv_split.h).
template <typename T, int kBits, bool kZeroPoints, bool kLines>
__global__ void __launch_bounds__(kWarps * kWarpSize, kBlocksPerSm) NBitsStagedKernel(const GemvParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using C = Codes<kBits>;
  constexpr int kActBytes = C::kPerWindow * 2;  // a window's activations of one row
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
  const uint8_t* zp_row[kSubtiles];
  const T* s_row[kSubtiles][2];
#pragma unroll
  for (int s = 0; s < kSubtiles; ++s) {
    const int64_t n = min(n_block + c_warp + 8 * s + g, p.n - 1);
    w_row[s] = p.b + n * p.row_bytes + static_cast<int64_t>(win0) * kWindowBytes + kChunkBytes * t;
    zp_row[s] = kZeroPoints ? p.zp + n * p.zp_row_bytes : nullptr;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      s_row[s][e] = p.scales + min(n_block + c_warp + 8 * s + 2 * t + e, p.n - 1) * p.k_blocks;
  }
  // Window i of the slice: its block (blocks of a window or more).
  const auto block_of = [&](uint32_t i) { return ((win0 + i) * C::kPerWindow) >> p.block_shift; };
  const auto load_consts = [&](uint32_t i, WindowLoads<T, kZeroPoints>& l) {
    const uint32_t blk = block_of(i);
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      l.s[s][0] = s_row[s][0][blk];
      l.s[s][1] = s_row[s][1][blk];
      if constexpr (kZeroPoints) l.zp[s] = __ldg(zp_row[s] + (kBits == 8 ? blk : blk >> 1));
    }
  };
  const auto load = [&](uint32_t i, WindowLoads<T, kZeroPoints>& l) {
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

  WindowLoads<T, kZeroPoints> buf[2];
  if (windows > 0) {  // in flight while the activations are staged
    if constexpr (kLines) {
      load_pair(0);
    } else {
      load(0, buf[0]);
    }
  }
  stage_activations<T, kBits>(p, smem, win0, windows, row_bytes);
  __syncthreads();

  // Lane's ldmatrix row address: matrix j = lane / 8 reads rows 8 (j % 2) + lane % 8 of
  // the fragment's group j / 2.
  const int j = lane / 8;
  const uint32_t a_lane = smem_addr(smem) + ((j % 2) * 8 + lane % 8) * row_bytes + (j / 2) * 16;

  float acc[kSubtiles][4] = {};
  const auto multiply = [&](uint32_t i, const WindowLoads<T, kZeroPoints>& l) {
    const uint32_t blk = block_of(i);
    BlockConsts c[kSubtiles];
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      uint32_t zp = C::kDefaultZeroPoint;
      if constexpr (kZeroPoints) zp = kBits == 8 ? l.zp[s] : (l.zp[s] >> ((blk & 1) * 4)) & C::kMask;
      c[s] = make_zero_consts<T, kBits>(zp);
    }
    float part[kSubtiles][4] = {};
    const uint32_t a_window = a_lane + i * kActBytes;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const auto word = [&](int s) {
        return w == 0 ? l.w[s].x : w == 1 ? l.w[s].y : w == 2 ? l.w[s].z : l.w[s].w;
      };
      if constexpr (kBits == 4) {
        uint32_t ax[4], ay[4];
        ldmatrix_x4(a_window + w * 64, ax);
        ldmatrix_x4(a_window + w * 64 + 32, ay);
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          uint32_t pr[4];
          decode_exact<T, kBits>(word(s), c[s], pr);
          mma_m16n8k16<T>(part[s], ax, {pr[0], pr[1]}, part[s]);
          mma_m16n8k16<T>(part[s], ay, {pr[2], pr[3]}, part[s]);
        }
      } else {
        uint32_t a[4];
        ldmatrix_x4(a_window + w * 32, a);
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          uint32_t pr[2];
          decode_exact<T, kBits>(word(s), c[s], pr);
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
  __trap();  // SM90+ only (thread-block clusters); the planner never asks for it below
#endif
}

// ================================================================= launcher
// The instantiated configurations (T, bits, packed zero points): every one a plan can
// reach. CMakeLists.txt builds this file for the SM90+ architectures only.
#define BQMM_STAGED_CONFIGS(X, T)                                                           \
  X(T, 4, false, false) X(T, 4, true, false) X(T, 8, false, false) X(T, 8, true, false)    \
  X(T, 4, false, true) X(T, 4, true, true) X(T, 8, false, true) X(T, 8, true, true)

template <typename T>
Status launch_staged(const NBitsGemvArgs& args, int k_split, bool lines, cudaStream_t stream) {
  const auto fail = [](const std::string& what) {
    return Status(StatusCode::kInternal, "launch_nbits_gemv (staged row tile): " + what);
  };
  const GemvParams<T> p = make_nbits_params<T>(args);
  const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
  if ((args.bits != 4 && args.bits != 8) || args.block_size < window_codes ||
      p.chunks % kWindowChunks != 0)
    return fail("takes rows of whole windows in blocks of a window or more, not " +
                std::to_string(args.bits) + "-bit K = " + std::to_string(args.k) +
                " block_size " + std::to_string(args.block_size));
  if (args.m < 1 || args.m > kRows) return fail("M = " + std::to_string(args.m) + " (1..16)");
  if (args.zp_typed != nullptr) return fail("typed zero points");
  if (k_split < 1 || k_split > kGemvStagedMaxSplit || (k_split & (k_split - 1)) != 0 ||
      static_cast<uint32_t>(k_split) > p.windows)
    return fail("k_split " + std::to_string(k_split) + " for " + std::to_string(p.windows) + " windows");
  if (lines && p.windows % 2 != 0)
    return fail("line loads take rows of whole 128-byte lines, not K = " + std::to_string(args.k));
  const int64_t smem = gemv_staged_smem_bytes(args.bits, p.row_bytes, k_split, lines);
  if (smem > kGemvStagedMaxSmemBytes) return fail("K = " + std::to_string(args.k) + " per block too long");
  const int64_t col_blocks = (args.n + kBlockCols - 1) / kBlockCols;
  if (col_blocks > 0x7fffffff) return fail("N = " + std::to_string(args.n));
  const dim3 grid(static_cast<unsigned>(col_blocks), 1, static_cast<unsigned>(k_split));
  const bool zero_points = args.zp_packed != nullptr;
#define BQMM_LAUNCH_IF(T_, B, ZP, LINES)                                                       \
  if (args.bits == B && zero_points == ZP && lines == LINES) {                                 \
    const auto kernel = NBitsStagedKernel<T_, B, ZP, LINES>;                                   \
    BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), static_cast<int>(smem))); \
    return launch_kernel_ex(kernel, grid, dim3(kWarps * kWarpSize), static_cast<int>(smem), stream, \
                            false, static_cast<unsigned>(k_split), "NBitsStagedKernel", p);    \
  }
  BQMM_STAGED_CONFIGS(BQMM_LAUNCH_IF, T)
#undef BQMM_LAUNCH_IF
  return fail("no kernel for " + std::to_string(args.bits) + "-bit codes");
}

}  // namespace

Status launch_nbits_gemv_staged(const NBitsGemvArgs& args, int k_split, bool lines, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_nbits_gemv (staged row tile)", [&](auto tag) -> Status {
    return launch_staged<decltype(tag)>(args, k_split, lines, stream);
  });
}

}  // namespace bqmm::cuda
