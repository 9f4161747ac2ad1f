// Fused decode GEMV of Fp8WeightMatMul, for 0 < M <= 8 (line loads: up to
// kGemvMaxGroupRows in row groups of 16, gemv/common.cuh):
//
//   Y[m, n] = sum_k A'[m, k] * e4m3(B[n, k]) * b_scale[n, k / block_size] + bias[n]
//
// with A' = QDQ(A) (W8A8, fused into the activation load) or A. At these M the op is a
// stream over the weight: N * K bytes of e4m3 against M * K activations that stay in
// L1/L2, so every kernel here reads each weight byte exactly once, with many bytes in
// flight per SM, and never materializes a dequantized weight.
//
//   GemvFmaKernel     CUDA cores (gemv/fma.cuh, shared with NBits 8-bit; its codecs and
//                     launchers: fma_gemv.cu): a warp per kCols output columns, all M rows
//                     at once, one 16-byte register load per lane and chunk.
//   Fp8GemvMmaKernel  tensor cores (SM80+): mma.m16n8k16, 16 columns per warp, kKSplit
//                     warps per block splitting K, a ring of kMmaDepth windows of
//                     fragment-shaped register loads in flight, or (kLines) register
//                     loads of whole 128-byte lines staged through shared memory
//                     (gemv/line_loads.cuh says why), one or two (kTiles) 16-column
//                     tiles per warp.
//   Fp8GemvTmaKernel  the same mma tile and K split (SM90+), the weights copied by the
//                     tensor memory accelerator in 16-row x 128-byte tiles into a
//                     per-warp shared-memory ring and read back by ldmatrix
//                     (gemv/tma.cuh says why: the load shape).
//
// Numerics (all): every weight * activation product is exact (e4m3 * T fits in float32,
// and e4m3 -> T is exact), the sums are float32, the block scale is applied in float32 to
// the partial sum of the 16- (FMA) or 64-element (MMA, TMA) K slice it covers, bias is
// added in float32 and Y is rounded to T once. The kernels sum in different orders, so
// they agree to rounding, not bit for bit.
//
// This file: the register-load tensor-core kernel (its window math and line-load K loop,
// Fp8GemvMmaKernel), then launch_fp8_gemv_mma and the configurations the planner can pick.
// Fp8GemvTmaKernel: fp8_tma.cu (built for SM90+ only). Parameters and epilogue:
// gemv/common.cuh.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/common.cuh"
#include "cuda/gemv/fma.cuh"  // word()
#include "cuda/gemv/line_loads.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

// ----------------------------------------------------------------- launch constants
constexpr int kMmaWindow = 64;      // K elements per lane load pair (one byte per code)
constexpr int kMmaDepth = 2;        // windows in flight per lane (the K loop's ring)
// Residency of the tensor-core kernels, the planner's wave model (core/gemv_split.h).
constexpr int kMmaWarpsPerSm = static_cast<int>(kGemvTensorCoreWarpsPerSm);
constexpr int kWideWarpsPerSm = static_cast<int>(kGemvWideWarpsPerSm);
static_assert(kMmaWindow == kWindowBytes, "an FP8 window is the planner's 64-byte K unit");

template <typename T>
using Fp8Params = GemvParams<T, float>;

// One 64-element K window of the register-load tile (Fp8GemvMmaKernel, either weight
// stream), in the ownership table below: decode_window turns lane (g, t)'s 16 codes of
// columns lo and hi into the A fragments of the window's four mma steps; multiply_window
// multiplies them with the lane's 16 activations of row g (after W8A8) and adds the
// window's float32 tile, scaled per column, to acc. Two steps, so that the ring can refill
// its weight registers between them.
template <typename T>
__device__ __forceinline__ void decode_window(const uint4& lo, const uint4& hi,
                                              uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t l = word(lo, j), h = word(hi, j);
    frag[j][0] = e4m3x2_to_packed2<T>(l);
    frag[j][1] = e4m3x2_to_packed2<T>(h);
    frag[j][2] = e4m3x2_to_packed2<T>(l >> 16);
    frag[j][3] = e4m3x2_to_packed2<T>(h >> 16);
  }
}
template <typename T>
__device__ __forceinline__ void multiply_window(const uint32_t (&frag)[4][4],
                                                const uint32_t (&act)[8], float scale_lo,
                                                float scale_hi, float (&acc)[4]) {
  float part[4] = {};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t b[2] = {act[2 * j], act[2 * j + 1]};
    mma_m16n8k16<T>(part, frag[j], b, part);
  }
  acc[0] = fmaf(part[0], scale_lo, acc[0]);
  acc[1] = fmaf(part[1], scale_lo, acc[1]);
  acc[2] = fmaf(part[2], scale_hi, acc[2]);
  acc[3] = fmaf(part[3], scale_hi, acc[3]);
}

