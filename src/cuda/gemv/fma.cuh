// The CUDA-core decode GEMV shared by both operators' 8-bit weights (FP8 e4m3 codes in
// fma_gemv.cu's Fp8FmaCodec, NBits 8-bit integer codes in its NBits8FmaCodec), for
// 0 < M <= 8:
//
//   Y[m, n] = sum_k A[m, k] * w(n, k) + bias[n],   w(n, k) = decode(code) * block scale
//
// Why a CUDA-core kernel next to the tensor-core tiles: its loads have the one shape that
// streams HBM at full speed from registers. A warp owns whole weight rows (output columns)
// and lane l reads 16-byte chunks l, l + 32, ... of each, so every warp load instruction
// covers 512 contiguous bytes of one row (4.4-4.6 TB/s in tools/microbench/stream_shapes.cu,
// against 2.5-3.3 for the 8 rows x 64 bytes of an mma A fragment). Its cost is arithmetic:
// one FMA per weight and activation row, so it wins at M = 1 (and M = 2 for FP8) and the
// tensor-core tiles take over above.
//
// A warp owns kCols consecutive output columns and kRows activation rows (the whole
// M <= 8 in one row group, so each weight row is streamed exactly once). Per chunk a lane
// decodes its 16 weights of each column to float32 once, multiplies them with the 16
// activations of every row (exact products: an 8-bit code's value times T fits in
// float32) into a float32 partial, and folds the chunk's block scale into the running sum
// with one FMA per row and column. A warp-wide scatter reduction leaves one (row, column)
// total per lane group; that lane adds the bias in float32 and rounds to T once.
//
// The weight format is a codec (a struct of static device functions), so that both
// operators share the loop, the loads, the reduction and the epilogue (store_output of
// gemv/common.cuh, which every GEMV kernel of both operators ends with):
//
//   using T, Params       activation type; the kernel's parameters, with at least
//                         a [M, K], b [N, K] (one byte per code), bias [N] or nullptr,
//                         y [M, N], m, n, k (K % 16 == 0, 16-byte aligned a and b)
//   Consts                a chunk's block constants as loaded (scale, zero point)
//   block_of(p, chunk)    the block of the 16-code chunk `chunk` (a block never ends
//                         inside a chunk: block_size % 16 == 0)
//   load_consts(p, col, blk, ok)   Consts of column col, block blk; zeros where !ok
//   decode(w, consts, wf)          16 codes -> their unscaled float32 values, exactly
//   scale(consts)                  the block scale as float32
//   Act(p), act(v)        an activation transform applied to 16 activations (8 packed
//                         pairs) after loading: W8A8's QDQ for FP8, nothing for NBits
#pragma once

#include <string>
#include <type_traits>

#include "bqmm/status.h"
#include "cuda/common.cuh"
#include "cuda/gemv/common.cuh"
#include "cuda/cuda_check.h"

