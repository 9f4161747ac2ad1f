// bqmm: NBitsMatMul, the operator of ONNX Runtime's com.microsoft::MatMulNBits
// (block-quantized 8-bit and 4-bit integer weights).
//
//   w[n, k] = (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//   Y[m, n] = sum_k A[m, k] * w[n, k] + bias[n]
//
// Use: validate -> plan -> run.
//   NBitsMatMulProblem problem;
//   BQMM_RETURN_IF_ERROR(validate_nbits_matmul(args, attrs, &problem));   // host, cheap
//   NBitsMatMulPlan plan;
//   BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, handle.device_info(), options, &plan));
//   // allocate plan.workspace_bytes of device memory once, then for every call:
//   BQMM_RETURN_IF_ERROR(run_nbits_matmul(handle, plan, args, ws, ws_bytes, stream));
// run never allocates and never synchronizes, so it can be captured in a CUDA graph.
// A plan depends only on shapes, dtypes, attributes, pointer alignment and the device;
// it can be kept and reused for every call of the same problem.
//
// g_idx range: every g_idx value must lie in [0, k_blocks). Checking that needs device
// data, so it is the caller's responsibility (as it is in ONNX Runtime). bqmm stays
// memory-safe for out-of-range values: it never reads scales or zero points out of
// bounds, and a k whose g_idx is out of range gets a NaN weight, so every output that
// depends on it is NaN rather than silently wrong.
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

struct NBitsMatMulAttrs {
  int64_t k = 0;               // required: A's last dimension
  int64_t n = 0;               // required: output features
  int64_t bits = 4;            // 8 or 4 (2 is valid by the contract but NotSupported)
  int64_t block_size = 0;      // required: power of two >= 16
  int64_t accuracy_level = 0;  // accepted and ignored (ONNX Runtime's compute-type hint)
};

// Device tensors of one call. Optional inputs are std::nullopt when absent.
struct NBitsMatMulArgs {
  TensorView a;       // T1 = float32 | float16 | bfloat16, [..., K], rank >= 1
  TensorView b;       // uint8, [N, k_blocks, block_size * bits / 8], packed low bits first
  TensorView scales;  // T1, [N, k_blocks] or flat [N * k_blocks]
  // uint8 packed [N, ceil(k_blocks * bits / 8)] (4-bit: even block in the low nibble), or
  // T1 [N, k_blocks] (may be fractional); either may be flat. Absent: 2^(bits - 1).
  std::optional<TensorView> zero_points;
  std::optional<TensorView> g_idx;  // int32, [K]: block index of each k (act order)
  std::optional<TensorView> bias;   // T1, [N]
  // [2, k_blocks, N] of nbits_matmul_prepacked_dtype(T1, bits): the scales and zero points
  // prepacked by prepack_nbits_matmul (an extension; below).
  std::optional<TensorView> prepacked;
  MutableTensorView y;              // T1, A's shape with the last dim replaced by N
};

// How the zero points are given.
enum class NBitsZeroPoints {
  kNone,    // absent: 2^(bits - 1)
  kPacked,  // uint8, bits-wide integers packed along the blocks
  kTyped,   // T1, one (possibly fractional) value per block
};
const char* nbits_zero_points_name(NBitsZeroPoints zp);  // "none", "packed", "typed"

// Everything the planner needs, as plain data (validate_nbits_matmul fills it from args).
struct NBitsMatMulProblem {
  DType dtype = DType::kFloat16;  // T1: A, scales, typed zero points, bias and Y
  int64_t m = 0;                  // product of A's leading dims
  int64_t n = 0;
  int64_t k = 0;
  int bits = 4;
  int64_t block_size = 32;
  NBitsZeroPoints zero_points = NBitsZeroPoints::kNone;
  bool has_g_idx = false;
  bool has_bias = false;
  bool has_prepacked = false;  // NBitsMatMulArgs::prepacked is given
  // Largest power of two <= 16 dividing every data pointer the vectorized kernels read
  // or write (A, B, bias, Y). They need 16; for plans made without tensors it is 16.
  int alignment = 16;
  // The same for the scales pointer (at least T1's size): the window kernel's line loads
  // read both scales of a pair of windows as one 4-byte load where a block is one window
  // (4-bit block_size 128, 8-bit 64), which needs 4. 16 for plans made without tensors.
  int scale_alignment = 16;

  int64_t k_blocks() const {
    return block_size > 0 ? k / block_size + (k % block_size != 0 ? 1 : 0) : 0;
  }
  int64_t blob_bytes() const { return block_size * bits / 8; }       // one block of a row
  int64_t row_bytes() const { return k_blocks() * blob_bytes(); }    // one row of B
  int64_t zp_row_bytes() const { return (k_blocks() * bits + 7) / 8; }  // packed zp row
};
std::ostream& operator<<(std::ostream& os, const NBitsMatMulProblem& p);

// Kernel paths of the dispatch chain, cheapest applicable first.
enum class NBitsPath {
  kEmpty,        // M == 0 or N == 0: nothing to write
  kBiasOnly,     // K == 0: Y = bias (or zeros)
  kGemv,         // 0 < M <= 8 (and a row group of 16 rows at M = 9..16), no g_idx:
                 // fused GEMV, bias fused
  kMixedGemm,    // M > 128, or from 65 rows where the fused GEMM is not
                 // the faster or does not apply; SM90, float16 / bfloat16, no g_idx,
                 // block_size % 64 == 0: mixed-input GEMM (CUTLASS; codes dequantized in
                 // registers, wgmma, every zero-point form; a persistent grid or stream-K),
                 // bias fused
  kFusedGemm,    // M > 8, SM80+, float16 / bfloat16, no g_idx, rows of B whole 16-byte
                 // chunks: fused GEMM (codes decoded in registers, tensor cores, every
                 // zero-point form), bias fused
  kDequantGemm,  // dequantize B tiles to T1 -> cuBLAS GEMM -> bias
};
// "empty", "bias_only", "gemv", "mixed_gemm", "fused_gemm", "dequant_gemm"
const char* nbits_path_name(NBitsPath path);

