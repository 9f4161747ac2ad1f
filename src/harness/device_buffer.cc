#include "harness/device_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "cuda/cuda_check.h"

namespace bqmm::harness {

DeviceBuffer::~DeviceBuffer() {
  // A destructor cannot report; a failing cudaFree here means the context is already
  // broken and the next checked call says so.
  if (data_ != nullptr) (void)cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Status DeviceBuffer::allocate(size_t bytes, DeviceBuffer* out) {
  DeviceBuffer b;
  if (bytes > 0) {
    BQMM_CUDA_RETURN(cudaMalloc(&b.data_, bytes));
    b.size_ = bytes;
  }
  *out = std::move(b);
  return Status::Ok();
}

Status DeviceTensor::upload(const HostTensor& host, DeviceTensor* out, size_t offset) {
  DeviceTensor t;
  t.dtype = host.dtype;
  t.shape = host.shape;
  t.offset = offset;
  const size_t bytes = host.bytes.size();
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(bytes + offset, &t.buffer));
  if (bytes > 0)
    BQMM_CUDA_RETURN(cudaMemcpy(t.data(), host.data(), bytes, cudaMemcpyHostToDevice));
  *out = std::move(t);
  return Status::Ok();
}

Status DeviceTensor::download(HostTensor* host) const {
  HostTensor h = HostTensor::zeros(dtype, shape);
  if (!h.bytes.empty())
    BQMM_CUDA_RETURN(cudaMemcpy(h.data(), data(), h.bytes.size(), cudaMemcpyDeviceToHost));
  *host = std::move(h);
  return Status::Ok();
}

Status DeviceTensor::poison() {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  if (bytes > 0) BQMM_CUDA_RETURN(cudaMemset(data(), 0xFF, bytes));
  return Status::Ok();
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Clear the error so that it does not surface in a later, unrelated check.
    (void)cudaGetLastError();
    if (why != nullptr) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "cudaGetDeviceCount found 0 devices";
    return false;
  }
  return true;
}

}  // namespace bqmm::harness
