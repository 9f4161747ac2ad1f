// Fp8WeightMatMul validation (docs/CONTRACT.md sections 1 and 3): host only, no CUDA calls.
#include <algorithm>
#include <cstring>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "core/arg_spans.h"
#include "core/check.h"
#include "core/prepack.h"

namespace bqmm {

int64_t find_b_scale_block_rows(const float* b_scale, int64_t n, int64_t k_blocks, int64_t rows) {
  if (rows <= 1 || b_scale == nullptr) return 1;
  const size_t row_bytes = static_cast<size_t>(k_blocks) * sizeof(float);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t first = r - r % rows;
    // Bitwise, so NaN scales repeat too (and, conservatively, -0.0 differs from 0.0).
    if (r != first && std::memcmp(b_scale + r * k_blocks, b_scale + first * k_blocks, row_bytes) != 0) return 1;
  }
  return rows;
}

Shape fp8_matmul_prepacked_shape(int64_t n, int64_t k_blocks) { return Shape{k_blocks, n}; }

Status validate_fp8_prepack(const TensorView& b_scale, const MutableTensorView& prepacked,
                            int64_t* n, int64_t* k_blocks) {
  BQMM_RETURN_IF_ERROR(check::dtype_in("b_scale", b_scale.dtype, {DType::kFloat32}));
  if (b_scale.shape.rank() != 2)
    return Status(StatusCode::kInvalidArgument,
                  "b_scale: expected rank 2 [N, ceil(K/block_size)] but got " + b_scale.shape.to_string());
  *n = b_scale.shape[0];
  *k_blocks = b_scale.shape[1];
  int64_t numel = 0;
  BQMM_RETURN_IF_ERROR(check::numel("b_scale", b_scale.shape, DType::kFloat32, &numel));
  BQMM_RETURN_IF_ERROR(check::data("b_scale", b_scale.data, numel, DType::kFloat32));
  BQMM_RETURN_IF_ERROR(check::prepacked(TensorView{prepacked.data, prepacked.dtype, prepacked.shape},
                                        DType::kFloat32, fp8_matmul_prepacked_shape(*n, *k_blocks),
                                        "ceil(K/block_size), N: b_scale's shape transposed"));
  return check::disjoint(check::span("prepacked", prepacked), {check::span("b_scale", b_scale)});
}

ArgSpans arg_spans(const Fp8MatMulArgs& args) {
  using check::span;
  return {span("a", args.a),
          span("b", args.b),
          span("b_scale", args.b_scale),
          span("a_scale", args.a_scale),
          span("bias", args.bias),
          span("prepacked", args.prepacked),
          check::Span{},
          span("y", args.y)};
}

Status fp8_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape) {
  return check::matmul_output_shape(a_shape, n, y_shape);
}

