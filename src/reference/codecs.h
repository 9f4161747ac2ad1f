// Host codecs, bit-exact with the CUDA conversions the kernels use:
// float8 e4m3fn (no infinities; 0x7F/0xFF NaN), float16, bfloat16; all rounding is
// round-to-nearest-even.
#pragma once

#include <cstdint>
#include <cstring>

#include "bqmm/tensor.h"

namespace bqmm::codec {

// The bit pattern of a float and back (std::bit_cast is C++20).
inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
inline float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

float e4m3_to_float(uint8_t code);                 // exact
uint8_t float_to_e4m3_satfinite(float v);          // RNE, |v| > 448 -> +-448, NaN -> 0x7F
float half_to_float(uint16_t bits);                // exact
uint16_t float_to_half(float v);                   // RNE, overflow -> inf
float bf16_to_float(uint16_t bits);                // exact
uint16_t float_to_bf16(float v);                   // RNE, NaN stays NaN

// The same roundings straight from a double, rounding once (going through float first
// could round twice). NaN gives the canonical NaN of each format (0x7F, 0x7FFF, 0x7FFF).
uint8_t double_to_e4m3_satfinite(double v);
uint16_t double_to_half(double v);
uint16_t double_to_bf16(double v);

// float -> dtype (float16 / bfloat16 / float32) -> float.
float round_to(DType dtype, float v);

// W8A8 activation quantize-dequantize of one element, as docs/CONTRACT.md section 1 defines it:
//   inv = a_scale != 0 ? 1 / a_scale : 0; q = e4m3_satfinite_rne(a * inv);
//   result = round_to_T(float(q) * a_scale)   (all float32 arithmetic)
float qdq_e4m3(DType t, float a, float a_scale);

}  // namespace bqmm::codec
