// A kernel that keeps the stream busy for a given time, so that the host can enqueue every
// timed run behind it and the GPU then executes them back to back: without it, runs shorter
// than their host-side enqueue cost (a few microseconds: validation, launches, events)
// would be timed with the host's gaps inside.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "harness/timing.h"

namespace bqmm::harness {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void SpinKernel(uint64_t duration_ns) {
  const uint64_t start = global_ns();
  while (global_ns() - start < duration_ns) __nanosleep(1000);
}

}  // namespace

Status gpu_spin(cudaStream_t stream, double microseconds) {
  if (microseconds <= 0) return Status::Ok();
  SpinKernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(microseconds * 1e3));
  return cuda::check_launch("SpinKernel");
}

}  // namespace bqmm::harness