Status validate_fp8_matmul(const Fp8MatMulArgs& args, const Fp8MatMulAttrs& attrs,
                           Fp8MatMulProblem* problem) {
  using check::dtype_in;
  using check::shape_eq;
  if (attrs.block_size <= 0)
    return Status(StatusCode::kInvalidArgument,
                  "block_size: expected an integer > 0 but got " +
                      std::to_string(attrs.block_size));

  // A: T[..., K]
  BQMM_RETURN_IF_ERROR(dtype_in("a", args.a.dtype, {DType::kFloat16, DType::kBFloat16}));
  const DType t = args.a.dtype;
  int64_t m = 0, k = 0, a_numel = 0;
  BQMM_RETURN_IF_ERROR(check::leading_dims("a", args.a.shape, &m, &k));
  BQMM_RETURN_IF_ERROR(check::numel("a", args.a.shape, t, &a_numel));
  BQMM_RETURN_IF_ERROR(check::data("a", args.a.data, a_numel, t));

  // B: e4m3[N, K]
  BQMM_RETURN_IF_ERROR(dtype_in("b", args.b.dtype, {DType::kFloat8E4M3}));
  if (args.b.shape.rank() != 2)
    return Status(StatusCode::kInvalidArgument,
                  "b: expected rank 2 [N, K] but got " + args.b.shape.to_string());
  const int64_t n = args.b.shape[0];
  if (n < 0)
    return Status(StatusCode::kInvalidArgument,
                  "b: expected non-negative dimensions but got " + args.b.shape.to_string());
  BQMM_RETURN_IF_ERROR(shape_eq("b", args.b.shape, Shape{n, k}, "N, K with K from a"));
  int64_t b_numel = 0;
  BQMM_RETURN_IF_ERROR(check::numel("b", args.b.shape, DType::kFloat8E4M3, &b_numel));
  BQMM_RETURN_IF_ERROR(check::data("b", args.b.data, b_numel, DType::kFloat8E4M3));

  // b_scale: float32[N, k_blocks]
  // Not (k + block_size - 1) / block_size: that overflows for a huge block_size attribute.
  const int64_t k_blocks = k / attrs.block_size + (k % attrs.block_size != 0 ? 1 : 0);
  BQMM_RETURN_IF_ERROR(dtype_in("b_scale", args.b_scale.dtype, {DType::kFloat32}));
  BQMM_RETURN_IF_ERROR(
      shape_eq("b_scale", args.b_scale.shape, Shape{n, k_blocks}, "N, ceil(K/block_size)"));
  BQMM_RETURN_IF_ERROR(check::data("b_scale", args.b_scale.data, n * k_blocks,
                                   DType::kFloat32));

  // a_scale: float32, exactly one element, on the device.
  if (args.a_scale) {
    const TensorView& s = *args.a_scale;
    BQMM_RETURN_IF_ERROR(dtype_in("a_scale", s.dtype, {DType::kFloat32}));
    int64_t s_numel = 0;
    BQMM_RETURN_IF_ERROR(check::numel("a_scale", s.shape, DType::kFloat32, &s_numel));
    if (s_numel != 1)
      return Status(StatusCode::kInvalidArgument,
                    "a_scale: expected a scalar (exactly 1 element) but got shape " +
                        s.shape.to_string());
    if (s.data == nullptr)
      return Status(StatusCode::kInvalidArgument, "a_scale: null data pointer for 1 element");
    BQMM_RETURN_IF_ERROR(check::data("a_scale", s.data, 1, DType::kFloat32));
  }

  // bias: T[N]
  if (args.bias) {
    BQMM_RETURN_IF_ERROR(dtype_in("bias", args.bias->dtype, {t}));
    BQMM_RETURN_IF_ERROR(shape_eq("bias", args.bias->shape, Shape{n}, "N"));
    BQMM_RETURN_IF_ERROR(check::data("bias", args.bias->data, n, t));
  }

  // prepacked: float32[k_blocks, N], b_scale transposed (prepack_fp8_matmul)
  if (args.prepacked)
    BQMM_RETURN_IF_ERROR(check::prepacked(*args.prepacked, DType::kFloat32, fp8_matmul_prepacked_shape(n, k_blocks),
                                          "ceil(K/block_size), N: b_scale transposed (prepack_fp8_matmul)"));

  // Y: T[..., N]
  Shape y_shape;
  BQMM_RETURN_IF_ERROR(fp8_matmul_output_shape(args.a.shape, n, &y_shape));
  BQMM_RETURN_IF_ERROR(dtype_in("y", args.y.dtype, {t}));
  BQMM_RETURN_IF_ERROR(shape_eq("y", args.y.shape, y_shape, "A's shape with K replaced by N"));
  int64_t y_numel = 0;
  BQMM_RETURN_IF_ERROR(check::numel("y", y_shape, t, &y_numel));
  BQMM_RETURN_IF_ERROR(check::data("y", args.y.data, y_numel, t));
  BQMM_RETURN_IF_ERROR(check_output_apart(arg_spans(args)));

  Fp8MatMulProblem p;
  p.dtype = t;
  p.m = m;
  p.n = n;
  p.k = k;
  p.block_size = attrs.block_size;
  p.has_bias = args.bias.has_value();
  p.has_a_scale = args.a_scale.has_value();
  p.has_prepacked = args.prepacked.has_value();
  p.dynamic_act_quant = attrs.dynamic_act_quant;
  if (attrs.b_scale_block_rows < 1)
    return Status(StatusCode::kInvalidArgument,
                  "b_scale_block_rows: expected >= 1 (rows of B sharing each scale), got " +
                      std::to_string(attrs.b_scale_block_rows));
  p.b_scale_block_rows = attrs.b_scale_block_rows;
  if (p.has_a_scale && p.dynamic_act_quant)
    return Status(StatusCode::kInvalidArgument,
                  "a_scale: given with dynamic_act_quant; static (a_scale) and dynamic "
                  "activation quantization exclude each other");
  p.alignment = check::min_pointer_alignment(
      {args.a.data, args.b.data, args.y.data, args.bias ? args.bias->data : nullptr});
  *problem = p;
  return Status::Ok();
}

}  // namespace bqmm
