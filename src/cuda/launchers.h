// Host-side launchers of the kernel families (one .cu file each). They enqueue on
// `stream`, never allocate, never synchronize, and check the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "bqmm/plan_parts.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm::cuda {

// fp8_dequant.cu: out[r, k] = T(e4m3(b[r, k]) * b_scale[r, k / block_size]) for
// `rows` rows of B (b and b_scale already point at the first row of the tile).
// vec16: the vector kernel (8-byte loads, 16-byte stores, fully coalesced); needs
// K % 16 == 0, K < 2^31 and a 16-byte aligned b. Otherwise the scalar kernel (any K).
Status launch_fp8_dequant(DType t, const uint8_t* b, const float* b_scale, int64_t rows,
                          int64_t k, int64_t block_size, bool vec16, void* out,
                          cudaStream_t stream);

// act_qdq.cu: out[i] = round_T(e4m3_satfinite(a[i] * inv) * a_scale), a_scale read on
// the device (W8A8 activation, docs/CONTRACT.md section 1).
Status launch_act_qdq(DType t, const void* a, const float* a_scale, int64_t count, void* out,
                      cudaStream_t stream);
// act_qdq.cu, dynamic: for each row m of a [M, K] and K block kb of block_size,
// s = amax |a| / 448 in float32 (NaN if the block has a NaN), inv = s != 0 ? 1 / s : 0,
// out = round_T(e4m3_satfinite(a * inv) * s).
Status launch_act_qdq_dynamic(DType t, const void* a, int64_t m, int64_t k, int64_t block_size,
                              void* out, cudaStream_t stream);

// bias.cu: y[m, n] = round_T(float(y[m, n]) + float(bias[n])) in place.
Status launch_bias_add(DType t, void* y, const void* bias, int64_t m, int64_t n,
                       cudaStream_t stream);
// bias.cu: y[m, n] = bias[n], or 0 without a bias (the K == 0 path).
Status launch_fill_bias(DType t, void* y, const void* bias, int64_t m, int64_t n,
                        cudaStream_t stream);

// gemv/fp8_mma.cu (tensor cores), gemv/fma_gemv.cu (CUDA cores): the fused decode GEMV,
// Y[m, n] = sum_k A'[m, k] * e4m3(B[n, k]) * b_scale[n, k / block_size] + bias[n] for
// 0 < M <= 8 (tensor cores with line loads: M <= kGemvMaxGroupRows, core/gemv_split.h, in
// row groups of 16; gemv/common.cuh), where A' = QDQ(A) when a_scale is given (fused into
// the activation load, bit-identical to launch_act_qdq) and A otherwise.
// Needs K % 16 == 0, block_size % 16 == 0 and 16-byte aligned a and b. The same arguments
// go to the W8A8 GEMM (launch_w8a8_gemm, below).
struct Fp8KernelArgs {
  DType dtype = DType::kFloat16;  // T of a, bias, y
  const void* a = nullptr;        // [M, K]
  const uint8_t* b = nullptr;     // [N, K] e4m3
  const float* b_scale = nullptr; // [N, k_blocks]
  const float* a_scale = nullptr; // device scalar or nullptr
  const void* bias = nullptr;     // [N] or nullptr
  void* y = nullptr;              // [M, N]
  int64_t m = 0, n = 0, k = 0, block_size = 0;
  // Launched as a programmatic dependent of the kernel before it (GemvConfig::
  // dependent_launch), without W8A8 only: the tensor-core GEMV's one tile of line loads at
  // M <= 8, the CUDA-core GEMV at one row per warp (else kInternal).
  bool dependent = false;
};
// CUDA cores: a warp per output column, `rows_per_warp` (1, 2, 4, 8) rows of A per warp.
Status launch_fp8_gemv_fma(const Fp8KernelArgs& args, int rows_per_warp, cudaStream_t stream);
// Tensor cores (SM80+): mma.m16n8k16, 16 columns per warp, `k_split` warps per block
// splitting K. Needs K % 64 == 0, K >= 256, block_size % 64 == 0. `tma` (SM90+): the
// weight tiles come by the tensor memory accelerator (gemv/tma.cuh) instead of by
// register loads; else `lines`: register loads of whole 128-byte lines staged through
// shared memory (gemv/line_loads.cuh; needs K % 128 == 0), `tiles_per_warp` (1 or 2; 2
// only with lines) 16-column tiles per warp; `registers`: 0, or with two tiles the
// kernel's register bound, kGemvTwoTileRegisters or kGemvWideRegisters (k_split <= 4).
// M > 8 needs `lines` (else kInternal).
Status launch_fp8_gemv_mma(const Fp8KernelArgs& args, int k_split, bool tma, bool lines,
                           int tiles_per_warp, int registers, cudaStream_t stream);

