// The NBitsMatMul host side: the float64 reference on integer examples computed by hand
// (the original design's 8-bit layout, 4-bit nibble order, default and packed zero points,
// g_idx, typed zero points, a partial last block), the packing layout, the quantizer's
// round trip, the dequant + GEMM emulation, and the random cases the tests draw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "bqmm/nbits_matmul.h"
#include "harness/accuracy.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::NBitsCase;
using reference::NBitsCaseSpec;
using reference::WeightInit;

// A case with explicit integer codes q [N, K] (packed here) and T1 = float32 inputs.
NBitsCase integer_case(int bits, int64_t block_size, int64_t n, int64_t k,
                       const std::vector<uint8_t>& q, const std::vector<double>& scales,
                       const std::vector<std::vector<double>>& a_rows, uint8_t pad = 0) {
  NBitsCase c;
  c.attrs.n = n;
  c.attrs.k = k;
  c.attrs.bits = bits;
  c.attrs.block_size = block_size;
  c.b = reference::pack_nbits_codes(q, n, k, bits, block_size, pad);
  c.scales = HostTensor::zeros(DType::kFloat32, Shape{n, c.k_blocks()});
  for (size_t i = 0; i < scales.size(); ++i) c.scales.set(static_cast<int64_t>(i), scales[i]);
  const auto m = static_cast<int64_t>(a_rows.size());
  c.a = HostTensor::zeros(DType::kFloat32, Shape{m, k});
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) c.a.set(r * k + i, a_rows[r][i]);
  return c;
}

std::vector<double> ones(int64_t k) { return std::vector<double>(static_cast<size_t>(k), 1.0); }

// The case must also be a valid operator input.
void expect_valid(const NBitsCase& c) {
  HostTensor y = HostTensor::zeros(c.dtype(), c.y_shape());
  NBitsMatMulProblem p;
  const Status s = validate_nbits_matmul(c.args(&y), c.attrs, &p);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// ------------------------------------------------------------------ hand examples
// The original design's 8-bit example: zero point 128 (the default), scale 0.5.
// Row 0: q[k] = 128 + k -> w[k] = k / 2; row 1: q = 120 -> w = -4.
// A row 0 = ones: y = sum k/2 = 60 and 16 * -4 = -64; A row 1 = e_0 + 2 e_15:
// y = 2 * 7.5 = 15 and -4 - 8 = -12. Bias (1, 2) is added.
TEST(NBitsReference, EightBitDefaultZeroPointByHand) {
  std::vector<uint8_t> q(32);
  for (int k = 0; k < 16; ++k) {
    q[k] = static_cast<uint8_t>(128 + k);
    q[16 + k] = 120;
  }
  std::vector<double> a1(16, 0.0);
  a1[0] = 1.0;
  a1[15] = 2.0;
  NBitsCase c = integer_case(8, 16, 2, 16, q, {0.5, 0.5}, {ones(16), a1});
  expect_valid(c);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 2), (std::vector<double>{60, -64, 15, -12}));
  c.bias = HostTensor::zeros(DType::kFloat32, Shape{2});
  c.bias->set(0, 1.0);
  c.bias->set(1, 2.0);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 2), (std::vector<double>{61, -62, 16, -10}));
  EXPECT_EQ(nbits_matmul_reference(c, 1, 2), (std::vector<double>{16, -10}));
}

// 4-bit, low nibble first: every byte 0x21 holds code 1 (even k) and code 2 (odd k).
// Default zero point 8, scale 0.25: w = -1.75 at even k, -1.5 at odd k.
TEST(NBitsReference, FourBitNibbleOrderByHand) {
  NBitsCase c;
  c.attrs.n = 1;
  c.attrs.k = 32;
  c.attrs.bits = 4;
  c.attrs.block_size = 32;
  c.b = HostTensor::zeros(DType::kUInt8, Shape{1, 1, 16});
  for (auto& byte : c.b.bytes) byte = 0x21;
  c.scales = HostTensor::zeros(DType::kFloat32, Shape{1, 1});
  c.scales.set(0, 0.25);
  c.a = HostTensor::zeros(DType::kFloat32, Shape{2, 32});
  for (int k = 0; k < 32; ++k) c.a.set((k % 2) * 32 + k, 1.0);  // row 0: even k, row 1: odd k
  expect_valid(c);
  EXPECT_EQ(reference::nbits_code(c, 0, 0), 1u);
  EXPECT_EQ(reference::nbits_code(c, 0, 1), 2u);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 2), (std::vector<double>{-28, -24}));
}

