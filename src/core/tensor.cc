#include "bqmm/tensor.h"

#include <cstdint>
#include <limits>

namespace bqmm {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3: return "float8e4m3fn";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
  }
  return 0;
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    if (rank_ == kMaxRank) break;
    dims_[rank_++] = d;
  }
}

Shape Shape::from(const int64_t* dims, int rank) {
  Shape s;
  for (int i = 0; i < rank && i < kMaxRank; ++i) s.dims_[s.rank_++] = dims[i];
  return s;
}

bool Shape::checked_numel(int64_t* out) const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    const int64_t d = dims_[i];
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

int64_t Shape::numel() const {
  int64_t n = 0;
  return checked_numel(&n) ? n : std::numeric_limits<int64_t>::max();
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

}  // namespace bqmm
