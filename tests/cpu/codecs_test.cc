// Host codecs against the format definitions and against CUDA's own host conversions
// (cuda_fp8.h / cuda_fp16.h / cuda_bf16.h), which the kernels' hardware conversions match.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reference/codecs.h"

namespace bqmm::codec {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();


// Float bit patterns to compare with CUDA: every 997th pattern (all exponents, both
// signs, NaNs, infinities) and every upper half with low halves that put exact ties and
// their neighbours at each of e4m3's, float16's and bfloat16's rounding positions.
const std::vector<uint32_t>& probe_bits() {
  static const std::vector<uint32_t> bits = [] {
    std::vector<uint32_t> v;
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) v.push_back(static_cast<uint32_t>(b));
    for (uint32_t hi = 0; hi < 0x10000; ++hi)
      for (uint32_t lo : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
        v.push_back(hi << 16 | lo);
    return v;
  }();
  return bits;
}

// The e4m3fn definition: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits,
// subnormals at exponent 0, S.1111.111 NaN, no infinities.
double e4m3_by_definition(int code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xF, mant = code & 7;
  if (exp == 15 && mant == 7) return std::nan("");
  const double mag = exp == 0 ? std::ldexp(mant / 8.0, -6) : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return sign ? -mag : mag;
}

TEST(E4m3, DecodesEveryCodeByDefinition) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_by_definition(c);
    const float got = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << "code " << c;
    }
  }
}

TEST(E4m3, LandmarkValues) {
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * 0x1p-9f);  // largest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(e4m3_to_float(0xC4), -3.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(E4m3, RoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3_satfinite(e4m3_to_float(static_cast<uint8_t>(c))), c) << "code " << c;
  }
  // Both zeros keep their sign.
  EXPECT_EQ(float_to_e4m3_satfinite(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3_satfinite(-0.0f), 0x80);
}

TEST(E4m3, TiesBetweenAdjacentCodesRoundToEven) {
  // Adjacent positive finite codes c, c + 1: the midpoint goes to the even code, anything
  // off the midpoint to the nearer one. Same for negatives.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact: a few bits more than e4m3
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(float_to_e4m3_satfinite(mid), even) << "between " << lo << " and " << hi;
    EXPECT_EQ(float_to_e4m3_satfinite(-mid), even | 0x80) << "between " << -lo << " and " << -hi;
    EXPECT_EQ(float_to_e4m3_satfinite(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(float_to_e4m3_satfinite(std::nextafter(mid, kInf)), c + 1);
  }
}

TEST(E4m3, HandPickedRounding) {
  EXPECT_EQ(float_to_e4m3_satfinite(0x1p-10f), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_e4m3_satfinite(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3_satfinite(-0x1p-11f), 0x80);  // underflow keeps the sign
  EXPECT_EQ(float_to_e4m3_satfinite(3 * 0x1p-10f), 0x02);  // 1.5 quanta: tie to 2
  EXPECT_EQ(float_to_e4m3_satfinite(2.375f), 0x42);  // 2.25 | 2.5 tie -> 2.5 (even mantissa)
  EXPECT_EQ(float_to_e4m3_satfinite(2.3f), 0x41);    // -> 2.25
  EXPECT_EQ(float_to_e4m3_satfinite(1e-30f), 0x00);
  EXPECT_EQ(float_to_e4m3_satfinite(float_of(1)), 0x00);  // float subnormal
}

TEST(E4m3, SaturatesToLargestFinite) {
  EXPECT_EQ(float_to_e4m3_satfinite(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(449.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(464.0f), 0x7E);  // the would-be tie with 480 (NaN)
  EXPECT_EQ(float_to_e4m3_satfinite(500.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(1e30f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(kInf), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(-448.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3_satfinite(-1000.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3_satfinite(-kInf), 0xFE);
  EXPECT_EQ(float_to_e4m3_satfinite(432.0f), 0x7E);  // 416 | 448 tie -> 448 (even)
  EXPECT_EQ(float_to_e4m3_satfinite(431.0f), 0x7D);
}

TEST(E4m3, NaNBecomesCanonicalNaN) {
  EXPECT_EQ(float_to_e4m3_satfinite(kNaN), 0x7F);
  EXPECT_EQ(float_to_e4m3_satfinite(-kNaN), 0x7F);
  EXPECT_EQ(float_to_e4m3_satfinite(float_of(0x7F800001u)), 0x7F);  // signalling payload
}

TEST(E4m3, DoubleRoundsOnce) {
  // 1 + 2^-4 + 2^-40 is just above the 1 | 1.125 tie; through float it would become the
  // tie itself and round down to 1.
  EXPECT_EQ(double_to_e4m3_satfinite(1.0 + 0x1p-4 + 0x1p-40), 0x39);
  EXPECT_EQ(float_to_e4m3_satfinite(static_cast<float>(1.0 + 0x1p-4 + 0x1p-40)), 0x38);
}

TEST(E4m3, MatchesCuda) {
  for (uint32_t b : probe_bits()) {
    const float f = float_of(b);
    const auto cuda = static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
    ASSERT_EQ(float_to_e4m3_satfinite(f), cuda) << "float bits " << std::hex << b;
  }
}

TEST(Half, RoundTripsEveryNonNaNPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7C00u, 0x7C00u);
      EXPECT_EQ(float_to_half(f), 0x7FFF);
      continue;
    }
    EXPECT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(Half, HandPicked) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x7C00), kInf);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);      // tie -> even (1.0)
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie -> even (1 + 2^-9)
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3C01);
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // tie with the next binade: rounds to inf
  EXPECT_EQ(float_to_half(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);      // tie between 0 and 2^-24
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 quanta
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(kNaN), 0x7FFF);
}

// ours(f) against CUDA's host-side conversion cuda(f) (a 16-bit type) on probe_bits().
template <typename Ours, typename Cuda>
void expect_matches_cuda(Ours ours, Cuda cuda) {
  for (uint32_t b : probe_bits()) {
    const float f = float_of(b);
    const auto h = cuda(f);
    uint16_t expected;
    static_assert(sizeof h == sizeof expected);
    std::memcpy(&expected, &h, sizeof expected);
    ASSERT_EQ(ours(f), expected) << "float bits " << std::hex << b;
  }
}

TEST(Half, MatchesCuda) {
  expect_matches_cuda(float_to_half, [](float f) { return __float2half_rn(f); });
}

TEST(BFloat16, RoundTripsEveryNonNaNPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    EXPECT_EQ(bits_of(f), h << 16);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f), h) << std::hex << h;
  }
}