// kLines (the plan's `lines`): the register-load tile's K loop with its weights
// read as whole 128-byte lines and staged through the warp's 2 KB of shared memory
// (gemv/line_loads.cuh says why). Warp w of the block takes the pairs of windows (128 K
// elements) w, w + kKSplit, ... (K % 128 == 0, the planner's condition); one pair in
// flight while the staged one is multiplied. Its activations (two windows, 4 loads per
// lane) are loaded at the start of its stage, by the lanes of rows g < M only: rows >= M
// get zeros without a load, which at M = 2 is a quarter of the L1 traffic of the
// unpredicated loads (the line loads' shared-memory round trip shares that pipe).
//
// kTiles = 2: the warp owns two 16-column tiles (n0 and n0 + 16), each with its own 2 KB
// buffer and pair in flight, and multiplies every activation load with both. Per weight
// byte that halves the activation loads and doubles the bytes in flight per warp (128
// registers, the launch bound; 0-8 bytes of spill, 8-24 with W8A8). Measured on the H200
//: at 28672 x 8192, M = 2..8, 5-12 % faster than one tile at
// its best K split, where one tile's 1792 warps (13 per SM) waited on their loads for
// 61 % of their stall cycles (Nsight Compute) and more warps of one tile did not help at
// M = 8; on smaller weights its grid has too few warps (0-30 % slower), so the planner
// takes it from 128 Mi codes. Fp8GemvMmaKernel's kWide runs it at up to 168 registers.
//
// kHalves = 2 (row groups, M > 8): the warp multiplies each decoded weight fragment with
// two 8-row halves of activations (rows g and g + 8 of the group, two mma and two sets of
// sums per fragment), so a group of 16 rows costs one decode of the weights; the
// accumulators of half r are acc[r * kTiles + j].
//
// kDependent (one tile, no W8A8, no row groups; GemvConfig::dependent_launch): launched as
// a programmatic dependent of the kernel before it, as NBitsMatMul's 4-bit register tile
// (nbits_gemv.cu): the next kernel may launch once every block has started, and the
// warp's first two pairs are pulled into L2 before griddepcontrol.wait, after which it
// reads everything. The weights are the call's inputs, but a kernel before could still
// write them, so only prefetches (never register loads) precede the wait.
template <int kKSplit, int kTiles, int kHalves, bool kDependent, typename T, typename Qdq>
__device__ __forceinline__ void lines_k_loop(const Fp8Params<T>& p, const Qdq& qdq, int warp,
                                             int lane, int64_t n0,
                                             const int64_t (&col_lo)[kTiles],
                                             const int64_t (&col_hi)[kTiles],
                                             float (&acc)[kHalves * kTiles][4]) {
  extern __shared__ uint4 fp8_lines[];
  const LineTiles<kTiles> lines(fp8_lines + warp * kTiles * (kLineBufferBytes / 16), p.b, n0,
                                p.n, p.k, lane);
  const uint32_t pairs = static_cast<uint32_t>(p.k / kLinePairBytes);
  const int count = warp < static_cast<int>(pairs)
                        ? static_cast<int>((pairs - warp + kKSplit - 1) / kKSplit)
                        : 0;
  if constexpr (kDependent) {
    // The first two pairs' lines into L2 while the kernel before finishes, then the wait:
    // the weights' registers, A and Y only after it.
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < count)
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
          lines[j].prefetch(static_cast<size_t>(warp + i * kKSplit) * kLinePairBytes);
    wait_for_prior_grid();
  }
  if (count == 0) return;
  const int g = lane / 4, t = lane % 4;
  bool row_ok[kHalves];
  const T* a_row[kHalves];
