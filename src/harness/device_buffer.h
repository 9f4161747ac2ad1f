// Owning device memory for the tests and the CLI (the library itself never allocates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bqmm/status.h"
#include "bqmm/tensor.h"
#include "harness/host_tensor.h"

namespace bqmm::harness {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static Status allocate(size_t bytes, DeviceBuffer* out);  // 0 bytes: no allocation
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A device copy of a HostTensor, optionally placed `offset` bytes into its buffer (to
// make deliberately misaligned pointers in tests).
struct DeviceTensor {
  DeviceBuffer buffer;
  DType dtype = DType::kFloat32;
  Shape shape;
  size_t offset = 0;

  static Status upload(const HostTensor& host, DeviceTensor* out, size_t offset = 0);
  Status download(HostTensor* host) const;  // host keeps dtype/shape of this tensor
  // Fills every byte with 0xFF: NaN in float32, float16 and bfloat16 (poisoned output).
  Status poison();
  void* data() const { return static_cast<uint8_t*>(buffer.data()) + offset; }
  TensorView view() const { return TensorView{data(), dtype, shape}; }
  MutableTensorView mutable_view() const { return MutableTensorView{data(), dtype, shape}; }
};

// true when a CUDA device is present and usable; `why` says why not.
bool cuda_device_available(std::string* why = nullptr);

}  // namespace bqmm::harness
