// bqmm: Fp8WeightMatMul, the operator of ONNX Runtime's
// com.microsoft::MatMulBlockQuantizedFp8Weight.
//
//   Y[m, n] = sum_k A[m, k] * (e4m3(B[n, k]) * b_scale[n, k / block_size]) + bias[n]
//
// Use: validate -> plan -> run.
//   Fp8MatMulProblem problem;
//   BQMM_RETURN_IF_ERROR(validate_fp8_matmul(args, attrs, &problem));   // host, cheap
//   Fp8MatMulPlan plan;
//   BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, handle.device_info(), options, &plan));
//   // allocate plan.workspace_bytes of device memory once, then for every call:
//   BQMM_RETURN_IF_ERROR(run_fp8_matmul(handle, plan, args, ws, ws_bytes, stream));
// run never allocates and never synchronizes, so it can be captured in a CUDA graph.
// A plan depends only on shapes, dtypes, attributes, pointer alignment and the device;
// it can be kept and reused for every call of the same problem.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm {

struct Fp8MatMulAttrs {
  int64_t block_size = 128;  // K elements per b_scale column; > 0
};

// Device tensors of one call. Optional inputs are std::nullopt when absent.
struct Fp8MatMulArgs {
  TensorView a;                      // T = float16 | bfloat16, [..., K], rank >= 1
  TensorView b;                      // float8 e4m3, [N, K], row-major
  TensorView b_scale;                // float32, [N, ceil(K / block_size)]
  std::optional<TensorView> a_scale; // float32 scalar (1 element), device memory: W8A8
  std::optional<TensorView> bias;    // T, [N]
  MutableTensorView y;               // T, A's shape with the last dim replaced by N
};

// Everything the planner needs, as plain data (validate_fp8_matmul fills it from args).
struct Fp8MatMulProblem {
  DType dtype = DType::kFloat16;  // T: A, bias and Y
  int64_t m = 0;                  // product of A's leading dims
  int64_t n = 0;
  int64_t k = 0;
  int64_t block_size = 128;
  bool has_bias = false;
  bool has_a_scale = false;
  // Largest power of two <= 16 dividing every data pointer of the call (A, B, bias, Y).
  // Vectorized kernels need 16; for plans made without tensors it is 16.
  int alignment = 16;

  int64_t k_blocks() const {
    return block_size > 0 ? k / block_size + (k % block_size != 0 ? 1 : 0) : 0;
  }
};
std::ostream& operator<<(std::ostream& os, const Fp8MatMulProblem& p);

// Kernel paths of the dispatch chain, cheapest applicable first.
enum class Fp8Path {
  kEmpty,        // M == 0 or N == 0: nothing to write
  kBiasOnly,     // K == 0: Y = bias (or zeros)
  kGemvFma,      // 0 < M <= 8: fused GEMV on CUDA cores (W8A8 and bias fused)
  kGemvMma,      // 0 < M <= 8, SM80+: fused GEMV on tensor cores (mma.m16n8k16)
  kDequantGemm,  // [QDQ A] -> dequantize B tiles to T -> cuBLAS GEMM -> bias
};
// "empty", "bias_only", "gemv_fma", "gemv_mma", "dequant_gemm"
const char* fp8_path_name(Fp8Path path);

