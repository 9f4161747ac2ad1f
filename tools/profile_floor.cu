// bqmm-profile's floor of a case: the fastest pure read of the case's weight bytes (the
// quantized weight with its scales and zero points, one copy's blob) under the same timing
// as the operator, so that a kernel's time can be read as a share of what streaming its
// bytes costs (stream_read.cuh's load shape, 8 blocks of 256 threads per SM, as
// tools/microbench/launch_floor.cu measured it).
#include <cuda_runtime.h>

#include <cstdint>

#include "profile.h"
#include "stream_read.cuh"

namespace bqmm::profile {
namespace {

constexpr int kFloorThreads = 256;
constexpr int kFloorBlocksPerSm = 8;

}  // namespace

Status launch_stream_read(const void* bytes_in, size_t bytes, int num_sms, uint32_t* sink,
                          cudaStream_t stream) {
  const size_t words = bytes / 16;  // a copy's blob is 256-byte aligned; its tail < 16 bytes is left out
  if (words == 0) return Status::Ok();
  stream_read::read_kernel<kFloorThreads><<<num_sms * kFloorBlocksPerSm, kFloorThreads, 0, stream>>>(
      static_cast<const uint4*>(bytes_in), words, sink);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return Status(StatusCode::kCudaError, std::string("stream_read::read_kernel: ") + cudaGetErrorString(e));
  return Status::Ok();
}

}  // namespace bqmm::profile
