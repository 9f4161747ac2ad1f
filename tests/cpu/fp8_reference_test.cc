// The float64 reference on hand-computed cases with exact data, the dequant + GEMM
// emulation, the block quantizer and the random case generator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "harness/accuracy.h"
#include "reference/codecs.h"
#include "reference/fp8_reference.h"

namespace bqmm::reference {
namespace {

using harness::HostTensor;

// e4m3 codes of the hand-computed cases.
constexpr uint8_t kOne = 0x38, kTwo = 0x40, kMinusThree = 0xC4, kHalf = 0x30, kNaN = 0x7F;

HostTensor tensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

HostTensor codes(int64_t n, int64_t k, const std::vector<uint8_t>& c) {
  HostTensor t = HostTensor::zeros(DType::kFloat8E4M3, Shape{n, k});
  EXPECT_EQ(t.numel(), static_cast<int64_t>(c.size()));
  std::memcpy(t.data(), c.data(), c.size());
  return t;
}

// K = 4, block 2, N = 2:
//   row 0: codes 1, 2, -3, 0.5, scales 2, 0.5 -> w0 = [2, 4, -1.5, 0.25]
//   row 1: codes 0.5, -3, 2, 1, scales 1, 4   -> w1 = [0.5, -3, 8, 4]
// A = [[1, 2, 3, 4], [-1, 0.5, 2, -4]]
//   Y = [[2 + 8 - 4.5 + 1, 0.5 - 6 + 24 + 16], [-2 + 2 - 3 - 1, -0.5 - 1.5 + 16 - 16]]
//     = [[6.5, 34.5], [-4, -2]]
Fp8Case small_case(DType t = DType::kFloat16, Shape a_shape = Shape{2, 4}) {
  Fp8Case c;
  c.block_size = 2;
  c.a = tensor(t, a_shape, {1, 2, 3, 4, -1, 0.5, 2, -4});
  c.b = codes(2, 4, {kOne, kTwo, kMinusThree, kHalf, kHalf, kMinusThree, kTwo, kOne});
  c.b_scale = tensor(DType::kFloat32, Shape{2, 2}, {2, 0.5, 1, 4});
  return c;
}

TEST(Fp8Reference, HandComputedSmallCase) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    const Fp8Case c = small_case(t);
    EXPECT_EQ(c.m(), 2);
    EXPECT_EQ(c.n(), 2);
    EXPECT_EQ(c.k(), 4);
    EXPECT_EQ(c.k_blocks(), 2);
    EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{6.5, 34.5, -4, -2}));
  }
}

TEST(Fp8Reference, RowSubset) {
  const Fp8Case c = small_case();
  EXPECT_EQ(fp8_matmul_reference(c, 1, 2), (std::vector<double>{-4, -2}));
  EXPECT_EQ(fp8_matmul_reference(c, 0, 1), (std::vector<double>{6.5, 34.5}));
  EXPECT_TRUE(fp8_matmul_reference(c, 1, 1).empty());
}

TEST(Fp8Reference, Bias) {
  Fp8Case c = small_case();
  c.bias = tensor(DType::kFloat16, Shape{2}, {0.5, -1});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{7, 33.5, -3.5, -3}));
}

TEST(Fp8Reference, BiasIsAddedInFloat64) {
  // 2049 + 0.5: float16 could hold neither the sum nor 2049, the reference holds both.
  Fp8Case c;
  c.block_size = 2;
  c.a = tensor(DType::kFloat16, Shape{1, 2}, {1024, 1025});
  c.b = codes(1, 2, {kOne, kOne});
  c.b_scale = tensor(DType::kFloat32, Shape{1, 1}, {1});
  c.bias = tensor(DType::kFloat16, Shape{1}, {0.5});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 1), (std::vector<double>{2049.5}));
}

TEST(Fp8Reference, PartialLastBlockUsesLastScaleColumn) {
  // K = 5, block 2: k = 4 is alone in block 2 with scale 8. A = [1, 2, 3, 4, 0.5],
  // w = [2, 4, -1.5, 0.25, 2 * 8] -> 2 + 8 - 4.5 + 1 + 8 = 14.5.
  Fp8Case c;
  c.block_size = 2;
  c.a = tensor(DType::kFloat16, Shape{1, 5}, {1, 2, 3, 4, 0.5});
  c.b = codes(1, 5, {kOne, kTwo, kMinusThree, kHalf, kTwo});
  c.b_scale = tensor(DType::kFloat32, Shape{1, 3}, {2, 0.5, 8});
  EXPECT_EQ(c.k_blocks(), 3);
  EXPECT_EQ(fp8_matmul_reference(c, 0, 1), (std::vector<double>{14.5}));
}

