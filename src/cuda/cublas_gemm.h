// The one cuBLAS call of bqmm: Y[M, N] (row-major, ld = ldy) = A[M, K] * W[N, K]^T with
// A and W row-major in T (float16 / bfloat16 / float32), FP32 compute, cuBLAS workspace
// supplied by the caller (so the call can be graph-captured). Used by the dequant + GEMM
// paths and by the CLI's dense baseline.
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

}  // namespace bqmm::cuda
