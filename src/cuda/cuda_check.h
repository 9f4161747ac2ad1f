// CUDA / cuBLAS return codes -> Status. Every CUDA call and every launch in bqmm goes
// through these.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "bqmm/status.h"

namespace bqmm::cuda {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kCudaError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// After a <<<>>> launch: reports launch-configuration errors without synchronizing.
inline Status check_launch(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

// Host: lets `kernel` launch with `smem_bytes` of dynamic shared memory (above 48 KB a
// kernel must opt in; the setting is per device, so launchers call this at every launch:
// a host-side call that stream capture allows).
inline Status allow_dynamic_smem(const void* kernel, int smem_bytes) {
  return cuda_status(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
      "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

// Stores `from` in `to`, as a kernel visitor's lambda hands its launch's status out. The
// assignment's Status& is dropped on purpose: Status is [[nodiscard]], and nvcc warns on
// a discarded reference to it.
inline void set_status(Status& to, Status from) { static_cast<void>(to = std::move(from)); }

}  // namespace bqmm::cuda

#define BQMM_CUDA_RETURN(expr) BQMM_RETURN_IF_ERROR(::bqmm::cuda::cuda_status((expr), #expr))
