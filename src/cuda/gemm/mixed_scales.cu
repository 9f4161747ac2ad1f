// The mixed-input GEMM's weight scales in the layout CUTLASS's collective reads ([k_blocks,
// N], weight rows contiguous; float32 for FP8, N-bit's of mixed_nbits_scales_dtype in
// core/mixed_plan.h) from the operators' [N, k_blocks]; for N-bit weights the zeros
// -zp * scale (the product in float32, then rounded to that type) after them. Built for
// every architecture: the prepack functions (prepack_fp8_matmul, prepack_nbits_matmul)
// write the same data once per weight that the mixed-input GEMM's per-run pass writes
// into the workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kTile = 32;  // a 32 x 32 tile of (weight rows, K blocks) per block
constexpr int kRowsPerPass = 8;

// The zero point of (row, block) as the operator defines it (docs/CONTRACT.md): packed
// integers (8-bit one byte per block; 4-bit two blocks per byte, the even one low), typed
// T values, or the default 2^(bits - 1).
template <typename T>
__device__ __forceinline__ float zero_point(const FusedGemmArgs& g, int bits, int64_t row, int64_t blk) {
  if (g.zp_packed != nullptr) {
    const uint8_t* zr = g.zp_packed + row * g.zp_row_bytes;
    if (bits == 8) return static_cast<float>(zr[blk]);
    return static_cast<float>((zr[blk / 2] >> (4 * (blk % 2))) & 0xF);
  }
  if (g.zp_typed != nullptr) return to_float(static_cast<const T*>(g.zp_typed)[row * g.k_blocks + blk]);
  return static_cast<float>(1 << (bits - 1));
}

// scales_t[b, n] = O(scale[n, b]); N-bit also zeros_t[b, n] = O(-zp[n, b] * scale[n, b])
// (the product in float32). T: the activation type (typed zero points), S: the scales',
// O: the GEMM's. A block transposes a 32 x 32 tile through shared memory: reads run along
// the K blocks of a row, writes along the rows of a block, both coalesced.
template <typename T, typename S, typename O>
__global__ void MixedScalesKernel(const FusedGemmArgs g, int bits, O* scales_t, O* zeros_t) {
  __shared__ float s_tile[kTile][kTile + 1];
  __shared__ float z_tile[kTile][kTile + 1];
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kTile, n0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const bool zeros = zeros_t != nullptr;
#pragma unroll
  for (int r = ty; r < kTile; r += kRowsPerPass) {
    const int64_t row = n0 + r, blk = b0 + tx;
    if (row < g.n && blk < g.k_blocks) {
      const float s = to_float(static_cast<const S*>(g.scales)[row * g.k_blocks + blk]);
      s_tile[r][tx] = s;
      if (zeros) z_tile[r][tx] = -zero_point<T>(g, bits, row, blk) * s;
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = ty; r < kTile; r += kRowsPerPass) {
    const int64_t blk = b0 + r, row = n0 + tx;
    if (row < g.n && blk < g.k_blocks) {
      scales_t[blk * g.n + row] = from_float<O>(s_tile[tx][r]);
      if (zeros) zeros_t[blk * g.n + row] = from_float<O>(z_tile[tx][r]);
    }
  }
}

// Writes `scales_t` as O [k_blocks, N], N-bit's zeros after them.
template <typename T, typename S, typename O>
Status launch_typed(const FusedGemmArgs& g, void* scales_t, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((g.k_blocks + kTile - 1) / kTile),
                  static_cast<unsigned>((g.n + kTile - 1) / kTile));
  const dim3 block(kTile, kRowsPerPass);
  O* scales = static_cast<O*>(scales_t);
  O* zeros = g.weights == GemmWeights::kFp8 ? nullptr : scales + g.k_blocks * g.n;
  MixedScalesKernel<T, S, O><<<grid, block, 0, stream>>>(g, gemm_weight_bits(g.weights), scales, zeros);
  return check_launch("MixedScalesKernel");
}

}  // namespace

Status launch_mixed_scales(const FusedGemmArgs& g, void* scales_t, cudaStream_t stream) {
  if (g.n == 0 || g.k_blocks == 0) return Status::Ok();
  const bool fp8 = g.weights == GemmWeights::kFp8;
  const bool typed = !fp8 && mixed_nbits_scales_dtype(g.dtype, gemm_weight_bits(g.weights)) == g.dtype;
  return dispatch_float_types(g.dtype, "mixed-input GEMM scales", [&](auto tag) {
    using T = decltype(tag);
    if (fp8) return launch_typed<T, float, float>(g, scales_t, stream);
    if (typed) return launch_typed<T, T, T>(g, scales_t, stream);
    return launch_typed<T, T, float>(g, scales_t, stream);
  });
}

}  // namespace bqmm::cuda
