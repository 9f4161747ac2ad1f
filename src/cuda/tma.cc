// Host side of cuda/gemv/tma.cuh: tensor maps of the GEMV weight matrices.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_check.h"
#include "cuda/gemv/tma.cuh"

namespace bqmm::cuda {
namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point: no link against
// libcuda, resolved once per process.
Status encode_function(PFN_cuTensorMapEncodeTiled_v12000* out) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static const cudaError_t err = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &query);
    if (e == cudaSuccess && query == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    return e;
  }();
  BQMM_RETURN_IF_ERROR(cuda_status(err, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)"));
  if (fn == nullptr)
    return Status(StatusCode::kCudaError, "cuTensorMapEncodeTiled: not provided by the driver");
  *out = fn;
  return Status::Ok();
}

}  // namespace

Status make_tile_tensor_map(const void* base, int64_t rows, int64_t row_bytes, CUtensorMap* out,
                            int box_rows, int box_bytes) {
  if (box_bytes != 128 && box_bytes != 64 && box_bytes != 32)
    return Status(StatusCode::kInternal, "make_tile_tensor_map: box of " + std::to_string(box_bytes) + " bytes");
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  BQMM_RETURN_IF_ERROR(encode_function(&encode));
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(row_bytes), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims,
                            strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            box_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                            : box_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                              : CU_TENSOR_MAP_SWIZZLE_32B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status(StatusCode::kCudaError,
                  "cuTensorMapEncodeTiled: error " + std::to_string(static_cast<int>(r)) +
                      " for a [" + std::to_string(rows) + ", " + std::to_string(row_bytes) +
                      "] byte matrix");
  return Status::Ok();
}

}  // namespace bqmm::cuda