// Packed 4-bit zero points, even block in the low nibble: byte 0x53 gives block 0 zero
// point 3 and block 1 zero point 5. Codes 7, scales (1, 0.5): w = 4 then 1; sum 80.
TEST(NBitsReference, PackedFourBitZeroPointsByHand) {
  NBitsCase c = integer_case(4, 16, 1, 32, std::vector<uint8_t>(32, 7), {1.0, 0.5}, {ones(32)});
  c.zero_points = HostTensor::zeros(DType::kUInt8, Shape{1, 1});
  c.zero_points->bytes[0] = 0x53;
  expect_valid(c);
  EXPECT_EQ(reference::nbits_zero_point(c, 0, 0), 3.0);
  EXPECT_EQ(reference::nbits_zero_point(c, 0, 1), 5.0);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{80}));
  // Absent zero points default to 8: w = -1 then -0.5; sum -24.
  c.zero_points.reset();
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{-24}));
}

// g_idx replaces k / block_size: with g_idx[k] = k % 2, even k take block 0 (scale 1) and
// odd k block 1 (scale 3). Codes 130, zero point 128: w = 2 or 6. A = ones on k < 16:
// 8 * 2 + 8 * 6 = 64 with g_idx; 16 * 2 = 32 by position.
TEST(NBitsReference, GIdxByHand) {
  std::vector<double> a(32, 0.0);
  for (int k = 0; k < 16; ++k) a[k] = 1.0;
  NBitsCase c = integer_case(8, 16, 1, 32, std::vector<uint8_t>(32, 130), {1.0, 3.0}, {a});
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{32}));
  c.g_idx = HostTensor::zeros(DType::kInt32, Shape{32});
  for (int k = 0; k < 32; ++k) c.g_idx->set(k, k % 2);
  expect_valid(c);
  EXPECT_EQ(reference::nbits_block_of(c, 3), 1);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{64}));
  // An out-of-range g_idx value makes the weight, and so the output, NaN.
  c.g_idx->set(5, 2);
  EXPECT_TRUE(std::isnan(nbits_matmul_reference(c, 0, 1)[0]));
  c.g_idx->set(5, -1);
  EXPECT_TRUE(std::isnan(nbits_matmul_reference(c, 0, 1)[0]));
}

// Typed zero points may be fractional: q = 128, zp = 127.5, scale 2: w = 1; sum 16.
TEST(NBitsReference, FractionalTypedZeroPointByHand) {
  NBitsCase c = integer_case(8, 16, 1, 16, std::vector<uint8_t>(16, 128), {2.0}, {ones(16)});
  c.zero_points = HostTensor::zeros(DType::kFloat32, Shape{1, 1});
  c.zero_points->set(0, 127.5);
  expect_valid(c);
  EXPECT_EQ(c.zero_point_kind(), NBitsZeroPoints::kTyped);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{16}));
}

// K = 20, block 16: the second block is partial and its padding (code 15 here) is never
// used. Codes 9, zero point 8, scales (1, 10): 16 * 1 + 4 * 10 = 56.
TEST(NBitsReference, PartialLastBlockByHand) {
  NBitsCase c = integer_case(4, 16, 1, 20, std::vector<uint8_t>(20, 9), {1.0, 10.0}, {ones(20)},
                             /*pad=*/15);
  expect_valid(c);
  EXPECT_EQ(c.b.shape, (Shape{1, 2, 8}));
  EXPECT_EQ(c.b.bytes[15], 0xFF);  // codes 30, 31: padding
  EXPECT_EQ(nbits_matmul_reference(c, 0, 1), (std::vector<double>{56}));
}

// ------------------------------------------------------------------ packing
TEST(NBitsPacking, CodesLowBitsFirst) {
  const HostTensor b4 = reference::pack_nbits_codes({1, 2, 3, 4, 5}, 1, 5, 4, 16);
  EXPECT_EQ(b4.shape, (Shape{1, 1, 8}));
  EXPECT_EQ(b4.bytes, (std::vector<uint8_t>{0x21, 0x43, 0x05, 0, 0, 0, 0, 0}));
  const HostTensor b8 = reference::pack_nbits_codes({1, 2, 250}, 1, 3, 8, 16, 7);
  EXPECT_EQ(b8.shape, (Shape{1, 1, 16}));
  EXPECT_EQ(b8.bytes[0], 1);
  EXPECT_EQ(b8.bytes[2], 250);
  EXPECT_EQ(b8.bytes[3], 7);  // padding
  // Two rows of two blocks: each row is k_blocks * blob bytes.
  std::vector<uint8_t> q(2 * 32);
  for (int i = 0; i < 64; ++i) q[i] = static_cast<uint8_t>(i % 16);
  const HostTensor two = reference::pack_nbits_codes(q, 2, 32, 4, 16);
  EXPECT_EQ(two.shape, (Shape{2, 2, 8}));
  EXPECT_EQ(two.bytes[16], 0x10);  // row 1, codes 0 and 1
}

