// bqmm-profile --between-kernel: a small kernel of the profiler's own before each timed
// call, standing for the norm or activation kernel that precedes a GEMV in a model's
// decode step. It is launched plainly and never calls griddepcontrol.launch_dependents, as
// another library's kernel would not, so a programmatic dependent launch after it can start
// no earlier than its blocks exit: the chain a dependent launch meets in a model, where
// the suites' back-to-back chains of one operator let each call start the next early.
#include <cuda_runtime.h>

#include <cstdint>

#include "profile.h"

namespace bqmm::profile {
namespace {

constexpr int kBetweenThreads = 256;

// Writes `words` 16-byte words of `out`: a norm of a few rows' worth of output.
__global__ void __launch_bounds__(kBetweenThreads) BetweenKernel(uint4* __restrict__ out, size_t words) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t v = static_cast<uint32_t>(i);
    out[i] = make_uint4(v, v + 1, v + 2, v + 3);
  }
}

}  // namespace

Status launch_between_kernel(void* out, size_t bytes, cudaStream_t stream) {
  const size_t words = bytes / 16;
  if (words == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>((words + kBetweenThreads - 1) / kBetweenThreads);
  BetweenKernel<<<blocks, kBetweenThreads, 0, stream>>>(static_cast<uint4*>(out), words);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return Status(StatusCode::kCudaError, std::string("BetweenKernel: ") + cudaGetErrorString(e));
  return Status::Ok();
}

}  // namespace bqmm::profile
