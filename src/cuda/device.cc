#include <cuda_runtime_api.h>

#include "bqmm/device.h"
#include "cuda/cuda_check.h"

namespace bqmm {

Status query_device_info(int device, DeviceInfo* out) {
  int major = 0, minor = 0, sms = 0;
  BQMM_CUDA_RETURN(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  BQMM_CUDA_RETURN(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  BQMM_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  out->sm = major * 10 + minor;
  out->num_sms = sms;
  return Status::Ok();
}

}  // namespace bqmm