TEST(Fp8Reference, RankThreeA) {
  const Fp8Case c = small_case(DType::kFloat16, Shape{2, 1, 4});
  EXPECT_EQ(c.m(), 2);
  EXPECT_EQ(c.y_shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{6.5, 34.5, -4, -2}));
}

TEST(Fp8Reference, RankOneA) {
  Fp8Case c = small_case();
  c.a = tensor(DType::kFloat16, Shape{4}, {1, 2, 3, 4});
  EXPECT_EQ(c.m(), 1);
  EXPECT_EQ(c.y_shape(), Shape{2});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 1), (std::vector<double>{6.5, 34.5}));
}

TEST(Fp8Reference, W8A8WithUnitScaleAndExactActivationIsUnchanged) {
  // Every value of A is an e4m3 value, so QDQ with a_scale 1 is the identity.
  Fp8Case c = small_case();
  c.a_scale = tensor(DType::kFloat32, Shape{}, {1});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{6.5, 34.5, -4, -2}));
}

TEST(Fp8Reference, W8A8QuantizesTheActivation) {
  // a_scale 2, row 0 = [1, 4.75, 4.6 (float16: 4.6015625), 1000]:
  //   a / 2 = [0.5, 2.375, 2.30078125, 500] -> e4m3 [0.5, 2.5 (tie to even), 2.25, 448]
  //   A'    = [1, 5, 4.5, 896]
  //   Y[0]  = [2 + 20 - 6.75 + 224, 0.5 - 15 + 36 + 3584] = [239.25, 3605.5]
  // Row 1 halves to e4m3 values exactly, so it is unchanged.
  Fp8Case c = small_case();
  c.a = tensor(DType::kFloat16, Shape{2, 4}, {1, 4.75, 4.6, 1000, -1, 0.5, 2, -4});
  c.a_scale = tensor(DType::kFloat32, Shape{}, {2});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{239.25, 3605.5, -4, -2}));
}

// Dynamic quantization, per row and K block of 2: s = amax / 448, q = e4m3(A / s), Y from
// q * s. Row 0: block 0 amax 448 (s = 1), block 1 amax 7 (s = 2^-6, q = [224, 448]): both
// exact, A unchanged. Row 1: block 0 s = 1 and 100 rounds to 96 (a tie between e4m3 96
// and 104, to even); block 1 amax 7 again, exact.
//   A'' = [[448, 224, 3.5, 7], [-448, 96, 7, -3.5]]
//   Y   = [[896 + 896 - 5.25 + 1.75, 224 - 672 + 28 + 28],
//          [-896 + 384 - 10.5 - 0.875, -224 - 288 + 56 - 14]]
TEST(Fp8Reference, DynamicQuantizationPerRowAndBlock) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    Fp8Case c = small_case(t);
    c.a = tensor(t, Shape{2, 4}, {448, 224, 3.5, 7, -448, 100, 7, -3.5});
    c.dynamic_act_quant = true;
    EXPECT_TRUE(c.attrs().dynamic_act_quant);
    EXPECT_EQ(fp8_matmul_reference(c, 0, 2),
              (std::vector<double>{1788.5, -392, -523.375, -470}));
    // Without it, 100 stays 100: Y[1] = [-896 + 400 - 10.5 - 0.875, -224 - 300 + 56 - 14].
    c.dynamic_act_quant = false;
    EXPECT_EQ(fp8_matmul_reference(c, 1, 2), (std::vector<double>{-507.375, -482}));
  }
}

// An all-zero block has s = 0 and adds nothing; a NaN makes its block's scale, and so
// every output of its row, NaN; other rows stay finite.
TEST(Fp8Reference, DynamicZeroAndNaNBlocks) {
  Fp8Case c = small_case();
  c.a = tensor(DType::kFloat16, Shape{2, 4}, {0, 0, 3.5, 7, std::nan(""), 1, 2, 4});
  c.dynamic_act_quant = true;
  const std::vector<double> y = fp8_matmul_reference(c, 0, 2);
  EXPECT_EQ(y[0], -5.25 + 1.75);
  EXPECT_EQ(y[1], 28 + 28);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(std::isnan(y[3]));
}

