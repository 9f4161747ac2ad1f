// The mixed-input GEMM's launcher (gemm/mixed_gemm.cuh has the GEMM): the scales (and
// zeros) into the layout CUTLASS's collective reads unless the operator's prepacked input
// has them (gemm/mixed_scales.cu), then the GEMM of the planned tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

template <typename T>
Status launch_typed(const FusedGemmArgs& g, const MixedGemmLaunch& launch, cudaStream_t stream) {
  const void* scales_t = launch.prepacked;
  if (scales_t == nullptr) {
    BQMM_RETURN_IF_ERROR(launch_mixed_scales(g, launch.scales, stream));
    scales_t = launch.scales;
  }
  const void* zeros_t = nullptr;  // N-bit's zeros follow the scales, of the same type
  if (g.weights != GemmWeights::kFp8) {
    const DType scales_dtype = mixed_nbits_scales_dtype(g.dtype, gemm_weight_bits(g.weights));
    zeros_t = static_cast<const uint8_t*>(scales_t) + mixed_scales_bytes(g.n, g.k_blocks, scales_dtype, false);
  }
  switch (g.weights) {
    case GemmWeights::kFp8: return launch_mixed_tile<T, GemmWeights::kFp8>(g, launch, scales_t, zeros_t, stream);
    case GemmWeights::kInt8: return launch_mixed_tile<T, GemmWeights::kInt8>(g, launch, scales_t, zeros_t, stream);
    case GemmWeights::kInt4: return launch_mixed_tile<T, GemmWeights::kInt4>(g, launch, scales_t, zeros_t, stream);
  }
  return Status(StatusCode::kInternal, "launch_mixed_gemm: unknown weight format");
}

}  // namespace

Status launch_mixed_gemm(const FusedGemmArgs& g, const MixedGemmLaunch& launch, cudaStream_t stream) {
  if (g.dtype == DType::kFloat16) return launch_typed<__half>(g, launch, stream);
  if (g.dtype == DType::kBFloat16) return launch_typed<__nv_bfloat16>(g, launch, stream);
  return Status(StatusCode::kInternal, std::string("launch_mixed_gemm: activations of ") + dtype_name(g.dtype));
}

}  // namespace bqmm::cuda
