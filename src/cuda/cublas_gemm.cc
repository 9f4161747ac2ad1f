// The one cuBLAS call: row-major Y = A * W^T expressed in cuBLAS's column-major terms.
// Row-major Y[M, N] is column-major Y^T [N, M] (ld = ldy), so
//   Y^T = W * A^T  with  W: column-major [K, N] read transposed (op T, ld K)
//                        A^T: column-major [K, M] as is        (op N, ld K).
// The weight is the "A" of cuBLAS (m = N), which is also how the dense baseline runs.
#include "cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include <limits>
#include <string>

namespace bqmm::cuda {
namespace {

Status cublas_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status(StatusCode::kCublasError, std::string(what) + ": " + cublasGetStatusString(st));
}

bool to_cuda_type(DType t, cudaDataType_t* out) {
  switch (t) {
    case DType::kFloat16: *out = CUDA_R_16F; return true;
    case DType::kBFloat16: *out = CUDA_R_16BF; return true;
    case DType::kFloat32: *out = CUDA_R_32F; return true;
    default: return false;
  }
}

}  // namespace

Status gemm_row_major_awt(const Handle& handle, const GemmRowMajorArgs& g,
                          void* cublas_workspace, size_t cublas_workspace_bytes,
                          cudaStream_t stream) {
  cudaDataType_t type;
  if (!to_cuda_type(g.dtype, &type))
    return Status(StatusCode::kInternal,
                  std::string("gemm: unsupported dtype ") + dtype_name(g.dtype));
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (g.m > kIntMax || g.n > kIntMax || g.k > kIntMax || g.ldy > kIntMax)
    return Status(StatusCode::kNotSupported,
                  "gemm: M, N, K and ldy must each fit in int32 for cuBLAS");
  cublasHandle_t h = handle.cublas();
  BQMM_RETURN_IF_ERROR(cublas_status(cublasSetStream(h, stream), "cublasSetStream"));
  // A caller-owned workspace keeps cuBLAS from allocating, so the call can be captured.
  BQMM_RETURN_IF_ERROR(cublas_status(
      cublasSetWorkspace(h, cublas_workspace, cublas_workspace_bytes), "cublasSetWorkspace"));
  const float alpha = 1.0f, beta = 0.0f;
  return cublas_status(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(g.n), static_cast<int>(g.m),
                   static_cast<int>(g.k), &alpha, g.w, type, static_cast<int>(g.k), g.a, type,
                   static_cast<int>(g.k), &beta, g.y, type, static_cast<int>(g.ldy),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace bqmm::cuda