TEST(NBitsPacking, ZeroPointsEvenBlockInLowNibble) {
  const HostTensor z4 = reference::pack_nbits_zero_points({1, 2, 3, 4, 5, 6}, 2, 3, 4);
  EXPECT_EQ(z4.shape, (Shape{2, 2}));
  EXPECT_EQ(z4.bytes, (std::vector<uint8_t>{0x21, 0x03, 0x54, 0x06}));
  const HostTensor z8 = reference::pack_nbits_zero_points({9, 200, 7}, 1, 3, 8);
  EXPECT_EQ(z8.bytes, (std::vector<uint8_t>{9, 200, 7}));
}

// ------------------------------------------------------------------ quantizer
// Dequantizing the quantizer's output gives each weight back to within half a step
// (symmetric) or one step (asymmetric: the rounded zero point shifts the grid by up to
// half a step), for both widths, every zero-point kind and a partial last block.
TEST(NBitsQuantize, RoundTripWithinAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 5, k = 200, bs = 32;
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = normal(rng);
  for (int bits : {4, 8})
    for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
      for (DType t : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << nbits_zero_points_name(zp) << " "
                                          << dtype_name(t));
        NBitsCase c;
        reference::quantize_nbits_blockwise(w, n, k, bits, bs, zp, t, &c);
        c.a = HostTensor::zeros(t, Shape{1, k});
        expect_valid(c);
        EXPECT_EQ(c.zero_point_kind(), zp);
        const double steps = (zp == NBitsZeroPoints::kNone ? 0.5 : 1.0) + 1e-6;
        std::vector<double> row;
        for (int64_t r = 0; r < n; ++r) {
          reference::nbits_weight_row(c, r, &row);
          for (int64_t i = 0; i < k; ++i) {
            const double scale = c.scales.get(r * c.k_blocks() + i / bs);
            ASSERT_LE(std::fabs(row[i] - w[r * k + i]), steps * scale) << r << "," << i;
          }
        }
      }
}

TEST(NBitsQuantize, ExtremesHitTheCodeRange) {
  // Symmetric: the block's largest magnitude maps to zp +- (2^(bits-1) - 1).
  std::vector<float> w(32, 0.0f);
  w[3] = 7.0f;
  w[4] = -3.5f;
  NBitsCase c;
  reference::quantize_nbits_blockwise(w, 1, 32, 4, 32, NBitsZeroPoints::kNone, DType::kFloat32, &c);
  EXPECT_FALSE(c.zero_points.has_value());
  EXPECT_EQ(c.scales.get(0), 1.0);
  EXPECT_EQ(reference::nbits_code(c, 0, 3), 15u);
  EXPECT_EQ(reference::nbits_code(c, 0, 4), 8u - 4u);  // -3.5 rounds to even: -4
  EXPECT_EQ(reference::nbits_code(c, 0, 0), 8u);
  // Asymmetric: min -> 0, max -> 2^bits - 1, 0 -> the zero point.
  w.assign(32, 0.0f);
  w[0] = -5.0f;
  w[1] = 10.0f;
  reference::quantize_nbits_blockwise(w, 1, 32, 4, 32, NBitsZeroPoints::kPacked, DType::kFloat32, &c);
  EXPECT_EQ(c.scales.get(0), 1.0);
  EXPECT_EQ(reference::nbits_zero_point(c, 0, 0), 5.0);
  EXPECT_EQ(reference::nbits_code(c, 0, 0), 0u);
  EXPECT_EQ(reference::nbits_code(c, 0, 1), 15u);
  EXPECT_EQ(reference::nbits_code(c, 0, 2), 5u);
  // An all-zero block keeps scale 1.
  w.assign(32, 0.0f);
  reference::quantize_nbits_blockwise(w, 1, 32, 8, 32, NBitsZeroPoints::kPacked, DType::kFloat16, &c);
  EXPECT_EQ(c.scales.get(0), 1.0);
}

