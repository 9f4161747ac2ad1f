// CUDA / cuBLAS return codes -> Status. Every CUDA call and every launch in bqmm goes
// through these.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "bqmm/status.h"

namespace bqmm::cuda {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kCudaError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// After a <<<>>> launch: reports launch-configuration errors without synchronizing.
inline Status check_launch(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

}  // namespace bqmm::cuda

#define BQMM_CUDA_RETURN(expr) BQMM_RETURN_IF_ERROR(::bqmm::cuda::cuda_status((expr), #expr))
