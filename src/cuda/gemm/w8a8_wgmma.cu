// W8A8 on FP8 tensor cores (w8a8_wgmma.cuh): the activation quantize pass, the GEMM's
// instantiations (float16 and bfloat16, static and dynamic scales) and their launch.
// Built for sm_90a only (CMake's BQMM_WGMMA_ARCHITECTURES), like fp8_wgmma.cu.
#include "cuda/gemm/w8a8_wgmma.cuh"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kQuantThreads = 256;

// 8 activations (one 16-byte load) of row `src` at `i`, as float32.
template <typename T>
__device__ __forceinline__ void load8(const T* src, int64_t i, float (&x)[8]) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(src + i));
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = packed2_to_float2<T>(w[j]);
    x[2 * j] = f.x;
    x[2 * j + 1] = f.y;
  }
}

// A group of lanes per (row, K block): 16 for blocks of 128, 32 for larger ones; lane l
// takes activations 8 l .. 8 l + 7 of each 8 x lanes chunk of the block (one 16-byte load,
// one 8-byte store of codes: K % 16 == 0 and 16-byte aligned rows, the planner's
// conditions). Its scale: dynamic amax / 448 (NaN where the block holds one; the amax
// reduced over the group), static a_scale; codes e4m3_satfinite_rne(a * inv), bit for bit
// the QDQ's. Dynamic scales go to column `blk` of [k_blocks, m_pad]. Grid: x the row's
// groups, y rows (striding by gridDim.y).
template <typename T, bool kDynamic>
__global__ void __launch_bounds__(kQuantThreads)
    ActQuantE4m3Kernel(const T* __restrict__ a, const float* __restrict__ a_scale, int64_t m, int64_t k,
                       int block_size, int k_blocks, int64_t m_pad, uint8_t* __restrict__ codes,
                       float* __restrict__ scales) {
  const int lanes = block_size == 128 ? 16 : 32;
  const int lane = threadIdx.x % lanes;
  const int blk = static_cast<int>((blockIdx.x * kQuantThreads + threadIdx.x) / lanes);
  if (blk >= k_blocks) return;  // whole groups leave together
  // The group's lanes: shuffles stay inside them.
  const unsigned mask = lanes == 32 ? 0xffffffffu : 0xffffu << (threadIdx.x % 32 - lane);
  const int64_t begin = static_cast<int64_t>(blk) * block_size;
  const int64_t end = blk + 1 < k_blocks ? begin + block_size : k;
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    const T* src = a + row * k;
    float scale;
    if constexpr (kDynamic) {
      float amax = 0.0f;
      bool nan = false;
      for (int64_t i = begin + 8 * lane; i < end; i += 8 * lanes) {
        float x[8];
        load8(src, i, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          nan |= x[j] != x[j];
          amax = fmaxf(amax, fabsf(x[j]));
        }
      }
      for (int o = lanes / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(mask, amax, o));
      nan = __any_sync(mask, nan);
      scale = nan ? __int_as_float(0x7fc00000) : amax / 448.0f;
      if (lane == 0) scales[blk * m_pad + row] = scale;
    } else {
      scale = *a_scale;
    }
    const float inv = qdq_inv_scale(scale);
    uint8_t* dst = codes + row * k;
    for (int64_t i = begin + 8 * lane; i < end; i += 8 * lanes) {
      float x[8];
      load8(src, i, x);
      uint32_t q[2] = {0, 0};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(x[2 * j] * inv, x[2 * j + 1] * inv),
                                                       __NV_SATFINITE, __NV_E4M3);
        q[j / 2] |= pair << (16 * (j % 2));
      }
      *reinterpret_cast<uint2*>(dst + i) = make_uint2(q[0], q[1]);
    }
  }
}

