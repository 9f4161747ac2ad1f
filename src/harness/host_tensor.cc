#include "harness/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "reference/codecs.h"

namespace bqmm::harness {
namespace {

template <typename U>
U load(const std::vector<uint8_t>& bytes, int64_t i) {
  U v;
  std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(U)), sizeof(U));
  return v;
}

template <typename U>
void store(std::vector<uint8_t>* bytes, int64_t i, U v) {
  std::memcpy(bytes->data() + i * static_cast<int64_t>(sizeof(U)), &v, sizeof(U));
}

// Integer stores: round half to even, clamp to the type's range; NaN stores 0.
template <typename I>
I round_clamp(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

}  // namespace

HostTensor HostTensor::zeros(DType dtype, const Shape& shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.bytes.assign(static_cast<size_t>(shape.numel()) * dtype_size(dtype), 0);
  return t;
}

int64_t HostTensor::numel() const { return shape.numel(); }

double HostTensor::get(int64_t i) const {
  switch (dtype) {
    case DType::kFloat32: return load<float>(bytes, i);
    case DType::kFloat16: return codec::half_to_float(load<uint16_t>(bytes, i));
    case DType::kBFloat16: return codec::bf16_to_float(load<uint16_t>(bytes, i));
    case DType::kFloat8E4M3: return codec::e4m3_to_float(load<uint8_t>(bytes, i));
    case DType::kUInt8: return load<uint8_t>(bytes, i);
    case DType::kInt32: return load<int32_t>(bytes, i);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void HostTensor::set(int64_t i, double v) {
  switch (dtype) {
    case DType::kFloat32: store(&bytes, i, static_cast<float>(v)); return;
    case DType::kFloat16: store(&bytes, i, codec::double_to_half(v)); return;
    case DType::kBFloat16: store(&bytes, i, codec::double_to_bf16(v)); return;
    case DType::kFloat8E4M3: store(&bytes, i, codec::double_to_e4m3_satfinite(v)); return;
    case DType::kUInt8: store(&bytes, i, round_clamp<uint8_t>(v)); return;
    case DType::kInt32: store(&bytes, i, round_clamp<int32_t>(v)); return;
  }
}

}  // namespace bqmm::harness