// nbits_dequant.cu: out[r, k] = T1((q[r, k] - zp[r, blk]) * scales[r, blk]) for `rows`
// rows of B (every pointer already at the first row of the tile), blk = g_idx[k] when
// g_idx is given, else k / block_size. A g_idx value outside [0, k_blocks) gives NaN.
struct NBitsDequantArgs {
  DType dtype = DType::kFloat16;        // T1 of scales, typed zero points and out
  int bits = 4;
  const uint8_t* b = nullptr;           // [rows, k_blocks * block_size * bits / 8]
  const void* scales = nullptr;         // [rows, k_blocks]
  const uint8_t* zp_packed = nullptr;   // [rows, ceil(k_blocks * bits / 8)] or nullptr
  const void* zp_typed = nullptr;       // [rows, k_blocks] of T1 or nullptr
  const int32_t* g_idx = nullptr;       // [K] or nullptr
  int64_t rows = 0, k = 0, block_size = 0;
  void* out = nullptr;                  // [rows, K] of T1
};
// vec8: 8 codes per thread with one load and 16-byte stores; needs K % 8 == 0 and an
// 8-byte aligned b. Otherwise one code per load and scalar stores (any K).
Status launch_nbits_dequant(const NBitsDequantArgs& args, bool vec8, cudaStream_t stream);

// gemv/nbits_gemv.cu (with nbits_window.cu, nbits_tma.cu; CUDA cores: fma_gemv.cu): the
// fused decode GEMV, Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, blk]) * scales[n, blk] +
// bias[n], blk = k / block_size, for 0 < M <= 8 (the window kernel's line loads: M <=
// kGemvMaxGroupRows in row groups of 16, `rows` 8; else kInternal). Needs integer zero
// points (packed or default), K % block_size == 0, rows of B of a multiple of 16 bytes,
// 16-byte aligned a and b, K < 2^31, and SM80+ for float16 / bfloat16 (tensor cores).
struct NBitsGemvArgs {
  DType dtype = DType::kFloat16;       // T1 of a, scales, bias, y
  int bits = 4;
  const void* a = nullptr;             // [M, K]
  const uint8_t* b = nullptr;          // [N, k_blocks * block_size * bits / 8]
  const void* scales = nullptr;        // [N, k_blocks]
  const uint8_t* zp_packed = nullptr;  // [N, ceil(k_blocks * bits / 8)] or nullptr
  // Typed (fractional) zero points, [N, k_blocks] of T1 (float16 / bfloat16), or nullptr:
  // only the register tile's algorithm 0 takes them (else kInternal).
  const void* zp_typed = nullptr;
  const void* bias = nullptr;          // [N] or nullptr
  void* y = nullptr;                   // [M, N]
  int64_t m = 0, n = 0, k = 0, block_size = 0;
  // The 4-bit tensor-core register tile (algorithm 0) launched as a programmatic dependent
  // of the kernel before it (SM90; GemvConfig::dependent_launch): it pulls its first
  // weights into L2, then waits for that kernel before it reads A or writes Y. Refused for
  // the other GEMV kernels.
  bool dependent = false;
};
// algo: the K-loop strategy (kNBitsGemvAlgo* of bqmm/nbits_matmul.h); rows: activation
// rows per warp tile (8 for float16 / bfloat16; 1, 2, 4 or 8 >= M for float32); k_split:
// warps per block splitting K (1, 2, 4 or 8; the window kernel's largest blocks also 12
// or 16, nbits_window_max_k_split). tma (SM90+, float16 / bfloat16, block_size
// >= 64 codes for 8-bit, >= 128 for 4-bit): the weights by TMA tiles (gemv/tma.cuh); algo
// does not apply then. window (float16 / bfloat16, blocks of a 64-byte window or more: 128
// codes 4-bit, 64 8-bit; with lines, of a 16-byte chunk or more: 32, 16; rows of whole
// windows): algorithm 0's loop without partial windows (NBitsGemvWindowKernel);
// tma and algo do not apply then. lines (with window, rows of whole 128-byte lines): the
// window kernel's weights loaded as whole lines and staged through shared memory,
// `tiles_per_warp` (1, or 2 with lines) 16-column tiles per warp; `registers`: 0, or with
// two tiles the kernel's register bound, kGemvTwoTileRegisters (16 warps per SM) or
// kGemvWideRegisters (12; k_split <= 4).
Status launch_nbits_gemv(const NBitsGemvArgs& args, int algo, int rows, int k_split, bool tma,
                         bool window, bool lines, int tiles_per_warp, int registers,
                         cudaStream_t stream);