#pragma unroll
  for (int r = 0; r < kHalves; ++r) {
    row_ok[r] = g + 8 * r < p.m;
    a_row[r] = p.a + static_cast<int64_t>(row_ok[r] ? g + 8 * r : 0) * p.k + 16 * t;
  }

  uint4 raw[kTiles][4];
  float scales[kTiles][2][2];  // [tile][window of the pair][lo, hi]
  auto load_pair = [&](int i) {
    const uint32_t v = warp + static_cast<uint32_t>(i) * kKSplit;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) lines[j].load(raw[j], static_cast<size_t>(v) * kLinePairBytes);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t idx = p.slices_per_block.div(2 * v + h);
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        scales[j][h][0] = __ldg(p.scales + col_lo[j] * p.k_blocks + idx);
        scales[j][h][1] = __ldg(p.scales + col_hi[j] * p.k_blocks + idx);
      }
    }
  };
  load_pair(0);
#pragma unroll 1
  for (int i = 0; i < count; ++i) {
    const uint32_t v = warp + static_cast<uint32_t>(i) * kKSplit;
    uint4 a[kHalves][2][2];
#pragma unroll
    for (int r = 0; r < kHalves; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4* src = reinterpret_cast<const uint4*>(
            a_row[r] + static_cast<int64_t>(2 * v + h) * kMmaWindow);
        a[r][h][0] = load_cached_u4_if(src, row_ok[r]);
        a[r][h][1] = load_cached_u4_if(src + 1, row_ok[r]);
      }
#pragma unroll
    for (int j = 0; j < kTiles; ++j) lines[j].stage(raw[j]);
    float s[kTiles][2][2];
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[j][h][0] = scales[j][h][0];
        s[j][h][1] = scales[j][h][1];
      }
    // The next pair's loads (past the range: the last pair again, never multiplied).
    load_pair(min(i + 1, count - 1));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t cur[kHalves][8];
#pragma unroll
      for (int r = 0; r < kHalves; ++r) {
        const uint4 x = a[r][h][0], y = a[r][h][1];
        const uint32_t words[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) cur[r][i] = words[i];
        qdq(cur[r]);
      }
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        uint32_t frag[4][4];
        decode_window<T>(lines[j].lo(h), lines[j].hi(h), frag);
#pragma unroll
        for (int r = 0; r < kHalves; ++r)
          multiply_window<T>(frag, cur[r], s[j][h][0], s[j][h][1], acc[r * kTiles + j]);
      }
    }
    lines.release();
  }
}

