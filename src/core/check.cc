#include "core/check.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/workspace.h"

namespace bqmm::check {
namespace {
Status invalid(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }
}  // namespace

Status dtype_in(const char* name, DType got, std::initializer_list<DType> allowed) {
  std::string expected;
  size_t i = 0;
  for (DType d : allowed) {
    if (d == got) return Status::Ok();
    if (i > 0) expected += (i + 1 == allowed.size()) ? " or " : ", ";
    expected += dtype_name(d);
    ++i;
  }
  return invalid(std::string(name) + ": expected dtype " + expected + " but got " +
                 dtype_name(got));
}

Status shape_eq(const char* name, const Shape& got, const Shape& expected,
                const char* meaning) {
  if (got == expected) return Status::Ok();
  return invalid(std::string(name) + ": expected shape " + expected.to_string() + " (" +
                 meaning + ") but got " + got.to_string());
}

Status shape_in(const char* name, const Shape& got, std::initializer_list<Shape> expected,
                const char* meaning) {
  std::string alternatives;
  for (const Shape& e : expected) {
    if (got == e) return Status::Ok();
    if (!alternatives.empty()) alternatives += " or ";
    alternatives += e.to_string();
  }
  return invalid(std::string(name) + ": expected shape " + alternatives + " (" + meaning +
                 ") but got " + got.to_string());
}

Status tensor(const char* name, const TensorView& t, DType dtype, const Shape& expected,
              const char* meaning) {
  BQMM_RETURN_IF_ERROR(dtype_in(name, t.dtype, {dtype}));
  BQMM_RETURN_IF_ERROR(shape_eq(name, t.shape, expected, meaning));
  int64_t count = 0;
  BQMM_RETURN_IF_ERROR(numel(name, t.shape, dtype, &count));
  return data(name, t.data, count, dtype);
}

Status prepacked(const TensorView& t, DType dtype, const Shape& expected, const char* meaning) {
  BQMM_RETURN_IF_ERROR(tensor("prepacked", t, dtype, expected, meaning));
  if (t.data != nullptr && pointer_alignment(t.data) < 16)
    return invalid("prepacked: expected a 16-byte aligned pointer but got one aligned to " +
                   std::to_string(pointer_alignment(t.data)) + " bytes");
  return Status::Ok();
}

Status numel(const char* name, const Shape& shape, DType dtype, int64_t* out) {
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] < 0)
      return invalid(std::string(name) + ": expected non-negative dimensions but got " +
                     shape.to_string());
  }
  int64_t n = 0;
  if (!shape.checked_numel(&n) ||
      n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype)))
    return invalid(std::string(name) + ": element count of shape " + shape.to_string() +
                   " overflows int64");
  *out = n;
  return Status::Ok();
}

int pointer_alignment(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && addr % a != 0) a /= 2;
  return a;
}

int min_pointer_alignment(std::initializer_list<const void*> ps) {
  int a = 16;
  for (const void* p : ps) a = std::min(a, pointer_alignment(p));
  return a;
}

Status data(const char* name, const void* data, int64_t numel, DType dtype) {
  if (numel > 0 && data == nullptr)
    return invalid(std::string(name) + ": null data pointer for " + std::to_string(numel) +
                   " elements");
  if (data != nullptr &&
      static_cast<size_t>(pointer_alignment(data)) < std::min<size_t>(dtype_size(dtype), 16))
    return invalid(std::string(name) + ": expected a pointer aligned to " +
                   std::to_string(dtype_size(dtype)) + " bytes (" + dtype_name(dtype) +
                   ") but got alignment " + std::to_string(pointer_alignment(data)));
  return Status::Ok();
}

Status leading_dims(const char* name, const Shape& shape, int64_t* m, int64_t* k) {
  if (shape.rank() < 1)
    return invalid(std::string(name) + ": expected rank >= 1 ([..., K]) but got rank 0");
  int64_t prod = 1;
  for (int i = 0; i + 1 < shape.rank(); ++i) {
    if (shape[i] < 0 || shape.back() < 0)
      return invalid(std::string(name) + ": expected non-negative dimensions but got " +
                     shape.to_string());
    BQMM_RETURN_IF_ERROR(mul_no_overflow(name, prod, shape[i], &prod));
  }
  if (shape.back() < 0)
    return invalid(std::string(name) + ": expected non-negative dimensions but got " +
                   shape.to_string());
  *m = prod;
  *k = shape.back();
  return Status::Ok();
}

Status matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape) {
  if (a_shape.rank() < 1) return invalid("a: expected rank >= 1 ([..., K]) but got rank 0");
  Shape y = a_shape;
  y[y.rank() - 1] = n;
  *y_shape = y;
  return Status::Ok();
}

Status workspace(const void* data, size_t bytes, size_t required) {
  if (bytes < required)
    return Status(StatusCode::kWorkspaceTooSmall,
                  "workspace: expected at least " + std::to_string(required) +
                      " bytes but got " + std::to_string(bytes));
  if (required > 0 && data == nullptr)
    return invalid("workspace: null pointer for " + std::to_string(required) + " bytes");
  if (required > 0 && reinterpret_cast<uintptr_t>(data) % kWorkspaceAlign != 0)
    return invalid("workspace: expected a 256-byte aligned pointer (as cudaMalloc returns)");
  return Status::Ok();
}

Status int_in_range(const char* name, int64_t got, int64_t lo, int64_t hi, const char* expected) {
  if (got >= lo && got <= hi) return Status::Ok();
  return invalid(std::string(name) + ": expected " + expected + " but got " + std::to_string(got));
}

Status mul_no_overflow(const char* what, int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a)
    return invalid(std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) +
                   " overflows int64");
  *out = a * b;
  return Status::Ok();
}

Span span(const char* name, const void* data, DType dtype, const Shape& shape) {
  Span s;
  s.name = name;
  s.begin = s.end = reinterpret_cast<uintptr_t>(data);
  if (data == nullptr) return s;
  const auto bytes = static_cast<uintptr_t>(shape.numel()) * dtype_size(dtype);
  s.end = bytes > std::numeric_limits<uintptr_t>::max() - s.begin ? std::numeric_limits<uintptr_t>::max()
                                                                   : s.begin + bytes;
  return s;
}
Span span(const char* name, const TensorView& t) { return span(name, t.data, t.dtype, t.shape); }
Span span(const char* name, const std::optional<TensorView>& t) {
  return t ? span(name, *t) : Span{name, 0, 0};
}
Span span(const char* name, const MutableTensorView& t) { return span(name, t.data, t.dtype, t.shape); }

Status disjoint(const Span& written, const Span* others, size_t count) {
  if (written.begin == written.end) return Status::Ok();
  for (size_t i = 0; i < count; ++i) {
    const Span& o = others[i];
    if (o.begin == o.end || o.end <= written.begin || written.end <= o.begin) continue;
    return invalid(std::string(written.name) + ": overlaps " + o.name +
                   "; an operator's output must not share memory with its inputs, other "
                   "outputs or workspace");
  }
  return Status::Ok();
}
Status disjoint(const Span& written, std::initializer_list<Span> others) {
  return disjoint(written, others.begin(), others.size());
}

Status scratch_bytes(int64_t bytes) {
  return int_in_range("options.dequant_scratch_bytes", bytes, 1, INT64_MAX, "> 0");
}

}  // namespace bqmm::check