// CUDA cores, 8-bit codes, float16 / bfloat16 (gemv/fma.cuh): a warp per two output
// columns, lanes along K; rows (1 or 2, >= M) activation rows per warp.
Status launch_nbits_gemv_fma(const NBitsGemvArgs& args, int rows, cudaStream_t stream);

// gemm/fused_gemm.cu: the fused GEMM of both operators for M above the decode GEMV (SM80+,
// float16 / bfloat16): Y = A * W^T + bias with W decoded from its stored form in registers
// (FP8: e4m3 * b_scale in float32 on each block's partial sums; N-bit: w = round_T((q - zp)
// * scale), the dequant kernel's weights; typed zero points round_T(q * scale +
// round_T(-zp * scale))), float32 sums, Y rounded to T once. Needs
// K % 8 == 0, 16-byte aligned a and b, rows of B of a multiple of 16 bytes, FP8
// block_size % 16 == 0 (N-bit block sizes are powers of two >= 16).
enum class GemmWeights { kFp8, kInt8, kInt4 };
constexpr int gemm_weight_bits(GemmWeights w) { return w == GemmWeights::kInt4 ? 4 : 8; }  // bits per code
struct FusedGemmArgs {
  DType dtype = DType::kFloat16;       // T of a, bias, y (and N-bit scales)
  GemmWeights weights = GemmWeights::kFp8;
  const void* a = nullptr;             // [M, K] (FP8 W8A8: the QDQ'd activation)
  const uint8_t* b = nullptr;          // [N, row_bytes]: e4m3 or packed codes
  const void* scales = nullptr;        // [N, k_blocks]: float32 (FP8) or T (N-bit)
  const uint8_t* zp_packed = nullptr;  // N-bit: [N, zp_row_bytes] or nullptr (default)
  const void* zp_typed = nullptr;      // N-bit typed zero points, [N, k_blocks] of T, or nullptr
  const void* bias = nullptr;          // [N] or nullptr
  void* y = nullptr;                   // [M, N]
  int64_t m = 0, n = 0, k = 0, block_size = 0;
  int64_t row_bytes = 0;               // bytes per row of B (FP8: K)
  int64_t k_blocks = 0;
  int64_t zp_row_bytes = 0;
  // The Hopper mainloop (config.wgmma): room for A in its K order, the plan's act_order
  // region (gemm_act_order_bytes of core/gemm_plan.h), 16-byte aligned.
  void* a_ordered = nullptr;
};
// `config`: the plan's tiling (bqmm/plan_parts.h, core/gemm_plan.h). With k_split > 1,
// `partials` holds k_split * M * N floats (the plan's partial region).
Status launch_fused_gemm(const FusedGemmArgs& args, const GemmConfig& config, float* partials,
                         cudaStream_t stream);