// ================================================================= tensor-core kernel
// Y^T tile = W tile * A^T with mma.m16n8k16: the weight is the mma's A operand (16 output
// columns = mma M, row-major [n][k] as stored), the activation its B operand (up to 8 rows
// = mma N, column-major [k][m], i.e. A's natural row-major [m][k]); rows >= M are zero
// fragments (zero-filled, never read). g = lane / 4, t = lane % 4.
//
// K permutation. K is a reduction axis, so any permutation applied to both operands leaves
// the result unchanged. In a 64-element K window w (K offsets 64w .. 64w+63) lane (g, t)
// loads the 16 bytes k in [16t, 16t + 16) of weight columns g and g + 8 (one 16-byte load
// each; 4 lanes cover a column's 64 contiguous bytes) and the 16 activations of row g at
// the same k. mma step j (0..3) of the window uses word j of those loads: its logical k16
// index maps to the physical offset in the window as
//     logical 2t + i      <->  physical 16t + 4j + i        (i = 0, 1)
//     logical 2t + 8 + i  <->  physical 16t + 4j + 2 + i
// which covers 0..63 once over (t, j, i, half). Fragment ownership per step j:
//
//   register        matrix entry (mma)             data (window w, step j)
//   a[0] = a0,a1    A[g][2t, 2t+1]                 B[n0+g  ][64w + 16t + 4j + 0, 1]
//   a[1] = a2,a3    A[g+8][2t, 2t+1]               B[n0+g+8][64w + 16t + 4j + 0, 1]
//   a[2] = a4,a5    A[g][2t+8, 2t+9]               B[n0+g  ][64w + 16t + 4j + 2, 3]
//   a[3] = a6,a7    A[g+8][2t+8, 2t+9]             B[n0+g+8][64w + 16t + 4j + 2, 3]
//   b[0] = b0,b1    Bm[2t, 2t+1][g]                A[g][64w + 16t + 4j + 0, 1]
//   b[1] = b2,b3    Bm[2t+8, 2t+9][g]              A[g][64w + 16t + 4j + 2, 3]
//   d[0], d[1]      D[g][2t, 2t+1]                 Y[row 2t, 2t+1][col n0+g]
//   d[2], d[3]      D[g+8][2t, 2t+1]               Y[row 2t, 2t+1][col n0+g+8]
//
// So loads are keyed off g (columns g, g + 8 and activation row g) and stores off t
// (activation rows 2t, 2t + 1). The block scale is constant over a window (block_size %
// 64 == 0): the four mma of a window accumulate into a fresh float32 tile that is then
// scaled per column (d[0..1] by column g's scale, d[2..3] by column g + 8's) and added to
// the running sums: exact products, float32 sums, no rounding of scaled weights to T.
// The kKSplit warps of a block take windows warp, warp + kKSplit, ... (together they sweep
// each column's bytes in order) and reduce through shared memory; warp 0 adds bias and
// stores.
//
// K loop: a ring of kMmaDepth windows of weights (2 x 16 bytes per lane each) and their
// scales. Slot u is consumed, then refilled with the window kMmaDepth ahead, so every
// lane keeps kMmaDepth - 1 to kMmaDepth windows of weight loads in flight at all times.
// Activations (L1/L2 hits) are loaded one window ahead of their mma, outside the ring.
// Measured on the H200: a ring of 2 or 4, predicated or unconditional
// loads, 16 or 24 warps per SM all land within 5 % of each other (about 2.9-3.2 TB/s);
// the ring of 2 with unconditional loads is the fastest at M = 8 and the simplest.
//
// Template parameters:
//   T        activation type (__half or __nv_bfloat16); the mma runs in T.
//   kKSplit  warps per block splitting the K windows of one 16-column tile (the planner's
//            k_split, core/gemv_split.h: 1, 2, 4 or 8).
//   kW8A8    a_scale given: QDQ fused into the activation load.
//   kLines   the weights by line loads (lines_k_loop above; dynamic shared memory:
//            kKSplit x kTiles x 2 KB), else by the ring of fragment-shaped register
//            loads below.
//   kTiles   16-column tiles per warp: 1, or 2 with line loads (lines_k_loop says why);
//            block b owns columns b * 16 * kTiles ...
//   kWide    two tiles at up to 168 registers, 12 warps per SM (kGemvWideRegisters,
//            the plan's `registers`; k_split <= 4): each warp faster, fewer of
//            them (NBitsGemvWindowKernel's kWide says why; the planner costs both).
//   kRowGroups  M > 8 (line loads only): the block's row group and column block from its
//            index (RowGroup, gemv/common.cuh), the tile below on the group's up to 16
//            rows (kHalves = 2: lines_k_loop multiplies each decoded window with rows g
//            and g + 8 of the group).
//   kDependent  a programmatic dependent launch (lines_k_loop says how; one tile of line
//            loads without W8A8 or row groups): a separate instance, so that the plain
//            kernel's code does not change.
// Launch bounds: 16 warps per SM at least (128 registers per thread at most; kWide: 12,
// 168), the residency the planner's wave model assumes (kGemvTensorCoreWarpsPerSm,
// kGemvWideWarpsPerSm); a row-group instantiation keeps its decode twin's.
//
// fp8_mma_tile is the kernel's body, p's rows (at most 8 kHalves) at column block
// column_block; inlined into each kernel, so the decode instantiations compile as if it
// were the kernel.
template <typename T, int kKSplit, bool kW8A8, bool kLines, int kTiles, bool kWide,
          int kHalves = 1, bool kDependent = false>
