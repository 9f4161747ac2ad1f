#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/codecs.h"
#include "reference/dense_rows.h"
#include "reference/nbits_reference.h"

namespace bqmm::reference {
namespace {

// Row n's per-block scales and zero points as Real, looked up once per block (the
// references run over N * K elements per output row in the CLI's layer-sized checks).
template <typename Real>
void block_constants(const NBitsCase& c, int64_t n, std::vector<Real>* scale,
                     std::vector<Real>* zero) {
  const int64_t k_blocks = c.k_blocks();
  scale->resize(static_cast<size_t>(k_blocks));
  zero->resize(static_cast<size_t>(k_blocks));
  for (int64_t blk = 0; blk < k_blocks; ++blk) {
    (*scale)[blk] = static_cast<Real>(c.scales.get(n * k_blocks + blk));
    (*zero)[blk] = static_cast<Real>(nbits_zero_point(c, n, blk));
  }
}

// Calls f(k, q, blk) for every k of row n: its code and its block (g_idx[k] or
// k / block_size), or blk = -1 when g_idx is out of range.
template <typename F>
void for_each_code(const NBitsCase& c, int64_t n, F f) {
  const int64_t k_blocks = c.k_blocks();
  const int64_t row_bytes = k_blocks * c.block_size() * c.bits() / 8;
  const auto* row = static_cast<const uint8_t*>(c.b.data()) + n * row_bytes;
  const auto* g_idx = c.g_idx ? static_cast<const uint8_t*>(c.g_idx->data()) : nullptr;
  for (int64_t k = 0; k < c.k(); ++k) {
    int64_t blk = k / c.block_size();
    if (g_idx != nullptr) {
      int32_t g;
      std::memcpy(&g, g_idx + 4 * k, sizeof(g));
      blk = g >= 0 && g < k_blocks ? g : -1;
    }
    f(k, nbits_packed_at(row, k, c.bits()), blk);
  }
}

}  // namespace

int64_t NBitsCase::m() const { return leading_rows(a.shape); }

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

Shape NBitsCase::y_shape() const { return output_shape(a.shape, n()); }

uint32_t nbits_packed_at(const uint8_t* row, int64_t i, int bits) {
  if (bits == 8) return row[i];
  return (row[i / 2] >> (4 * (i % 2))) & 0xFu;
}

void nbits_put_packed(uint8_t* row, int64_t i, int bits, uint8_t value) {
  if (bits == 8) {
    row[i] = value;
  } else {
    const int shift = 4 * static_cast<int>(i % 2);
    row[i / 2] = static_cast<uint8_t>((row[i / 2] & ~(0xF << shift)) | ((value & 0xF) << shift));
  }
}

uint32_t nbits_code(const NBitsCase& c, int64_t n, int64_t k) {
  const int64_t row_bytes = c.k_blocks() * c.block_size() * c.bits() / 8;
  return nbits_packed_at(static_cast<const uint8_t*>(c.b.data()) + n * row_bytes, k, c.bits());
}

double nbits_zero_point(const NBitsCase& c, int64_t n, int64_t blk) {
  switch (c.zero_point_kind()) {
    case NBitsZeroPoints::kNone:
      return static_cast<double>(1 << (c.bits() - 1));
    case NBitsZeroPoints::kTyped:
      return c.zero_points->get(n * c.k_blocks() + blk);
    case NBitsZeroPoints::kPacked: {
      const int64_t row_bytes = (c.k_blocks() * c.bits() + 7) / 8;
      return nbits_packed_at(static_cast<const uint8_t*>(c.zero_points->data()) + n * row_bytes,
                             blk, c.bits());
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t nbits_block_of(const NBitsCase& c, int64_t k) {
  return c.g_idx ? static_cast<int64_t>(c.g_idx->get(k)) : k / c.block_size();
}

void nbits_weight_row(const NBitsCase& c, int64_t n, std::vector<double>* w) {
  std::vector<double> scale, zero;
  block_constants(c, n, &scale, &zero);
  w->resize(static_cast<size_t>(c.k()));
  for_each_code(c, n, [&](int64_t k, uint32_t q, int64_t blk) {
    (*w)[k] = blk < 0 ? std::numeric_limits<double>::quiet_NaN()
                      : (static_cast<double>(q) - zero[blk]) * scale[blk];
  });
}

std::vector<double> nbits_matmul_reference(const NBitsCase& c, int64_t row_begin,
                                           int64_t row_end) {
  const RowRange rows = RowRange::clamp(row_begin, row_end, c.m());
  const int64_t k = c.k();
  const std::vector<double> at = k_major_rows<double>(
      rows.count, k, [&](int64_t r, int64_t kk) { return c.a.get((rows.begin + r) * k + kk); });
  return exact_output_rows(at, rows.count, c.n(), k, c.bias,
                           [&](int64_t n, std::vector<double>* w) { nbits_weight_row(c, n, w); });
}

HostTensor nbits_matmul_emulate_dequant_gemm(const NBitsCase& c) {
  const DType t = c.dtype();
  const int64_t rows = c.m();
  const int64_t k = c.k();
  const std::vector<float> at = k_major_rows<float>(
      rows, k, [&](int64_t r, int64_t kk) { return static_cast<float>(c.a.get(r * k + kk)); });
  std::vector<float> scale, zero;
  return emulated_dequant_gemm_rows(
      t, at, rows, c.n(), k, c.bias, c.y_shape(), [&](int64_t n, std::vector<float>* w) {
        // As the dequant kernel writes the weights: (q - zp) * scale in float32, rounded to T1.
        block_constants(c, n, &scale, &zero);
        for_each_code(c, n, [&](int64_t kk, uint32_t q, int64_t blk) {
          (*w)[kk] = blk < 0 ? std::numeric_limits<float>::quiet_NaN()
                             : codec::round_to(t, (static_cast<float>(q) - zero[blk]) * scale[blk]);
        });
      });
}

HostTensor nbits_prepacked(const NBitsCase& c) {
  const int64_t n = c.n(), k_blocks = c.k_blocks();
  const DType dtype = nbits_matmul_prepacked_dtype(c.dtype(), c.attrs.bits);
  HostTensor t = HostTensor::zeros(dtype, Shape{2, k_blocks, n});
  for (int64_t row = 0; row < n; ++row)
    for (int64_t blk = 0; blk < k_blocks; ++blk) {
      const float scale = static_cast<float>(c.scales.get(row * k_blocks + blk));
      const float zp = static_cast<float>(nbits_zero_point(c, row, blk));
      t.set(blk * n + row, scale);  // set() rounds to the dtype
      t.set((k_blocks + blk) * n + row, -zp * scale);
    }
  return t;
}

}  // namespace bqmm::reference
