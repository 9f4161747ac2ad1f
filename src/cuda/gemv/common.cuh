// What the decode GEMVs of both operators share (Fp8WeightMatMul's FP8 kernels and
// NBitsMatMul's N-bit kernels, 0 < M <= 8, and with line loads row groups of 16 up to
// kGemvMaxGroupRows): the tile geometry, tied to the host planner's constants
// (core/gemv_split.h, bqmm/device.h); the one parameter type every GEMV kernel takes; the
// row groups; the W8A8 activation transform; and the epilogue, i.e. the reduction across a
// block's k_split warps and store_output (cuda/common.cuh: bias added in float32, one
// rounding to T).
//
// Tiles: a tensor-core warp owns 16 output columns (weight rows: the mma M extent) and all
// M <= 8 activation rows (the mma N extent). Lane (g, t) = (lane / 4, lane % 4) reads
// weight rows n0 + g ("lo") and n0 + g + 8 ("hi") in 16-byte chunks, the 4 lanes of a quad
// covering 4 adjacent chunks: a 64-byte window per row. The k_split warps of a block take
// different windows of the same 16 columns and reduce through shared memory.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "bqmm/device.h"
#include "core/gemv_split.h"
#include "cuda/common.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {

// ----------------------------------------------------------------- tile constants
constexpr int kTileCols = static_cast<int>(kGemvTileCols);  // output columns per warp tile
constexpr int kMmaRows = 8;        // activation rows per mma (the mma N extent): M <= 8
constexpr int kChunkBytes = 16;    // one 16-byte weight load per lane per row
constexpr int kWindowChunks = 4;   // a lane quad covers 4 adjacent chunks of a row
constexpr int kWindowBytes = kChunkBytes * kWindowChunks;
constexpr int kMaxKSplit = kGemvMaxKSplit;  // warps per block, at most
static_assert(kWindowBytes == kGemvWindowBytes, "the planner's K unit is the lane quad's window");
static_assert(kChunkBytes == kGemvChunkBytes, "the planner's row rule: rows of whole 16-byte chunks");
static_assert(kMmaRows == kGemvMaxRows, "the planner's GEMV range is the mma N extent");
static_assert(kTileCols == 2 * kMmaRows, "lane (g, t) owns columns g and g + 8 of the tile");
static_assert((kMaxKSplit & (kMaxKSplit - 1)) == 0, "k_split is a power of two");

// Register budgets behind the planner's residency model: an SM's 64 K registers hold
// kGemvTensorCoreWarpsPerSm warps at kGemvTwoTileRegisters each (the tensor-core kernels'
// launch bounds: two blocks of kMaxKSplit warps), kGemvWideWarpsPerSm at
// kGemvWideRegisters (blocks of at most kGemvWideMaxKSplit warps).
constexpr int kSmRegisters = 64 * 1024;
constexpr int kTensorCoreBlocksPerSm = static_cast<int>(kGemvTensorCoreWarpsPerSm) / kMaxKSplit;
static_assert(kTensorCoreBlocksPerSm * kMaxKSplit == kGemvTensorCoreWarpsPerSm,
              "the tensor-core tiles' residency is whole blocks of kMaxKSplit warps");
static_assert(kSmRegisters / (kGemvTensorCoreWarpsPerSm * kWarpSize) == kGemvTwoTileRegisters,
              "16 warps per SM is 128 registers per thread");
static_assert(kGemvWideRegisters <= kSmRegisters / (kGemvWideWarpsPerSm * kWarpSize) &&
                  kGemvWideRegisters % 8 == 0,
              "12 warps per SM hold 168 registers per thread (allocated in units of 8)");
constexpr int kWideMaxKSplit = kGemvWideMaxKSplit;
constexpr int kWideBlocksPerSm = static_cast<int>(kGemvWideWarpsPerSm) / kWideMaxKSplit;
static_assert(kWideBlocksPerSm * kWideMaxKSplit == kGemvWideWarpsPerSm,
              "the planner's 12 warps per SM are whole blocks of kWideMaxKSplit warps");

// ----------------------------------------------------------------- parameters
// Everything a GEMV kernel reads, for both operators. T: the activation type (A, bias,
// Y); S: the scales' type (T for N-bit weights, float for FP8). Sizes that multiply N are
// 64-bit; per-row counters are 32-bit (the launchers check K < 2^31). The N-bit fields come
// first and FP8's last, so that each kernel's parameter layout is its operator's own
// struct's, extended.
template <typename T, typename S = T>
struct GemvParams {
  const T* a;               // [M, K]
  const uint8_t* b;         // [N, row_bytes]: packed codes or e4m3
  const S* scales;          // [N, k_blocks]
  const uint8_t* zp;        // N-bit: [N, zp_row_bytes] packed, or typed T (as bytes), or nullptr (default)
  const T* bias;            // [N] or nullptr
  T* y;                     // [M, N]
  int m;
  int64_t n;
  int64_t k;
  // N-bit
  int64_t row_bytes;
  int64_t k_blocks;            // both
  int64_t zp_row_bytes;
  uint32_t chunks;             // 16-byte chunks per row
  uint32_t windows;            // ceil(chunks / 4)
  uint32_t block_shift;        // log2(block_size)
  uint32_t windows_per_block;  // block_size / codes per window, 0 if below one
  // FP8
  const float* a_scale;        // W8A8 device scalar (read only by the kW8A8 instantiations)
  // The scale column of a K slice: slice index / (block_size / slice length). Exact
  // because block_size is a multiple of the slice length, so a slice never straddles two
  // blocks.
  FastDivU32 slices_per_block;
};