// The emulation rounds A'' = q * s to T (the kernels' A'); within the tolerance of the
// reference's unrounded one.
TEST(Fp8Emulate, DynamicRoundsTheQuantizedActivationToT) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    Fp8Case c = make_random_fp8_case(t, 7, 33, 300, 128, true, false, 77);
    c.dynamic_act_quant = true;
    const HostTensor y = fp8_matmul_emulate_dequant_gemm(c);
    const std::vector<double> ref = fp8_matmul_reference(c, 0, c.m());
    const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
    EXPECT_TRUE(r.passed) << r.to_string();
    EXPECT_GT(r.rel_err, 0.0);  // the rounding of A'' (and of the weights) shows
  }
}

TEST(Fp8Reference, NaNCodesPropagate) {
  for (uint8_t nan : {kNaN, static_cast<uint8_t>(0xFF)}) {
    Fp8Case c = small_case();
    static_cast<uint8_t*>(c.b.data())[2] = nan;  // row 0, k = 2
    const std::vector<double> y = fp8_matmul_reference(c, 0, 2);
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_EQ(y[1], 34.5);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(y[3], -2);
  }
}

TEST(Fp8Reference, KZeroIsBias) {
  Fp8Case c;
  c.block_size = 128;
  c.a = HostTensor::zeros(DType::kFloat16, Shape{2, 0});
  c.b = HostTensor::zeros(DType::kFloat8E4M3, Shape{2, 0});
  c.b_scale = HostTensor::zeros(DType::kFloat32, Shape{2, 0});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{0, 0, 0, 0}));
  c.bias = tensor(DType::kFloat16, Shape{2}, {0.5, -1});
  EXPECT_EQ(fp8_matmul_reference(c, 0, 2), (std::vector<double>{0.5, -1, 0.5, -1}));
}

TEST(Fp8Reference, ArgsDescribeTheCase) {
  Fp8Case c = small_case(DType::kBFloat16, Shape{2, 1, 4});
  c.bias = tensor(DType::kBFloat16, Shape{2}, {0.5, -1});
  HostTensor y = HostTensor::zeros(DType::kBFloat16, c.y_shape());
  Fp8MatMulProblem p;
  const Status s = validate_fp8_matmul(c.args(&y), c.attrs(), &p);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(p.m, 2);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.k, 4);
  EXPECT_EQ(p.block_size, 2);
  EXPECT_TRUE(p.has_bias);
  EXPECT_FALSE(p.has_a_scale);
  EXPECT_EQ(p.dtype, DType::kBFloat16);
}

// ------------------------------------------------------------------ emulation
TEST(Fp8Emulate, HandComputedSmallCase) {
  Fp8Case c = small_case();
  HostTensor y = fp8_matmul_emulate_dequant_gemm(c);
  EXPECT_EQ(y.dtype, DType::kFloat16);
  EXPECT_EQ(y.shape, (Shape{2, 2}));
  EXPECT_EQ(y.get(0), 6.5);
  EXPECT_EQ(y.get(1), 34.5);
  EXPECT_EQ(y.get(2), -4);
  EXPECT_EQ(y.get(3), -2);
  c.bias = tensor(DType::kFloat16, Shape{2}, {0.5, -1});
  y = fp8_matmul_emulate_dequant_gemm(c);
  EXPECT_EQ(y.get(0), 7);
  EXPECT_EQ(y.get(3), -3);
}

TEST(Fp8Emulate, RoundsBeforeAndAfterTheBias) {
  // 1024 + 1025 = 2049 rounds to 2048 in float16 (tie to even); + 0.5 = 2048.5 rounds to
  // 2048 again, where the single-rounding reference has 2049.5.
  Fp8Case c;
  c.block_size = 2;
  c.a = tensor(DType::kFloat16, Shape{1, 2}, {1024, 1025});
  c.b = codes(1, 2, {kOne, kOne});
  c.b_scale = tensor(DType::kFloat32, Shape{1, 1}, {1});
  c.bias = tensor(DType::kFloat16, Shape{1}, {0.5});
  EXPECT_EQ(fp8_matmul_emulate_dequant_gemm(c).get(0), 2048);
}

TEST(Fp8Emulate, WeightsAreRoundedToT) {
  // w0 = 1.125 * 0.1f is not a float16; w1 = 1 * float16(w0) is. With A = [1, -1] the
  // emulation, which sees both weights in float16, gives exactly 0; the reference gives
  // the rounding error of w0.
  const float w16 = codec::round_to(DType::kFloat16, 1.125f * 0.1f);
  Fp8Case c;
  c.block_size = 1;
  c.a = tensor(DType::kFloat16, Shape{1, 2}, {1, -1});
  c.b = codes(1, 2, {0x39, kOne});  // 1.125, 1
  c.b_scale = HostTensor::zeros(DType::kFloat32, Shape{1, 2});
  c.b_scale.set(0, 0.1f);
  c.b_scale.set(1, w16);
  EXPECT_EQ(fp8_matmul_emulate_dequant_gemm(c).get(0), 0.0);
  EXPECT_EQ(fp8_matmul_reference(c, 0, 1)[0], 1.125 * static_cast<double>(0.1f) - w16);
  EXPECT_NE(fp8_matmul_reference(c, 0, 1)[0], 0.0);
}

