// What the host references and emulations of every operator share: M and Y's shape of
// an activation, and the loop: for each output column n the weight row is dequantized
// once (by the operator), then every activation row is multiplied by it. The activation
// is stored k-major (at[k * rows + r]) so the inner loop runs over independent rows,
// which the compiler vectorizes, while every row still sums in k order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "bqmm/tensor.h"
#include "harness/host_tensor.h"
#include "reference/codecs.h"

namespace bqmm::reference {

using harness::HostTensor;

// M of an activation of shape [..., K]: the product of its leading dims.
inline int64_t leading_rows(const Shape& a) {
  int64_t m = 1;
  for (int i = 0; i + 1 < a.rank(); ++i) m *= a[i];
  return m;
}

// Y's shape for an activation of shape [..., K]: the same with the last dim N.
inline Shape output_shape(Shape a, int64_t n) {
  if (a.rank() > 0) a[a.rank() - 1] = n;
  return a;
}

// at[k * rows + r] = value(r, k) for r < rows, k < k_len.
template <typename Acc, typename Value>
std::vector<Acc> k_major_rows(int64_t rows, int64_t k_len, Value value) {
  std::vector<Acc> at(static_cast<size_t>(rows * k_len));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < k_len; ++k) at[k * rows + r] = value(r, k);
  return at;
}

// acc[r] = sum_k at[k * rows + r] * w[k], summed in k order.
template <typename Acc>
void dot_rows(const std::vector<Acc>& at, const std::vector<Acc>& w, int64_t rows, Acc* acc) {
  std::fill(acc, acc + rows, Acc(0));
  for (size_t k = 0; k < w.size(); ++k) {
    const Acc wk = w[k];
    const Acc* a = at.data() + k * rows;
    for (int64_t r = 0; r < rows; ++r) acc[r] += a[r] * wk;
  }
}

// The rows [row_begin, row_end) of an M-row output, clamped to [0, M): first row and count.
struct RowRange {
  int64_t begin = 0, count = 0;
  static RowRange clamp(int64_t row_begin, int64_t row_end, int64_t m) {
    row_end = std::min(row_end, m);
    RowRange r;
    r.begin = std::clamp<int64_t>(row_begin, 0, std::max<int64_t>(row_end, 0));
    r.count = std::max<int64_t>(row_end - r.begin, 0);
    return r;
  }
};

// Either operator's float64 reference: Y[r, n] = sum_k at(r, k) * w_n[k] + bias[n] for
// the `rows` activation rows of `at` (k_major_rows), where weight_row(n, &w) writes the
// exactly dequantized weight row n (K doubles). Row-major [rows, n_total].
template <typename WeightRow>
std::vector<double> exact_output_rows(const std::vector<double>& at, int64_t rows,
                                      int64_t n_total, int64_t k,
                                      const std::optional<HostTensor>& bias,
                                      WeightRow&& weight_row) {
  std::vector<double> w(static_cast<size_t>(k));
  std::vector<double> acc(static_cast<size_t>(rows));
  std::vector<double> y(static_cast<size_t>(rows * n_total));
  for (int64_t n = 0; n < n_total; ++n) {
    weight_row(n, &w);
    dot_rows(at, w, rows, acc.data());
    const double b = bias ? bias->get(n) : 0.0;
    for (int64_t r = 0; r < rows; ++r) y[r * n_total + n] = acc[r] + b;
  }
  return y;
}

// Either operator's dequant + GEMM path as the GPU computes it: weight_row(n, &w) writes
// row n as the dequant kernel does (rounded to T); float32 sums, rounded to T as cuBLAS
// writes them; then the bias kernel adds in float32 and rounds again.
template <typename WeightRow>
HostTensor emulated_dequant_gemm_rows(DType t, const std::vector<float>& at, int64_t rows,
                                      int64_t n_total, int64_t k,
                                      const std::optional<HostTensor>& bias,
                                      const Shape& y_shape, WeightRow&& weight_row) {
  std::vector<float> w(static_cast<size_t>(k));
  std::vector<float> acc(static_cast<size_t>(rows));
  HostTensor y = HostTensor::zeros(t, y_shape);
  for (int64_t n = 0; n < n_total; ++n) {
    weight_row(n, &w);
    dot_rows(at, w, rows, acc.data());
    const float b = bias ? static_cast<float>(bias->get(n)) : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float v = codec::round_to(t, acc[r]);
      if (bias) v = codec::round_to(t, v + b);
      y.set(r * n_total + n, v);
    }
  }
  return y;
}

}  // namespace bqmm::reference
