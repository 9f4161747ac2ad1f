#include "common/gpu.h"

#include <memory>
#include <string>

namespace bqmm::testing {

const Handle* shared_handle() {
  static std::unique_ptr<Handle> handle = [] {
    std::unique_ptr<Handle> h;
    const Status s = Handle::create(0, &h);
    if (!s.ok()) ADD_FAILURE() << "Handle::create: " << s.to_string();
    return h;
  }();
  return handle.get();
}

Status run_on_fresh_stream(const std::function<Status(cudaStream_t)>& enqueue) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess)
    return Status(StatusCode::kCudaError, "cudaStreamCreate failed");
  const Status run = enqueue(stream);
  const cudaError_t sync = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  BQMM_RETURN_IF_ERROR(run);
  if (sync != cudaSuccess)
    return Status(StatusCode::kCudaError,
                  std::string("kernel execution: ") + cudaGetErrorString(sync));
  return Status::Ok();
}

}  // namespace bqmm::testing
