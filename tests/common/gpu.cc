#include "common/gpu.h"

#include <memory>
#include <string>

#include "cuda/cuda_check.h"
#include "harness/host_tensor.h"

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

Status run_on_fresh_stream(const Enqueue& enqueue) {
  cudaStream_t stream = nullptr;
  BQMM_CUDA_RETURN(cudaStreamCreate(&stream));
  const Status run = enqueue(stream);
  const cudaError_t sync = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  BQMM_RETURN_IF_ERROR(run);
  return cuda::cuda_status(sync, "kernel execution");
}

Status run_in_graph(const Enqueue& enqueue, int replays) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  const Status replayed = run_on_fresh_stream([&](cudaStream_t stream) -> Status {
    BQMM_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const Status captured = enqueue(stream);
    // The capture is ended whatever the enqueue returned, so that the stream leaves
    // capture mode; the enqueue's own error says more than the capture it invalidated.
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    BQMM_RETURN_IF_ERROR(captured);
    BQMM_RETURN_IF_ERROR(cuda::cuda_status(ended, "cudaStreamEndCapture"));
    BQMM_CUDA_RETURN(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < replays; ++r) BQMM_CUDA_RETURN(cudaGraphLaunch(exec, stream));
    return Status::Ok();
  });
  // Destroyed only here, after run_on_fresh_stream's synchronization: the replay is over.
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  return replayed;
}

Status upload_poisoned(DType dtype, const Shape& shape, harness::DeviceTensor* out) {
  const harness::HostTensor zeros = harness::HostTensor::zeros(dtype, shape);
  BQMM_RETURN_IF_ERROR(harness::DeviceTensor::upload(zeros, out));
  return out->poison();
}

}  // namespace bqmm::testing
