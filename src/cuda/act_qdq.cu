// W8A8 activation quantize-dequantize into the workspace (dequant + cuBLAS path only; the
// GEMV kernels fuse the same qdq_e4m3 into their activation load).
// a_scale is read on the device: the op never copies it to the host, so it stays
// CUDA-graph capturable and never synchronizes.
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

}  // namespace

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
