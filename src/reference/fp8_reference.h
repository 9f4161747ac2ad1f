// Fp8WeightMatMul on the host: the float64 reference (the oracle of every test), a CPU
// emulation of the dequant + GEMM path's numerics (the CLI's CPU mode), the block
// quantizer that turns float weights into e4m3 + per-block scales, and random cases.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bqmm/fp8_matmul.h"
#include "harness/host_tensor.h"

namespace bqmm::reference {

using harness::HostTensor;

// One problem's inputs on the host.
struct Fp8Case {
  int64_t block_size = 128;
  HostTensor a;                        // T [M, K] (any rank >= 1)
  HostTensor b;                        // float8e4m3 [N, K]
  HostTensor b_scale;                  // float32 [N, k_blocks]
  std::optional<HostTensor> a_scale;   // float32 [] (scalar)
  std::optional<HostTensor> bias;      // T [N]
  bool dynamic_act_quant = false;      // Fp8MatMulAttrs::dynamic_act_quant (no a_scale)
  int64_t b_scale_block_rows = 1;      // Fp8MatMulAttrs::b_scale_block_rows (share_scale_rows)

  DType dtype() const { return a.dtype; }
  int64_t m() const;
  int64_t n() const { return b.shape[0]; }
  int64_t k() const { return b.shape[1]; }
  int64_t k_blocks() const { return k() / block_size + (k() % block_size != 0 ? 1 : 0); }
  Fp8MatMulAttrs attrs() const { return Fp8MatMulAttrs{block_size, dynamic_act_quant, b_scale_block_rows}; }
  // Host-pointer args for validate_fp8_matmul; y is the caller's output tensor.
  Fp8MatMulArgs args(HostTensor* y) const;
  // Y's shape (A's shape with the last dim replaced by N).
  Shape y_shape() const;
};

// float64 reference of output rows [row_begin, row_end) (row = flattened leading index
// of A, the range clipped to [0, M]): y[(r - row_begin) * N + n]. Uses the exactly
// dequantized weights and, with an a_scale, the exactly QDQ'd activation, so a test's
// tolerance measures kernel error only. Dynamic quantization: per row and K block
// s = amax |A| / 448 and q = e4m3_satfinite_rne(A * inv) in float32 as the contract
// states, then Y from q * s exactly (not rounded to T).
std::vector<double> fp8_matmul_reference(const Fp8Case& c, int64_t row_begin, int64_t row_end);

// The dequant + cuBLAS path's numerics on the CPU: weights rounded to T, float32
// accumulation, one rounding to T, then bias added in float32 and rounded again.
HostTensor fp8_matmul_emulate_dequant_gemm(const Fp8Case& c);

// Block quantizer: w float32 [N, K] -> e4m3 codes [N, K] and float32 scales
// [N, ceil(K/block_size)], scale = amax(block) / 448 (1 for an all-zero block).
void quantize_fp8_blockwise(const std::vector<float>& w, int64_t n, int64_t k,
                            int64_t block_size, HostTensor* b, HostTensor* b_scale);

// How the random weight is made.
enum class WeightInit {
  kQuantizedNormal,  // normal floats through quantize_fp8_blockwise (realistic checkpoints)
  kAllCodes,         // uniform over every non-NaN e4m3 code, scales ~ 1/sqrt(K)
};

// Fresh random inputs: normal activations, weights per `init`, scales around 1/sqrt(K),
// optional bias (normal) and a_scale (amax(A)/448-ish so the QDQ is meaningful).
Fp8Case make_random_fp8_case(DType dtype, int64_t m, int64_t n, int64_t k, int64_t block_size,
                             bool bias, bool w8a8, uint64_t seed,
                             WeightInit init = WeightInit::kQuantizedNormal);

// Makes c's weight scales keep the b_scale_block_rows promise for `rows`: each aligned
// group of `rows` rows takes its first row's scales (the codes are kept, so the weight
// changes; the reference follows b_scale as it is), and sets c.b_scale_block_rows.
void share_scale_rows(int64_t rows, Fp8Case* c);

// The operator's prepacked input as prepack_fp8_matmul defines it: b_scale transposed,
// float32 [k_blocks, N].
HostTensor fp8_prepacked(const Fp8Case& c);

}  // namespace bqmm::reference
