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
#include "bqmm/plan_parts.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm {

struct Fp8MatMulAttrs {
  int64_t block_size = 128;  // K elements per b_scale column; > 0
  // Dynamic activation quantization (an extension; ONNX Runtime's operator has none): A is
  // quantized per row and per K block of block_size, s = amax |A| / 448 (float32; 0 for an
  // all-zero block), q = e4m3_satfinite_rne(A / s), and Y computed from q * s, as FP8
  // checkpoints (DeepSeek-V3, Qwen3-FP8) are served. Excludes a_scale (static W8A8).
  bool dynamic_act_quant = false;
  // Rows of B sharing each scale (an extension, a promise about b_scale's values; >= 1):
  // b_scale[n, b] == b_scale[n - n % b_scale_block_rows, b] for every n and b. FP8
  // checkpoints with 128 x 128 weight blocks (DeepSeek-V3's `weight_scale_inv`) expanded
  // to the operator's per-row scales keep it with 128. Y means the same either way; with a
  // multiple of 128 the W8A8 GEMMs may read one scale per 128 rows (the first of each
  // group), so where b_scale breaks the promise Y is unspecified.
  int64_t b_scale_block_rows = 1;
};

// Device tensors of one call. Optional inputs are std::nullopt when absent.
struct Fp8MatMulArgs {
  TensorView a;                      // T = float16 | bfloat16, [..., K], rank >= 1
  TensorView b;                      // float8 e4m3, [N, K], row-major
  TensorView b_scale;                // float32, [N, ceil(K / block_size)]
  std::optional<TensorView> a_scale; // float32 scalar (1 element), device memory: W8A8
  std::optional<TensorView> bias;    // T, [N]
  // float32, [k_blocks, N]: b_scale prepacked by prepack_fp8_matmul (an extension; below).
  std::optional<TensorView> prepacked;
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
  bool has_a_scale = false;        // static W8A8
  bool dynamic_act_quant = false;  // Fp8MatMulAttrs::dynamic_act_quant
  int64_t b_scale_block_rows = 1;  // Fp8MatMulAttrs::b_scale_block_rows
  bool has_prepacked = false;      // Fp8MatMulArgs::prepacked is given
  // Largest power of two <= 16 dividing every data pointer of the call (A, B, bias, Y).
  // Vectorized kernels need 16; for plans made without tensors it is 16.
  int alignment = 16;

  // A is quantized (statically or dynamically) before the multiply.
  bool quantizes_activation() const { return has_a_scale || dynamic_act_quant; }
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
  kGemvMma,      // 0 < M <= 8 (and a row group of 16 rows at M = 9..16), SM80+: fused
                 // GEMV on tensor cores (mma.m16n8k16)
  kW8a8Cublaslt,  // M >= 256 (static with per-row weight scales: 512), SM90, A quantized
                  // (a_scale or dynamic_act_quant), block_size 128, N % 8 == 0: A -> e4m3
                  // codes and scales -> cuBLASLt's FP8 GEMM with block scales (128 x 128
                  // blocks where b_scale_block_rows % 128 == 0, else per row), bias fused
  kW8a8Gemm,     // M > 8, SM90, A quantized (a_scale or dynamic_act_quant),
                 // block_size % 128 == 0: A -> e4m3 codes (+ scales) -> FP8 x FP8 wgmma
                 // GEMM, the scales applied per K block in float32, bias fused
  kMixedGemm,    // M > 128, or from 65 rows where the fused GEMM is not the faster; SM90,
                 // float16 / bfloat16, block_size % 64 == 0: [QDQ A] ->
                 // mixed-input GEMM (CUTLASS; e4m3 dequantized in registers, wgmma, bias
                 // fused; a persistent grid or stream-K)
  kFusedGemm,    // M > 8, SM80+: [QDQ A] -> fused GEMM (e4m3 decoded in registers, block
                 // scale and bias fused, tensor cores)
  kDequantGemm,  // [QDQ A] -> dequantize B tiles to T -> cuBLAS GEMM -> bias
};
// "empty", "bias_only", "gemv_fma", "gemv_mma", "w8a8_cublaslt", "w8a8_gemm", "mixed_gemm",
// "fused_gemm", "dequant_gemm"
const char* fp8_path_name(Fp8Path path);

