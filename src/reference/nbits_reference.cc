#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/codecs.h"
#include "reference/dense_rows.h"
#include "reference/nbits_reference.h"

namespace bqmm::reference {

int64_t NBitsCase::m() const {
  int64_t m = 1;
  for (int i = 0; i + 1 < a.shape.rank(); ++i) m *= a.shape[i];
  return m;
}

int64_t NBitsCase::k_blocks() const {
  return k() / block_size() + (k() % block_size() != 0 ? 1 : 0);
}

NBitsZeroPoints NBitsCase::zero_point_kind() const {
  if (!zero_points) return NBitsZeroPoints::kNone;
  return zero_points->dtype == DType::kUInt8 ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kTyped;
}

NBitsMatMulArgs NBitsCase::args(HostTensor* y) const {
  NBitsMatMulArgs args;
  args.a = a.view();
  args.b = b.view();
  args.scales = scales.view();
  if (zero_points) args.zero_points = zero_points->view();
  if (g_idx) args.g_idx = g_idx->view();
  if (bias) args.bias = bias->view();
  args.y = y->mutable_view();
  return args;
}

Shape NBitsCase::y_shape() const {
  Shape s = a.shape;
  if (s.rank() > 0) s[s.rank() - 1] = n();
  return s;
}

uint32_t nbits_code(const NBitsCase& c, int64_t n, int64_t k) {
  const int64_t row_bytes = c.k_blocks() * c.block_size() * c.bits() / 8;
  const auto* row = static_cast<const uint8_t*>(c.b.data()) + n * row_bytes;
  if (c.bits() == 8) return row[k];
  return (row[k / 2] >> (4 * (k % 2))) & 0xFu;
}

double nbits_zero_point(const NBitsCase& c, int64_t n, int64_t blk) {
  switch (c.zero_point_kind()) {
    case NBitsZeroPoints::kNone:
      return static_cast<double>(1 << (c.bits() - 1));
    case NBitsZeroPoints::kTyped:
      return c.zero_points->get(n * c.k_blocks() + blk);
    case NBitsZeroPoints::kPacked: {
      const int64_t row_bytes = (c.k_blocks() * c.bits() + 7) / 8;
      const auto* row = static_cast<const uint8_t*>(c.zero_points->data()) + n * row_bytes;
      if (c.bits() == 8) return row[blk];
      return (row[blk / 2] >> (4 * (blk % 2))) & 0xF;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t nbits_block_of(const NBitsCase& c, int64_t k) {
  return c.g_idx ? static_cast<int64_t>(c.g_idx->get(k)) : k / c.block_size();
}

void nbits_weight_row(const NBitsCase& c, int64_t n, std::vector<double>* w) {
  const int64_t k_blocks = c.k_blocks();
  w->resize(static_cast<size_t>(c.k()));
  for (int64_t k = 0; k < c.k(); ++k) {
    const int64_t blk = nbits_block_of(c, k);
    if (blk < 0 || blk >= k_blocks) {
      (*w)[k] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    (*w)[k] = (static_cast<double>(nbits_code(c, n, k)) - nbits_zero_point(c, n, blk)) *
              c.scales.get(n * k_blocks + blk);
  }
}

std::vector<double> nbits_matmul_reference(const NBitsCase& c, int64_t row_begin,
                                           int64_t row_end) {
  row_end = std::min(row_end, c.m());
  row_begin = std::clamp<int64_t>(row_begin, 0, std::max<int64_t>(row_end, 0));
  const int64_t rows = std::max<int64_t>(row_end - row_begin, 0);
  const int64_t k = c.k();
  const int64_t n_total = c.n();
  const std::vector<double> at = k_major_rows<double>(
      rows, k, [&](int64_t r, int64_t kk) { return c.a.get((row_begin + r) * k + kk); });
  std::vector<double> w;
  std::vector<double> acc(static_cast<size_t>(rows));
  std::vector<double> y(static_cast<size_t>(rows * n_total));
  for (int64_t n = 0; n < n_total; ++n) {
    nbits_weight_row(c, n, &w);
    dot_rows(at, w, rows, acc.data());
    const double bias = c.bias ? c.bias->get(n) : 0.0;
    for (int64_t r = 0; r < rows; ++r) y[r * n_total + n] = acc[r] + bias;
  }
  return y;
}

HostTensor nbits_matmul_emulate_dequant_gemm(const NBitsCase& c) {
  const DType t = c.dtype();
  const int64_t rows = c.m();
  const int64_t k = c.k();
  const int64_t n_total = c.n();
  const std::vector<float> at = k_major_rows<float>(
      rows, k, [&](int64_t r, int64_t kk) { return static_cast<float>(c.a.get(r * k + kk)); });
  std::vector<float> w(static_cast<size_t>(k));
  std::vector<float> acc(static_cast<size_t>(rows));
  HostTensor y = HostTensor::zeros(t, c.y_shape());
  const int64_t k_blocks = c.k_blocks();
  for (int64_t n = 0; n < n_total; ++n) {
    // As the dequant kernel writes the weights: (q - zp) * scale in float32, rounded to T1.
    for (int64_t kk = 0; kk < k; ++kk) {
      const int64_t blk = nbits_block_of(c, kk);
      if (blk < 0 || blk >= k_blocks) {
        w[kk] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const auto q = static_cast<float>(nbits_code(c, n, kk));
      const auto zp = static_cast<float>(nbits_zero_point(c, n, blk));
      const auto s = static_cast<float>(c.scales.get(n * k_blocks + blk));
      w[kk] = codec::round_to(t, (q - zp) * s);
    }
    dot_rows(at, w, rows, acc.data());
    // cuBLAS rounds its FP32 sum to T1; the bias kernel then adds in FP32 and rounds again.
    const float bias = c.bias ? static_cast<float>(c.bias->get(n)) : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float v = codec::round_to(t, acc[r]);
      if (c.bias) v = codec::round_to(t, v + bias);
      y.set(r * n_total + n, v);
    }
  }
  return y;
}

}  // namespace bqmm::reference
