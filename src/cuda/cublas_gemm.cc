// The cuBLAS calls: row-major Y = A * W^T expressed in cuBLAS's column-major terms.
// Row-major Y[M, N] is column-major Y^T [N, M] (ld = ldy), so
//   Y^T = W * A^T  with  W: column-major [K, N] read transposed (op T, ld K)
//                        A^T: column-major [K, M] as is        (op N, ld K).
// The weight is the "A" of cuBLAS (m = N), which is also how the dense baseline runs, and
// the only order cuBLASLt's FP8 GEMMs take (both operands K-major).
#include "cuda/cublas_gemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
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

namespace {

// cuBLASLt's descriptors, destroyed with the call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, y = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (y != nullptr) cublasLtMatrixLayoutDestroy(y);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (w != nullptr) cublasLtMatrixLayoutDestroy(w);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

template <typename V>
Status set_op(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const V& value) {
  return cublas_status(cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(value)),
                       "cublasLtMatmulDescSetAttribute");
}

}  // namespace

Status gemm_fp8_block_scaled(const Handle& handle, const Fp8BlockScaledArgs& g, void* cublas_workspace,
                             size_t cublas_workspace_bytes, cudaStream_t stream) {
  cudaDataType_t type;
  if (g.dtype == DType::kFloat32 || !to_cuda_type(g.dtype, &type))
    return Status(StatusCode::kInternal,
                  std::string("gemm_fp8_block_scaled: unsupported dtype ") + dtype_name(g.dtype));
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (g.m > kIntMax || g.n > kIntMax || g.k > kIntMax)
    return Status(StatusCode::kNotSupported, "gemm_fp8_block_scaled: M, N and K must each fit in int32 for cuBLASLt");
  // A cublasHandle_t is a valid cublasLtHandle_t (cuBLAS's documentation).
  const auto lt = reinterpret_cast<cublasLtHandle_t>(handle.cublas());
  LtDescriptors d;
  BQMM_RETURN_IF_ERROR(cublas_status(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                     "cublasLtMatmulDescCreate"));
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  // cuBLAS's A is the weight, its B the activation (the file's header).
  const int32_t w_mode = g.weight_blocks ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                         : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, w_mode));
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, a_mode));
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, g.w_scales));
  BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, g.a_scales));
  if (g.bias != nullptr) {
    BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS));
    BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias));
    BQMM_RETURN_IF_ERROR(set_op(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type));
  }
  const auto layout = [](cublasLtMatrixLayout_t* out, cudaDataType_t t, int64_t rows, int64_t cols) {
    return cublas_status(
        cublasLtMatrixLayoutCreate(out, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows),
        "cublasLtMatrixLayoutCreate");
  };
  BQMM_RETURN_IF_ERROR(layout(&d.w, CUDA_R_8F_E4M3, g.k, g.n));
  BQMM_RETURN_IF_ERROR(layout(&d.a, CUDA_R_8F_E4M3, g.k, g.m));
  BQMM_RETURN_IF_ERROR(layout(&d.y, type, g.n, g.m));
  BQMM_RETURN_IF_ERROR(cublas_status(cublasLtMatmulPreferenceCreate(&d.pref), "cublasLtMatmulPreferenceCreate"));
  BQMM_RETURN_IF_ERROR(cublas_status(
      cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cublas_workspace_bytes,
                                           sizeof(cublas_workspace_bytes)),
      "cublasLtMatmulPreferenceSetAttribute"));
  constexpr int kMaxAlgos = 4;
  cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
  int found = 0;
  const int wanted = std::clamp(g.algo + 1, 1, kMaxAlgos);
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.w, d.a, d.y, d.y, d.pref, wanted, results, &found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status(StatusCode::kCublasError,
                  "gemm_fp8_block_scaled: cuBLASLt has no block-scaled FP8 kernel for M=" + std::to_string(g.m) +
                      " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) + " (" +
                      (hs == CUBLAS_STATUS_SUCCESS ? std::string("no algorithm") : cublasGetStatusString(hs)) + ")");
  const cublasLtMatmulAlgo_t& algo = results[std::min(g.algo, found - 1)].algo;
  const float alpha = 1.0f, beta = 0.0f;
  return cublas_status(cublasLtMatmul(lt, d.op, &alpha, g.w, d.w, g.a, d.a, &beta, g.y, d.y, g.y, d.y, &algo,
                                      cublas_workspace, cublas_workspace_bytes, stream),
                       "cublasLtMatmul");
}

}  // namespace bqmm::cuda
