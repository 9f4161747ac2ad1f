// The device memory of an operator call, for the overlap checks (check::disjoint): what the
// call reads, then Y. Validation refuses a Y that overlaps an input; run() refuses a
// workspace that overlaps any of them. Host only; reads no device memory.
#pragma once

#include <array>

#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "core/check.h"

namespace bqmm {

// The inputs (absent ones empty) and, last, Y.
using ArgSpans = std::array<check::Span, 8>;

// a, b, b_scale, a_scale, bias, prepacked, (empty), y
ArgSpans arg_spans(const Fp8MatMulArgs& args);
// a, b, scales, zero_points, g_idx, bias, prepacked, y
ArgSpans arg_spans(const NBitsMatMulArgs& args);

// Y (the last span) overlaps none of the inputs.
inline Status check_output_apart(const ArgSpans& spans) {
  return check::disjoint(spans.back(), spans.data(), spans.size() - 1);
}

}  // namespace bqmm
