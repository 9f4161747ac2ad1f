#include <algorithm>
#include <cmath>
#include <random>

#include "reference/codecs.h"
#include "reference/fp8_reference.h"

namespace bqmm::reference {
namespace {
constexpr float kE4m3Max = 448.0f;
constexpr int kFiniteE4m3Codes = 254;  // 256 codes less the two NaNs, 0x7F and 0xFF
}  // namespace

void quantize_fp8_blockwise(const std::vector<float>& w, int64_t n, int64_t k,
                            int64_t block_size, HostTensor* b, HostTensor* b_scale) {
  const int64_t k_blocks = (k + block_size - 1) / block_size;
  *b = HostTensor::zeros(DType::kFloat8E4M3, Shape{n, k});
  *b_scale = HostTensor::zeros(DType::kFloat32, Shape{n, k_blocks});
  auto* codes = static_cast<uint8_t*>(b->data());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t blk = 0; blk < k_blocks; ++blk) {
      const int64_t begin = row * k + blk * block_size;
      const int64_t end = row * k + std::min(k, (blk + 1) * block_size);
      float amax = 0.0f;
      for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(w[i]));
      // The block's largest magnitude lands on the largest finite code; an all-zero
      // block keeps scale 1 so that dequantizing never divides by zero.
      const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
      b_scale->set(row * k_blocks + blk, scale);
      for (int64_t i = begin; i < end; ++i) codes[i] = codec::float_to_e4m3_satfinite(w[i] / scale);
    }
  }
}

Fp8Case make_random_fp8_case(DType dtype, int64_t m, int64_t n, int64_t k, int64_t block_size,
                             bool bias, bool w8a8, uint64_t seed, WeightInit init) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double inv_sqrt_k = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));

  Fp8Case c;
  c.block_size = block_size;
  c.a = HostTensor::zeros(dtype, Shape{m, k});
  for (int64_t i = 0; i < m * k; ++i) c.a.set(i, normal(rng));

  if (init == WeightInit::kQuantizedNormal) {
    // Weights ~ N(0, 1/K) keep outputs of order one whatever K is.
    std::vector<float> w(static_cast<size_t>(n * k));
    for (float& v : w) v = static_cast<float>(normal(rng) * inv_sqrt_k);
    quantize_fp8_blockwise(w, n, k, block_size, &c.b, &c.b_scale);
  } else {
    c.b = HostTensor::zeros(DType::kFloat8E4M3, Shape{n, k});
    const int64_t k_blocks = c.k_blocks();
    c.b_scale = HostTensor::zeros(DType::kFloat32, Shape{n, k_blocks});
    std::uniform_int_distribution<int> code_index(0, kFiniteE4m3Codes - 1);
    auto* codes = static_cast<uint8_t*>(c.b.data());
    for (int64_t i = 0; i < n * k; ++i) {
      const int idx = code_index(rng);
      codes[i] = static_cast<uint8_t>(idx < 0x7F ? idx : idx + 1);  // skip 0x7F
    }
    for (int64_t i = 0; i < n * k_blocks; ++i)
      c.b_scale.set(i, (0.5 + uniform(rng)) * inv_sqrt_k);
  }

  if (bias) {
    c.bias = HostTensor::zeros(dtype, Shape{n});
    for (int64_t i = 0; i < n; ++i) c.bias->set(i, normal(rng));
  }
  if (w8a8) {
    // Around amax / 448, so that A uses the whole e4m3 range and, when the draw falls
    // below 1, the largest values saturate a little.
    double amax = 0.0;
    for (int64_t i = 0; i < m * k; ++i) amax = std::max(amax, std::fabs(c.a.get(i)));
    const double jitter = 0.8 + 0.4 * uniform(rng);
    c.a_scale = HostTensor::zeros(DType::kFloat32, Shape{});
    c.a_scale->set(0, amax > 0.0 ? amax / kE4m3Max * jitter : 1.0);
  }
  return c;
}

void share_scale_rows(int64_t rows, Fp8Case* c) {
  const int64_t k_blocks = c->k_blocks();
  for (int64_t row = 0; row < c->n(); ++row) {
    const int64_t first = row - row % rows;
    for (int64_t blk = 0; blk < k_blocks; ++blk)
      c->b_scale.set(row * k_blocks + blk, c->b_scale.get(first * k_blocks + blk));
  }
  c->b_scale_block_rows = rows;
}

}  // namespace bqmm::reference