namespace bqmm::cuda {

constexpr int kFmaChunk = 16;    // codes per lane load: 16 one-byte codes = one 16-byte load
constexpr int kFmaWarps = 8;     // warps per block
constexpr int kFmaThreads = kFmaWarps * kWarpSize;

// 16 consecutive activations (one K chunk, 32 bytes) as 8 packed pairs; zeros when !pred,
// so masked rows, masked tail chunks and missing columns add nothing and read nothing.
// Activations are re-read by every warp of the grid: plain loads that stay in L1 and L2.
template <typename T>
__device__ __forceinline__ void load_act16(const T* p, bool pred, uint32_t (&v)[8]) {
  const uint4 lo = load_cached_u4_if(p, pred);
  const uint4 hi = load_cached_u4_if(reinterpret_cast<const uint4*>(p) + 1, pred);
  v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
  v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}


// Template parameters:
//   Codec    the weight format (above).
//   kRows    activation rows per warp (1, 2, 4, 8; >= M, or the grid's y covers M).
//            Rows >= M are neither read nor written (their activations load as zeros).
//   kCols    output columns per warp. Each activation chunk is loaded once per warp and
//            reused across kCols columns: with kRows = 8 the 16 activation bytes per
//            weight byte would exceed L1's 128 B/clock at HBM rate for kCols = 1.
//   kUnroll  K chunks per lane per iteration: kUnroll * kCols 16-byte weight loads are in
//            flight per lane before the first is used (memory-level parallelism).
// kMinBlocks: blocks per SM the registers must allow (GemvFmaConfig says why per row
// group); at 1, ptxas uses the registers it needs (without an explicit minimum it aimed
// lower and spilled: FP8 R4 W8A8, 8 bytes at 80 registers).
// kDependent: launched as a programmatic dependent of the kernel before it (FP8 at one
// row; GemvConfig::dependent_launch): the next kernel may launch once every block has
// started, and the lane's first iteration of weights is pulled into L2 before
// griddepcontrol.wait, after which it reads everything (the weights too: a kernel before
// could write them; prefetch_l2 says why a prefetch is safe). A separate instance, so
// that the plain kernel's code does not change.
template <class Codec, int kRows, int kCols, int kUnroll, int kMinBlocks, bool kDependent = false>
__global__ void __launch_bounds__(kFmaThreads, kMinBlocks)
    GemvFmaKernel(const typename Codec::Params p) {
  using T = typename Codec::T;
  static_assert(kRows * kCols <= kWarpSize, "one reduced value per lane group");
  if constexpr (kDependent) allow_dependent_launch();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n0 =
      (static_cast<int64_t>(blockIdx.x) * kFmaWarps + threadIdx.x / kWarpSize) * kCols;
  if (n0 >= p.n) return;  // whole warp: no block-level synchronization in this kernel
  if constexpr (kDependent) {
    const uint32_t k_chunks = static_cast<uint32_t>(p.k / kFmaChunk);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const uint32_t chunk = u * kWarpSize + lane;
        if (n0 + c < p.n && chunk < k_chunks) prefetch_l2(p.b + (n0 + c) * p.k + chunk * kFmaChunk);
      }
    wait_for_prior_grid();
  }
  const int row0 = blockIdx.y * kRows;
  const typename Codec::Act act_transform(p);  // device-side constants, loaded once

  // Columns n0 + c and rows row0 + r; masked ones (past N, past M) are never loaded.
  bool col_ok[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) col_ok[c] = n0 + c < p.n;
  bool row_ok[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row_ok[r] = row0 + r < p.m;
  // Lane pointers at this lane's first chunk, advanced once per iteration so that every
  // load of an iteration is a base register plus an immediate offset. Column c and row r
  // sit c * K (r * K) further on.
  const uint8_t* w_ptr = p.b + n0 * p.k + lane * kFmaChunk;
  const T* a_ptr = p.a + static_cast<int64_t>(row0) * p.k + lane * kFmaChunk;

  float acc[kRows][kCols] = {};
  const uint32_t chunks = static_cast<uint32_t>(p.k / kFmaChunk);
  constexpr int kStride = kUnroll * kWarpSize * kFmaChunk;  // K elements per iteration

  // One iteration: kUnroll chunks per lane starting at chunk `base` (warp-uniform).
  // kTail: the last, partial iteration; slots past K are skipped (warp-uniform) and lanes
  // past K load nothing. The main iterations carry no guards, so every weight load of the
  // iteration is issued before the first FMA. Activations (L1 hits) are loaded row by row
  // where they are used, which keeps kRows * 8 registers per slot free.
  auto step = [&](uint32_t base, auto tail) {
    constexpr bool kTail = decltype(tail)::value;
    uint4 w[kUnroll][kCols];
    typename Codec::Consts s[kUnroll][kCols];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t chunk = base + u * kWarpSize + lane;
      const bool in = !kTail || chunk < chunks;
      const uint32_t blk = Codec::block_of(p, chunk);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const bool ok = in && col_ok[c];
        w[u][c] = load_stream_u4_if(w_ptr + c * p.k + u * kWarpSize * kFmaChunk, ok);
        s[u][c] = Codec::load_consts(p, n0 + c, blk, ok);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (kTail && base + u * kWarpSize >= chunks) break;
      const bool in = !kTail || base + u * kWarpSize + lane < chunks;
      // 16 weights of each column, decoded once and reused by every row.
      float wf[kCols][kFmaChunk];
#pragma unroll
      for (int c = 0; c < kCols; ++c) Codec::decode(w[u][c], s[u][c], wf[c]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint32_t act[8];
        load_act16(a_ptr + r * p.k + u * kWarpSize * kFmaChunk, in && row_ok[r], act);
        act_transform(act);
        float af[kFmaChunk];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 f = packed2_to_float2<T>(act[i]);
          af[2 * i] = f.x;
          af[2 * i + 1] = f.y;
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          float partial = 0.0f;
#pragma unroll
          for (int e = 0; e < kFmaChunk; ++e) partial = fmaf(af[e], wf[c][e], partial);
          acc[r][c] = fmaf(partial, Codec::scale(s[u][c]), acc[r][c]);
        }
      }
    }
    w_ptr += kStride;
    a_ptr += kStride;
  };

  uint32_t base = 0;
  for (; base + kUnroll * kWarpSize <= chunks; base += kUnroll * kWarpSize)
    step(base, std::false_type{});
  if (base < chunks) step(base, std::true_type{});

  // Value i = c * kRows + r ends up, summed over the warp, in lanes i * 32 / (kRows * kCols)
  // and up; the first lane of each group writes it.
  constexpr int kValues = kRows * kCols;
  float v[kValues];
