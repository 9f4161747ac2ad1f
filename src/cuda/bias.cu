// Bias epilogues of the dequant + cuBLAS path (the GEMV kernels fuse the bias instead).
// Adding after cuBLAS rounds Y to T twice (GEMM result, then + bias); docs/DESIGN.md says so.
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kBiasThreads = 256;

// kAdd: y = round_T(y + bias); otherwise y = bias (or 0 when bias is null: K == 0).
// Grid: x over columns, y over rows (strided past 65535), so no per-element division.
template <typename T, bool kAdd>
__global__ void __launch_bounds__(kBiasThreads)
    BiasKernel(T* __restrict__ y, const T* __restrict__ bias, int64_t m, int64_t n) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kBiasThreads + threadIdx.x;
  if (col >= n) return;
  const float b = bias != nullptr ? to_float(bias[col]) : 0.0f;
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    T* p = y + row * n + col;
    *p = from_float<T>(kAdd ? to_float(*p) + b : b);
  }
}

template <bool kAdd>
Status launch_bias(DType t, void* y, const void* bias, int64_t m, int64_t n,
                   cudaStream_t stream) {
  if (m == 0 || n == 0) return Status::Ok();
  return dispatch_float_types(t, "bias", [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>((n + kBiasThreads - 1) / kBiasThreads),
                    static_cast<unsigned>(m < 65535 ? m : 65535));
    BiasKernel<T, kAdd><<<grid, kBiasThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), m, n);
    return check_launch(kAdd ? "BiasKernel<add>" : "BiasKernel<fill>");
  });
}

}  // namespace

Status launch_bias_add(DType t, void* y, const void* bias, int64_t m, int64_t n,
                       cudaStream_t stream) {
  return launch_bias<true>(t, y, bias, m, n, stream);
}

Status launch_fill_bias(DType t, void* y, const void* bias, int64_t m, int64_t n,
                        cudaStream_t stream) {
  return launch_bias<false>(t, y, bias, m, n, stream);
}

}  // namespace bqmm::cuda
