// Every narrowing conversion goes through one rounding routine on the bits of a double:
// a float widens to a double exactly, so rounding from the double is the single RNE
// rounding that __float2half_rn, __float2bfloat16_rn and cvt.rn.satfinite.e4m3 perform.
#include "reference/codecs.h"

#include <cmath>
#include <cstring>

namespace bqmm::codec {
namespace {

constexpr int kDoubleMantBits = 52;
constexpr int kDoubleBias = 1023;

uint64_t double_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Rounds the magnitude of a finite double to nearest-even in a binary format with
// `mant_bits` stored mantissa bits and exponent bias `bias` (IEEE-style subnormals), and
// returns the magnitude's bit pattern. Values beyond the format's range come back as
// codes above its largest finite one; the caller decides between saturation and inf.
uint64_t round_magnitude(uint64_t abs_bits, int mant_bits, int bias) {
  const int exp = static_cast<int>(abs_bits >> kDoubleMantBits) - kDoubleBias;
  const int min_exp = 1 - bias;
  const uint64_t frac = abs_bits & ((uint64_t{1} << kDoubleMantBits) - 1);
  int shift = kDoubleMantBits - mant_bits;
  uint64_t code;
  uint64_t dropped;
  if (exp >= min_exp) {
    code = (static_cast<uint64_t>(exp + bias) << mant_bits) | (frac >> shift);
    dropped = frac & ((uint64_t{1} << shift) - 1);
  } else {
    // Subnormal in the target: the implicit bit joins the shifted-out significand.
    shift += min_exp - exp;
    // Below half the smallest subnormal (a double subnormal included): rounds to zero.
    if (shift > kDoubleMantBits + 1) return 0;
    const uint64_t sig = frac | (uint64_t{1} << kDoubleMantBits);
    code = sig >> shift;
    dropped = sig & ((uint64_t{1} << shift) - 1);
  }
  const uint64_t half = uint64_t{1} << (shift - 1);
  // A carry out of the mantissa correctly bumps the exponent field.
  if (dropped > half || (dropped == half && (code & 1))) ++code;
  return code;
}

// Shared by float16 and bfloat16: sign, canonical NaN, overflow to inf.
uint16_t double_to_16bit(double v, int mant_bits, int bias, uint16_t max_finite,
                         uint16_t inf) {
  const uint64_t bits = double_bits(v);
  const auto sign = static_cast<uint16_t>((bits >> 48) & 0x8000);
  if (std::isnan(v)) return 0x7FFF;
  const uint64_t code = round_magnitude(bits & ~(uint64_t{1} << 63), mant_bits, bias);
  return static_cast<uint16_t>(sign | (code > max_finite ? inf : code));
}

}  // namespace

float e4m3_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t exp = (code >> 3) & 0xF;
  const uint32_t mant = code & 0x7;
  if ((code & 0x7F) == 0x7F) return std::nanf("");
  if (exp == 0) {
    // Subnormal: mant * 2^-9, exact in float.
    const float mag = static_cast<float>(mant) * 0x1p-9f;
    return sign ? -mag : mag;
  }
  return float_of(sign | ((exp - 7 + 127) << 23) | (mant << 20));
}

uint8_t double_to_e4m3_satfinite(double v) {
  // CUDA canonicalizes NaN before converting, so the sign of a NaN is lost.
  if (std::isnan(v)) return 0x7F;
  const uint64_t bits = double_bits(v);
  const auto sign = static_cast<uint8_t>((bits >> 56) & 0x80);
  const uint64_t code = round_magnitude(bits & ~(uint64_t{1} << 63), 3, 7);
  // 0x7F would be NaN: everything at or beyond 448 (inf included) saturates to 0x7E.
  return static_cast<uint8_t>(sign | (code > 0x7E ? 0x7E : code));
}

uint8_t float_to_e4m3_satfinite(float v) { return double_to_e4m3_satfinite(v); }

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1F;
  const uint32_t mant = bits & 0x3FF;
  if (exp == 0) {
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  if (exp == 0x1F) return float_of(sign | 0x7F800000u | (mant << 13));
  return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t double_to_half(double v) { return double_to_16bit(v, 10, 15, 0x7BFF, 0x7C00); }
uint16_t float_to_half(float v) { return double_to_half(v); }

float bf16_to_float(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

uint16_t double_to_bf16(double v) { return double_to_16bit(v, 7, 127, 0x7F7F, 0x7F80); }
uint16_t float_to_bf16(float v) { return double_to_bf16(v); }

float round_to(DType dtype, float v) {
  switch (dtype) {
    case DType::kFloat16: return half_to_float(float_to_half(v));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(v));
    default: return v;
  }
}

float qdq_e4m3(DType t, float a, float a_scale) {
  const float inv = a_scale != 0.0f ? 1.0f / a_scale : 0.0f;
  const uint8_t q = float_to_e4m3_satfinite(a * inv);
  return round_to(t, e4m3_to_float(q) * a_scale);
}

}  // namespace bqmm::codec