#pragma unroll
  for (int c = 0; c < kCols; ++c)
#pragma unroll
    for (int r = 0; r < kRows; ++r) v[c * kRows + r] = acc[r][c];
  const float total = warp_reduce_sum_scatter(v, lane);
  constexpr int kLanesPerValue = kWarpSize / kValues;
  if (lane % kLanesPerValue == 0) {
    const int i = lane / kLanesPerValue;
    const int64_t col = n0 + i / kRows;
    const int row = row0 + i % kRows;
    if (col < p.n && row < p.m) store_output(p, row, col, total);
  }
}

// Configuration per row group, from H200 measurements (FP8, float16, M = kRows, N x K in
// {16384 x 4096, 4096 x 16384, 28672 x 8192}). Several columns per warp reuse each
// activation chunk (the L1 bytes per weight byte are 2 * kRows / kCols) and give every lane
// kCols * kUnroll weight loads in flight. kRows = 8 takes ~170 registers for 4 columns
// (one block per SM); capping it at 128 spilled and ran no faster.
// kMinBlocks = 4 at one row: 64 registers, so that 4 blocks (32 warps) fit an SM and
// N = 8192 (512 blocks) runs in one wave of 528. The NBits 8-bit codec took 65-72
// registers unbounded: 3 blocks per SM, 396 per wave, and 8192 x 8192 at M = 1 ran
// 24.0 us against FP8's 20.4 (H200). kMinBlocks = 3 at two rows: 80 registers
// instead of 97-124 (2 blocks per SM), 12 bytes of spill in the NBits codec with zero
// points; M = 2 ran up to 11 % faster in both codecs (28672 x 8192: 77.7 -> 69.0 us NBits,
// 74.0 -> 67.9 FP8, float16).
template <int kRows> struct GemvFmaConfig;
template <> struct GemvFmaConfig<1> {
  static constexpr int kCols = 2, kUnroll = 2, kMinBlocks = 4;
};
template <> struct GemvFmaConfig<2> {
  static constexpr int kCols = 2, kUnroll = 2, kMinBlocks = 3;
};
template <> struct GemvFmaConfig<4> {
  static constexpr int kCols = 2, kUnroll = 2, kMinBlocks = 1;
};
template <> struct GemvFmaConfig<8> {
  static constexpr int kCols = 4, kUnroll = 1, kMinBlocks = 1;
};

// Launches GemvFmaKernel<Codec, kRows> over M rows and N columns (kDependent: its
// dependent-launch instance); `kernel_name` names it in a launch error.
template <class Codec, int kRows, bool kDependent = false>
Status launch_gemv_fma(const typename Codec::Params& p, int64_t m, int64_t n,
                       cudaStream_t stream, const char* kernel_name) {
  using Config = GemvFmaConfig<kRows>;
  const int64_t cols_per_block = int64_t{kFmaWarps} * Config::kCols;
  const int64_t blocks_x = (n + cols_per_block - 1) / cols_per_block;
  const int64_t blocks_y = (m + kRows - 1) / kRows;
  if (blocks_x > 0x7fffffff || blocks_y > 65535)
    return Status(StatusCode::kInternal, std::string(kernel_name) + ": grid too large for M = " +
                                             std::to_string(m) + ", N = " + std::to_string(n));
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  if constexpr (kDependent) {
    return launch_kernel(GemvFmaKernel<Codec, kRows, Config::kCols, Config::kUnroll, Config::kMinBlocks, true>,
                         grid, dim3(kFmaThreads), 0, stream, true, kernel_name, p);
  } else {
    GemvFmaKernel<Codec, kRows, Config::kCols, Config::kUnroll, Config::kMinBlocks>
        <<<grid, kFmaThreads, 0, stream>>>(p);
    return check_launch(kernel_name);
  }
}

}  // namespace bqmm::cuda