// The fields both operators fill alike; the rest zero, for the caller to set.
template <typename T, typename S>
GemvParams<T, S> make_gemv_params(const void* a, const uint8_t* b, const S* scales,
                                  const void* bias, void* y, int64_t m, int64_t n, int64_t k,
                                  int64_t k_blocks) {
  GemvParams<T, S> p{};
  p.a = static_cast<const T*>(a);
  p.b = b;
  p.scales = scales;
  p.bias = static_cast<const T*>(bias);
  p.y = static_cast<T*>(y);
  p.m = static_cast<int>(m);
  p.n = n;
  p.k = k;
  p.k_blocks = k_blocks;
  return p;
}

// The kernels' parameters of an FP8 GEMV; `slice`: the K elements a scale lookup covers
// (16 for the CUDA-core kernel's chunks, 64 for the tensor-core kernels' windows).
template <typename T>
GemvParams<T, float> make_fp8_params(const Fp8KernelArgs& args, int64_t slice) {
  GemvParams<T, float> p =
      make_gemv_params<T>(args.a, args.b, args.b_scale, args.bias, args.y, args.m, args.n,
                          args.k, (args.k + args.block_size - 1) / args.block_size);
  p.a_scale = args.a_scale;
  p.slices_per_block = FastDivU32(static_cast<uint32_t>(args.block_size / slice));
  return p;
}

// The FP8 kernels' 32-bit chunk / window counters and the fast division need K / 16 < 2^31
// and block_size / 16 < 2^31; the planner does not bound K, so this is checked here.
inline Status check_fp8_k_range(const Fp8KernelArgs& args, const char* kernel) {
  constexpr int64_t kMax = int64_t{1} << 31;
  if (args.k / 16 >= kMax || args.block_size / 16 >= kMax)
    return Status(StatusCode::kNotSupported,
                  std::string(kernel) + ": K = " + std::to_string(args.k) + ", block_size = " +
                      std::to_string(args.block_size) + " exceed the GEMV's 2^35 limit");
  return Status::Ok();
}

// ----------------------------------------------------------------- row groups
// M > kMmaRows (line-load kernels only, their kRowGroups instantiations): the rows are
// split into G = ceil(M / 16) groups of up to kGroupRows = 16, group r rows 16r ..
// 16r + min(16, M - 16r) - 1. A group's warp tile is the decode tile with kGroupHalves = 2
// halves of 8 rows (the mma N extent): each weight fragment is decoded once and multiplied
// with both halves (rows g and g + 8 of the group), so up to 16 rows cost one decode of
// the weights, which paces these kernels (not the HBM stream). The grid is G x (column
// blocks) blocks with the group varying fastest (block b: group b % G, column block b /
// G): the G blocks that stream the same weight columns are adjacent, so they are
// scheduled together and all but the first find those weight bytes in L2; in group-major
// order each group would stream the whole weight (larger than L2) from HBM again.
constexpr int kGroupHalves = 2;
constexpr int kGroupRows = kGroupHalves * kMmaRows;
static_assert(kGroupRows == kGemvGroupRows, "the planner's row groups are two mma N extents");
static_assert(kGemvMaxGroupRows % kGroupRows == 0, "the row-group range is whole groups");

// This block's group of a row-group launch: the parameters of its rows, and its column
// block (the decode kernels' blockIdx.x). G is recomputed from the launch's M (the
// launcher sized the grid with gemv_row_groups(M), core/gemv_split.h); the offsets
// multiply N and K in 64 bits.
template <typename T, typename S>
struct RowGroup {
  GemvParams<T, S> p;
  uint32_t column_block;
  __device__ explicit RowGroup(const GemvParams<T, S>& all) : p(all) {
    const uint32_t groups = (static_cast<uint32_t>(all.m) + kGroupRows - 1) / kGroupRows;
    const uint32_t group = blockIdx.x % groups;
    column_block = blockIdx.x / groups;
    const int row0 = kGroupRows * static_cast<int>(group);
    p.a += static_cast<int64_t>(row0) * all.k;
    p.y += static_cast<int64_t>(row0) * all.n;
    p.m = min(kGroupRows, all.m - row0);
  }
};

// fp8_tma.cu: launch_fp8_gemv_mma's TMA tiles (SM90+), after its checks.
Status launch_fp8_gemv_tma(const Fp8KernelArgs& args, int k_split, cudaStream_t stream);

