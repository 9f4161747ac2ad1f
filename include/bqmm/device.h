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

// Register bounds per thread of the decode GEMVs' two-tile kernels (both operators'
// options gemv_registers): 128 holds 16 of their warps per SM (Hopper's and Ampere's 16 K
// registers per scheduler); 168 holds 12, and each warp streams faster.
constexpr int kGemvTwoTileRegisters = 128;
constexpr int kGemvWideRegisters = 168;

// Reads sm and num_sms of CUDA device `device`.
Status query_device_info(int device, DeviceInfo* out);

// Per-device state: a cuBLAS handle, and a second stream with a few events on which the
// dequant + GEMM paths overlap the dequantization of one N tile with the GEMM of the
// previous one (forked from and joined back into the caller's stream, so a call is still
// one graph-capturable unit). Create once (it allocates), then share across calls on that
// device; not thread-safe across concurrent calls.
class Handle {
 public:
  static Status create(int device, std::unique_ptr<Handle>* out);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  int device() const { return device_; }
  const DeviceInfo& device_info() const { return info_; }
  cublasContext* cublas() const { return cublas_; }
  // The second stream and its events (CUDA types, kept opaque in this header).
  struct Overlap;
  const Overlap& overlap() const { return *overlap_; }

 private:
  Handle();
  int device_ = 0;
  DeviceInfo info_;
  cublasContext* cublas_ = nullptr;
  std::unique_ptr<Overlap> overlap_;
};

}  // namespace bqmm