// gemm/mixed_gemm.cu (SM90a, CUTLASS; gemm/mixed_gemm.cuh): the mixed-input GEMM on the
// fused GEMM's arguments (typed zero points too), in tiles of tile_m (128 or 256)
// activation rows on a persistent grid of num_sms blocks, or stream-K: the K tiles dealt
// out over the SMs, float32 partial tiles in `partials`. It reads the scales (and,
// N-bit, the zeros -zp * scale) as [k_blocks, N], float32 for FP8, N-bit's of
// mixed_nbits_scales_dtype (core/mixed_plan.h, as mixed_scales_bytes): the operator's
// prepacked input, or where there is none a first pass
// (launch_mixed_scales) writes them into `scales`. Needs block_size % 64 == 0, N % 8 == 0,
// 16-byte rows of W and A and 16-byte aligned pointers.
struct MixedGemmLaunch {
  int tile_m = 128;
  bool stream_k = false;
  int swizzle = 0;  // GemmConfig::swizzle
  int num_sms = 0;
  const void* prepacked = nullptr;  // the scales (and zeros) in place, or nullptr:
  void* scales = nullptr;           // the plan's scales region, written first
  void* partials = nullptr;   // stream-K: the plan's partial region (mixed_stream_k_bytes)
  size_t partial_bytes = 0;
};
Status launch_mixed_gemm(const FusedGemmArgs& args, const MixedGemmLaunch& launch, cudaStream_t stream);
// Its GEMM alone, one weight format in one activation type T (__half, __nv_bfloat16), the
// scales (and zeros) in place at `scales_t` (and `zeros_t`): gemm/mixed_{fp8,int8,int4}.cu
// instantiate it, so each compiles in parallel.
template <typename T, GemmWeights kW>
Status launch_mixed_tile(const FusedGemmArgs& args, const MixedGemmLaunch& launch, const void* scales_t,
                         const void* zeros_t, cudaStream_t stream);

// gemm/mixed_scales.cu (every architecture): the mixed-input GEMM's scales from the
// operator's layout, float32 [k_blocks, N] into `scales_t`, and for N-bit weights the
// zeros -zp * scale [k_blocks, N] after them (the zero points as `args` gives them: packed,
// typed or the default). Reads args' dtype, weights, scales, zero points, n and k_blocks.
// The prepack functions and the mixed-input GEMM's per-run pass.
Status launch_mixed_scales(const FusedGemmArgs& args, void* scales_t, cudaStream_t stream);

// gemm/w8a8_wgmma.cu (SM90a): Fp8WeightMatMul with the activation quantized, on FP8 tensor
// cores. A quantize pass writes A's e4m3 codes (and, `dynamic`, its per-(row, block) scales
// amax / 448; else args.a_scale's) into `ws`, then an FP8 x FP8 wgmma GEMM multiplies the
// codes and applies the scales per K block in float32, the bias in its epilogue (or, with
// k_split > 1, in the sum of the partials), in tiles of tile_m (32, 64 or 128) activation
// rows. Needs block_size % 128 == 0, K % 16 == 0, 16-byte aligned a and b. Workspace
// sizes: core/gemm_plan.h (w8a8_m_pad).
struct W8A8Workspace {
  uint8_t* codes = nullptr;    // M x K bytes
  float* scales = nullptr;     // k_blocks x w8a8_m_pad(M) floats (the W8A8 GEMM: dynamic only;
                               // cuBLASLt's prologue: k_blocks x rows)
  float* partials = nullptr;   // k_split > 1 (the W8A8 GEMM: without cluster_reduce):
                               // k_split x M x N floats
};
// The plan's choices in `config`: tile_m, k_split, dependent_launch (the GEMM launched as a
// programmatic dependent of the quantize pass, its first stages' weights copied while the
// pass runs; SM90) and cluster_reduce (a K split of 2 summed in the tile's thread-block
// cluster; ws.partials unused).
Status launch_w8a8_gemm(const Fp8KernelArgs& args, bool dynamic, const GemmConfig& config, const W8A8Workspace& ws,
                        cudaStream_t stream);
// gemm/w8a8_cublaslt.cu (every architecture): the passes before cuBLASLt's block-scaled FP8
// GEMM (cublas_gemm.h, gemm_fp8_block_scaled), block_size 128: the quantize pass writes A's
// codes [rows, K] and scales [k_blocks, rows] (`dynamic`, else args.a_scale in each) into
// `ws` for `rows` >= M (M rounded up to 4; the rows past M zero); with `block_scales`, the
// weight's scales of rows 0, 128, 256, ... in cuBLASLt's 128 x 128 block layout
// ([ceil(N / 128), k_blocks rounded up to 4], w8a8_cublaslt_block_scales floats). Needs
// K % 16 == 0, 16-byte aligned a.
Status launch_w8a8_cublaslt_prologue(const Fp8KernelArgs& args, bool dynamic, int64_t rows, const W8A8Workspace& ws,
                                     float* block_scales, cudaStream_t stream);

}  // namespace bqmm::cuda
