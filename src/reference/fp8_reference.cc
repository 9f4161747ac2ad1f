// The float64 reference and the dequant + GEMM emulation of Fp8WeightMatMul, on the row
// loop of reference/dense_rows.h.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/codecs.h"
#include "reference/dense_rows.h"
#include "reference/fp8_reference.h"

namespace bqmm::reference {
namespace {

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = codec::e4m3_to_float(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

std::vector<float> scales_of(const Fp8Case& c) {
  std::vector<float> s(static_cast<size_t>(c.b_scale.numel()));
  if (!s.empty()) std::memcpy(s.data(), c.b_scale.data(), s.size() * sizeof(float));
  return s;
}

// Dynamic quantization's scales of row `row`: s[kb] = amax |A| / 448 over K block kb in
// float32, NaN where the block has a NaN.
std::vector<float> dynamic_scales(const Fp8Case& c, int64_t row) {
  std::vector<float> s(static_cast<size_t>(c.k_blocks()), 0.0f);
  for (int64_t kk = 0; kk < c.k(); ++kk) {
    const auto a = static_cast<float>(c.a.get(row * c.k() + kk));
    float& amax = s[static_cast<size_t>(kk / c.block_size)];
    amax = std::isnan(a) || std::isnan(amax) ? std::numeric_limits<float>::quiet_NaN()
                                             : std::max(amax, std::fabs(a));
  }
  for (float& v : s) v = v / 448.0f;
  return s;
}

// Activation rows [row_begin, row_end) as Acc, k-major, QDQ'd first for W8A8 (rounded to
// T, the contract's A') and dynamic quantization (q * s; rounded to T where `round_dynamic`,
// as the kernels' A' is).
template <typename Acc>
std::vector<Acc> activation_k_major(const Fp8Case& c, int64_t row_begin, int64_t row_end,
                                    bool round_dynamic) {
  const int64_t k = c.k();
  const bool qdq = c.a_scale.has_value();
  const float a_scale = qdq ? static_cast<float>(c.a_scale->get(0)) : 0.0f;
  std::vector<std::vector<float>> dyn;
  if (c.dynamic_act_quant)
    for (int64_t r = row_begin; r < row_end; ++r) dyn.push_back(dynamic_scales(c, r));
  return k_major_rows<Acc>(row_end - row_begin, k, [&](int64_t r, int64_t kk) -> Acc {
    const auto a = static_cast<float>(c.a.get((row_begin + r) * k + kk));
    if (c.dynamic_act_quant) {
      const float s = dyn[static_cast<size_t>(r)][static_cast<size_t>(kk / c.block_size)];
      const float inv = s != 0.0f ? 1.0f / s : 0.0f;
      const float q = codec::e4m3_to_float(codec::float_to_e4m3_satfinite(a * inv));
      // e4m3 (4 significant bits) times a float32 scale is exact in a double.
      return round_dynamic ? static_cast<Acc>(codec::round_to(c.dtype(), q * s))
                           : static_cast<Acc>(static_cast<double>(q) * s);
    }
    return qdq ? codec::qdq_e4m3(c.dtype(), a, a_scale) : a;
  });
}

// Weight row n: w[k] = dequant(e4m3 value, scale of k's block).
template <typename Acc, typename Dequant>
void weight_row(const Fp8Case& c, const std::vector<float>& scales, int64_t n,
                Dequant dequant, std::vector<Acc>* w) {
  const int64_t k = c.k();
  const int64_t k_blocks = c.k_blocks();
  const auto* codes = static_cast<const uint8_t*>(c.b.data()) + n * k;
  const auto& table = e4m3_table();
  for (int64_t blk = 0; blk < k_blocks; ++blk) {
    const float s = scales[n * k_blocks + blk];
    const int64_t end = std::min(k, (blk + 1) * c.block_size);
    for (int64_t kk = blk * c.block_size; kk < end; ++kk) (*w)[kk] = dequant(table[codes[kk]], s);
  }
}

}  // namespace

int64_t Fp8Case::m() const { return leading_rows(a.shape); }

Fp8MatMulArgs Fp8Case::args(HostTensor* y) const {
  Fp8MatMulArgs args;
  args.a = a.view();
  args.b = b.view();
  args.b_scale = b_scale.view();
  if (a_scale) args.a_scale = a_scale->view();
  if (bias) args.bias = bias->view();
  args.y = y->mutable_view();
  return args;
}

Shape Fp8Case::y_shape() const { return output_shape(a.shape, n()); }

std::vector<double> fp8_matmul_reference(const Fp8Case& c, int64_t row_begin, int64_t row_end) {
  const RowRange rows = RowRange::clamp(row_begin, row_end, c.m());
  const std::vector<double> at =
      activation_k_major<double>(c, rows.begin, rows.begin + rows.count, /*round_dynamic=*/false);
  const std::vector<float> scales = scales_of(c);
  // e4m3 (4 significant bits) times a float32 scale (24) is exact in a double.
  const auto dequant = [](float v, float s) { return static_cast<double>(v) * s; };
  return exact_output_rows(at, rows.count, c.n(), c.k(), c.bias, [&](int64_t n, auto* w) {
    weight_row(c, scales, n, dequant, w);
  });
}

HostTensor fp8_matmul_emulate_dequant_gemm(const Fp8Case& c) {
  const DType t = c.dtype();
  const std::vector<float> at = activation_k_major<float>(c, 0, c.m(), /*round_dynamic=*/true);
  const std::vector<float> scales = scales_of(c);
  // The dequant kernel writes T(float(e4m3) * scale): the GEMM sees weights rounded to T.
  const auto dequant = [t](float v, float s) { return codec::round_to(t, v * s); };
  return emulated_dequant_gemm_rows(
      t, at, c.m(), c.n(), c.k(), c.bias, c.y_shape(),
      [&](int64_t n, auto* w) { weight_row(c, scales, n, dequant, w); });
}

HostTensor fp8_prepacked(const Fp8Case& c) {
  const int64_t n = c.n(), k_blocks = c.k_blocks();
  HostTensor t = HostTensor::zeros(DType::kFloat32, Shape{k_blocks, n});
  for (int64_t row = 0; row < n; ++row)
    for (int64_t blk = 0; blk < k_blocks; ++blk) t.set(blk * n + row, c.b_scale.get(row * k_blocks + blk));
  return t;
}

}  // namespace bqmm::reference
