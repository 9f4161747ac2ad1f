// W8A8 on FP8 tensor cores (gemm/w8a8_wgmma.cu, SM90a): the launch and its workspace
// (sizes: core/gemm_plan.h, w8a8_m_pad).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "bqmm/status.h"
#include "bqmm/tensor.h"  // DType
#include "core/gemm_plan.h"

namespace bqmm::cuda {

struct W8A8GemmArgs {
  DType t = DType::kFloat16;      // activation and output type (float16, bfloat16)
  const void* a = nullptr;        // [M, K] T
  const float* a_scale = nullptr; // static mode: the scalar (device)
  bool dynamic = false;           // per-(row, block) scales computed by the quantize pass
  const uint8_t* b = nullptr;     // [N, K] e4m3
  const float* b_scales = nullptr;  // [N, k_blocks]
  const void* bias = nullptr;     // [N] T or nullptr
  void* y = nullptr;              // [M, N] T
  int64_t m = 0, n = 0, k = 0, block_size = 128;
};

struct W8A8Workspace {
  uint8_t* codes = nullptr;    // M x K bytes
  float* scales = nullptr;     // dynamic: k_blocks x w8a8_m_pad(M) floats
  float* partials = nullptr;   // k_split > 1: k_split x M x N floats
};

Status launch_w8a8_gemm(const W8A8GemmArgs& args, int k_split, const W8A8Workspace& ws,
                        cudaStream_t stream);

}  // namespace bqmm::cuda
