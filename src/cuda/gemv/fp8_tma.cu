// Fp8WeightMatMul's TMA decode GEMV, Fp8GemvTmaKernel (SM90+; the operator, the mma tile
// and its K permutation: fp8_mma.cu; parameters and epilogue: gemv/common.cuh; the weight
// stream: gemv/tma.cuh). CMakeLists.txt builds this file for the SM90+ architectures only
// (the planner takes TMA tiles there only, core/gemv_split.h gemv_tma_fits); built for
// an older one (a build without SM90), the kernels are traps.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/common.cuh"
#include "cuda/gemv/tma.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kMmaWindow = 64;  // K elements per scale lookup (one byte per code)
constexpr int kMmaWarpsPerSm = static_cast<int>(kGemvTensorCoreWarpsPerSm);
constexpr int kStageSteps = 8;  // mma steps (16 K elements each) per 128-byte TMA tile
static_assert(kMmaWindow == kWindowBytes, "an FP8 window is the planner's 64-byte K unit");
static_assert(kStageSteps * 16 == kTmaBoxBytes, "a TMA tile is 8 mma steps of K");
static_assert(kTmaBoxRows == kTileCols, "a TMA tile is one warp tile's rows");

template <typename T>
using Fp8Params = GemvParams<T, float>;

// ================================================================= TMA tensor-core kernel
// The tensor-core kernel's math with the weight stream of gemv/tma.cuh (SM90+): one copy
// instruction per 16-row x 128-byte tile (128 K elements) into a per-warp ring of kTmaDepth
// shared-memory slots, read back by ldmatrix. No weight registers in flight, no weight
// load instructions, no clamping (rows past N and the bytes of a last half tile, K % 128
// == 64, arrive as zeros).
//
// K permutation: ldmatrix_tile_chunks gives lane (g, t) word t of chunk c of rows g and
// g + 8, the codes at tile offsets 16c + 4t .. 16c + 4t + 3. mma step c takes chunk c with
// the ownership table of Fp8GemvMmaKernel, 4t + 16c + {0, 1} in place of 16t + 4j + {0, 1}
// (and + {2, 3} likewise); the lane's activations of step c are the 4 elements of row g at
// 16c + 4t (one 8-byte load). Steps 0-3 cover the tile's first 64 K offsets (one scale),
// steps 4-7 the last 64 (the next).
//
// K loop: warp w of the block takes tiles w, w + kKSplit, ...; lane 0 starts the copies
// of the first kTmaDepth, and after the warp has multiplied tile i it starts tile i +
// kTmaDepth into the freed slot (the __syncwarp before it orders every lane's ldmatrix of
// the slot before the copy). The activations and scales of tile i + 2 are loaded while tile
// i is multiplied.
//
// Template parameters (as Fp8GemvMmaKernel's):
//   T        activation type (__half or __nv_bfloat16); the mma runs in T.
//   kKSplit  warps per block splitting the tiles of one 16-column tile (1, 2, 4, 8).
//   kW8A8    a_scale given: QDQ fused into the activation load.
// Launch bounds: 16 warps per SM at least (kGemvTensorCoreWarpsPerSm). Shared memory
// (dynamic): kKSplit * kTmaDepth slots of 2 KB, 1024-byte aligned.
constexpr int kTmaDepth = 4;  // tiles in flight per warp: 16 warps x 4 x 2 KB = 128 KB per SM

