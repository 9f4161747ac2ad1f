// NBitsMatMul validation (docs/CONTRACT.md sections 2 and 3): host only, no CUDA calls.
#include <algorithm>
#include <string>

#include "bqmm/nbits_matmul.h"
#include "core/arg_spans.h"
#include "core/check.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/prepack.h"

namespace bqmm {
namespace {

Status invalid(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }

Status check_attrs(const NBitsMatMulAttrs& attrs) {
  if (attrs.bits == 2)
    return Status(StatusCode::kNotSupported,
                  "bits: 2-bit weights are valid MatMulNBits but not implemented by bqmm "
                  "(supported: 4, 8)");
  if (attrs.bits != 4 && attrs.bits != 8)
    return invalid("bits: expected 2, 4 or 8 but got " + std::to_string(attrs.bits));
  const int64_t bs = attrs.block_size;
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return invalid("block_size: expected a power of two >= 16 but got " + std::to_string(bs));
  if (attrs.k < 0) return invalid("K: expected an integer >= 0 but got " + std::to_string(attrs.k));
  if (attrs.n < 0) return invalid("N: expected an integer >= 0 but got " + std::to_string(attrs.n));
  return Status::Ok();
}

// scales and typed zero points: T1 [N, k_blocks], or flat [N * k_blocks].
Status check_per_block(const char* name, const TensorView& t, DType dtype, int64_t n,
                       int64_t k_blocks) {
  BQMM_RETURN_IF_ERROR(check::dtype_in(name, t.dtype, {dtype}));
  BQMM_RETURN_IF_ERROR(check::shape_in(name, t.shape, {Shape{n, k_blocks}, Shape{n * k_blocks}},
                                       "N, ceil(K/block_size); or flat"));
  return check::data(name, t.data, n * k_blocks, dtype);
}

// scales T1 [N, k_blocks] (or flat); zero_points packed uint8 [N, ceil(k_blocks * bits /
// 8)] or typed T1 [N, k_blocks] (either flat too). Writes the zero points' form.
Status check_scales_and_zero_points(const TensorView& scales, const std::optional<TensorView>& zero_points,
                                    DType t, int64_t n, int64_t k_blocks, int64_t bits, NBitsZeroPoints* zp_kind) {
  BQMM_RETURN_IF_ERROR(check_per_block("scales", scales, t, n, k_blocks));
  *zp_kind = NBitsZeroPoints::kNone;
  if (!zero_points) return Status::Ok();
  const TensorView& zp = *zero_points;
  BQMM_RETURN_IF_ERROR(check::dtype_in("zero_points", zp.dtype, {DType::kUInt8, t}));
  if (zp.dtype == DType::kUInt8) {
    *zp_kind = NBitsZeroPoints::kPacked;
    const int64_t row = (k_blocks * bits + 7) / 8;
    BQMM_RETURN_IF_ERROR(check::shape_in("zero_points", zp.shape, {Shape{n, row}, Shape{n * row}},
                                         "N, ceil(k_blocks*bits/8) packed uint8; or flat"));
    return check::data("zero_points", zp.data, n * row, DType::kUInt8);
  }
  *zp_kind = NBitsZeroPoints::kTyped;
  return check_per_block("zero_points", zp, t, n, k_blocks);
}

// Every size of the weight is at most N * k_blocks * block_size: checked once, so the
// products that follow cannot overflow. Writes k_blocks.
Status check_weight_size(const NBitsMatMulAttrs& attrs, int64_t* k_blocks) {
  *k_blocks = attrs.k / attrs.block_size + (attrs.k % attrs.block_size != 0 ? 1 : 0);
  int64_t padded_k = 0, padded_numel = 0;
  BQMM_RETURN_IF_ERROR(
      check::mul_no_overflow("K padded to whole blocks", *k_blocks, attrs.block_size, &padded_k));
  return check::mul_no_overflow("N * K padded to whole blocks", attrs.n, padded_k, &padded_numel);
}

}  // namespace

Shape nbits_matmul_prepacked_shape(int64_t n, int64_t k_blocks) { return Shape{2, k_blocks, n}; }
DType nbits_matmul_prepacked_dtype(DType t1, int64_t bits) {
  return mixed_nbits_scales_dtype(t1, static_cast<int>(bits));
}

Status validate_nbits_prepack(const NBitsMatMulAttrs& attrs, const TensorView& scales,
                              const std::optional<TensorView>& zero_points,
                              const MutableTensorView& prepacked, NBitsMatMulProblem* problem) {
  BQMM_RETURN_IF_ERROR(check_attrs(attrs));
  int64_t k_blocks = 0;
  BQMM_RETURN_IF_ERROR(check_weight_size(attrs, &k_blocks));
  const DType t = scales.dtype;
  BQMM_RETURN_IF_ERROR(check::dtype_in("scales", t, {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  NBitsZeroPoints zp_kind = NBitsZeroPoints::kNone;
  BQMM_RETURN_IF_ERROR(check_scales_and_zero_points(scales, zero_points, t, attrs.n, k_blocks, attrs.bits, &zp_kind));
  BQMM_RETURN_IF_ERROR(check::prepacked(TensorView{prepacked.data, prepacked.dtype, prepacked.shape},
                                        nbits_matmul_prepacked_dtype(t, attrs.bits),
                                        nbits_matmul_prepacked_shape(attrs.n, k_blocks),
                                        "2, ceil(K/block_size), N: scales and zeros transposed"));
  BQMM_RETURN_IF_ERROR(check::disjoint(check::span("prepacked", prepacked),
                                       {check::span("scales", scales), check::span("zero_points", zero_points)}));
  NBitsMatMulProblem p;
  p.dtype = t;
  p.n = attrs.n;
  p.k = attrs.k;
  p.bits = static_cast<int>(attrs.bits);
  p.block_size = attrs.block_size;
  p.zero_points = zp_kind;
  *problem = p;
  return Status::Ok();
}

const char* nbits_zero_points_name(NBitsZeroPoints zp) {
  switch (zp) {
    case NBitsZeroPoints::kNone: return "none";
    case NBitsZeroPoints::kPacked: return "packed";
    case NBitsZeroPoints::kTyped: return "typed";
  }
  return "unknown";
}

ArgSpans arg_spans(const NBitsMatMulArgs& args) {
  using check::span;
  return {span("a", args.a),
          span("b", args.b),
          span("scales", args.scales),
          span("zero_points", args.zero_points),
          span("g_idx", args.g_idx),
          span("bias", args.bias),
          span("prepacked", args.prepacked),
          span("y", args.y)};
}

Status nbits_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape) {
  return check::matmul_output_shape(a_shape, n, y_shape);
}

Status validate_nbits_matmul(const NBitsMatMulArgs& args, const NBitsMatMulAttrs& attrs,
                             NBitsMatMulProblem* problem) {
  BQMM_RETURN_IF_ERROR(check_attrs(attrs));
  const int64_t n = attrs.n;
  const int64_t k = attrs.k;
  const int64_t bits = attrs.bits;
  int64_t k_blocks = 0;
  BQMM_RETURN_IF_ERROR(check_weight_size(attrs, &k_blocks));

  // A: T1[..., K]
  BQMM_RETURN_IF_ERROR(check::dtype_in("a", args.a.dtype,
                                       {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  const DType t = args.a.dtype;
  int64_t m = 0, a_k = 0, a_numel = 0;
  BQMM_RETURN_IF_ERROR(check::leading_dims("a", args.a.shape, &m, &a_k));
  if (a_k != k) {
    Shape expected = args.a.shape;
    expected[expected.rank() - 1] = k;
    BQMM_RETURN_IF_ERROR(
        check::shape_eq("a", args.a.shape, expected, "..., K with K from the attribute"));
  }
  BQMM_RETURN_IF_ERROR(check::numel("a", args.a.shape, t, &a_numel));
  BQMM_RETURN_IF_ERROR(check::data("a", args.a.data, a_numel, t));

  // B: uint8[N, k_blocks, block_size * bits / 8]
  BQMM_RETURN_IF_ERROR(check::tensor("b", args.b, DType::kUInt8,
                                     Shape{n, k_blocks, attrs.block_size * bits / 8},
                                     "N, ceil(K/block_size), block_size*bits/8"));

  // scales: T1[N, k_blocks] (or flat); zero_points: packed uint8 [N, ceil(k_blocks * bits /
  // 8)] or typed T1 [N, k_blocks]
  NBitsZeroPoints zp_kind = NBitsZeroPoints::kNone;
  BQMM_RETURN_IF_ERROR(check_scales_and_zero_points(args.scales, args.zero_points, t, n, k_blocks, bits, &zp_kind));

  // g_idx: int32[K]; its values' range is the caller's responsibility (nbits_matmul.h).
  if (args.g_idx)
    BQMM_RETURN_IF_ERROR(check::tensor("g_idx", *args.g_idx, DType::kInt32, Shape{k}, "K"));

  // bias: T1[N]
  if (args.bias) BQMM_RETURN_IF_ERROR(check::tensor("bias", *args.bias, t, Shape{n}, "N"));

  // prepacked: [2, k_blocks, N] of nbits_matmul_prepacked_dtype (prepack_nbits_matmul)
  if (args.prepacked)
    BQMM_RETURN_IF_ERROR(check::prepacked(*args.prepacked, nbits_matmul_prepacked_dtype(t, bits),
                                          nbits_matmul_prepacked_shape(n, k_blocks),
                                          "2, ceil(K/block_size), N: scales and zeros transposed "
                                          "(prepack_nbits_matmul)"));

  // Y: T1[..., N]
  Shape y_shape;
  BQMM_RETURN_IF_ERROR(nbits_matmul_output_shape(args.a.shape, n, &y_shape));
  const TensorView y{args.y.data, args.y.dtype, args.y.shape};
  BQMM_RETURN_IF_ERROR(check::tensor("y", y, t, y_shape, "A's shape with K replaced by N"));
  BQMM_RETURN_IF_ERROR(check_output_apart(arg_spans(args)));

  NBitsMatMulProblem p;
  p.dtype = t;
  p.m = m;
  p.n = n;
  p.k = k;
  p.bits = static_cast<int>(bits);
  p.block_size = attrs.block_size;
  p.zero_points = zp_kind;
  p.has_g_idx = args.g_idx.has_value();
  p.has_bias = args.bias.has_value();
  p.has_prepacked = args.prepacked.has_value();
  p.alignment = check::min_pointer_alignment(
      {args.a.data, args.b.data, args.y.data, args.bias ? args.bias->data : nullptr});
  p.scale_alignment = check::pointer_alignment(args.scales.data);
  *problem = p;
  return Status::Ok();
}

}  // namespace bqmm
