// The cuBLAS calls of bqmm, each with its workspace supplied by the caller (so the call can
// be graph-captured):
//   gemm_row_major_awt: Y[M, N] (row-major, ld = ldy) = A[M, K] * W[N, K]^T with A and W
//     row-major in T (float16 / bfloat16 / float32), FP32 compute. The dequant + GEMM paths
//     and the CLI's dense baseline.
//   gemm_fp8_block_scaled: W8A8 on cuBLASLt's FP8 GEMM with block scales (SM90), the
//     w8a8_cublaslt path of Fp8WeightMatMul.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm::cuda {

struct GemmRowMajorArgs {
  DType dtype = DType::kFloat16;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  // [M, K], ld = K
  const void* w = nullptr;  // [N, K], ld = K
  void* y = nullptr;        // [M, N], ld = ldy
  int64_t ldy = 0;
};

Status gemm_row_major_awt(const Handle& handle, const GemmRowMajorArgs& args,
                          void* cublas_workspace, size_t cublas_workspace_bytes,
                          cudaStream_t stream);

// Y[m, n] = sum_b sa[b, m] * sw(n, b) * sum_{k in block b} A[m, k] * W[n, k] + bias[n]
// (blocks of 128 K, the last one partial), rounded to T once: A [M, K] and W [N, K] e4m3,
// row-major; sa [k_blocks, M] float32 (M contiguous); sw, float32, `weight_blocks`: one per
// (128-row group, block), [ceil(N / 128), k_blocks rounded up to 4], else one per (row,
// block), [k_blocks, N] (N contiguous). cuBLASLt's requirements (else it has no kernel: an
// error): M % 4 == 0, N % 8 == 0, K % 16 == 0, 16-byte aligned pointers.
struct Fp8BlockScaledArgs {
  DType dtype = DType::kFloat16;  // T: Y and bias
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const float* a_scales = nullptr;
  const void* w = nullptr;
  const float* w_scales = nullptr;
  bool weight_blocks = false;
  int algo = 0;                // index into cuBLASLt's heuristic list (fewer found: the last)
  const void* bias = nullptr;  // T [N] or nullptr
  void* y = nullptr;           // [M, N], ld = N
};

Status gemm_fp8_block_scaled(const Handle& handle, const Fp8BlockScaledArgs& args,
                             void* cublas_workspace, size_t cublas_workspace_bytes,
                             cudaStream_t stream);

}  // namespace bqmm::cuda
