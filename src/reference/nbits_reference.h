// NBitsMatMul on the host: the float64 reference (the oracle of every test), a CPU
// emulation of the dequant + GEMM path's numerics (the CLI's CPU mode), the block
// quantizer that turns float weights into packed codes + scales + zero points, the
// packing helpers, and random cases.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bqmm/nbits_matmul.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"  // WeightInit

namespace bqmm::reference {

using harness::HostTensor;

// One problem's inputs on the host, in the operator's layouts.
struct NBitsCase {
  NBitsMatMulAttrs attrs;                  // k, n, bits, block_size
  HostTensor a;                            // T1 [..., K]
  HostTensor b;                            // uint8 [N, k_blocks, block_size * bits / 8]
  HostTensor scales;                       // T1 [N, k_blocks]
  std::optional<HostTensor> zero_points;   // uint8 packed [N, ceil(k_blocks*bits/8)] or T1 [N, k_blocks]
  std::optional<HostTensor> g_idx;         // int32 [K]
  std::optional<HostTensor> bias;          // T1 [N]

  DType dtype() const { return a.dtype; }
  int64_t m() const;
  int64_t n() const { return attrs.n; }
  int64_t k() const { return attrs.k; }
  int bits() const { return static_cast<int>(attrs.bits); }
  int64_t block_size() const { return attrs.block_size; }
  int64_t k_blocks() const;
  NBitsZeroPoints zero_point_kind() const;
  // Host-pointer args for validate_nbits_matmul; y is the caller's output tensor.
  NBitsMatMulArgs args(HostTensor* y) const;
  Shape y_shape() const;  // A's shape with the last dim replaced by N
};

// The integer code q[n, k] (low bits first; 4-bit: element 2j in the low nibble).
uint32_t nbits_code(const NBitsCase& c, int64_t n, int64_t k);
// The zero point of block `blk` of row n: packed (integer), typed (T1 value) or the
// default 2^(bits - 1).
double nbits_zero_point(const NBitsCase& c, int64_t n, int64_t blk);
// The operator's prepacked input as prepack_nbits_matmul defines it, [2, k_blocks, N] of
// nbits_matmul_prepacked_dtype: [0][b][n] = scales[n, b], [1][b][n] = -zp * scales[n, b]
// (the product in float32, then rounded to that type).
HostTensor nbits_prepacked(const NBitsCase& c);
// The block of k: g_idx[k] when given, else k / block_size.
int64_t nbits_block_of(const NBitsCase& c, int64_t k);
// Row n of the exactly dequantized weight, (q - zp) * scale in float64 (exact: |q - zp|
// and the T1 scale have few significant bits). NaN where g_idx is out of range.
void nbits_weight_row(const NBitsCase& c, int64_t n, std::vector<double>* w);

// float64 reference of output rows [row_begin, row_end) (row = flattened leading index
// of A): y[(r - row_begin) * N + n]. Built on the exact weights, so a test's tolerance
// measures kernel error only.
std::vector<double> nbits_matmul_reference(const NBitsCase& c, int64_t row_begin,
                                           int64_t row_end);

// The dequant + cuBLAS path's numerics on the CPU: weights rounded to T1 (from the
// float32 (q - zp) * scale), float32 accumulation, one rounding to T1, then bias added
// in float32 and rounded again.
HostTensor nbits_matmul_emulate_dequant_gemm(const NBitsCase& c);

// Element i of a packed row of bits-wide values (codes, packed zero points): byte i
// (8-bit), or the nibble of byte i / 2 with even i low (4-bit); and its inverse.
uint32_t nbits_packed_at(const uint8_t* row, int64_t i, int bits);
void nbits_put_packed(uint8_t* row, int64_t i, int bits, uint8_t value);

// Packs integer codes q [N, K] (each < 2^bits) into B [N, k_blocks, block_size*bits/8],
// low bits first; the padding of a partial last block is `pad`.
HostTensor pack_nbits_codes(const std::vector<uint8_t>& q, int64_t n, int64_t k, int bits,
                            int64_t block_size, uint8_t pad = 0);
// Packs integer zero points zp [N, k_blocks] into [N, ceil(k_blocks * bits / 8)] uint8:
// one byte per block (8-bit) or two blocks per byte, even block in the low nibble.
HostTensor pack_nbits_zero_points(const std::vector<uint8_t>& zp, int64_t n, int64_t k_blocks,
                                  int bits);

// Block quantizer: w float32 [N, K] -> codes, T1 scales and zero points per block.
//   kNone (symmetric): scale = amax / (2^(bits-1) - 1), zero point 2^(bits-1) (absent).
//   kPacked (asymmetric): per-block min/max (widened to include 0),
//            scale = (max - min) / (2^bits - 1), zp = round(-min / scale), packed.
//   kTyped (asymmetric): as kPacked but zp = -min / scale unrounded, stored in T1.
// Scales are stored in T1 rounded up (so the block's range fits the codes); codes are
// round(w / scale + zp) clamped to [0, 2^bits), with the stored scale and typed zero
// point, so dequantizing gives w back to within half a step (symmetric) or one step
// (asymmetric: the zero point's rounding shifts the grid). An all-zero block gets scale 1.
void quantize_nbits_blockwise(const std::vector<float>& w, int64_t n, int64_t k, int bits,
                              int64_t block_size, NBitsZeroPoints zero_points, DType scale_dtype,
                              NBitsCase* out);

// What make_random_nbits_case draws.
struct NBitsCaseSpec {
  DType dtype = DType::kFloat16;
  int64_t m = 1, n = 1, k = 1;
  int bits = 4;
  int64_t block_size = 32;
  NBitsZeroPoints zero_points = NBitsZeroPoints::kNone;
  bool g_idx = false;  // a random act-order g_idx (every block keeps its size)
  bool bias = false;
  WeightInit init = WeightInit::kQuantizedNormal;
};

// Fresh random inputs: normal activations and bias; weights per spec.init: normal
// N(0, 1/K) through quantize_nbits_blockwise, or (kAllCodes) uniform codes over the whole
// integer range with scales around 1/sqrt(K) and uniform zero points (fractional when
// typed). The padding codes of a partial last block and of a packed zero-point row are
// random, so kernels that read them show up.
NBitsCase make_random_nbits_case(const NBitsCaseSpec& spec, uint64_t seed);

}  // namespace bqmm::reference
