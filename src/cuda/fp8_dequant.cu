// FP8 weight dequantization: B e4m3 [rows, K] * b_scale[rows, K / block_size] -> T [rows, K].
//
// The dequant + cuBLAS path's bottleneck is this pass: it reads rows*K bytes and writes
// 2*rows*K, and does almost no arithmetic, so the only goal is to run at the speed of HBM:
//   * Vec16Kernel (K % 16 == 0, 16-byte aligned B): a thread owns 16-element chunks, so the
//     load is one 16-byte vector and the store two; the row comes from the grid (no 64-bit
//     division per element); one scale per chunk when block_size % 16 == 0 (a chunk then
//     never straddles a scale block), a scale per element otherwise.
//   * ScalarKernel (any K): one element per thread step, a scale lookup per element.
// Weights are read once (streaming, L1 no-allocate) and the output is written once and
// then read by cuBLAS, so it is stored normally (it may still hit L2 for a small tile).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kDequantThreads = 256;
constexpr int kChunksPerThread = 2;  // two independent 16-byte loads in flight per thread

// Packs two floats into one 32-bit word of T (element 0 in the low half).
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// 16 codes (one uint4) -> 16 T values (two uint4), each code times its scale.
// kUniformScale: the whole chunk shares scale[0].
template <typename T, bool kUniformScale>
__device__ __forceinline__ void dequant_chunk(uint4 codes, const float* scale_of, int64_t k0,
                                              int64_t block_size, uint4* out) {
  const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t packed[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 v = e4m3x2_to_float2(static_cast<uint16_t>(words[w] >> (16 * h)));
      float s0, s1;
      if (kUniformScale) {
        s0 = s1 = scale_of[0];
      } else {
        const int64_t k = k0 + w * 4 + h * 2;
        s0 = scale_of[k / block_size];
        s1 = scale_of[(k + 1) / block_size];
      }
      packed[w * 2 + h] = pack2<T>(v.x * s0, v.y * s1);
    }
  }
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
}

// Grid: x over chunk groups of a row, y over rows (strided for more than 65535 rows).
template <typename T, bool kUniformScale>
__global__ void __launch_bounds__(kDequantThreads)
    DequantFp8Vec16Kernel(const uint8_t* __restrict__ b, const float* __restrict__ b_scale,
                          int64_t rows, int64_t k, int64_t k_blocks, int64_t block_size,
                          T* __restrict__ out) {
  const int64_t chunks = k / 16;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kDequantThreads * kChunksPerThread +
                        threadIdx.x;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const uint8_t* b_row = b + row * k;
    const float* s_row = b_scale + row * k_blocks;
    T* out_row = out + row * k;
    uint4 codes[kChunksPerThread];
#pragma unroll
    for (int c = 0; c < kChunksPerThread; ++c) {
      const int64_t chunk = first + c * kDequantThreads;
      if (chunk < chunks) codes[c] = load_stream_u4(b_row + chunk * 16);
    }
#pragma unroll
    for (int c = 0; c < kChunksPerThread; ++c) {
      const int64_t chunk = first + c * kDequantThreads;
      if (chunk >= chunks) continue;
      const int64_t k0 = chunk * 16;
      uint4 v[2];
      if (kUniformScale) {
        dequant_chunk<T, true>(codes[c], s_row + k0 / block_size, k0, block_size, v);
      } else {
        dequant_chunk<T, false>(codes[c], s_row, k0, block_size, v);
      }
      uint4* dst = reinterpret_cast<uint4*>(out_row + k0);
      dst[0] = v[0];
      dst[1] = v[1];
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
  const int64_t k_blocks = (k + block_size - 1) / block_size;
  return dispatch_half_types(t, "fp8 dequant", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    if (vec16) {
      const int64_t chunks = k / 16;
      const int64_t per_block = int64_t{kDequantThreads} * kChunksPerThread;
      const dim3 grid(static_cast<unsigned>((chunks + per_block - 1) / per_block),
                      static_cast<unsigned>(rows < 65535 ? rows : 65535));
      if (block_size % 16 == 0) {
        DequantFp8Vec16Kernel<T, true><<<grid, kDequantThreads, 0, stream>>>(
            b, b_scale, rows, k, k_blocks, block_size, o);
      } else {
        DequantFp8Vec16Kernel<T, false><<<grid, kDequantThreads, 0, stream>>>(
            b, b_scale, rows, k, k_blocks, block_size, o);
      }
      return check_launch("DequantFp8Vec16Kernel");
    }
    DequantFp8ScalarKernel<T><<<grid_for(rows * k, kDequantThreads), kDequantThreads, 0,
                                stream>>>(b, b_scale, rows, k, k_blocks, block_size, o);
    return check_launch("DequantFp8ScalarKernel");
  });
}

}  // namespace bqmm::cuda