__device__ __forceinline__ void fp8_mma_tile(const Fp8Params<T>& p, uint32_t column_block) {
  static_assert(!kDependent || (kLines && kTiles == 1 && !kW8A8 && kHalves == 1),
                "the dependent launch: one tile of line loads, no W8A8, no row groups");
  if constexpr (kDependent) allow_dependent_launch();
  static_assert(kLines || kTiles == 1, "two tiles per warp only with line loads");
  static_assert(kLines || kHalves == 1, "16-row groups only with line loads");
  static_assert(!kWide || (kTiles == 2 && kKSplit <= kGemvWideMaxKSplit),
                "168 registers: two tiles, k_split <= 4");
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(column_block) * kTileCols * kTiles;

  const W8A8Qdq<T, kW8A8> qdq(p);

  // Columns n0 + g ("lo") and n0 + g + 8 ("hi"), activation row g. Masked ones are never
  // loaded (zero fragments, zero scale); their base pointers are clamped in bounds.
  bool lo_oks[kTiles], hi_oks[kTiles];
  int64_t cols_lo[kTiles], cols_hi[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    lo_oks[j] = n0 + j * kTileCols + g < p.n;
    hi_oks[j] = n0 + j * kTileCols + g + 8 < p.n;
    cols_lo[j] = lo_oks[j] ? n0 + j * kTileCols + g : p.n - 1;
    cols_hi[j] = hi_oks[j] ? n0 + j * kTileCols + g + 8 : p.n - 1;
  }
  const bool row_ok = g < p.m;
  float accs[kHalves * kTiles][4] = {};
  if constexpr (kLines) {
    lines_k_loop<kKSplit, kTiles, kHalves, kDependent>(p, qdq, warp, lane, n0, cols_lo, cols_hi, accs);
  } else {
    const int64_t col_lo = cols_lo[0], col_hi = cols_hi[0];
    float (&acc)[4] = accs[0];
    // This warp's windows: warp, warp + kKSplit, ... (`count` of them); its i-th window sits
    // i * kStride elements past the first.
    const uint32_t windows = static_cast<uint32_t>(p.k / kMmaWindow);
    const int count = warp < static_cast<int>(windows)
                          ? static_cast<int>((windows - warp + kKSplit - 1) / kKSplit)
                          : 0;
    constexpr int kStride = kKSplit * kMmaWindow;
    const uint8_t* const w_lo = p.b + col_lo * p.k + warp * kMmaWindow + 16 * t;
    const uint8_t* const w_hi = p.b + col_hi * p.k + warp * kMmaWindow + 16 * t;
    // Activation row g, or row 0 for g >= M: those rows only feed outputs of rows >= M,
    // which are never stored, so they need no zeroing (nor a predicate on the load).
    const T* const a_row =
        p.a + static_cast<int64_t>(row_ok ? g : 0) * p.k + warp * kMmaWindow + 16 * t;
    const float* const s_lo = p.scales + col_lo * p.k_blocks;
    const float* const s_hi = p.scales + col_hi * p.k_blocks;

    // Every load is unconditional at a valid address: masked columns read a clamped row
    // (their sums are never stored) and ring slots past `count` re-read the last window
    // (never consumed). No predicate, no zeroing, no select: a loaded register is first
    // read where it is used, so all kMmaDepth windows stay in flight.
    uint4 wl[kMmaDepth], wh[kMmaDepth];
    float sl[kMmaDepth], sh[kMmaDepth];
    uint32_t act[2][8];  // ping-pong: window i's activations in act[i % 2]
    auto load_window = [&](int u, int i) {
      const int64_t off = static_cast<int64_t>(i) * kStride;
      wl[u] = load_stream_u4_l2_256(w_lo + off);
      wh[u] = load_stream_u4_l2_256(w_hi + off);
      const uint32_t scale_idx = p.slices_per_block.div(warp + static_cast<uint32_t>(i) * kKSplit);
      sl[u] = __ldg(s_lo + scale_idx);
      sh[u] = __ldg(s_hi + scale_idx);
    };
    auto load_act = [&](uint32_t (&v)[8], int i) {
      const uint4* src = reinterpret_cast<const uint4*>(a_row + static_cast<int64_t>(i) * kStride);
      const uint4 lo = __ldg(src), hi = __ldg(src + 1);
      v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
      v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
    };

    // One round: consume the windows i0 .. i0 + kMmaDepth - 1 (slot u holds i0 + u), refill
    // slot u with window i0 + u + kMmaDepth and load the activations one window ahead.
    // kTail: the last rounds, where windows past `count` are skipped (warp-uniform) and the
    // loads ahead clamp to the last window.
    auto round = [&](int i0, auto tail) {
      constexpr bool kTail = decltype(tail)::value;
#pragma unroll
      for (int u = 0; u < kMmaDepth; ++u) {
        const int i = i0 + u;
        if (kTail && i >= count) break;  // warp-uniform: mma.sync needs every lane
        load_act(act[(u + 1) % 2], kTail ? min(i + 1, count - 1) : i + 1);
        uint32_t frag[4][4];
        decode_window<T>(wl[u], wh[u], frag);
        const float scale_lo = sl[u], scale_hi = sh[u];
        load_window(u, kTail ? min(i + kMmaDepth, count - 1) : i + kMmaDepth);
        uint32_t (&cur)[8] = act[u % 2];
        qdq(cur);
        multiply_window<T>(frag, cur, scale_lo, scale_hi, acc);
      }
    };
    if (count > 0) {
#pragma unroll
      for (int u = 0; u < kMmaDepth; ++u) load_window(u, min(u, count - 1));
      load_act(act[0], 0);
      int i0 = 0;
      for (; i0 + 2 * kMmaDepth <= count; i0 += kMmaDepth) round(i0, std::false_type{});
      for (; i0 < count; i0 += kMmaDepth) round(i0, std::true_type{});
    }
  }

  if (!reduce_k_split<kKSplit>(accs, warp, lane)) return;
  store_d_fragments<kTiles, kHalves>(p, accs, lane, lo_oks, hi_oks, cols_lo, cols_hi);
}

