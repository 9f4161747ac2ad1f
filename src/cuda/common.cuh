// Device-side building blocks shared by every kernel family (FP8 and N-bit alike):
// the activation type traits, e4m3 decoding, streaming loads, warp reductions and the
// W8A8 activation quantize-dequantize. Kernel files include this; nothing here launches.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include <string>

#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm::cuda {

constexpr int kWarpSize = 32;

// ----------------------------------------------------------------- activation types
// T is __half or __nv_bfloat16 (float for the N-bit operator's float32 activations).
template <typename T> struct TypeOf;
template <> struct TypeOf<__half> {
  static constexpr DType kDType = DType::kFloat16;
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct TypeOf<__nv_bfloat16> {
  static constexpr DType kDType = DType::kBFloat16;
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
template <> struct TypeOf<float> {
  static constexpr DType kDType = DType::kFloat32;
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};

template <typename T> __device__ __forceinline__ float to_float(T v) { return TypeOf<T>::to_float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v) { return TypeOf<T>::from_float(v); }

// Returns f(T{}) with T the device type of `dtype` (float16 or bfloat16); f returns a
// Status. Any other dtype is an internal error naming `what` (the planner never asks).
template <typename F>
Status dispatch_half_types(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(__half{});
    case DType::kBFloat16: return f(__nv_bfloat16{});
    default:
      return Status(StatusCode::kInternal, std::string(what) + ": unsupported dtype " + dtype_name(dtype));
  }
}

// ----------------------------------------------------------------- e4m3 decoding
// Every e4m3 value is exact in float16 (and in bfloat16 and float32), so decoding goes
// through the hardware fp8x2 -> half2 conversion and widens from there.
__device__ __forceinline__ float e4m3_to_float(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Two codes packed in the low 16 bits (element 0 in the low byte) -> two floats.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t codes) {
  const __half2_raw h2 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
  return __half22float2(__half2(h2));
}

// ----------------------------------------------------------------- W8A8 activation
// q = e4m3_satfinite_rne(a * inv); a' = round_T(float(q) * a_scale). inv is computed once
// by the caller as a_scale != 0 ? 1 / a_scale : 0 (IEEE division, no fast-math), so the
// kernels that fuse this are bit-identical to the standalone QDQ kernel.
__device__ __forceinline__ float qdq_inv_scale(float a_scale) {
  return a_scale != 0.0f ? 1.0f / a_scale : 0.0f;
}
template <typename T>
__device__ __forceinline__ T qdq_e4m3(float a, float inv, float a_scale) {
  const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(a * inv, __NV_SATFINITE, __NV_E4M3);
  return from_float<T>(e4m3_to_float(static_cast<uint8_t>(q)) * a_scale);
}

// ----------------------------------------------------------------- memory
// Weights are read exactly once per call: stream them past L1 (no_allocate) through the
// read-only path so they do not evict the activations other warps re-read.
__device__ __forceinline__ uint4 load_stream_u4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Outputs written once and not re-read by this kernel: evict-first streaming store.
__device__ __forceinline__ void store_stream_u4(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// ----------------------------------------------------------------- reductions
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ----------------------------------------------------------------- launch shapes
// Grid-stride element loops cap the grid at a few waves of the device.
inline unsigned int grid_for(int64_t work_items, int threads_per_block, int64_t max_blocks = 65535 * 8) {
  int64_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned int>(blocks);
}

}  // namespace bqmm::cuda
