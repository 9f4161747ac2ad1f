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
  kGemv,         // 0 < M <= 8, no g_idx, integer zero points: fused GEMV, bias fused
  kDequantGemm,  // dequantize B tiles to T1 -> cuBLAS GEMM -> bias
};
// "empty", "bias_only", "gemv", "dequant_gemm"
const char* nbits_path_name(NBitsPath path);

// The GEMV's K-loop strategies (the original design's three algorithms).
constexpr int kNBitsGemvAlgoUnrolled = 0;  // several chunks per iteration, loads batched
constexpr int kNBitsGemvAlgoLoop = 1;      // one chunk per iteration, no unrolling
constexpr int kNBitsGemvAlgoPerBlock = 2;  // outer loop over quantization blocks

// Knobs a caller may set; nbits_matmul_options_from_env applies the environment overrides.
struct NBitsMatMulOptions {
  // Upper bound of the dequantized-weight scratch (bytes). The weight is dequantized
  // and multiplied in N tiles of at most this size (at least one row per tile).
  int64_t dequant_scratch_bytes = int64_t{256} << 20;
  // Overlap each N tile's dequantization with the previous tile's GEMM (the handle's
  // second stream, two scratch buffers; BQMM_DEQUANT_OVERLAP=1). Off by default: on the
  // H200 prefill suite it was 2-44 % slower than one buffer (docs/PERF.md).
  bool overlap_dequant = false;
  // Allow the fused decode GEMV (false forces dequant + GEMM, e.g. to test that path).
  bool allow_gemv = true;
  // GEMV K-loop algorithm (kNBitsGemvAlgo*), or -1 for the planner's default per
  // block size (the fastest measured on an H200, docs/PERF.md).
  int gemv_algo = -1;
  // The tensor-core GEMV's warps per block splitting K: 0 lets the planner choose (its
  // wave model, core/gemv_split.h); 1, 2, 4 or 8 forces one (BQMM_NBITS_GEMV_KSPLIT). As
  // Fp8MatMulOptions::gemv_k_split; the CUDA-core kernels have no K split.
  int gemv_k_split = 0;
  // On SM90 the tensor-core GEMV can take its weights as TMA tiles (as Fp8WeightMatMul's
  // gemv_tma) where that kernel applies: float16 / bfloat16, block_size >= 64 (8-bit) or
  // >= 128 (4-bit). -1: where measured faster on the H200 (docs/PERF.md: N x K >= 128 Mi,
  // and M <= 4 for 8-bit) and the window kernel (line loads) is not taken; 0: never; 1:
  // wherever it applies (BQMM_NBITS_GEMV_TMA=0 / 1).
  int gemv_tma = -1;
  // 8-bit codes with float16 / bfloat16 activations, M <= 2: the CUDA-core GEMV (a warp
  // per output column, lanes along K: the load shape that streams HBM fastest, at one FMA
  // per weight and row). -1: where measured faster on the H200 (docs/PERF.md: M = 1, and
  // M = 2 in bfloat16 where line loads are not taken: without a zero-point tensor below
  // 128 Mi on grids of few tiles, or on rows that are not whole 128-byte lines), unless
  // gemv_algo or gemv_tma is set (they choose among the tensor-core kernels);
  // 0: never; 1: wherever it applies (BQMM_NBITS_GEMV_FMA=0 / 1).
  int gemv_fma = -1;
  // float16 / bfloat16 activations, algorithm 0, block_size >= a 64-byte window's codes
  // (128 4-bit, 64 8-bit; with line loads, below, a 16-byte chunk's: 32, 16): the window
  // kernel (algorithm 0's loop on whole 64-byte windows, with fewer registers and twice
  // the warps per SM). -1: where measured faster on the H200 (docs/PERF.md: 4-bit without
  // a zero-point tensor on grids of more than 16 warps per SM, i.e. ceil(N / 16) * 8 > 16 *
  // SMs; and wherever line loads are taken), unless gemv_tma = 1; 0: never; 1: wherever it
  // applies (BQMM_NBITS_GEMV_WINDOW=0 / 1).
  int gemv_window = -1;
  // The window kernel with line loads: each warp load instruction reads 4 whole 128-byte
  // lines of 4 weight rows (the mma fragment's own shape is 8 rows x 64 bytes, which
  // streams slower), staged through 2 KB of shared memory per warp; rows of whole
  // 128-byte lines (K % 256 == 0 4-bit, K % 128 == 0 8-bit), blocks of 32 codes or more
  // (4-bit) or 16 (8-bit), and on blocks of exactly one window (4-bit 128, 8-bit 64)
  // 4-byte aligned scales (a row's two scales of a pair of windows in one load).
  // -1: where measured faster on the H200 (docs/PERF.md: 4-bit on N x K >= 128 Mi, and
  // wherever two tiles per warp are taken; 8-bit wherever the tensor cores run), unless
  // gemv_window = 0 or gemv_tma = 1; 0: never;
  // 1: wherever it applies (it takes the window kernel then, whatever the grid), unless
  // gemv_window = 0 (BQMM_NBITS_GEMV_LINES=0 / 1).
  int gemv_lines = -1;
  // Line loads' 16-column tiles per warp (as Fp8WeightMatMul's): with 2 a warp multiplies
  // each activation load with two tiles and keeps twice the weight bytes in flight (128
  // registers). -1: where measured faster on the H200 (docs/PERF.md: N x K >= 128 Mi,
  // 4-bit at every M, 8-bit from M = 2 in float16 and M = 5 in bfloat16 (with packed zero
  // points 4-bit and 8-bit float16); without a zero-point tensor also grids of many tiles
  // below that, 4-bit from M = 5 (every M with blocks smaller than a window), 8-bit
  // bfloat16 from M = 2), else 1; 1 or 2 forces it wherever line loads apply (2 takes
  // them) (BQMM_NBITS_GEMV_TILES).
  int gemv_tiles_per_warp = -1;
  // The two-tile kernel's register bound per thread: 128 (kGemvTwoTileRegisters, 16
  // warps per SM, k_split up to 8) or 168 (kGemvWideRegisters, 12 warps per SM,
  // k_split up to 4; each warp streams faster). -1: the planner's wave model weighs both
  // (core/gemv_split.h; measured on the H200, docs/PERF.md); 128 or 168 forces it wherever
  // two tiles per warp are taken (BQMM_NBITS_GEMV_REGISTERS). 168 with gemv_k_split = 8 is
  // an error.
  int gemv_registers = -1;
};
// Overrides `opts` from BQMM_DEQUANT_SCRATCH_MIB (a positive integer, MiB),
// BQMM_DEQUANT_OVERLAP (0 or 1), BQMM_NBITS_GEMV_ALGO (0, 1 or 2 forces that GEMV
// algorithm), BQMM_NBITS_GEMV_KSPLIT (0, 1, 2, 4 or 8; see gemv_k_split),
// BQMM_NBITS_GEMV_TMA (0 or 1; see gemv_tma), BQMM_NBITS_GEMV_FMA (0 or 1;
// see gemv_fma), BQMM_NBITS_GEMV_WINDOW (0 or 1; see gemv_window),
// BQMM_NBITS_GEMV_LINES (0 or 1; see gemv_lines), BQMM_NBITS_GEMV_TILES (1 or 2; see
// gemv_tiles_per_warp) and BQMM_NBITS_GEMV_REGISTERS (128 or 168; see gemv_registers). A
// malformed value is an error that names the variable.
Status nbits_matmul_options_from_env(NBitsMatMulOptions* opts);

