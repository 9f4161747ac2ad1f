#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "bqmm/device.h"
#include "cuda/cuda_check.h"
#include "cuda/handle_overlap.h"

namespace bqmm {

Handle::Handle() : overlap_(new Overlap()) {}

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
  Overlap& o = *h->overlap_;
  BQMM_CUDA_RETURN(cudaStreamCreateWithFlags(&o.stream, cudaStreamNonBlocking));
  // Ordering only: no timing, so recording them costs nothing.
  BQMM_CUDA_RETURN(cudaEventCreateWithFlags(&o.fork, cudaEventDisableTiming));
  for (int b = 0; b < 2; ++b) {
    BQMM_CUDA_RETURN(cudaEventCreateWithFlags(&o.dequantized[b], cudaEventDisableTiming));
    BQMM_CUDA_RETURN(cudaEventCreateWithFlags(&o.consumed[b], cudaEventDisableTiming));
  }
  *out = std::move(h);
  return Status::Ok();
}

Handle::~Handle() {
  const Overlap& o = *overlap_;
  for (int b = 0; b < 2; ++b) {
    if (o.dequantized[b] != nullptr) cudaEventDestroy(o.dequantized[b]);
    if (o.consumed[b] != nullptr) cudaEventDestroy(o.consumed[b]);
  }
  if (o.fork != nullptr) cudaEventDestroy(o.fork);
  if (o.stream != nullptr) cudaStreamDestroy(o.stream);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

}  // namespace bqmm