// ------------------------------------------------------------------ emulation, random cases
TEST(NBitsReference, EmulationMatchesReferenceWithinTolerance) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int bits : {4, 8}) {
      NBitsCaseSpec spec;
      spec.dtype = t;
      spec.m = 5;
      spec.n = 33;
      spec.k = 200;
      spec.bits = bits;
      spec.block_size = 64;
      spec.zero_points = NBitsZeroPoints::kTyped;
      spec.g_idx = true;
      spec.bias = true;
      const NBitsCase c = reference::make_random_nbits_case(spec, 11 + bits);
      const HostTensor y = reference::nbits_matmul_emulate_dequant_gemm(c);
      const harness::AccuracyReport r =
          harness::compare(y, c.n(), 0, reference::nbits_matmul_reference(c, 0, c.m()));
      EXPECT_TRUE(r.passed) << dtype_name(t) << " " << bits << ": " << r.to_string();
    }
}

TEST(NBitsReference, EmulationIsExactOnSmallIntegers) {
  std::vector<uint8_t> q(32);
  for (int k = 0; k < 32; ++k) q[k] = static_cast<uint8_t>(128 + k % 5);
  const NBitsCase c = integer_case(8, 16, 1, 32, q, {2.0, 0.5}, {ones(32)});
  const HostTensor y = reference::nbits_matmul_emulate_dequant_gemm(c);
  EXPECT_EQ(y.get(0), nbits_matmul_reference(c, 0, 1)[0]);
}

TEST(NBitsRandomCase, EveryVariantIsAValidInput) {
  int seed = 0;
  for (int bits : {4, 8})
    for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
      for (auto init : {WeightInit::kQuantizedNormal, WeightInit::kAllCodes})
        for (bool g_idx : {false, true}) {
          NBitsCaseSpec spec;
          spec.dtype = seed % 3 == 0 ? DType::kFloat32 : seed % 3 == 1 ? DType::kFloat16 : DType::kBFloat16;
          spec.m = 3;
          spec.n = 7;
          spec.k = 16 * 5 + 3;  // 6 blocks of 16, the last partial
          spec.bits = bits;
          spec.block_size = 16;
          spec.zero_points = zp;
          spec.g_idx = g_idx;
          spec.bias = seed % 2 == 0;
          spec.init = init;
          SCOPED_TRACE(::testing::Message() << "variant " << seed);
          const NBitsCase c = reference::make_random_nbits_case(spec, 100 + seed++);
          expect_valid(c);
          EXPECT_EQ(c.zero_point_kind(), zp);
          EXPECT_EQ(c.g_idx.has_value(), g_idx);
          EXPECT_EQ(c.bias.has_value(), spec.bias);
          // g_idx: every block keeps its size.
          if (g_idx) {
            std::vector<int> members(6, 0);
            for (int64_t i = 0; i < spec.k; ++i) ++members.at(static_cast<size_t>(c.g_idx->get(i)));
            EXPECT_EQ(members, (std::vector<int>{16, 16, 16, 16, 16, 3}));
          }
          // All weights finite, the codes spread over the range.
          std::vector<double> w;
          uint32_t lo = 255, hi = 0;
          for (int64_t r = 0; r < spec.n; ++r) {
            reference::nbits_weight_row(c, r, &w);
            for (int64_t i = 0; i < spec.k; ++i) {
              ASSERT_TRUE(std::isfinite(w[i]));
              lo = std::min(lo, reference::nbits_code(c, r, i));
              hi = std::max(hi, reference::nbits_code(c, r, i));
            }
          }
          EXPECT_LT(lo, (1u << bits) / 4);
          EXPECT_GT(hi, (1u << bits) * 3 / 4);
        }
}

// The padding of a partial last block is random and must not matter.
TEST(NBitsRandomCase, PaddingIsGarbageAndUnused) {
  NBitsCaseSpec spec;
  spec.dtype = DType::kFloat32;
  spec.m = 2;
  spec.n = 3;
  spec.k = 40;
  spec.bits = 4;
  spec.block_size = 32;  // 2 blocks, 24 padding codes per row
  spec.init = WeightInit::kAllCodes;
  NBitsCase c = reference::make_random_nbits_case(spec, 5);
  const std::vector<double> before = nbits_matmul_reference(c, 0, 2);
  int nonzero_padding = 0;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t byte = 20; byte < 32; ++byte) {
      nonzero_padding += c.b.bytes[r * 32 + byte] != 0;
      c.b.bytes[r * 32 + byte] ^= 0x5A;
    }
  EXPECT_GT(nonzero_padding, 0);
  EXPECT_EQ(nbits_matmul_reference(c, 0, 2), before);
}

}  // namespace
}  // namespace bqmm