template <typename T, bool kDynamic, int kTileM>
Status launch_typed(const Fp8KernelArgs& args, int k_split, const W8A8Workspace& ws, cudaStream_t stream) {
  const int64_t k_blocks = (args.k + args.block_size - 1) / args.block_size;
  // One block covering K is K rounded up to a slab, whatever block_size says (it may be
  // beyond int); every other block_size is at most K.
  const int64_t block = k_blocks == 1 ? (args.k + kW8a8SlabK - 1) / kW8a8SlabK * kW8a8SlabK : args.block_size;
  const int64_t m_pad = w8a8_m_pad(args.m);
  const int64_t lanes = block == 128 ? 16 : 32;
  const dim3 quant_grid(static_cast<unsigned>((k_blocks * lanes + kQuantThreads - 1) / kQuantThreads),
                        static_cast<unsigned>(std::min<int64_t>(args.m, 65535)));
  ActQuantE4m3Kernel<T, kDynamic><<<quant_grid, kQuantThreads, 0, stream>>>(
      static_cast<const T*>(args.a), args.a_scale, args.m, args.k, static_cast<int>(block),
      static_cast<int>(k_blocks), m_pad, ws.codes, ws.scales);
  BQMM_RETURN_IF_ERROR(check_launch("ActQuantE4m3Kernel"));

  W8A8Params<T> p{};
  // One box per operand and slab: kGemmTileN weight rows, kTileM activation rows.
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(args.b, args.n, args.k, &p.w_map, kGemmTileN));
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(ws.codes, args.m, args.k, &p.a_map, kTileM));
  p.a = ws.codes;
  p.a_scales = kDynamic ? ws.scales : nullptr;
  p.a_scale = kDynamic ? nullptr : args.a_scale;
  p.b = args.b;
  p.b_scales = args.b_scale;
  p.bias = static_cast<const T*>(args.bias);
  p.y = static_cast<T*>(args.y);
  p.partials = k_split > 1 ? ws.partials : nullptr;
  p.m = static_cast<int>(args.m);
  p.n = args.n;
  p.k = args.k;
  p.m_pad = m_pad;
  p.row_bytes = args.k;
  p.k_blocks = k_blocks;
  p.block_slabs = static_cast<int>(block / kW8a8SlabK);
  const int64_t blocks_per_split = (k_blocks + k_split - 1) / k_split;
  p.slabs_per_split = static_cast<int>(blocks_per_split * p.block_slabs);

  const int64_t tiles = (args.m + kTileM - 1) / kTileM * ((args.n + kGemmTileN - 1) / kGemmTileN);
  const dim3 grid(static_cast<unsigned>(tiles), 1, static_cast<unsigned>(k_split));
  const auto kernel = W8A8WgmmaKernel<T, kDynamic, kTileM>;
  constexpr int kSmem = static_cast<int>(w8a8_smem_bytes(kTileM));
  BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem));
  kernel<<<grid, kWgmmaThreads, kSmem, stream>>>(p);
  BQMM_RETURN_IF_ERROR(check_launch("W8A8WgmmaKernel"));
  if (k_split == 1) return Status::Ok();
  FusedGemmReduceKernel<T><<<grid_for(args.m * args.n, 256), 256, 0, stream>>>(
      ws.partials, p.bias, p.y, args.m, args.n, k_split);
  return check_launch("FusedGemmReduceKernel");
}

// The kernel of one (type, mode), at the tile the plan chose.
template <typename T, bool kDynamic>
Status launch_tile(const Fp8KernelArgs& args, int tile_m, int k_split, const W8A8Workspace& ws,
                   cudaStream_t stream) {
  switch (tile_m) {
    case 32:
      return launch_typed<T, kDynamic, 32>(args, k_split, ws, stream);
    case 64:
      return launch_typed<T, kDynamic, 64>(args, k_split, ws, stream);
    default:
      return launch_typed<T, kDynamic, kW8a8TileM>(args, k_split, ws, stream);
  }
}

}  // namespace

Status launch_w8a8_gemm(const Fp8KernelArgs& args, bool dynamic, int tile_m, int k_split,
                        const W8A8Workspace& ws, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  if (args.block_size % kW8a8SlabK != 0 || args.k % 16 != 0 || k_split < 1 ||
      (tile_m != 32 && tile_m != 64 && tile_m != kW8a8TileM))
    return Status(StatusCode::kInternal,
                  "launch_w8a8_gemm: block_size % 128, K % 16, k_split >= 1 and tile_m 32, 64 or 128");
  return dispatch_half_types(args.dtype, "w8a8 gemm", [&](auto tag) {
    using T = decltype(tag);
    return dynamic ? launch_tile<T, true>(args, tile_m, k_split, ws, stream)
                   : launch_tile<T, false>(args, tile_m, k_split, ws, stream);
  });
}

}  // namespace bqmm::cuda