// Knobs a caller may set; fp8_matmul_options_from_env applies the environment overrides.
struct Fp8MatMulOptions {
  // Upper bound of the dequantized-weight scratch (bytes). The weight is dequantized
  // and multiplied in N tiles of at most this size (at least one row per tile).
  int64_t dequant_scratch_bytes = int64_t{256} << 20;
  // Overlap each N tile's dequantization with the previous tile's GEMM (the handle's
  // second stream, two scratch buffers; BQMM_DEQUANT_OVERLAP=1). Off by default: on the
  // H200 prefill suite it was 2-44 % slower than one buffer (docs/PERF.md).
  bool overlap_dequant = false;
  // Allow the fused decode GEMV (false forces dequant + GEMM, e.g. to test that path).
  bool allow_gemv = true;
  // Allow the tensor-core GEMV sub-path; BQMM_FP8_GEMV_MMA=0 clears it.
  bool allow_gemv_mma = true;
  // The fewest rows (M) that take the tensor-core GEMV where it is allowed; fewer take
  // the CUDA-core one. 2 by measurement on the H200 (docs/PERF.md): at M = 1 the tensor-core
  // kernel takes 8-26 % longer, at M = 2 the two are within 7 % of each other, from
  // M = 4 the tensor cores are 1.2-2.5x faster. 1 gives the original design's rule,
  // tensor cores at every M (BQMM_FP8_GEMV_MMA=1).
  int gemv_mma_min_rows = 2;
  // gemv_mma's warps per block splitting K: 0 lets the planner choose from N, K and the
  // SM count (its wave model); 1, 2, 4 or 8 forces one (BQMM_FP8_GEMV_KSPLIT).
  int gemv_k_split = 0;
  // gemv_mma on SM90+: weight tiles by the tensor memory accelerator instead of register
  // loads. -1: on weights of 128 Mi codes and more where line loads do not apply (K % 128
  // == 64; docs/PERF.md); 0: never; 1: always, in place of line loads too
  // (BQMM_FP8_GEMV_TMA=0 / 1).
  int gemv_tma = -1;
  // gemv_mma's register-load tile with its weights read as whole 128-byte lines and staged
  // through shared memory (needs K % 128 == 0; docs/PERF.md). -1 and 1: wherever it
  // applies (measured faster on the H200 at every decode shape), unless gemv_tma is 1;
  // 0: never (BQMM_FP8_GEMV_LINES=0 / 1).
  int gemv_lines = -1;
  // Line loads' 16-column tiles per warp: with 2 a warp multiplies each activation load
  // with two tiles and keeps twice the weight bytes in flight (128 registers). -1: 2 on
  // weights of 128 Mi codes and more, where measured faster on the H200 (docs/PERF.md),
  // else 1; 1 or 2 forces it (BQMM_FP8_GEMV_TILES). Without line loads a warp has 1.
  int gemv_tiles_per_warp = -1;
  // The two-tile kernel's register bound per thread (as NBitsMatMulOptions'): 128
  // (kGemvTwoTileRegisters, 16 warps per SM, k_split up to 8) or 168 (kGemvWideRegisters,
  // 12 warps per SM, k_split up to 4; each warp streams faster). -1: in float16, 168 where
  // the planner's wave model prefers it at k_split 2 or 4 (core/gemv_split.h); bfloat16
  // keeps 128 (measured on the H200, docs/PERF.md); 128 or 168 forces it wherever two
  // tiles per warp are taken (BQMM_FP8_GEMV_REGISTERS). 168 with gemv_k_split = 8 is an
  // error.
  int gemv_registers = -1;
};
// Overrides `opts` from BQMM_DEQUANT_SCRATCH_MIB (a positive integer, MiB),
// BQMM_DEQUANT_OVERLAP (0 or 1),
// BQMM_FP8_GEMV_MMA (0: CUDA-core GEMV only; 1: tensor cores at every M, the original
// design's rule; unset: gemv_mma_min_rows decides) and
// BQMM_FP8_GEMV_KSPLIT (0, 1, 2, 4 or 8; see gemv_k_split) and
// BQMM_FP8_GEMV_TMA (0 or 1; see gemv_tma) and
// BQMM_FP8_GEMV_LINES (0 or 1; see gemv_lines) and
// BQMM_FP8_GEMV_TILES (1 or 2; see gemv_tiles_per_warp) and
// BQMM_FP8_GEMV_REGISTERS (128 or 168; see gemv_registers).
// A malformed value is an error that names the variable.
Status fp8_matmul_options_from_env(Fp8MatMulOptions* opts);

// The planner's decision: which path, which kernels, the tiling and the workspace layout.
// Plain data; operator<< prints it on one line (BQMM_PRINT_PLAN=1 prints it at run).
struct Fp8MatMulPlan {
  Fp8MatMulProblem problem;
  DeviceInfo device;
  Fp8Path path = Fp8Path::kEmpty;

  // dequant_gemm
  bool qdq_activation = false;  // a_scale given: A' = QDQ(A) is written to the workspace
  bool dequant_vec16 = false;   // 16-element vector dequant kernel (else scalar)
  int64_t n_tile = 0;           // B rows dequantized per GEMM call
  int64_t num_n_tiles = 0;
  // 2 when there are several tiles: tile i + 1 is dequantized (on the handle's second
  // stream) into one buffer while tile i's GEMM reads the other.
  int scratch_buffers = 0;

  // gemv_fma / gemv_mma
  int gemv_rows_per_warp = 0;  // gemv_fma: activation rows per warp (1, 2, 4 or 8)
  int gemv_k_split = 0;        // gemv_mma: warps per block splitting K
  bool gemv_tma = false;       // gemv_mma: weight tiles by TMA (SM90+)
  bool gemv_lines = false;     // gemv_mma: register line loads through shared memory
  int gemv_tiles_per_warp = 0;  // gemv_mma: 16-column tiles per warp (2 only with lines)
  int gemv_registers = 0;       // gemv_mma, two tiles: the register bound, 128 or 168

  // Workspace layout: byte offsets into the caller's workspace, each 256-byte aligned.
  size_t act_offset = 0, act_bytes = 0;        // QDQ'd activation, [M, K] of T
  size_t cublas_offset = 0, cublas_bytes = 0;  // cuBLAS's own workspace
  size_t scratch_offset = 0, scratch_bytes = 0;  // scratch_buffers x [n_tile, K] of T
  size_t workspace_bytes = 0;                  // total the caller must provide
};
std::ostream& operator<<(std::ostream& os, const Fp8MatMulPlan& plan);

// Host only, cheap, no CUDA calls: checks every input against the contract and
// describes the problem. Errors name the input, the expected and the received value.
Status validate_fp8_matmul(const Fp8MatMulArgs& args, const Fp8MatMulAttrs& attrs,
                           Fp8MatMulProblem* problem);

// Y's shape for an A of shape `a_shape` and N output features.
Status fp8_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape);

// Pure: the same inputs always give the same plan. Needs no GPU.
Status plan_fp8_matmul(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, Fp8MatMulPlan* plan);

// Runs `plan` on `args` (which must describe plan.problem) on `stream`. Enqueues
// kernels and cuBLAS calls only: no allocation, no synchronization.
Status run_fp8_matmul(const Handle& handle, const Fp8MatMulPlan& plan,
                      const Fp8MatMulArgs& args, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace bqmm