TEST(Fp8Emulate, W8A8UsesTheQdqActivation) {
  Fp8Case c = small_case();
  c.a = tensor(DType::kFloat16, Shape{2, 4}, {1, 4.75, 4.6, 1000, -1, 0.5, 2, -4});
  c.a_scale = tensor(DType::kFloat32, Shape{}, {2});
  const HostTensor y = fp8_matmul_emulate_dequant_gemm(c);
  EXPECT_EQ(y.get(0), 239.25);
  EXPECT_EQ(y.get(1), 3606);  // 3605.5 rounded to float16, whose spacing is 2 above 2048
  EXPECT_EQ(y.get(2), -4);
}

TEST(Fp8Emulate, MatchesReferenceWithinTolerance) {
  // K = 320 has a partial last block of 64; both weight inits, W8A8 and bias.
  uint64_t seed = 1;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (WeightInit init : {WeightInit::kQuantizedNormal, WeightInit::kAllCodes}) {
      for (bool w8a8 : {false, true}) {
        const Fp8Case c = make_random_fp8_case(t, 16, 96, 320, 128, true, w8a8, seed++, init);
        const HostTensor y = fp8_matmul_emulate_dequant_gemm(c);
        const std::vector<double> ref = fp8_matmul_reference(c, 0, c.m());
        const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
        EXPECT_TRUE(r.passed) << dtype_name(t) << " w8a8=" << w8a8 << ": " << r.to_string();
        // Rounding to T makes some error: a zero would mean the comparison saw nothing.
        EXPECT_GT(r.rel_err, 0.0);
        double norm = 0;
        for (double v : ref) norm += v * v;
        EXPECT_GT(norm, 0.0);
      }
    }
  }
}

