// The loop the host references and emulations of every operator share: for each output
// column n the weight row is dequantized once (by the operator), then every activation
// row is multiplied by it. The activation is stored k-major (at[k * rows + r]) so the
// inner loop runs over independent rows, which the compiler vectorizes, while every row
// still sums in k order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace bqmm::reference {

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

}  // namespace bqmm::reference