// ----------------------------------------------------------------- W8A8 activations
// W8A8 (FP8): the static activation quantize-dequantize of docs/CONTRACT.md section 1, on packed
// pairs of activations (qdq_e4m3x2: the conversions of the standalone QDQ kernel's
// qdq_e4m3, so the fused result is bit-identical to running that kernel first). Every
// kernel builds one at its start (a_scale is read on the device: the op stays
// graph-capturable) and applies it where the activations are used, after every load of
// the iteration has been issued. Without W8A8 it is nothing.
template <typename T, bool kW8A8>
struct W8A8Qdq {
  float a_scale = 0.0f, inv = 0.0f;
  template <typename S>
  __device__ explicit W8A8Qdq(const GemvParams<T, S>& p) {
    if constexpr (kW8A8) {
      a_scale = *p.a_scale;
      inv = qdq_inv_scale(a_scale);
    }
  }
  template <int N>
  __device__ __forceinline__ void operator()(uint32_t (&v)[N]) const {
    if constexpr (kW8A8) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = qdq_e4m3x2<T>(v[i], inv, a_scale);
    }
  }
};

// ----------------------------------------------------------------- epilogue
// One output element of a decode GEMV: the bias added in float32, then the single rounding
// to T. Params: either operator's GEMV parameters (y [M, N] of T, bias [N] or nullptr, n).
template <typename Params>
__device__ __forceinline__ void store_output(const Params& p, int64_t row, int64_t col, float v) {
  using T = std::remove_pointer_t<decltype(p.y)>;
  if (p.bias != nullptr) v += to_float(p.bias[col]);
  p.y[row * p.n + col] = from_float<T>(v);
}

// The K-split reduction of every tensor-core GEMV: warps 1.. of the block hand their
// partial sums to warp 0 through shared memory (same lane, same ownership) and return
// false; warp 0 adds them, returns true and stores its outputs (store_output: bias in
// float32, one rounding to T). Two forms of one step:
//   - kValues sums, the block's run-time split k_split (the N-bit kernels: one kernel for
//     every split), one float at a time;
//   - kTiles mma D fragments (4 sums each), the split kKSplit a template parameter (the
//     FP8 kernels), moved as float4 with every loop unrolled.
// Warp: the kernel's warp index type (int or uint32_t, as in its other indexing).
// kMaxSplit: the kernel's largest block (kMaxKSplit, or the N-bit window kernel's 16).
template <int kValues, int kMaxSplit = kMaxKSplit, typename Warp>
__device__ __forceinline__ bool reduce_k_split(float (&v)[kValues], Warp warp, int lane,
                                               uint32_t k_split) {
  __shared__ float partials[kMaxSplit - 1][kValues][kWarpSize];
  if (k_split > 1) {
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < kValues; ++i) partials[warp - 1][i][lane] = v[i];
    }
    __syncthreads();
    if (warp > 0) return false;
    for (uint32_t w = 0; w < k_split - 1; ++w)
#pragma unroll
      for (int i = 0; i < kValues; ++i) v[i] += partials[w][i][lane];
  }
  return true;
}

template <int kKSplit, int kTiles, typename Warp>
__device__ __forceinline__ bool reduce_k_split(float (&acc)[kTiles][4], Warp warp, int lane) {
  static_assert(kKSplit >= 1 && kKSplit <= kMaxKSplit, "k_split");
  if constexpr (kKSplit > 1) {
    __shared__ float4 partials[kKSplit - 1][kTiles][kWarpSize];
    if (warp > 0) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j)
        partials[warp - 1][j][lane] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
    }
    __syncthreads();
    if (warp > 0) return false;
#pragma unroll
    for (int w = 0; w < kKSplit - 1; ++w)
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const float4 q = partials[w][j][lane];
        acc[j][0] += q.x;
        acc[j][1] += q.y;
        acc[j][2] += q.z;
        acc[j][3] += q.w;
      }
  }
  return true;
}

// The mma D fragments of kTiles 16-column tiles after the reduction, for kHalves 8-row
// halves (acc[r * kTiles + j]: half r, tile j): lane (g, t) stores rows 8r + 2t and
// 8r + 2t + 1 of columns lo and hi of each tile (d[0..1], d[2..3]); masked rows (>= M)
// and columns (past N) are not stored.
template <int kTiles, int kHalves = 1, typename T, typename S>
__device__ __forceinline__ void store_d_fragments(const GemvParams<T, S>& p,
                                                  const float (&acc)[kHalves * kTiles][4],
                                                  int lane, const bool (&lo_ok)[kTiles],
                                                  const bool (&hi_ok)[kTiles],
                                                  const int64_t (&col_lo)[kTiles],
                                                  const int64_t (&col_hi)[kTiles]) {
#pragma unroll
  for (int r = 0; r < kHalves; ++r) {
    const int row = 8 * r + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const float (&d)[4] = acc[r * kTiles + j];
      if (lo_ok[j] && row < p.m) store_output(p, row, col_lo[j], d[0]);
      if (lo_ok[j] && row + 1 < p.m) store_output(p, row + 1, col_lo[j], d[1]);
      if (hi_ok[j] && row < p.m) store_output(p, row, col_hi[j], d[2]);
      if (hi_ok[j] && row + 1 < p.m) store_output(p, row + 1, col_hi[j], d[3]);
    }
  }
}

}  // namespace bqmm::cuda
