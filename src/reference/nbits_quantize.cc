// The N-bit block quantizer, the packing of codes and zero points, and random cases.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "reference/codecs.h"
#include "reference/nbits_reference.h"

namespace bqmm::reference {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

HostTensor pack_nbits_codes(const std::vector<uint8_t>& q, int64_t n, int64_t k, int bits,
                            int64_t block_size, uint8_t pad) {
  const int64_t k_blocks = ceil_div(k, block_size);
  const int64_t padded_k = k_blocks * block_size;
  HostTensor b = HostTensor::zeros(DType::kUInt8, Shape{n, k_blocks, block_size * bits / 8});
  auto* bytes = static_cast<uint8_t*>(b.data());
  const int64_t row_bytes = padded_k * bits / 8;
  for (int64_t row = 0; row < n; ++row)
    for (int64_t i = 0; i < padded_k; ++i)
      nbits_put_packed(bytes + row * row_bytes, i, bits, i < k ? q[row * k + i] : pad);
  return b;
}

HostTensor pack_nbits_zero_points(const std::vector<uint8_t>& zp, int64_t n, int64_t k_blocks,
                                  int bits) {
  const int64_t row_bytes = ceil_div(k_blocks * bits, 8);
  HostTensor out = HostTensor::zeros(DType::kUInt8, Shape{n, row_bytes});
  auto* bytes = static_cast<uint8_t*>(out.data());
  for (int64_t row = 0; row < n; ++row)
    for (int64_t blk = 0; blk < k_blocks; ++blk)
      nbits_put_packed(bytes + row * row_bytes, blk, bits, zp[row * k_blocks + blk]);
  return out;
}

void quantize_nbits_blockwise(const std::vector<float>& w, int64_t n, int64_t k, int bits,
                              int64_t block_size, NBitsZeroPoints zero_points, DType scale_dtype,
                              NBitsCase* out) {
  const int64_t k_blocks = ceil_div(k, block_size);
  const double q_max = static_cast<double>((1 << bits) - 1);
  const double half = static_cast<double>(1 << (bits - 1));
  std::vector<uint8_t> q(static_cast<size_t>(n * k));
  std::vector<uint8_t> zp_packed(static_cast<size_t>(n * k_blocks));
  out->attrs.k = k;
  out->attrs.n = n;
  out->attrs.bits = bits;
  out->attrs.block_size = block_size;
  out->scales = HostTensor::zeros(scale_dtype, Shape{n, k_blocks});
  out->zero_points.reset();
  if (zero_points == NBitsZeroPoints::kTyped)
    out->zero_points = HostTensor::zeros(scale_dtype, Shape{n, k_blocks});

  for (int64_t row = 0; row < n; ++row) {
    for (int64_t blk = 0; blk < k_blocks; ++blk) {
      const int64_t begin = row * k + blk * block_size;
      const int64_t end = row * k + std::min(k, (blk + 1) * block_size);
      double lo = 0.0, hi = 0.0;  // the range always holds 0, so 0 stays representable
      for (int64_t i = begin; i < end; ++i) {
        lo = std::min<double>(lo, w[i]);
        hi = std::max<double>(hi, w[i]);
      }
      const int64_t s_idx = row * k_blocks + blk;
      const double raw_scale = zero_points == NBitsZeroPoints::kNone
                                   ? std::max(-lo, hi) / (half - 1.0)
                                   : (hi - lo) / q_max;
      // Stored in T1 rounded up, so that the block's range still fits the codes.
      const double wanted = raw_scale > 0.0 ? raw_scale : 1.0;
      double up = wanted;
      out->scales.set(s_idx, up);
      while (out->scales.get(s_idx) < wanted) {
        up *= 1.0 + 0x1p-12;
        out->scales.set(s_idx, up);
      }
      const double scale = out->scales.get(s_idx);  // what dequantizes
      double zp = half;
      if (zero_points == NBitsZeroPoints::kPacked) {
        zp = std::clamp(std::nearbyint(-lo / scale), 0.0, q_max);
        zp_packed[s_idx] = static_cast<uint8_t>(zp);
      } else if (zero_points == NBitsZeroPoints::kTyped) {
        out->zero_points->set(s_idx, -lo / scale);
        zp = out->zero_points->get(s_idx);
      }
      for (int64_t i = begin; i < end; ++i)
        q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(w[i] / scale + zp), 0.0, q_max));
    }
  }
  out->b = pack_nbits_codes(q, n, k, bits, block_size);
  if (zero_points == NBitsZeroPoints::kPacked)
    out->zero_points = pack_nbits_zero_points(zp_packed, n, k_blocks, bits);
}

