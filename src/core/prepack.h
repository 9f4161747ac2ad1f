// The checks of the prepack functions (prepack_fp8_matmul, prepack_nbits_matmul): the
// validators' rules for the weight's scales and zero points, and the prepacked tensor's
// dtype, shape and alignment (check::prepacked). Host only; the runs are in
// cuda/fp8_matmul_run.cc and cuda/nbits_matmul_run.cc.
#pragma once

#include <cstdint>
#include <optional>

#include "bqmm/nbits_matmul.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm {

// b_scale float32 [N, k_blocks] with data; prepacked float32 [k_blocks, N]. Writes N and
// k_blocks.
Status validate_fp8_prepack(const TensorView& b_scale, const MutableTensorView& prepacked,
                            int64_t* n, int64_t* k_blocks);

// The attributes, the scales and zero points as validate_nbits_matmul checks them (T1
// from the scales), prepacked float32 [2, k_blocks, N]. Fills the weight's part of
// `problem` (dtype, n, k, bits, block_size, zero_points; M = 0).
Status validate_nbits_prepack(const NBitsMatMulAttrs& attrs, const TensorView& scales,
                              const std::optional<TensorView>& zero_points,
                              const MutableTensorView& prepacked, NBitsMatMulProblem* problem);

}  // namespace bqmm
