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

template <typename T>
__global__ void __launch_bounds__(kQdqThreads)
    ActQdqKernel(const T* __restrict__ a, const float* __restrict__ a_scale, int64_t count,
                 T* __restrict__ out) {
  const float scale = *a_scale;
  const float inv = qdq_inv_scale(scale);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = qdq_e4m3<T>(to_float(a[i]), inv, scale);
  }
}

// Dynamic: one warp per (row, K block); lanes stride the block twice, for its amax and
// then for the QDQ (the second pass hits L1). A NaN anywhere in the block makes s NaN and
// so every output of the block (the contract's rule); an infinity makes inv 0 and the
// outputs NaN (inf * 0), as the reference computes it.
template <typename T>
__global__ void __launch_bounds__(kQdqThreads)
    ActQdqDynamicKernel(const T* __restrict__ a, int64_t m, int64_t k, int64_t block_size,
                        int64_t k_blocks, T* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = m * k_blocks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (kQdqThreads / 32);
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * (kQdqThreads / 32) + threadIdx.x / 32;
       w < warps; w += stride) {
    const int64_t row = w / k_blocks, blk = w % k_blocks;
    const int64_t begin = row * k + blk * block_size;
    const int64_t end = row * k + (blk + 1 < k_blocks ? (blk + 1) * block_size : k);
    float amax = 0.0f;
    bool nan = false;
    for (int64_t i = begin + lane; i < end; i += 32) {
      const float x = to_float(a[i]);
      nan |= x != x;
      amax = fmaxf(amax, fabsf(x));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    nan = __any_sync(0xffffffffu, nan);
    const float scale = nan ? __int_as_float(0x7fc00000) : amax / 448.0f;
    const float inv = qdq_inv_scale(scale);
    for (int64_t i = begin + lane; i < end; i += 32) out[i] = qdq_e4m3<T>(to_float(a[i]), inv, scale);
  }
}

}  // namespace

Status launch_act_qdq_dynamic(DType t, const void* a, int64_t m, int64_t k, int64_t block_size,
                              void* out, cudaStream_t stream) {
  if (m == 0 || k == 0) return Status::Ok();
  const int64_t k_blocks = (k + block_size - 1) / block_size;
  return dispatch_half_types(t, "dynamic act qdq", [&](auto tag) {
    using T = decltype(tag);
    ActQdqDynamicKernel<T><<<grid_for(m * k_blocks * 32, kQdqThreads), kQdqThreads, 0, stream>>>(
        static_cast<const T*>(a), m, k, block_size, k_blocks, static_cast<T*>(out));
    return check_launch("ActQdqDynamicKernel");
  });
}

Status launch_act_qdq(DType t, const void* a, const float* a_scale, int64_t count, void* out,
                      cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  return dispatch_half_types(t, "act qdq", [&](auto tag) {
    using T = decltype(tag);
    ActQdqKernel<T><<<grid_for(count, kQdqThreads), kQdqThreads, 0, stream>>>(
        static_cast<const T*>(a), a_scale, count, static_cast<T*>(out));
    return check_launch("ActQdqKernel");
  });
}

}  // namespace bqmm::cuda