template <typename T, int kKSplit, bool kW8A8>
__global__ void __launch_bounds__(kKSplit * kWarpSize, kMmaWarpsPerSm / kKSplit)
    Fp8GemvTmaKernel(const __grid_constant__ CUtensorMap map, const Fp8Params<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  extern __shared__ uint8_t tma_smem[];
  __shared__ uint64_t full[kKSplit][kTmaDepth];
  const TmaTileRing<kTmaDepth> ring(tma_smem, warp, full[warp]);

  const W8A8Qdq<T, kW8A8> qdq(p);

  // This warp's tiles: warp, warp + kKSplit, ... A K % 128 == 64 row ends in a half tile
  // (its upper 64 bytes arrive as zeros and are not multiplied).
  const WarpTiles tiles(p.k, static_cast<uint32_t>(warp), kKSplit);
  const int count = tiles.count;
  const int half_i = tiles.partial;
  const uint32_t windows = static_cast<uint32_t>(p.k / kMmaWindow);
  const int32_t y0 = static_cast<int32_t>(n0);
  ring.start(&map, tiles, y0, lane);

  // Columns n0 + g ("lo") and n0 + g + 8 ("hi"), activation row g; masked columns read
  // the scales of a clamped column and rows g >= M read row 0 (never stored).
  const bool lo_ok = n0 + g < p.n;
  const bool hi_ok = n0 + g + 8 < p.n;
  const int64_t col_lo = lo_ok ? n0 + g : p.n - 1;
  const int64_t col_hi = hi_ok ? n0 + g + 8 : p.n - 1;
  const float* const s_lo = p.scales + col_lo * p.k_blocks;
  const float* const s_hi = p.scales + col_hi * p.k_blocks;
  const T* const a_row =
      p.a + static_cast<int64_t>(g < p.m ? g : 0) * p.k + warp * kTmaBoxBytes + 4 * t;

  // Tile i's activations (8 steps x 4 elements; a half tile has steps 0-3) and scales
  // (column lo halves 0, 1; column hi halves 0, 1) in buffer i % 3, loaded two tiles ahead
  // (at M = 8 they come from L2, as slowly as the weights under a full stream). Lane t of
  // a quad loads scale t (one load, 16 lines per warp instead of four loads of 8) and the
  // quad shares them by shuffles where they are used.
  constexpr int kOperandBuffers = 3;
  uint2 act[kOperandBuffers][kStageSteps];
  float sc[kOperandBuffers];
  const float* const s_mine = t < 2 ? s_lo : s_hi;
  auto load_operands = [&](int b, int i) {
    const T* src = a_row + static_cast<int64_t>(i) * kKSplit * kTmaBoxBytes;
    const bool half = i == half_i;
#pragma unroll
    for (int c = 0; c < kStageSteps; ++c)
      if (c < kStageSteps / 2 || !half) act[b][c] = __ldg(reinterpret_cast<const uint2*>(src + 16 * c));
    const uint32_t window = min(2 * (warp + static_cast<uint32_t>(i) * kKSplit) + t % 2, windows - 1);
    sc[b] = __ldg(s_mine + p.slices_per_block.div(window));
  };

  float acc[4] = {};
  auto consume = [&](int b, int i) {
    if (i + 2 < count) load_operands((b + 2) % kOperandBuffers, i + 2);
    const uint32_t slot = ring.wait(i);
    const bool half = i == half_i;  // warp-uniform
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && half) break;
      float part[4] = {};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        uint32_t w[4];
        ldmatrix_tile_chunks(slot, 4 * h + 2 * q, lane, w);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 4 * h + 2 * q + e;
          const uint32_t lo = w[2 * e], hi = w[2 * e + 1];
          const uint32_t frag[4] = {e4m3x2_to_packed2<T>(lo), e4m3x2_to_packed2<T>(hi),
                                    e4m3x2_to_packed2<T>(lo >> 16), e4m3x2_to_packed2<T>(hi >> 16)};
          uint32_t bv[2] = {act[b][c].x, act[b][c].y};
          qdq(bv);
          mma_m16n8k16<T>(part, frag, bv, part);
        }
      }
      const int quad = lane & ~3;
      const float scale_lo = __shfl_sync(0xffffffffu, sc[b], quad + h);
      const float scale_hi = __shfl_sync(0xffffffffu, sc[b], quad + 2 + h);
      acc[0] = fmaf(part[0], scale_lo, acc[0]);
      acc[1] = fmaf(part[1], scale_lo, acc[1]);
      acc[2] = fmaf(part[2], scale_hi, acc[2]);
      acc[3] = fmaf(part[3], scale_hi, acc[3]);
    }
    ring.refill(&map, tiles, i, y0, lane);
  };
  if (count > 0) load_operands(0, 0);
  if (count > 1) load_operands(1, 1);
  int i = 0;
  for (; i + 2 < count; i += kOperandBuffers) {
    consume(0, i);
    consume(1, i + 1);
    consume(2, i + 2);
  }
  if (i < count) consume(0, i);
  if (i + 1 < count) consume(1, i + 1);

  float sums[1][4] = {{acc[0], acc[1], acc[2], acc[3]}};
  const bool lo[1] = {lo_ok}, hi[1] = {hi_ok};
  const int64_t cl[1] = {col_lo}, ch[1] = {col_hi};
  if (!reduce_k_split<kKSplit>(sums, warp, lane)) return;
  store_d_fragments<1>(p, sums, lane, lo, hi, cl, ch);
#else
  __trap();  // SM90+ only; the planner never asks for it below
#endif
}

// ================================================================= launcher
// The instantiated configurations (T, k_split, W8A8): every one a plan can reach on SM90+.
#define BQMM_FP8_TMA_CONFIGS(X, T)                                       \
  X(T, 1, false) X(T, 2, false) X(T, 4, false) X(T, 8, false)            \
  X(T, 1, true) X(T, 2, true) X(T, 4, true) X(T, 8, true)

template <typename T>
Status launch_tma(const Fp8KernelArgs& args, int k_split, cudaStream_t stream) {
  const Fp8Params<T> p = make_fp8_params<T>(args, kMmaWindow);
  CUtensorMap map;
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(args.b, args.n, args.k, &map));
  const int64_t blocks = (args.n + kTileCols - 1) / kTileCols;
  if (blocks > 0x7fffffff || args.n > 0x7fffffff || args.k > 0x7fffffff)
    return Status(StatusCode::kInternal, "launch_fp8_gemv_mma (TMA): N = " + std::to_string(args.n) +
                                             ", K = " + std::to_string(args.k) + " exceed 2^31");
  const dim3 grid(static_cast<unsigned>(blocks));
  const bool w8a8 = args.a_scale != nullptr;
#define BQMM_LAUNCH_IF(T_, KS, W)                                                          \
  if (k_split == KS && w8a8 == W) {                                                        \
    constexpr int kSmem = tma_ring_smem_bytes(KS, kTmaDepth);                              \
    BQMM_RETURN_IF_ERROR(allow_dynamic_smem(                                               \
        reinterpret_cast<const void*>(Fp8GemvTmaKernel<T_, KS, W>), kSmem));               \
    Fp8GemvTmaKernel<T_, KS, W><<<grid, KS * kWarpSize, kSmem, stream>>>(map, p);          \
    return check_launch("Fp8GemvTmaKernel");                                               \
  }
  BQMM_FP8_TMA_CONFIGS(BQMM_LAUNCH_IF, T)
#undef BQMM_LAUNCH_IF
  return Status(StatusCode::kInternal, "launch_fp8_gemv_mma: no Fp8GemvTmaKernel for k_split " +
                                           std::to_string(k_split) + (w8a8 ? ", W8A8" : ""));
}

}  // namespace

Status launch_fp8_gemv_tma(const Fp8KernelArgs& args, int k_split, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_fp8_gemv_mma (TMA tiles)", [&](auto tag) -> Status {
    return launch_tma<decltype(tag)>(args, k_split, stream);
  });
}

}  // namespace bqmm::cuda