// The planner's decision: which path, which kernels, the tiling and the workspace layout.
// Plain data; operator<< prints it on one line (BQMM_PRINT_PLAN=1 prints it at run).
struct NBitsMatMulPlan {
  NBitsMatMulProblem problem;
  DeviceInfo device;
  NBitsPath path = NBitsPath::kEmpty;

  // dequant_gemm
  bool dequant_vec8 = false;  // 8-element runs with one 16/32-byte store (else scalar)
  int64_t n_tile = 0;         // B rows dequantized per GEMM call
  int64_t num_n_tiles = 0;
  int scratch_buffers = 0;    // 2 with several tiles: dequantization overlaps the GEMMs

  // gemv
  bool gemv_fma = false;      // the CUDA-core kernel (8-bit, M <= 2); the fields below but
                              // gemv_rows do not apply then
  int gemv_algo = 0;          // kNBitsGemvAlgo*
  int gemv_rows = 0;          // activation rows per warp (tile): float32 and gemv_fma
                              // 1, 2, 4, 8 >= M; the tensor-core tiles 8
  int gemv_k_split = 0;       // warps per block splitting K
  bool gemv_tma = false;      // weight tiles by TMA (SM90+); gemv_algo does not apply then
  bool gemv_window = false;   // the window kernel (4-bit, algorithm 0 on whole windows);
                              // gemv_tma is false then
  bool gemv_lines = false;    // the window kernel's weights by whole-line loads
  int gemv_tiles_per_warp = 1;  // 16-column tiles per warp of the tensor-core tiles (2 only
                                // with lines)
  int gemv_registers = 0;     // two tiles: the register bound, 128 or 168 (0 elsewhere)

  // Workspace layout: byte offsets into the caller's workspace, each 256-byte aligned.
  size_t cublas_offset = 0, cublas_bytes = 0;    // cuBLAS's own workspace
  size_t scratch_offset = 0, scratch_bytes = 0;  // scratch_buffers x [n_tile, K] of T1
  size_t workspace_bytes = 0;                    // total the caller must provide
};
std::ostream& operator<<(std::ostream& os, const NBitsMatMulPlan& plan);

// Host only, cheap, no CUDA calls: checks every input against the contract and
// describes the problem. Errors name the input, the expected and the received value.
// bits == 2 is NotSupported; other bits outside {4, 8} are InvalidArgument.
Status validate_nbits_matmul(const NBitsMatMulArgs& args, const NBitsMatMulAttrs& attrs,
                             NBitsMatMulProblem* problem);

// Y's shape for an A of shape `a_shape` and N output features.
Status nbits_matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape);

// Pure: the same inputs always give the same plan. Needs no GPU.
Status plan_nbits_matmul(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, NBitsMatMulPlan* plan);

// Runs `plan` on `args` (which must describe plan.problem) on `stream`. Enqueues
// kernels and cuBLAS calls only: no allocation, no synchronization.
Status run_nbits_matmul(const Handle& handle, const NBitsMatMulPlan& plan,
                        const NBitsMatMulArgs& args, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);

}  // namespace bqmm
