// The W8A8 GEMMs' activation quantize pass (w8a8_wgmma.cu, w8a8_groupwise.cu,
// w8a8_cublaslt.cu): A's e4m3 codes, bit for bit the QDQ's, and with dynamic quantization
// its per-(row, K block) scales amax / 448.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace act_quant {

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
// the QDQ's. The scales (static: a_scale in every entry) go to column `blk` of [k_blocks,
// m_pad] where `scales` is given. Rows m .. rows - 1 (a GEMM's padding) get codes and scales
// 0. Grid: x the row's groups, y rows (striding by gridDim.y).
template <typename T, bool kDynamic>
__global__ void __launch_bounds__(kQuantThreads)
    ActQuantE4m3Kernel(const T* __restrict__ a, const float* __restrict__ a_scale, int64_t m, int64_t rows,
                       int64_t k, int block_size, int k_blocks, int64_t m_pad, uint8_t* __restrict__ codes,
                       float* __restrict__ scales) {
  const int lanes = block_size == 128 ? 16 : 32;
  const int lane = threadIdx.x % lanes;
  const int blk = static_cast<int>((blockIdx.x * kQuantThreads + threadIdx.x) / lanes);
  if (blk >= k_blocks) return;  // whole groups leave together
  // The group's lanes: shuffles stay inside them.
  const unsigned mask = lanes == 32 ? 0xffffffffu : 0xffffu << (threadIdx.x % 32 - lane);
  const int64_t begin = static_cast<int64_t>(blk) * block_size;
  const int64_t end = blk + 1 < k_blocks ? begin + block_size : k;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    if (row >= m) {
      if (scales != nullptr && lane == 0) scales[blk * m_pad + row] = 0.0f;
      for (int64_t i = begin + 8 * lane; i < end; i += 8 * lanes)
        *reinterpret_cast<uint2*>(codes + row * k + i) = make_uint2(0, 0);
      continue;
    }
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
    } else {
      scale = *a_scale;
    }
    if (scales != nullptr && lane == 0) scales[blk * m_pad + row] = scale;
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

}  // namespace act_quant

// The pass over A of `args` in K blocks of `block` (k_blocks of them): codes [rows, K]
// bytes, and where `scales` is given the scales [k_blocks, m_pad] (static: a_scale in
// each); rows >= M (rows <= m_pad) zero.
template <typename T, bool kDynamic>
Status launch_act_quant_e4m3(const Fp8KernelArgs& args, int64_t rows, int64_t block, int64_t k_blocks,
                             int64_t m_pad, uint8_t* codes, float* scales, cudaStream_t stream) {
  using act_quant::kQuantThreads;
  const int64_t lanes = block == 128 ? 16 : 32;
  const dim3 grid(static_cast<unsigned>((k_blocks * lanes + kQuantThreads - 1) / kQuantThreads),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  act_quant::ActQuantE4m3Kernel<T, kDynamic><<<grid, kQuantThreads, 0, stream>>>(
      static_cast<const T*>(args.a), args.a_scale, args.m, rows, args.k, static_cast<int>(block),
      static_cast<int>(k_blocks), m_pad, codes, scales);
  return check_launch("ActQuantE4m3Kernel");
}

}  // namespace bqmm::cuda