template <typename T, int kKSplit, bool kW8A8, bool kLines, int kTiles, bool kWide = false,
          bool kRowGroups = false, bool kDependent = false>
__global__ void __launch_bounds__(kKSplit * kWarpSize,
                                  (kWide ? kWideWarpsPerSm : kMmaWarpsPerSm) / kKSplit)
    Fp8GemvMmaKernel(const Fp8Params<T> p) {
  if constexpr (kRowGroups) {
    static_assert(kLines && !kDependent, "row groups only with line loads, launched plainly");
    const RowGroup<T, float> group(p);
    fp8_mma_tile<T, kKSplit, kW8A8, kLines, kTiles, kWide, kGroupHalves>(group.p,
                                                                          group.column_block);
  } else {
    fp8_mma_tile<T, kKSplit, kW8A8, kLines, kTiles, kWide, 1, kDependent>(p, blockIdx.x);
  }
}

// ================================================================= launchers
// The instantiated configurations: every one a plan can reach. Register-load tiles
// (T, k_split, W8A8, kLines, kTiles, kWide): fragment loads, line loads of one tile, of
// two tiles at 128 registers and (k_split <= kWideMaxKSplit) at 168. TMA tiles:
// fp8_tma.cu.
#define BQMM_FP8_MMA_STREAMS(X, T, KS, W) \
  X(T, KS, W, false, 1, false) X(T, KS, W, true, 1, false) X(T, KS, W, true, 2, false)
#define BQMM_FP8_MMA_SPLITS(X, T, W)                                               \
  BQMM_FP8_MMA_STREAMS(X, T, 1, W) X(T, 1, W, true, 2, true)                       \
  BQMM_FP8_MMA_STREAMS(X, T, 2, W) X(T, 2, W, true, 2, true)                       \
  BQMM_FP8_MMA_STREAMS(X, T, 4, W) X(T, 4, W, true, 2, true)                       \
  BQMM_FP8_MMA_STREAMS(X, T, 8, W)
#define BQMM_FP8_MMA_CONFIGS(X, T) BQMM_FP8_MMA_SPLITS(X, T, false) BQMM_FP8_MMA_SPLITS(X, T, true)