// The GEMV's K-loop strategies (the original design's three algorithms).
constexpr int kNBitsGemvAlgoUnrolled = 0;  // several chunks per iteration, loads batched
constexpr int kNBitsGemvAlgoLoop = 1;      // one chunk per iteration, no unrolling
constexpr int kNBitsGemvAlgoPerBlock = 2;  // outer loop over quantization blocks

// What a caller chooses; nbits_matmul_options_from_env applies the environment.
struct NBitsMatMulOptions {
  // Upper bound of the dequantized-weight scratch of the dequant + cuBLAS path (bytes).
  // The weight is dequantized and multiplied in N tiles of at most this size (at least
  // one row per tile).
  int64_t dequant_scratch_bytes = int64_t{256} << 20;
  // Launch the decode GEMV (M <= 8) as a programmatic dependent of the kernel before it
  // on the stream (SM90 and later): its first weights are read while that kernel drains.
  // It gains only where that kernel lets its dependents start early (it executes
  // griddepcontrol.launch_dependents, as bqmm's decode GEMVs do): in a chain of bqmm
  // calls 0-6 % less time on the H200. After a kernel that does not (most other
  // libraries' kernels, e.g. a norm before the GEMV), it costs time instead: 7-17 % on
  // 4096 x 4096 weights (about 1 us). Taken by the 4-bit register tile on float16 /
  // bfloat16; the plan prints `dependent_launch=yes`.
  bool gemv_dependent_launch = false;
};
// Overrides `opts` from BQMM_DEQUANT_SCRATCH_MIB (a positive integer, MiB) and
// BQMM_GEMV_DEPENDENT_LAUNCH (0 or 1). A malformed value is an error that names the
// variable.
Status nbits_matmul_options_from_env(NBitsMatMulOptions* opts);

// The planner's decision: which path, which kernels, the tiling and the workspace layout.
// Plain data; operator<< prints it on one line (BQMM_PRINT_PLAN=1 prints it at run).
struct NBitsMatMulPlan {
  NBitsMatMulProblem problem;
  DeviceInfo device;
  NBitsPath path = NBitsPath::kEmpty;
  GemvConfig gemv;          // gemv
  GemmConfig gemm;          // fused_gemm, mixed_gemm
  DequantConfig dequant;    // dequant_gemm
  WorkspaceRegions regions;
  size_t workspace_bytes = 0;  // device memory the caller provides to run_nbits_matmul
};
std::ostream& operator<<(std::ostream& os, const NBitsMatMulPlan& plan);

// Host only, cheap, no CUDA calls: checks every input against the contract and
// describes the problem. Errors name the input, the expected and the received value.
// Y must not share memory with any input.
// bits == 2 is NotSupported; other bits outside {4, 8} are InvalidArgument.
Status validate_nbits_matmul(const NBitsMatMulArgs& args, const NBitsMatMulAttrs& attrs,
                             NBitsMatMulProblem* problem);

// The weight's prepacked scales and zero points (an extension; optional): [2, k_blocks, N]
// of nbits_matmul_prepacked_dtype(T1, bits), the scales transposed ([0][b][n] =
// scales[n, b]) and the zeros ([1][b][n] = -zp[n, b] * scales[n, b], the product in
// float32, zp as the operator defines it, default 2^(bits - 1) included), the layout and
// type the mixed-input GEMM (the mixed_gemm path) reads: T1 (the GEMM takes q * scale +
// zero in T1), or float32 for bfloat16 with 8 bits (a float32 multiply-add there).
// Without them that path writes them into the workspace on every run, a pass of its own
// before the GEMM; written once per weight (at load) and passed as
// NBitsMatMulArgs::prepacked with every call, they take that pass and the workspace
// region away. Other paths ignore them. They must be these scales' and zero points': run
// cannot tell stale ones from fresh ones. prepack_nbits_matmul checks the tensors as
// validate does (attrs' k, n, bits and block_size; T1 from the scales) and enqueues the
// pass on `stream` (no allocation, no synchronization).
Shape nbits_matmul_prepacked_shape(int64_t n, int64_t k_blocks);  // {2, k_blocks, N}
DType nbits_matmul_prepacked_dtype(DType t1, int64_t bits);       // T1; bfloat16 8-bit: float32
Status prepack_nbits_matmul(const NBitsMatMulAttrs& attrs, const TensorView& scales,
                            const std::optional<TensorView>& zero_points,
                            const MutableTensorView& prepacked, cudaStream_t stream);

// Y's shape for an A of shape `a_shape` and N output features.
Status nbits_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape);

// Pure: the same inputs always give the same plan. Needs no GPU.
Status plan_nbits_matmul(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, NBitsMatMulPlan* plan);

// Runs `plan` on `args` (which must describe plan.problem) on `stream`. Enqueues
// kernels and cuBLAS calls only: no allocation, no synchronization.
// The workspace's first plan.workspace_bytes bytes must not overlap any tensor of `args`.
Status run_nbits_matmul(const Handle& handle, const NBitsMatMulPlan& plan,
                        const NBitsMatMulArgs& args, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);

}  // namespace bqmm
