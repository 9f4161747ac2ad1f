// bqmm: non-owning tensor views (pointer, dtype, shape). bqmm never owns or allocates
// tensors; the caller keeps them alive for the duration of a call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace bqmm {

enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3,  // float8 e4m3fn: no infinities, 0x7F/0xFF are NaN
  kUInt8,
  kInt32,
};

const char* dtype_name(DType dtype);  // "float16", "bfloat16", ...
size_t dtype_size(DType dtype);       // bytes per element

// A shape of rank 0..8. Rank 0 is a scalar (one element).
class Shape {
 public:
  static constexpr int kMaxRank = 8;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape from(const int64_t* dims, int rank);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t back() const { return dims_[rank_ - 1]; }
  // Product of all dimensions (1 for a scalar). Saturates at INT64_MAX on overflow;
  // callers that care use checked_numel.
  int64_t numel() const;
  // false when the product overflows int64.
  bool checked_numel(int64_t* out) const;
  std::string to_string() const;  // "[4096, 32]"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// A read-only device (or host, for the reference) tensor.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
};

// A writable tensor (outputs).
struct MutableTensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
};

}  // namespace bqmm
