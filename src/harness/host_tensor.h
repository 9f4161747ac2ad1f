// Host tensors for the reference, the tests and the CLI: owning byte buffers with a dtype
// and a shape, element access through double, and views for the public API.
#pragma once

#include <cstdint>
#include <vector>

#include "bqmm/tensor.h"

namespace bqmm::harness {

struct HostTensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<uint8_t> bytes;

  static HostTensor zeros(DType dtype, const Shape& shape);
  int64_t numel() const;
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  // Element i as a double (exact: every supported dtype fits in a double).
  double get(int64_t i) const;
  // Stores v rounded to the dtype: round-to-nearest-even; float8 e4m3 saturates to
  // +-448 (NaN stays NaN); integer dtypes round and clamp.
  void set(int64_t i, double v);
  TensorView view() const { return TensorView{bytes.data(), dtype, shape}; }
  MutableTensorView mutable_view() { return MutableTensorView{bytes.data(), dtype, shape}; }
};

}  // namespace bqmm::harness
