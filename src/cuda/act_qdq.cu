// Activation quantize-dequantize into the workspace, A' = QDQ(A), for Fp8WeightMatMul:
//   static W8A8 (a_scale): one scale for the tensor, read on the device (the op never
//     copies it to the host, so it stays CUDA-graph capturable and never synchronizes);
//     off the GEMV only, whose kernels fuse the same qdq_e4m3 into their activation load.
//   dynamic: one scale per row and K block, s = amax |A| / 448, computed here; every path.
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kQdqThreads = 256;

// Eight activations in one 16-byte word: their QDQ (qdq_e4m3x2, bit-identical to
// qdq_e4m3 per element) and their amax / NaN.
template <typename T>
__device__ __forceinline__ uint4 qdq8(uint4 v, float inv, float scale) {
  return make_uint4(qdq_e4m3x2<T>(v.x, inv, scale), qdq_e4m3x2<T>(v.y, inv, scale),
                    qdq_e4m3x2<T>(v.z, inv, scale), qdq_e4m3x2<T>(v.w, inv, scale));
}
template <typename T>
__device__ __forceinline__ void amax8(uint4 v, float* amax, bool* nan) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = packed2_to_float2<T>(words[j]);
    *nan |= f.x != f.x || f.y != f.y;
    *amax = fmaxf(*amax, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
}

// Static: a grid-stride loop, 8 activations (one 16-byte load and store) per step where A
// and A' are 16-byte aligned (`vec`), the rest one at a time.
template <typename T>
__global__ void __launch_bounds__(kQdqThreads)
    ActQdqKernel(const T* __restrict__ a, const float* __restrict__ a_scale, int64_t count,
                 bool vec, T* __restrict__ out) {
  const float scale = *a_scale;
  const float inv = qdq_inv_scale(scale);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t vec_end = vec ? count / 8 * 8 : 0;
  for (int64_t i = first * 8; i < vec_end; i += stride * 8)
    *reinterpret_cast<uint4*>(out + i) = qdq8<T>(*reinterpret_cast<const uint4*>(a + i), inv, scale);
  for (int64_t i = vec_end + first; i < count; i += stride)
    out[i] = qdq_e4m3<T>(to_float(a[i]), inv, scale);
}

// Dynamic: one warp per (row, K block); lanes stride the block twice, for its amax and
// then for the QDQ (the second pass hits L1), 8 activations per load where the block
// starts on a 16-byte boundary (`vec` and a block offset of whole 8-element groups), the
// block's last < 8 one at a time. A NaN anywhere in the block makes s NaN and so every
// output of the block (the contract's rule); an infinity makes inv 0 and the outputs NaN
// (inf * 0), as the reference computes it.
template <typename T>
__global__ void __launch_bounds__(kQdqThreads)
    ActQdqDynamicKernel(const T* __restrict__ a, int64_t m, int64_t k, int64_t block_size,
                        int64_t k_blocks, bool vec, T* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = m * k_blocks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kQdqThreads / 32);
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * (kQdqThreads / 32) + threadIdx.x / 32;
       w < warps; w += stride) {
    const int64_t row = w / k_blocks, blk = w % k_blocks;
    const int64_t begin = row * k + blk * block_size;
    const int64_t end = row * k + (blk + 1 < k_blocks ? (blk + 1) * block_size : k);
    const int64_t vec_end = vec && begin % 8 == 0 ? begin + (end - begin) / 8 * 8 : begin;
    float amax = 0.0f;
    bool nan = false;
    for (int64_t i = begin + 8 * lane; i < vec_end; i += 8 * 32)
      amax8<T>(*reinterpret_cast<const uint4*>(a + i), &amax, &nan);
    for (int64_t i = vec_end + lane; i < end; i += 32) {
      const float x = to_float(a[i]);
      nan |= x != x;
      amax = fmaxf(amax, fabsf(x));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    nan = __any_sync(0xffffffffu, nan);
    const float scale = nan ? __int_as_float(0x7fc00000) : amax / 448.0f;
    const float inv = qdq_inv_scale(scale);
    for (int64_t i = begin + 8 * lane; i < vec_end; i += 8 * 32)
      *reinterpret_cast<uint4*>(out + i) = qdq8<T>(*reinterpret_cast<const uint4*>(a + i), inv, scale);
    for (int64_t i = vec_end + lane; i < end; i += 32) out[i] = qdq_e4m3<T>(to_float(a[i]), inv, scale);
  }
}

bool aligned16(const void* a, const void* b) {
  return reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
}

}  // namespace

Status launch_act_qdq_dynamic(DType t, const void* a, int64_t m, int64_t k, int64_t block_size,
                              void* out, cudaStream_t stream) {
  if (m == 0 || k == 0) return Status::Ok();
  const int64_t k_blocks = (k + block_size - 1) / block_size;
  return dispatch_half_types(t, "dynamic act qdq", [&](auto tag) {
    using T = decltype(tag);
    ActQdqDynamicKernel<T><<<grid_for(m * k_blocks * 32, kQdqThreads), kQdqThreads, 0, stream>>>(
        static_cast<const T*>(a), m, k, block_size, k_blocks, aligned16(a, out),
        static_cast<T*>(out));
    return check_launch("ActQdqDynamicKernel");
  });
}

Status launch_act_qdq(DType t, const void* a, const float* a_scale, int64_t count, void* out,
                      cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  return dispatch_half_types(t, "act qdq", [&](auto tag) {
    using T = decltype(tag);
    const bool vec = aligned16(a, out);
    ActQdqKernel<T><<<grid_for(vec ? (count + 7) / 8 : count, kQdqThreads), kQdqThreads, 0, stream>>>(
        static_cast<const T*>(a), a_scale, count, vec, static_cast<T*>(out));
    return check_launch("ActQdqKernel");
  });
}

}  // namespace bqmm::cuda