TEST(BFloat16, HandPicked) {
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);      // tie -> even (1.0)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16(kNaN), 0x7FFF);
  EXPECT_EQ(float_to_bf16(float_of(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(float_to_bf16(float_of(0x00008000u)), 0x0000);
}

TEST(BFloat16, MatchesCuda) {
  expect_matches_cuda(float_to_bf16, [](float f) { return __float2bfloat16_rn(f); });
}

TEST(Codecs, DoubleToHalfAndBf16RoundOnce) {
  // Just above the half tie 1 + 2^-11; float would land on the tie and round to 1.0.
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11 + 0x1p-40), 0x3C01);
  EXPECT_EQ(double_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);
  EXPECT_EQ(double_to_half(1e300), 0x7C00);
  EXPECT_EQ(double_to_bf16(-1e300), 0xFF80);
}

TEST(Codecs, RoundTo) {
  EXPECT_EQ(round_to(DType::kFloat16, 1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(round_to(DType::kFloat16, 0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to(DType::kBFloat16, 0.1f), 0.10009765625f);
  EXPECT_EQ(round_to(DType::kFloat32, 0.1f), 0.1f);
}

TEST(Codecs, QdqE4m3) {
  // a_scale 2: a / 2 is quantized, then multiplied back.
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, 4.75f, 2.0f), 5.0f);    // 2.375: tie -> 2.5
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, 4.6f, 2.0f), 4.5f);     // 2.3 -> 2.25
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, 1000.0f, 2.0f), 896.0f);  // 500 saturates to 448
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, -1000.0f, 2.0f), -896.0f);
  EXPECT_EQ(qdq_e4m3(DType::kBFloat16, 3.0f, 1.0f), 3.0f);
  // a_scale 0: inv is 0, everything finite becomes 0.
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, 123.0f, 0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(qdq_e4m3(DType::kFloat16, kNaN, 1.0f)));
  // The product float(q) * a_scale is rounded to T: 1.125 * 0.1 is not a float16.
  EXPECT_EQ(qdq_e4m3(DType::kFloat16, 0.1125f, 0.1f), round_to(DType::kFloat16, 1.125f * 0.1f));
  EXPECT_NE(qdq_e4m3(DType::kFloat16, 0.1125f, 0.1f), 1.125f * 0.1f);
}

// What the dynamic quantize pass's amax rests on (act_quant_e4m3.cuh,
// chunk_abs_max_bits): with the sign cleared, float16 and bfloat16 bits order as their
// magnitudes, strictly, from zero to infinity, and every bit pattern above infinity's is
// a NaN; so an unsigned max of the bits is max |x|, and a NaN wins it.
TEST(SixteenBitFloats, MagnitudeBitsOrderAsMagnitudes) {
  struct Format { const char* name; float (*to_float)(uint16_t); uint16_t inf; };
  const Format formats[] = {{"float16", half_to_float, 0x7C00}, {"bfloat16", bf16_to_float, 0x7F80}};
  for (const Format& f : formats) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(f.to_float(0), 0.0f);
    EXPECT_EQ(f.to_float(f.inf), kInf);
    for (uint32_t bits = 1; bits <= f.inf; ++bits)
      ASSERT_LT(f.to_float(static_cast<uint16_t>(bits - 1)), f.to_float(static_cast<uint16_t>(bits))) << bits;
    for (uint32_t bits = f.inf + 1u; bits <= 0x7FFFu; ++bits)
      ASSERT_TRUE(std::isnan(f.to_float(static_cast<uint16_t>(bits)))) << bits;
    // The sign bit aside, a negative value's magnitude is its positive twin's.
    EXPECT_EQ(f.to_float(static_cast<uint16_t>(0x8000u | 0x1234u)), -f.to_float(0x1234u));
  }
}

}  // namespace
}  // namespace bqmm::codec