NBitsCase make_random_nbits_case(const NBitsCaseSpec& spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int bits = spec.bits;
  const int64_t n = spec.n, k = spec.k;
  const int64_t k_blocks = ceil_div(k, spec.block_size);
  const int code_max = (1 << bits) - 1;
  std::uniform_int_distribution<int> code(0, code_max);
  const double inv_sqrt_k = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));

  NBitsCase c;
  c.a = HostTensor::zeros(spec.dtype, Shape{spec.m, k});
  for (int64_t i = 0; i < spec.m * k; ++i) c.a.set(i, normal(rng));

  if (spec.init == WeightInit::kQuantizedNormal) {
    // Weights ~ N(0, 1/K) keep outputs of order one whatever K is.
    std::vector<float> w(static_cast<size_t>(n * k));
    for (float& v : w) v = static_cast<float>(normal(rng) * inv_sqrt_k);
    quantize_nbits_blockwise(w, n, k, bits, spec.block_size, spec.zero_points, spec.dtype, &c);
  } else {
    c.attrs.k = k;
    c.attrs.n = n;
    c.attrs.bits = bits;
    c.attrs.block_size = spec.block_size;
    // Uniform codes are uniform bytes in either width: 8 per draw (the CLI draws layers
    // of 200M codes).
    c.b = HostTensor::zeros(DType::kUInt8, Shape{n, k_blocks, spec.block_size * bits / 8});
    for (size_t i = 0; i < c.b.bytes.size(); i += 8) {
      const uint64_t r = rng();
      for (size_t j = 0; j < 8 && i + j < c.b.bytes.size(); ++j)
        c.b.bytes[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
    // |q - zp| averages about 2^bits / 3: scale down so that outputs stay of order one.
    const double scale_unit = inv_sqrt_k * 3.0 / (1 << bits);
    c.scales = HostTensor::zeros(spec.dtype, Shape{n, k_blocks});
    for (int64_t i = 0; i < n * k_blocks; ++i) c.scales.set(i, (0.5 + uniform(rng)) * scale_unit);
    if (spec.zero_points == NBitsZeroPoints::kPacked) {
      std::vector<uint8_t> zp(static_cast<size_t>(n * k_blocks));
      for (auto& v : zp) v = static_cast<uint8_t>(code(rng));
      c.zero_points = pack_nbits_zero_points(zp, n, k_blocks, bits);
    } else if (spec.zero_points == NBitsZeroPoints::kTyped) {
      c.zero_points = HostTensor::zeros(spec.dtype, Shape{n, k_blocks});
      for (int64_t i = 0; i < n * k_blocks; ++i) c.zero_points->set(i, uniform(rng) * code_max);
    }
  }

  // Garbage where nothing may be read: the padding of a partial last block and, for
  // 4-bit packed zero points with an odd k_blocks, the last nibble of each row.
  const int64_t padded_k = k_blocks * spec.block_size;
  if (padded_k > k) {
    const int64_t row_bytes = padded_k * bits / 8;
    auto* bytes = static_cast<uint8_t*>(c.b.data());
    for (int64_t row = 0; row < n; ++row)
      for (int64_t i = k; i < padded_k; ++i)
        nbits_put_packed(bytes + row * row_bytes, i, bits, static_cast<uint8_t>(code(rng)));
  }
  if (c.zero_point_kind() == NBitsZeroPoints::kPacked && bits == 4 && k_blocks % 2 == 1) {
    const int64_t row_bytes = ceil_div(k_blocks * bits, 8);
    auto* bytes = static_cast<uint8_t*>(c.zero_points->data());
    for (int64_t row = 0; row < n; ++row)
      nbits_put_packed(bytes + row * row_bytes, k_blocks, bits, static_cast<uint8_t>(code(rng)));
  }

  if (spec.g_idx) {
    // Act order: each k keeps a block, every block keeps block_size members (the last its
    // remainder), in a random order over K.
    std::vector<int32_t> g(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) g[i] = static_cast<int32_t>(i / spec.block_size);
    std::shuffle(g.begin(), g.end(), rng);
    c.g_idx = HostTensor::zeros(DType::kInt32, Shape{k});
    for (int64_t i = 0; i < k; ++i) c.g_idx->set(i, g[i]);
  }
  if (spec.bias) {
    c.bias = HostTensor::zeros(spec.dtype, Shape{n});
    for (int64_t i = 0; i < n; ++i) c.bias->set(i, normal(rng));
  }
  return c;
}

}  // namespace bqmm::reference
