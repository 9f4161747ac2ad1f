// The passes before W8A8 on cuBLASLt's block-scaled FP8 GEMM (the w8a8_cublaslt path of
// Fp8WeightMatMul; the GEMM itself: cuda/cublas_gemm.cc, gemm_fp8_block_scaled):
//
//   codes, sa  = quantize(A)                   [rows, K] e4m3, [k_blocks, rows] float32
//   sw[g, b]   = b_scale[128 g, b]             128 x 128 weight blocks only
//
// cuBLASLt reads the activation's scales with the rows contiguous (VEC128_32F on its B
// operand) and takes row counts in multiples of 4 only, so the quantize pass writes `rows`
// = M rounded up to 4 (act_quant_e4m3.cuh; the rows past M zero). Where the caller
// promises weight scales shared by 128-row groups (b_scale_block_rows), cuBLASLt's
// BLK128x128_32F wants one scale per (group, K block), the K blocks of a group contiguous
// and padded to 4; the gather below reads the first row of each group. Per-row weight
// scales are the mixed-input GEMM's transpose ([k_blocks, N], launch_mixed_scales or the
// prepacked input). Built for every architecture; the planner takes the path on SM90.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/gemm/act_quant_e4m3.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kGatherThreads = 256;
constexpr int kScaleGroupRows = 128;

// sw[g * kb4 + b] = b_scale[(128 g) * k_blocks + b] for b < k_blocks, 0 for the padding
// up to kb4. One thread per entry of sw.
__global__ void __launch_bounds__(kGatherThreads)
    GatherBlockScalesKernel(const float* __restrict__ b_scale, int64_t groups, int64_t k_blocks, int64_t kb4,
                            float* __restrict__ sw) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGatherThreads + threadIdx.x;
  if (i >= groups * kb4) return;
  const int64_t g = i / kb4, b = i % kb4;
  sw[i] = b < k_blocks ? __ldg(b_scale + g * kScaleGroupRows * k_blocks + b) : 0.0f;
}

template <typename T, bool kDynamic>
Status quantize(const Fp8KernelArgs& args, int64_t rows, int64_t k_blocks, const W8A8Workspace& ws,
                cudaStream_t stream) {
  return launch_act_quant_e4m3<T, kDynamic>(args, rows, args.block_size, k_blocks, rows, ws.codes, ws.scales,
                                            stream);
}

}  // namespace

Status launch_w8a8_cublaslt_prologue(const Fp8KernelArgs& args, bool dynamic, int64_t rows, const W8A8Workspace& ws,
                                     float* block_scales, cudaStream_t stream) {
  if (args.block_size != 128 || args.k % 16 != 0 || rows < args.m)
    return Status(StatusCode::kInternal, "launch_w8a8_cublaslt_prologue: block_size 128, K % 16 == 0, rows >= M");
  const int64_t k_blocks = (args.k + args.block_size - 1) / args.block_size;
  BQMM_RETURN_IF_ERROR(dispatch_half_types(args.dtype, "w8a8 cublaslt quantize", [&](auto tag) {
    using T = decltype(tag);
    return dynamic ? quantize<T, true>(args, rows, k_blocks, ws, stream)
                   : quantize<T, false>(args, rows, k_blocks, ws, stream);
  }));
  if (block_scales == nullptr) return Status::Ok();
  const int64_t groups = (args.n + kScaleGroupRows - 1) / kScaleGroupRows;
  const int64_t kb4 = (k_blocks + 3) / 4 * 4;
  const int64_t entries = groups * kb4;
  GatherBlockScalesKernel<<<static_cast<unsigned>((entries + kGatherThreads - 1) / kGatherThreads), kGatherThreads,
                            0, stream>>>(args.b_scale, groups, k_blocks, kb4, block_scales);
  return check_launch("GatherBlockScalesKernel");
}

}  // namespace bqmm::cuda
