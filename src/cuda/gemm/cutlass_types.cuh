// CUTLASS's element types for bqmm's: the activation type T and each weight format
// (mixed_gemm.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cutlass/numeric_types.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {

template <typename T>
using CutlassFloat = std::conditional_t<std::is_same_v<T, __half>, cutlass::half_t, cutlass::bfloat16_t>;
template <GemmWeights kW>
using CutlassCodes = std::conditional_t<
    kW == GemmWeights::kFp8, cutlass::float_e4m3_t,
    std::conditional_t<kW == GemmWeights::kInt8, uint8_t, cutlass::uint4b_t>>;

}  // namespace bqmm::cuda
