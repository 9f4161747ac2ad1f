#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "bqmm/device.h"
#include "cuda/cuda_check.h"

namespace bqmm {

Status Handle::create(int device, std::unique_ptr<Handle>* out) {
  std::unique_ptr<Handle> h(new Handle());
  h->device_ = device;
  BQMM_CUDA_RETURN(cudaSetDevice(device));
  BQMM_RETURN_IF_ERROR(query_device_info(device, &h->info_));
  cublasHandle_t cublas = nullptr;
  const cublasStatus_t st = cublasCreate(&cublas);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status(StatusCode::kCublasError,
                  std::string("cublasCreate: ") + cublasGetStatusString(st));
  h->cublas_ = cublas;
  *out = std::move(h);
  return Status::Ok();
}

Handle::~Handle() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

}  // namespace bqmm