// ------------------------------------------------------------------ quantizer
TEST(Fp8Quantize, RoundTripWithinE4m3Precision) {
  const int64_t n = 8, k = 300, block = 128, k_blocks = 3;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> w(n * k);
  for (float& v : w) v = normal(rng);
  for (int64_t i = 3 * k + 128; i < 3 * k + 256; ++i) w[i] = 0;  // row 3, block 1
  HostTensor b, s;
  quantize_fp8_blockwise(w, n, k, block, &b, &s);
  ASSERT_EQ(b.dtype, DType::kFloat8E4M3);
  ASSERT_EQ(b.shape, (Shape{n, k}));
  ASSERT_EQ(s.dtype, DType::kFloat32);
  ASSERT_EQ(s.shape, (Shape{n, k_blocks}));
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t blk = 0; blk < k_blocks; ++blk) {
      const int64_t begin = row * k + blk * block, end = row * k + std::min(k, (blk + 1) * block);
      float amax = 0;
      for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(w[i]));
      const double scale = s.get(row * k_blocks + blk);
      if (amax == 0) {
        EXPECT_EQ(scale, 1.0);
        for (int64_t i = begin; i < end; ++i) EXPECT_EQ(b.get(i), 0.0);
        continue;
      }
      EXPECT_EQ(scale, amax / 448.0f);
      for (int64_t i = begin; i < end; ++i) {
        const double deq = b.get(i) * scale;
        // 3 mantissa bits: half an ulp is 2^-4 relative; in the subnormal range half the
        // quantum 2^-9 * scale.
        const double bound = std::max(0x1p-4 * std::fabs(w[i]), 0x1p-10 * scale) * (1 + 1e-6);
        EXPECT_LE(std::fabs(deq - w[i]), bound) << "row " << row << " k " << i - row * k;
        if (std::fabs(w[i]) == amax) {
          EXPECT_EQ(std::fabs(b.get(i)), 448.0);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ random cases
TEST(Fp8RandomCase, ShapesAndDtypes) {
  const Fp8Case c = make_random_fp8_case(DType::kBFloat16, 5, 7, 300, 128, true, true, 3);
  EXPECT_EQ(c.a.dtype, DType::kBFloat16);
  EXPECT_EQ(c.a.shape, (Shape{5, 300}));
  EXPECT_EQ(c.b.dtype, DType::kFloat8E4M3);
  EXPECT_EQ(c.b.shape, (Shape{7, 300}));
  EXPECT_EQ(c.b_scale.dtype, DType::kFloat32);
  EXPECT_EQ(c.b_scale.shape, (Shape{7, 3}));
  ASSERT_TRUE(c.bias.has_value());
  EXPECT_EQ(c.bias->dtype, DType::kBFloat16);
  EXPECT_EQ(c.bias->shape, Shape{7});
  ASSERT_TRUE(c.a_scale.has_value());
  EXPECT_EQ(c.a_scale->dtype, DType::kFloat32);
  EXPECT_EQ(c.a_scale->numel(), 1);
  const Fp8Case plain = make_random_fp8_case(DType::kFloat16, 5, 7, 300, 128, false, false, 3);
  EXPECT_FALSE(plain.bias.has_value());
  EXPECT_FALSE(plain.a_scale.has_value());
}

TEST(Fp8RandomCase, SeedDeterminesTheCase) {
  const Fp8Case a = make_random_fp8_case(DType::kFloat16, 4, 8, 256, 64, true, true, 11);
  const Fp8Case b = make_random_fp8_case(DType::kFloat16, 4, 8, 256, 64, true, true, 11);
  const Fp8Case c = make_random_fp8_case(DType::kFloat16, 4, 8, 256, 64, true, true, 12);
  EXPECT_EQ(a.a.bytes, b.a.bytes);
  EXPECT_EQ(a.b.bytes, b.b.bytes);
  EXPECT_EQ(a.b_scale.bytes, b.b_scale.bytes);
  EXPECT_EQ(a.bias->bytes, b.bias->bytes);
  EXPECT_EQ(a.a_scale->bytes, b.a_scale->bytes);
  EXPECT_NE(a.a.bytes, c.a.bytes);
  EXPECT_NE(a.b.bytes, c.b.bytes);
}

TEST(Fp8RandomCase, AllCodesCoversEveryFiniteCode) {
  const int64_t k = 512;
  const Fp8Case c = make_random_fp8_case(DType::kFloat16, 1, 64, k, 128, false, false, 5,
                                         WeightInit::kAllCodes);
  std::set<int> seen;
  const auto* codes = static_cast<const uint8_t*>(c.b.data());
  for (int64_t i = 0; i < c.b.numel(); ++i) {
    EXPECT_NE(codes[i] & 0x7F, 0x7F) << "NaN code at " << i;
    seen.insert(codes[i]);
  }
  EXPECT_EQ(seen.size(), 254u);
  for (int64_t i = 0; i < c.b_scale.numel(); ++i) {
    EXPECT_GE(c.b_scale.get(i), 0.5 / std::sqrt(k) * (1 - 1e-6));
    EXPECT_LE(c.b_scale.get(i), 1.5 / std::sqrt(k) * (1 + 1e-6));
  }
}

TEST(Fp8RandomCase, QuantizedNormalWeightsHaveNoNaN) {
  const Fp8Case c = make_random_fp8_case(DType::kFloat16, 1, 32, 512, 128, false, false, 6);
  const auto* codes = static_cast<const uint8_t*>(c.b.data());
  int saturated = 0;
  for (int64_t i = 0; i < c.b.numel(); ++i) {
    EXPECT_NE(codes[i] & 0x7F, 0x7F);
    saturated += (codes[i] & 0x7F) == 0x7E;
  }
  EXPECT_GE(saturated, c.b_scale.numel());  // each block's amax maps to +-448
  for (int64_t i = 0; i < c.b_scale.numel(); ++i) EXPECT_GT(c.b_scale.get(i), 0.0);
}

TEST(Fp8RandomCase, ActivationScaleMakesANonTrivialQdq) {
  for (uint64_t seed = 20; seed < 30; ++seed) {
    const Fp8Case c = make_random_fp8_case(DType::kFloat16, 4, 8, 512, 128, false, true, seed);
    double amax = 0;
    for (int64_t i = 0; i < c.a.numel(); ++i) amax = std::max(amax, std::fabs(c.a.get(i)));
    const auto s = static_cast<float>(c.a_scale->get(0));
    EXPECT_GE(s, amax / 448 * 0.8 * (1 - 1e-6));
    EXPECT_LE(s, amax / 448 * 1.2 * (1 + 1e-6));
    int changed = 0;
    for (int64_t i = 0; i < c.a.numel(); ++i) {
      const auto a = static_cast<float>(c.a.get(i));
      changed += codec::qdq_e4m3(DType::kFloat16, a, s) != a;
    }
    EXPECT_GT(changed, c.a.numel() / 2) << "seed " << seed;
  }
}

}  // namespace
}  // namespace bqmm::reference
