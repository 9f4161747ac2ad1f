// The parts of a plan both operators share. Plain data that the planner fills and that
// plans print (operator<<, BQMM_PRINT_PLAN=1, bqmm-profile --explain): which kernels run
// and how they are tiled. They are the planner's decisions for a problem on a device,
// not options: what a caller chooses is in Fp8MatMulOptions / NBitsMatMulOptions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bqmm {

// The decode GEMV (0 < M <= 8). Which fields apply depends on the kernel chosen.
struct GemvConfig {
  bool fma = false;   // CUDA-core kernel (Fp8WeightMatMul: the gemv_fma path)
  int rows = 0;       // activation rows per warp tile
  int algo = 0;       // NBitsMatMul's K-loop algorithm (kNBitsGemvAlgo*)
  int k_split = 0;    // tensor-core tiles: warps per block splitting K
  bool tma = false;   // weight tiles by the tensor memory accelerator (SM90+)
  bool window = false;  // NBitsMatMul's whole-window kernel
  bool lines = false;   // weights by whole 128-byte line loads staged through shared memory
  int tiles = 0;        // 16-column tiles per warp (2 only with line loads)
  int registers = 0;    // two tiles: the kernel's register bound (128 or 168), else 0
  int row_groups = 1;   // M > 8: groups of 16 activation rows, one block each per column block
  bool dependent_launch = false;  // SM90, NBitsMatMul's 4-bit register tile or FP8's one tile
                                  // of line loads: a programmatic dependent launch, its
                                  // first weights pulled into L2 while the kernel before
                                  // it finishes
};

// The fused GEMM (M above the decode GEMV's rows): blocks of tile_m activation rows x
// tile_n output columns stream their weight rows once through a shared-memory pipeline,
// decode them in registers and multiply on tensor cores (mma.m16n8k16, float32 sums; on
// SM90 with wgmma, the decoded weight as its register operand).
// Fp8WeightMatMul's W8A8 GEMM (FP8 x FP8 wgmma) is tiled the same way: wgmma, tile_m 128.
// The mixed-input GEMM (CUTLASS's SM90 collective, M above the fused GEMM's tiles) uses
// tile_m (128 or 256), tile_n (128), stream_k and swizzle of it.
struct GemmConfig {
  bool wgmma = false;  // the Hopper mainloop (SM90), else mma.sync
  int tile_m = 0;    // activation rows per block (mma.sync: 16, 32 or 64; wgmma: also 128,
                     // and 256 for N-bit codes)
  int tile_n = 0;    // output columns (weight rows) per block
  int stages = 0;    // shared-memory pipeline depth (K slabs in flight)
  int k_split = 1;   // blocks splitting K; > 1: float32 partial sums in the workspace,
                     // added (with the bias) by a second kernel, or cluster_reduce
  bool stream_k = false;  // the mixed-input GEMM's K tiles dealt out evenly over the SMs,
                          // float32 partial tiles in the workspace
  int swizzle = 0;  // the mixed-input GEMM's tile order on its persistent grid: 0 CUTLASS's
                    // own; S > 0 weight tiles first, in bands of S activation tiles
  int scale_rows = 1;  // W8A8 on cuBLASLt's block-scaled FP8 GEMM: weight rows per
                       // scale read (1, or 128 where Fp8MatMulAttrs::b_scale_block_rows
                       // promises it)
  int lt_algo = 0;  // W8A8 on cuBLASLt: the index of its algorithm in cuBLASLt's heuristic
                    // list (fewer found: the last)
  bool dependent_launch = false;  // the W8A8 GEMM: a programmatic dependent launch after its
                                  // quantize pass (the first stages' weights copied while
                                  // the pass runs)
  bool cluster_reduce = false;  // a wgmma GEMM (the W8A8 GEMM, the fused GEMM's Hopper
                                // mainloop) with k_split 2: a tile's two splits run as one
                                // thread-block cluster and add their partial sums through
                                // distributed shared memory (no partial sums in the
                                // workspace, no second kernel)
};

// The dequant + cuBLAS path: the weight dequantized in N tiles into the scratch.
struct DequantConfig {
  bool qdq_activation = false;  // Fp8WeightMatMul W8A8: A' = QDQ(A) into the workspace
  bool vector = false;          // the vectorized dequant kernel (else the scalar one)
  int64_t n_tile = 0;           // weight rows dequantized per GEMM call
  int64_t num_n_tiles = 0;
};

// Byte offsets of a plan's regions in the caller's workspace, each 256-byte aligned.
struct WorkspaceRegions {
  // QDQ'd activation, [M, K] of T: Fp8WeightMatMul W8A8 on the dequant + cuBLAS path and
  // on the fused GEMM, which read A' = QDQ(A) from here (act_bytes > 0 exactly then).
  size_t act_offset = 0, act_bytes = 0;
  size_t cublas_offset = 0, cublas_bytes = 0;    // cuBLAS's own workspace
  // [n_tile, K] dequantized weight of T; W8A8 on cuBLASLt with M % 4 != 0: Y of M rounded
  // up to 4 rows, copied to Y after the GEMM.
  size_t scratch_offset = 0, scratch_bytes = 0;
  // The fused GEMM's Hopper mainloop: the activation (A, or A') in the K order its TMA
  // copies want, [M rounded up to its tile, K rounded up to 32] of T, written by a pass
  // before it.
  size_t act_order_offset = 0, act_order_bytes = 0;
  size_t partial_offset = 0, partial_bytes = 0;  // fused / W8A8 GEMM k_split > 1: [k_split, M, N] float32;
                                                 // the stream-K mixed-input GEMM's partial tiles and flags
  // Fp8WeightMatMul's W8A8 GEMMs: the activation quantized to e4m3, [M, K] bytes, and its
  // float32 scales [k_blocks, M padded] (M padded to a multiple of 128; on cuBLASLt both
  // cover M rounded up to 4 rows).
  size_t codes_offset = 0, codes_bytes = 0;
  size_t act_scales_offset = 0, act_scales_bytes = 0;
  // The mixed-input GEMM: the weight's scales as float32 [k_blocks, N] and, NBitsMatMul,
  // its zeros (-zero_point * scale) after them, written by each run before the GEMM.
  // W8A8 on cuBLASLt: the weight's scales in its layout (per row: [k_blocks, N]; per 128
  // rows: w8a8_cublaslt_block_scales floats).
  size_t scales_offset = 0, scales_bytes = 0;
};

}  // namespace bqmm
