// FP8 weight dequantization: B e4m3 [rows, K] * b_scale[rows, K / block_size] -> T [rows, K].
//
// The dequant + cuBLAS path's bottleneck is this pass: it reads rows*K bytes, writes
// 2*rows*K and does almost no arithmetic, so the only goal is the speed of HBM.
//   * Vec16Kernel (K % 16 == 0, 16-byte aligned B, K < 2^31): a lane converts 8 codes per
//     step (one 8-byte load, one 16-byte store), so a warp's loads cover 256 contiguous
//     bytes and its stores 512: both fully coalesced. (Sixteen codes per lane in one
//     16-byte load would leave each 16-byte store instruction writing every other 16 bytes.)
//     Each lane keeps four such steps in flight and the row comes from the grid, so there is
//     no per-element 64-bit division; the scale column comes from a multiply-shift division
//     once per 8 elements when block_size % 8 == 0 (8 elements then share one scale), per
//     element otherwise.
//   * ScalarKernel (any K, any alignment): one element per step, a scale lookup each.
// Weights are read once: streamed past L1 (no_allocate).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kDequantThreads = 128;
constexpr int kGroup = 8;           // codes per lane per step: 8-byte load, 16-byte store
constexpr int kGroupsPerThread = 4;  // independent loads in flight per lane
constexpr int kElemsPerBlockRow = kDequantThreads * kGroup * kGroupsPerThread;

// 8 codes -> 8 T, each times its scale. kUniformScale: all share `scale`.
template <typename T, bool kUniformScale>
__device__ __forceinline__ uint4 dequant_group(uint2 codes, const float* s_row, uint32_t k0,
                                               FastDivU32 block_div, float scale) {
  const uint32_t words[2] = {codes.x, codes.y};
  uint32_t packed[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = e4m3x2_to_float2(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
    float s0 = scale, s1 = scale;
    if (!kUniformScale) {
      s0 = s_row[block_div.div(k0 + 2 * i)];
      s1 = s_row[block_div.div(k0 + 2 * i + 1)];
    }
    packed[i] = float2_to_packed2<T>(v.x * s0, v.y * s1);
  }
  return make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

// Grid: x over kElemsPerBlockRow-element spans of a row, y over rows (strided past 65535).
template <typename T, bool kUniformScale>
__global__ void __launch_bounds__(kDequantThreads)
    DequantFp8Vec16Kernel(const uint8_t* __restrict__ b, const float* __restrict__ b_scale,
                          int64_t rows, uint32_t k, int64_t k_blocks, FastDivU32 block_div,
                          T* __restrict__ out) {
  const uint32_t first = blockIdx.x * kElemsPerBlockRow + threadIdx.x * kGroup;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const uint8_t* b_row = b + row * k;
    const float* s_row = b_scale + row * k_blocks;
    T* out_row = out + row * k;
    uint2 codes[kGroupsPerThread];
#pragma unroll
    for (int g = 0; g < kGroupsPerThread; ++g) {
      const uint32_t k0 = first + g * kDequantThreads * kGroup;
      if (k0 < k) codes[g] = load_stream_u2(b_row + k0);
    }
#pragma unroll
    for (int g = 0; g < kGroupsPerThread; ++g) {
      const uint32_t k0 = first + g * kDequantThreads * kGroup;
      if (k0 >= k) continue;
      const float scale = kUniformScale ? s_row[block_div.div(k0)] : 0.0f;
      *reinterpret_cast<uint4*>(out_row + k0) =
          dequant_group<T, kUniformScale>(codes[g], s_row, k0, block_div, scale);
    }
  }
}

// Any K, any alignment: a grid-stride loop over elements.
template <typename T>
__global__ void __launch_bounds__(kDequantThreads)
    DequantFp8ScalarKernel(const uint8_t* __restrict__ b, const float* __restrict__ b_scale,
                           int64_t rows, int64_t k, int64_t k_blocks, int64_t block_size,
                           T* __restrict__ out) {
  const int64_t total = rows * k;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / k;
    const int64_t col = i - row * k;
    out[i] = from_float<T>(e4m3_to_float(b[i]) * b_scale[row * k_blocks + col / block_size]);
  }
}

}  // namespace

Status launch_fp8_dequant(DType t, const uint8_t* b, const float* b_scale, int64_t rows,
                          int64_t k, int64_t block_size, bool vec16, void* out,
                          cudaStream_t stream) {
  if (rows == 0 || k == 0) return Status::Ok();
  const int64_t k_blocks = k / block_size + (k % block_size != 0 ? 1 : 0);
  // The vector kernel indexes within a row in 32 bits.
  if (vec16 && (k % 16 != 0 || k >= (int64_t{1} << 31)))
    return Status(StatusCode::kInternal, "fp8 dequant: vector kernel needs K % 16 == 0, K < 2^31");
  return dispatch_half_types(t, "fp8 dequant", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    if (vec16) {
      const dim3 grid(static_cast<unsigned>((k + kElemsPerBlockRow - 1) / kElemsPerBlockRow),
                      static_cast<unsigned>(rows < 65535 ? rows : 65535));
      // A block size >= 2^31 is one block covering all of K.
      const FastDivU32 block_div(static_cast<uint32_t>(block_size < k ? block_size : k));
      const uint32_t k32 = static_cast<uint32_t>(k);
      if (block_size % kGroup == 0 || block_size >= k) {
        DequantFp8Vec16Kernel<T, true><<<grid, kDequantThreads, 0, stream>>>(
            b, b_scale, rows, k32, k_blocks, block_div, o);
      } else {
        DequantFp8Vec16Kernel<T, false><<<grid, kDequantThreads, 0, stream>>>(
            b, b_scale, rows, k32, k_blocks, block_div, o);
      }
      return check_launch("DequantFp8Vec16Kernel");
    }
    DequantFp8ScalarKernel<T><<<grid_for(rows * k, kDequantThreads), kDequantThreads, 0,
                                stream>>>(b, b_scale, rows, k, k_blocks, block_size, o);
    return check_launch("DequantFp8ScalarKernel");
  });
}

}  // namespace bqmm::cuda