// What a caller chooses; fp8_matmul_options_from_env applies the environment.
struct Fp8MatMulOptions {
  // Upper bound of the dequantized-weight scratch of the dequant + cuBLAS path (bytes).
  // The weight is dequantized and multiplied in N tiles of at most this size (at least
  // one row per tile).
  int64_t dequant_scratch_bytes = int64_t{256} << 20;
  // Launch the decode GEMV (M <= 8) as a programmatic dependent of the kernel before it
  // on the stream (SM90 and later): its first weights are read while that kernel drains.
  // It gains only where that kernel lets its dependents start early (it executes
  // griddepcontrol.launch_dependents, as bqmm's decode GEMVs do): in a chain of bqmm
  // calls 0-6 % less time on the H200. After a kernel that does not (most other
  // libraries' kernels, e.g. a norm before the GEMV), it costs time instead: up to 13 %
  // on 4096 x 4096 weights (about 1 us). Taken by the tensor-core GEMV's one tile of
  // line loads (M = 2..8, no static W8A8); the plan prints `dependent_launch=yes`.
  bool gemv_dependent_launch = false;
};
// Overrides `opts` from BQMM_DEQUANT_SCRATCH_MIB (a positive integer, MiB) and
// BQMM_GEMV_DEPENDENT_LAUNCH (0 or 1). A malformed value is an error that names the
// variable.
Status fp8_matmul_options_from_env(Fp8MatMulOptions* opts);

// The planner's decision: which path, which kernels, the tiling and the workspace layout.
// Plain data; operator<< prints it on one line (BQMM_PRINT_PLAN=1 prints it at run).
struct Fp8MatMulPlan {
  Fp8MatMulProblem problem;
  DeviceInfo device;
  Fp8Path path = Fp8Path::kEmpty;
  GemvConfig gemv;          // gemv_fma / gemv_mma
  GemmConfig gemm;          // fused_gemm, w8a8_gemm, mixed_gemm
  DequantConfig dequant;    // dequant_gemm
  WorkspaceRegions regions;
  size_t workspace_bytes = 0;  // device memory the caller provides to run_fp8_matmul
};
std::ostream& operator<<(std::ostream& os, const Fp8MatMulPlan& plan);

// Host only, cheap, no CUDA calls: checks every input against the contract and
// describes the problem. Errors name the input, the expected and the received value.
// Y must not share memory with any input.
Status validate_fp8_matmul(const Fp8MatMulArgs& args, const Fp8MatMulAttrs& attrs,
                           Fp8MatMulProblem* problem);

// Host helper for loaders: `rows` where every aligned group of `rows` rows of the host
// scales b_scale [N, k_blocks] (row-major) repeats its first row bit for bit, else 1: the
// b_scale_block_rows that the data keeps (for a checkpoint whose 128 x 128 block scales
// were expanded to rows before it reached the caller). Reads N x k_blocks floats once.
int64_t find_b_scale_block_rows(const float* b_scale, int64_t n, int64_t k_blocks, int64_t rows = 128);

// The weight's prepacked scales (an extension; optional): b_scale transposed to float32
// [k_blocks, N], the layout the mixed-input GEMM (the mixed_gemm path) and cuBLASLt's FP8
// GEMM with per-row scales (the w8a8_cublaslt path) read. Without them those paths write
// this transpose into the workspace on every run, a pass of its own before the GEMM;
// written once per weight (at load) and passed as Fp8MatMulArgs::prepacked with every
// call, they take that pass and the workspace region away. Other paths (and w8a8_cublaslt
// with 128-row weight scales) ignore them. They must be this b_scale's: run cannot tell
// stale ones from fresh ones. prepack_fp8_matmul checks both tensors as validate does and
// enqueues the transpose on `stream` (no allocation, no synchronization).
Shape fp8_matmul_prepacked_shape(int64_t n, int64_t k_blocks);  // {k_blocks, N}
Status prepack_fp8_matmul(const TensorView& b_scale, const MutableTensorView& prepacked,
                          cudaStream_t stream);

// Y's shape for an A of shape `a_shape` and N output features.
Status fp8_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape);

// Pure: the same inputs always give the same plan. Needs no GPU.
Status plan_fp8_matmul(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, Fp8MatMulPlan* plan);

// Runs `plan` on `args` (which must describe plan.problem) on `stream`. Enqueues
// kernels and cuBLAS calls only: no allocation, no synchronization.
// The workspace's first plan.workspace_bytes bytes must not overlap any tensor of `args`.
Status run_fp8_matmul(const Handle& handle, const Fp8MatMulPlan& plan,
                      const Fp8MatMulArgs& args, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace bqmm
