// bqmm: what the planner needs to know about a GPU, and the handle that owns the
// per-device library state (the cuBLAS handle).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <ostream>

#include "bqmm/status.h"

struct cublasContext;  // cuBLAS's handle type, opaque here

namespace bqmm {

// The planner's view of a device. Plain data so that plans can be made (and tested)
// for a GPU that is not present: DeviceInfo{90, 132} is an H100/H200.
struct DeviceInfo {
  int sm = 0;        // compute capability * 10 + minor: 80, 86, 89, 90, ...
  int num_sms = 0;   // multiprocessor count
};
std::ostream& operator<<(std::ostream& os, const DeviceInfo& d);

// Reads sm and num_sms of CUDA device `device`.
Status query_device_info(int device, DeviceInfo* out);

// Per-device state: the cuBLAS handle of the dequant + cuBLAS paths. Create once (it
// allocates), then share across calls on that device; not thread-safe across concurrent
// calls.
class Handle {
 public:
  static Status create(int device, std::unique_ptr<Handle>* out);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  int device() const { return device_; }
  const DeviceInfo& device_info() const { return info_; }
  cublasContext* cublas() const { return cublas_; }

 private:
  Handle() = default;
  int device_ = 0;
  DeviceInfo info_;
  cublasContext* cublas_ = nullptr;
};

}  // namespace bqmm
