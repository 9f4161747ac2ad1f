// The definition of Handle::Overlap (opaque in the public header): the handle's second
// stream and the events that order it against the caller's stream.
#pragma once

#include <cuda_runtime_api.h>

#include "bqmm/device.h"

namespace bqmm {

struct Handle::Overlap {
  cudaStream_t stream = nullptr;       // non-blocking: never waits on the legacy stream
  cudaEvent_t fork = nullptr;          // caller's stream -> second stream
  cudaEvent_t dequantized[2] = {};     // buffer b filled (second stream -> caller's)
  cudaEvent_t consumed[2] = {};        // buffer b's GEMM done (caller's -> second stream)
};

}  // namespace bqmm