// One configuration of the table: its decode kernel, or (row_groups, M > 8) its row-group
// twin, instantiated for the line-load configurations only (the launcher refuses M > 8
// without line loads before it gets here), or (dependent) its dependent-launch instance,
// instantiated for one tile of line loads without W8A8 (the launcher refuses the others).
template <typename T, int kKSplit, bool kW8A8, bool kLines, int kTiles, bool kWide>
Status launch_mma_config(const Fp8Params<T>& p, dim3 grid, int smem, bool row_groups, bool dependent,
                         cudaStream_t stream) {
  if constexpr (kLines && kTiles == 1 && !kW8A8) {
    if (dependent)
      return launch_kernel(Fp8GemvMmaKernel<T, kKSplit, false, true, 1, false, false, true>, grid,
                           dim3(kKSplit * kWarpSize), smem, stream, true, "Fp8GemvMmaKernel (dependent)", p);
  }
  if (dependent)
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: no dependent instance of this configuration");
  if constexpr (kLines) {
    if (row_groups) {
      Fp8GemvMmaKernel<T, kKSplit, kW8A8, kLines, kTiles, kWide, true>
          <<<grid, kKSplit * kWarpSize, smem, stream>>>(p);
      return check_launch("Fp8GemvMmaKernel (row groups)");
    }
  }
  if (row_groups)
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: row groups without line loads");
  Fp8GemvMmaKernel<T, kKSplit, kW8A8, kLines, kTiles, kWide>
      <<<grid, kKSplit * kWarpSize, smem, stream>>>(p);
  return check_launch("Fp8GemvMmaKernel");
}
template <typename T>
Status launch_mma(const Fp8KernelArgs& args, int k_split, bool tma, bool lines, int tiles,
                  int registers, cudaStream_t stream) {
  bool wide = false;
  BQMM_RETURN_IF_ERROR(check_line_tiles_registers("launch_fp8_gemv_mma", registers,
                                                  lines && tiles == 2, k_split, &wide));
  // The one configuration with a dependent-launch instance (kDependent): one tile of line
  // loads, no W8A8, M <= 8.
  if (args.dependent && (tma || !lines || tiles != 1 || args.a_scale != nullptr || args.m > kMmaRows))
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_mma: a dependent launch only of one tile of line loads without "
                  "W8A8 at M <= 8");
  if (tma) return launch_fp8_gemv_tma(args, k_split, stream);
  if (lines && args.k % kLinePairBytes != 0)
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: line loads need K % 128 == 0, got K = " +
                                             std::to_string(args.k));
  if (tiles != 1 && !(tiles == 2 && lines))
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: " + std::to_string(tiles) +
                                             " tiles per warp (1, or 2 with line loads)");
  const Fp8Params<T> p = make_fp8_params<T>(args, kMmaWindow);
  // M > 8: row groups, the group varying fastest (RowGroup, gemv/common.cuh).
  const bool row_groups = args.m > kMmaRows;
  const int64_t blocks =
      (args.n + kTileCols * tiles - 1) / (kTileCols * tiles) * gemv_row_groups(args.m);
  if (blocks > 0x7fffffff)
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_mma: grid too large for N = " + std::to_string(args.n));
  const dim3 grid(static_cast<unsigned>(blocks));
  const int smem = lines ? k_split * tiles * kLineBufferBytes : 0;  // at most 32 KB: no opt-in
  const bool w8a8 = args.a_scale != nullptr;
#define BQMM_LAUNCH_IF(T_, KS, W, LINES, TILES, WIDE)                                    \
  if (k_split == KS && w8a8 == W && lines == LINES && tiles == TILES && wide == WIDE)   \
    return launch_mma_config<T_, KS, W, LINES, TILES, WIDE>(p, grid, smem, row_groups, args.dependent, stream);
  BQMM_FP8_MMA_CONFIGS(BQMM_LAUNCH_IF, T)
#undef BQMM_LAUNCH_IF
  return Status(StatusCode::kInternal,
                "launch_fp8_gemv_mma: no Fp8GemvMmaKernel for k_split " + std::to_string(k_split) +
                    (w8a8 ? ", W8A8" : "") + (lines ? ", line loads" : "") + ", " +
                    std::to_string(tiles) + " tile(s)" + (wide ? ", 168 registers" : "") +
                    (row_groups ? ", row groups" : ""));
}

}  // namespace

Status launch_fp8_gemv_mma(const Fp8KernelArgs& args, int k_split, bool tma, bool lines,
                           int tiles_per_warp, int registers, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  if (args.m > kGemvMaxGroupRows)
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: M = " + std::to_string(args.m) +
                                             " exceeds the row groups' " +
                                             std::to_string(kGemvMaxGroupRows) + " rows");
  // M > 8 (row groups) only on line loads.
  if (args.m > kMmaRows && (tma || !lines))
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_mma: M = " + std::to_string(args.m) +
                      " > 8 takes row groups, which only line loads have, not " +
                      (tma ? "TMA tiles" : "fragment register loads"));
  BQMM_RETURN_IF_ERROR(check_fp8_k_range(args, "launch_fp8_gemv_mma"));
  return dispatch_half_types(args.dtype, "launch_fp8_gemv_mma", [&](auto tag) -> Status {
    return launch_mma<decltype(tag)>(args, k_split, tma, lines, tiles_per_warp, registers, stream);
  });
}

}  // namespace bqmm::cuda
