// The fused GEMM's geometry and tiling rule, one for both planners (Fp8WeightMatMul and
// NBitsMatMul) and for the kernel (cuda/gemm/fused_gemm.cuh static_asserts against it),
// and the part of its applicability both planners share (gemm_common_refusal).
//
// A block owns tile_m activation rows x kGemmTileN output columns (weight rows) and a range
// of K; each pipeline stage holds kGemmSlabBytes of every one of its weight rows (128 K
// elements of FP8 / 8-bit, 256 of 4-bit: whole 128-byte lines, the load shape that streams)
// and the matching [tile_m, slab K] activations.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "bqmm/device.h"
#include "bqmm/plan_parts.h"
#include "bqmm/tensor.h"
#include "core/gemv_split.h"

namespace bqmm {

// The most activation rows both planners give the fused GEMM; above, the mixed-input GEMM
// (SM90, below) or dequant + cuBLAS. Measured on the H200 (fp16, block 128, back to back,
// 8192 x 8192): the fused GEMM's mma.sync tiles run at 170-220 TFLOP/s, so they win while
// the weight stream weighs most: M = 128 FP8 79 us against 91 for dequant + cuBLAS, 8-bit
// 89 against 110, 4-bit 100 against 109; at M = 256 they would take about twice that
// against 100-120. On SM90 the wgmma mainloop runs M = 128 in 58-64 us, and N-bit codes
// to kWgmmaTallMaxRows on its 256-row tile (gemm_max_rows).
constexpr int64_t kGemmMaxRows = 128;
constexpr int64_t kWgmmaTallMaxRows = 256;

constexpr int kGemmTileN = 128;              // output columns per block
constexpr int64_t kGemmSlabBytes = 128;      // weight bytes per row per stage
constexpr int kGemmWarps = 8;                // warps per block, every tile
// The W8A8 GEMM sums a K split of 2 in a thread-block cluster of the tile's two blocks
// (GemmConfig::cluster_reduce); larger splits in planes: clusters of four SMs did not all
// fit at once on the H200 (the fused GEMM's cluster form, 4096 x 14336 M = 64 at split 4:
// 41.1 us against 26.9 with planes; H200). The fused GEMM's wgmma mainloop sums a split of
// 2 the same way where that measured faster (fused_gemm_cluster_sums).
constexpr int kClusterSumSplit = 2;
constexpr int kGemmMaxKSplit = 16;
constexpr int kGemmMaxStages = 4;
constexpr int kGemmMinStages = 3;            // a stage refills one iteration after its use
// Shared memory per SM (usable by blocks, each also costs 1 KB the driver reserves): the
// kernel's stage count targets two resident blocks on SM90 (16 warps per SM) where three
// stages of the tile fit twice, else one block of at most kGemmOneBlockSmemBytes, which
// every SM80+ device the library builds for holds (A100: 163 KB per block).
constexpr int64_t kGemmSmemPerSm90 = 228 * 1024;
constexpr int64_t kGemmSmemPerSm80 = 164 * 1024;
constexpr int64_t kGemmBlockReserve = 1024;
constexpr int64_t kGemmOneBlockSmemBytes = 160 * 1024;

constexpr int64_t gemm_slab_k(int bits) { return kGemmSlabBytes * 8 / bits; }

// The activation tile's row pitch in shared memory: the slab's halves plus a pad that
// makes the B-fragment loads conflict-free (cuda/gemm/fused_gemm.cuh says how).
constexpr int64_t gemm_act_pitch_bytes(int bits) {
  return gemm_slab_k(bits) * 2 + (bits == 4 ? 64 : 32);
}
constexpr int64_t gemm_stage_bytes(int tile_m, int bits) {
  return kGemmTileN * kGemmSlabBytes + tile_m * gemm_act_pitch_bytes(bits);
}
// Stages of two resident blocks on SM90 (0 if fewer than kGemmMinStages fit).
constexpr int gemm_two_block_stages(int tile_m, int bits) {
  const int64_t fit = (kGemmSmemPerSm90 / 2 - kGemmBlockReserve) / gemm_stage_bytes(tile_m, bits);
  return fit < kGemmMinStages ? 0 : static_cast<int>(std::min<int64_t>(kGemmMaxStages, fit));
}
constexpr int gemm_stages(int tile_m, int bits) {
  const int two = gemm_two_block_stages(tile_m, bits);
  if (two > 0) return two;
  return static_cast<int>(std::min<int64_t>(
      kGemmMaxStages, kGemmOneBlockSmemBytes / gemm_stage_bytes(tile_m, bits)));
}
constexpr int64_t gemm_smem_bytes(int tile_m, int bits) {
  return gemm_stages(tile_m, bits) * gemm_stage_bytes(tile_m, bits);
}
// Blocks an SM holds at once (the kernel's launch bounds ask for two where the stages
// allow; registers then fit 128 per thread).
inline int gemm_blocks_per_sm(int tile_m, int bits, int sm) {
  const int64_t per_sm = sm >= 90 ? kGemmSmemPerSm90 : kGemmSmemPerSm80;
  const int64_t fit = per_sm / (gemm_smem_bytes(tile_m, bits) + kGemmBlockReserve);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(2, fit)));
}

// The Hopper mainloop (cuda/gemm/fused_wgmma.cuh, SM90 only): a producer warpgroup loads
// the slabs; two consumer warpgroups, each 64 of the block's kGemmTileN weight rows,
// multiply with wgmma (A = the decoded weight in registers, B = tile_m activation rows in
// shared memory, tile_m = the wgmma's N). Its activation tile has no pad (the 128-byte
// swizzle of the wgmma operand layout keeps loads conflict-free), one block per SM, as
// many stages as kWgmmaSmemBytes holds.
constexpr int kWgmmaProducerThreads = 128;
constexpr int kWgmmaConsumerThreads = 256;
constexpr int kWgmmaThreads = kWgmmaProducerThreads + kWgmmaConsumerThreads;
constexpr int kWgmmaMaxStages = 6;
constexpr int kWgmmaMinStages = 3;  // one slab in the wgmma, one decoded, one in flight
constexpr int64_t kWgmmaSmemBytes = 200 * 1024;
constexpr int64_t kWgmmaAlignBytes = 1024;  // the swizzle atom: stage bases aligned to it
// A stage holds wgmma_slab_bytes of each weight row: a slab, or part of one where a whole
// slab's activation rows leave room for few stages: 4-bit codes at tile 128 half a slab
// (256 K of 128 rows would be 64 KB a stage; 128 K fit five stages of 40 KB), and so at
// tile 64 with K halves (kKHalvesTileN, below: two halves' 256 K of 64 rows would leave
// three stages of 80 KB; 128 K fit five of 40 KB), tile 256 64 K, one 128-byte panel of
// activation rows (4-bit 32 bytes of each weight row, 8-bit 64: five stages of 36 / 40
// KB). Plans and the K split count whole slabs either way.
constexpr int64_t wgmma_slab_bytes(int tile_m, int bits, bool halves = false) {
  if (tile_m == 256) return 64 * bits / 8;
  return (tile_m == 128 || halves) && bits == 4 ? kGemmSlabBytes / 2 : kGemmSlabBytes;
}
constexpr int64_t wgmma_slab_k(int tile_m, int bits, bool halves = false) {
  return wgmma_slab_bytes(tile_m, bits, halves) * 8 / bits;
}
// K halves: a stage holds a slab of each half, the same weight bytes and twice the
// activation bytes.
constexpr int64_t wgmma_stage_bytes(int tile_m, int bits, bool halves = false) {
  return kGemmTileN * wgmma_slab_bytes(tile_m, bits, halves) +
         (halves ? 2 : 1) * tile_m * wgmma_slab_k(tile_m, bits, halves) * 2;
}
constexpr int wgmma_stages(int tile_m, int bits, bool halves = false) {
  return static_cast<int>(std::min<int64_t>(kWgmmaMaxStages,
                                            kWgmmaSmemBytes / wgmma_stage_bytes(tile_m, bits, halves)));
}
constexpr int64_t wgmma_smem_bytes(int tile_m, int bits, bool halves = false) {
  return wgmma_stages(tile_m, bits, halves) * wgmma_stage_bytes(tile_m, bits, halves) + kWgmmaAlignBytes;
}
// K halves, both wgmma GEMMs (plan tile_n = kKHalvesTileN): a block of 64 weight rows,
// whose two consumer warpgroups take the first and the second half of the block's K, their
// sums added in the block at the end. It replaces a K split of 2 of the 128-row tiles: as
// many blocks, no cluster and no planes. The W8A8 GEMM's rule: w8a8_takes_halves; the
// fused GEMM's: fused_gemm_takes_halves.
constexpr int kKHalvesTileN = 64;

// W8A8 on FP8 tensor cores (cuda/gemm/w8a8_wgmma.cuh, SM90 only): Fp8WeightMatMul with its
// activation quantized to e4m3 first, both operands multiplied as e4m3 by wgmma. Blocks of
// tile_m activation rows (w8a8_tile_m: 32, 64 or 128, the wgmma's N) x kGemmTileN weight
// rows, the wgmma roles of the fused GEMM's Hopper mainloop (a producer warpgroup, two
// consumers); a slab is 128 K of both operands (128 bytes of e4m3 per row) plus the scales
// of the slab's K block for the tile's 128 weight rows and (dynamic) tile_m activation
// rows, in 1 KB (stages stay on swizzle-atom boundaries).
constexpr int kW8a8TileM = 128;  // the largest tile; the dynamic scales' rows are padded to it
constexpr int64_t kW8a8SlabK = 128;
// K halves (kKHalvesTileN, above): a stage holds a slab of each half, the same weight
// bytes, twice the activation bytes. Measured on an H100 against the split of 2 summed in
// its cluster (back to back, same run, scripts/ab_cases/k_halves.txt): 8192 x 8192 M = 64
// 0.957-0.962x the time (static, dynamic, both activation types, 128-row weight scales),
// M = 16 and 32 0.982-0.991x. In place of a split of 4 (then halves and a split of 2 in
// planes, 4096 x 14336) it was 0.978-0.982x at M = 64 but 1.022x at M = 16, so it is not
// taken there.
constexpr int kW8a8HalvesMaxTileM = 64;  // the tiles instantiated with halves (32, 64)
constexpr int64_t w8a8_stage_bytes(int tile_m, int tile_n = kGemmTileN) {
  return (kGemmTileN + (tile_n == kKHalvesTileN ? 2 : 1) * tile_m) * kW8a8SlabK + 1024;
}
constexpr int w8a8_stages(int tile_m, int tile_n = kGemmTileN) {
  return static_cast<int>(
      std::min<int64_t>(kWgmmaMaxStages, kWgmmaSmemBytes / w8a8_stage_bytes(tile_m, tile_n)));
}
constexpr int64_t w8a8_smem_bytes(int tile_m, int tile_n = kGemmTileN) {
  return w8a8_stages(tile_m, tile_n) * w8a8_stage_bytes(tile_m, tile_n) + kWgmmaAlignBytes;
}
// The tile for M rows: the smallest of 32, 64, 128 holding them (above 128, 128). A
// 128-row tile on 64 rows or fewer multiplies mostly padding: at 8192 x 8192 M = 64 the
// 128-row tile's wgmma work per slab (0.56 us per block at 900 TFLOP/s over 132 SMs) is
// twice its weight stream's (16 KB at 4.5 TB/s over 132 SMs: 0.25 us).
constexpr int w8a8_tile_m(int64_t m) { return m <= 32 ? 32 : m <= 64 ? 64 : kW8a8TileM; }
// The largest tile whose GEMM launches as a programmatic dependent of the quantize pass.
constexpr int kW8a8PdlTileM = 32;
// The rows where the planner takes it: every M above the decode GEMV's (measured on the
// H200, back to back, the prefill suite's four shapes, static and dynamic scales, against
// the path it replaces forced in the same run): at M = 9, 16 and 32 (tile 32) 0.61-0.96x
// the time of the fused GEMM on the QDQ'd activation, from M = 64 to 1024 0.33-0.88x, at
// 4096 0.74-0.96x the time of dequant + cuBLAS BF16 (one case 1.02x: dynamic 14336 x 4096).
constexpr int64_t kW8a8MinRows = kGemvMaxRows + 1;
// The K split's price of one M x N float32 plane of partial sums (written by the GEMM,
// read back by the reduce), in slab times: a block's 128 x 128 x 128 slab takes about
// 0.6 us (about 900 TFLOP/s over 132 SMs) while a plane crosses HBM twice at about
// 3 TB/s, so about 0.9 MB of plane costs a slab. (Priced at zero, the wave model splits
// 28672 x 8192 at M = 256 in two: 200 us, against 81 at M = 128, unsplit, in one run.)
constexpr int64_t kW8a8PlaneBytesPerSlab = 900 * 1024;
// The quantized activation in the workspace: [M, K] e4m3 codes (K % 16 == 0) and, dynamic,
// its scales [k_blocks][M padded to whole tiles] float32.
constexpr int64_t w8a8_m_pad(int64_t m) { return (m + kW8a8TileM - 1) / kW8a8TileM * kW8a8TileM; }

// W8A8 on cuBLASLt's FP8 GEMM with block scales (cuda/cublas_gemm.cc, SM90 only): the
// activation's e4m3 codes with one float32 scale per (row, 128-K block) (cuBLASLt's
// VEC128_32F) times the weight's e4m3 rows with one scale per 128 x 128 block
// (BLK128x128_32F, where b_scale_block_rows promises them) or per (row, 128-K block)
// (VEC128_32F). cuBLASLt takes the activation's rows in multiples of 4 (it has no kernel
// for other counts): the codes and scales cover M rounded up to 4 (the rows past M zero)
// and, where M % 4 != 0, the GEMM writes its rows into the workspace and M of them are
// copied to Y. The planner takes it from kW8a8CublasltMinRows rows, static W8A8 with
// per-row weight scales from kW8a8CublasltStaticPerRowMinRows. Measured on the H200 (back
// to back, float16, against the path it replaces forced in the same run): at
// M = 64 it took 0.94-0.96x the W8A8 GEMM's time with per-row scales at 8192 x 8192 but
// 1.17-1.20x with 128 x 128 blocks and 1.04-1.12x at 14336 x 4096; at M = 128 0.96-1.04x;
// at M = 256 (8192 x 8192) 0.94-0.97x the time of CUTLASS's groupwise FP8 GEMM (which it
// replaced) with dynamic or 128-row scales, 1.04x the W8A8 GEMM's with static per-row
// scales (whose single activation scale folds cheaply); from 512 rows 0.90-1.02x with
// static per-row scales on the four prefill shapes, 0.91-0.98x otherwise (PERF.md, "W8A8
// on cuBLASLt's block-scaled FP8 GEMM").
constexpr int64_t kW8a8CublasltRowMultiple = 4;
constexpr int64_t kW8a8CublasltMinRows = 256;
constexpr int64_t kW8a8CublasltStaticPerRowMinRows = 512;
constexpr int64_t w8a8_cublaslt_rows(int64_t m) {
  return (m + kW8a8CublasltRowMultiple - 1) / kW8a8CublasltRowMultiple * kW8a8CublasltRowMultiple;
}
// The weight's block scales in cuBLASLt's BLK128x128_32F layout: [ceil(N / 128)] groups of
// k_blocks scales each, every group padded to a multiple of 4 (16 bytes).
constexpr int64_t w8a8_cublaslt_block_scales(int64_t n, int64_t k_blocks) {
  return (n + 127) / 128 * ((k_blocks + 3) / 4 * 4);
}

// The tiles of 64 rows or fewer, which both mainloops have: 16, 32, 64.
constexpr bool gemm_small_tile(int tile_m) { return tile_m == 16 || tile_m == 32 || tile_m == 64; }
// The smallest of them holding M rows; 64 above.
constexpr int gemm_tile_m(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }
// Output tiles of tile_m activation rows x kGemmTileN weight rows for M x N (unsplit).
constexpr int64_t gemm_tiles(int64_t m, int64_t n, int64_t tile_m) {
  return (m + tile_m - 1) / tile_m * ((n + kGemmTileN - 1) / kGemmTileN);
}

// The K split. A block's time is about (its slabs + the pipeline's fill of `stages`
// slabs); the grid runs in waves of (SMs x resident blocks), and a partial last wave costs
// a whole one. The split (a power of two up to kGemmMaxKSplit, at most one per slab) with
// the least (waves x block time) wins, the smaller on a tie: each split also writes and
// re-reads an M x N float32 plane.
// `unit_slabs`: the split's unit in slabs (W8A8 splits K in whole scale blocks); `units`
// the units of K; `plane_slabs`: the price of each partial-sum plane of a split in slab
// times (0: not counted).
inline int64_t gemm_split_cost(int64_t tiles, int64_t units, int64_t unit_slabs, int64_t resident,
                               int stages, int split, int64_t plane_slabs = 0) {
  const int64_t waves = (tiles * split + resident - 1) / resident;
  const int64_t planes = split > 1 ? split * plane_slabs : 0;
  return waves * ((units + split - 1) / split * unit_slabs + stages) + planes;
}
inline int choose_gemm_k_split(int64_t tiles, int64_t units, int64_t resident, int stages,
                               int64_t unit_slabs = 1, int64_t plane_slabs = 0) {
  int best = 1;
  int64_t best_cost = gemm_split_cost(tiles, units, unit_slabs, resident, stages, 1);
  for (int split = 2; split <= kGemmMaxKSplit && split <= units; split *= 2) {
    const int64_t cost = gemm_split_cost(tiles, units, unit_slabs, resident, stages, split, plane_slabs);
    if (cost < best_cost) {
      best = split;
      best_cost = cost;
    }
  }
  return best;
}

// Whether this build has the Hopper mainloop (CMakeLists.txt builds it with SM90 in
// CUDA_ARCHITECTURES; gemm_plan.cc).
bool wgmma_built();

// Whether this build's kernels have SM90 device code (an SM90+ entry in
// CUDA_ARCHITECTURES; gemm_plan.cc). A build for SM80 alone runs on SM90 GPUs from its
// PTX, which has no griddepcontrol: its launches stay plain (cuda/common.cuh).
bool sm90_code_built();

// A decode GEMV may be launched as a programmatic dependent: the device takes it (SM90)
// and the kernel waits for the one before (sm90_code_built).
inline bool gemv_dependent_launch_possible(const DeviceInfo& d) { return d.sm >= 90 && sm90_code_built(); }

// The Hopper mainloop's built tiles (kFp8WgmmaKernels and the N-bit lists below):
// tiles 16, 32, 64 and 128, and for N-bit codes 256. FP8 takes one scale block per slab
// (block_size % 128 == 0), whose partial sums it scales per slab (beside tile 256's 128
// accumulators they do not fit); N-bit codes take every block at tiles 16 to 64, blocks of
// half a stage (64 K) or more at tile 128 and of a stage (64 K) or more at tile 256
// (beside their 64 and 128 accumulators the per-word constants of smaller blocks do not
// fit).
inline bool wgmma_tile_supported(int tile_m, int bits, bool fp8, int64_t block_size) {
  if (tile_m == 256) return !fp8 && block_size % wgmma_slab_k(256, bits) == 0;
  if (!gemm_small_tile(tile_m) && tile_m != 128) return false;
  if (fp8) return block_size % gemm_slab_k(bits) == 0;
  return tile_m != 128 || block_size % (wgmma_slab_k(tile_m, bits) / 2) == 0;
}

// On SM90 the wgmma mainloop takes every M the fused GEMM does, on its smallest tile
// holding M up to 64 rows (gemm_tile_m: 16, 32, 64): a 64-row tile at M <= 32 multiplies
// rows of zeros, and its consumers (decode and wgmma), not the weight stream, set its
// time (4-bit 4096 x 14336: 22.3 us at M = 32 and 22.8 at 64 on the 64-row tile, H100,
// against a weight-stream floor of 8.5). mma.sync's tiles run it where the override says
// wgmma=0, on SM80, and where wgmma_refusal has a reason.

// The wgmma mainloop's activations in the K order of its A fragments, written by a pass
// before it into the workspace (cuda/gemm/fused_wgmma.cuh): [M rounded up to tile_m, K
// rounded up to kGemmActOrderK] elements, whole chunks of the 4-bit decode's 32 K (8-bit's
// 16 divide it), zeros past M and K. Whole tiles of rows, because a TMA box reaching past
// its tensor's rows copies slower (H200, float16, 8192 x 8192, tile 64, same run: M = 17
// FP8 33.6 us with the rows unpadded, 27.1 padded; M = 32 32.6 / 27.4; 8-bit M = 17 33.0
// / 27.4).
constexpr int64_t kGemmActOrderK = 32;
constexpr int64_t gemm_act_order_k(int64_t k) { return (k + kGemmActOrderK - 1) / kGemmActOrderK * kGemmActOrderK; }
constexpr int64_t gemm_act_order_rows(int64_t m, int64_t tile_m) { return (m + tile_m - 1) / tile_m * tile_m; }
constexpr int64_t gemm_act_order_bytes(int64_t m, int64_t k, int64_t tile_m, int64_t elem_bytes) {
  return gemm_act_order_rows(m, tile_m) * gemm_act_order_k(k) * elem_bytes;
}

// The wgmma mainloop copies by TMA, whose coordinates are 32-bit: it reaches weight rows
// (N) and bytes of a row (weights: row_bytes; ordered activations: gemm_act_order_k(K) x
// 2) below 2^31.
constexpr bool wgmma_tma_reaches(int64_t n, int64_t w_row_bytes, int64_t a_row_bytes) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  return n < kLimit && w_row_bytes < kLimit && a_row_bytes < kLimit;
}

// The fused GEMM's problem as the tiling sees it.
struct GemmShape {
  int64_t m = 0, n = 0;
  int64_t row_bytes = 0;   // bytes per weight row
  int bits = 8;            // 8 (FP8, int8) or 4
  bool fp8 = false;
  int64_t block_size = 0;
  bool bf16 = false;       // bfloat16 activations (else float16 or, off the fused GEMM, float32)
};

// The fused GEMM's forced choices (the plan override's wgmma, tile_m, gemm_k_split,
// cluster_sum, k_halves): -1 / 0 for the rule's.
struct GemmForced {
  int wgmma = -1;
  int tile_m = 0;
  int k_split = 0;
  int cluster_sum = -1;  // 0 / 1: the wgmma GEMMs' K split of 2 in planes / summed in a cluster
  int halves = -1;       // 0 / 1: the wgmma GEMMs' K halves never / wherever they apply
};

// Why the fused GEMM of `s` does not take the wgmma mainloop on `device` under `forced`,
// or nullptr where it does (choose_gemm_mainloop decides by it; --explain prints it).
inline const char* wgmma_refusal(const GemmShape& s, const DeviceInfo& device,
                                 const GemmForced& forced) {
  if (forced.wgmma == 0) return "wgmma=0 (plan override)";
  if (device.sm != 90) return "not an SM90 device (wgmma code is sm_90a only)";
  if (!wgmma_built()) return "this build has no SM90 in CUDA_ARCHITECTURES";
  if (!wgmma_tile_supported(64, s.bits, s.fp8, s.block_size))
    return "FP8 block_size % 128 != 0 (the wgmma tile scales one block per 128-K slab)";
  // K <= row_bytes x 8 / bits: ordered activation rows of at most row_bytes x 16 / bits
  // + 64 bytes.
  if (!wgmma_tma_reaches(s.n, s.row_bytes, s.row_bytes * 16 / s.bits + 2 * kGemmActOrderK))
    return "N or the rows' bytes beyond TMA's 32-bit coordinates";
  return nullptr;
}

// Why the wgmma mainloop runs `s` on tiles of 64 rows or fewer rather than its 128-row one
// under `forced`, or nullptr where it takes tile 128 (choose_gemm_mainloop; --explain prints it
// above 64 rows). Tile 128 above 64 rows wherever instantiated, since two rows of 64-row
// tiles decode every weight strip twice, but for FP8 with float16 activations (the
// shortest decode) where the 64-row tiles are one wave of SMs. Measured on an H100 (one
// run, back to back, the prefill suite's shapes at M = 65, 96, 128, tile 128 / tile 64):
// FP8 float16 8192 x 8192 (128 tiles of 64 rows) 1.02, 1.05, 1.08x the time, 4096 x 14336
// (64) 0.99-1.02x; two waves 0.76-0.83x; bfloat16 0.72-0.99x on every shape.
inline const char* wgmma_tile_128_refusal(const GemmShape& s, const DeviceInfo& device,
                                          const GemmForced& forced) {
  if (gemm_small_tile(forced.tile_m)) return "tile_m <= 64 (plan override)";
  if (!wgmma_tile_supported(128, s.bits, s.fp8, s.block_size))
    return "N-bit blocks under 64 codes (beside tile 128's accumulators their per-word constants do not fit)";
  if (forced.tile_m == 128) return nullptr;
  if (s.m <= 64) return "M <= 64: one 64-row tile holds it";
  if (s.fp8 && !s.bf16 && gemm_tiles(s.m, s.n, 64) <= std::max(1, device.num_sms))
    return "FP8 float16 and the 64-row tiles one wave of SMs: they are faster there";
  return nullptr;
}

// Whether the wgmma mainloop runs `s` on its 256-row tile (N-bit codes in blocks of 64 K
// or more): above kGemmMaxRows rows (the 128-row tile would decode each weight strip once
// per tile row), or forced.
inline bool wgmma_takes_tile_256(const GemmShape& s, const GemmForced& forced) {
  if (!wgmma_tile_supported(256, s.bits, s.fp8, s.block_size)) return false;
  return forced.tile_m == 256 || (forced.tile_m == 0 && s.m > kGemmMaxRows);
}

// The most activation rows the fused GEMM takes of `s` on `device`: kWgmmaTallMaxRows
// where the wgmma mainloop's 256-row tile would run them (no smaller tile forced), else
// kGemmMaxRows.
inline int64_t gemm_max_rows(const GemmShape& s, const DeviceInfo& device, const GemmForced& forced) {
  GemmShape tall = s;
  tall.m = kWgmmaTallMaxRows;
  return wgmma_takes_tile_256(tall, forced) && wgmma_refusal(tall, device, forced) == nullptr
             ? kWgmmaTallMaxRows
             : kGemmMaxRows;
}

// The mainloop and tile height: wgmma where wgmma_refusal has no reason against it, tile
// 256 where wgmma_takes_tile_256, else tile 128 where wgmma_tile_128_refusal has no
// reason against it, else its smallest tile holding M (16, 32, 64; gemm_tile_m); else
// mma.sync's smallest tile holding M. Both mainloops have tiles 16, 32 and 64: a forced
// one of those keeps the rule's mainloop (wgmma forces that); a forced 128 or 256 where no
// such wgmma tile exists is ignored (the rule's own choice).
inline void choose_gemm_mainloop(const GemmShape& s, const DeviceInfo& device,
                                 const GemmForced& forced, GemmConfig* g) {
  GemmForced f = forced;
  if ((f.tile_m == 128 || f.tile_m == 256) && !wgmma_tile_supported(f.tile_m, s.bits, s.fp8, s.block_size))
    f.tile_m = 0;
  g->wgmma = wgmma_refusal(s, device, f) == nullptr;
  if (g->wgmma) {
    g->tile_m = wgmma_takes_tile_256(s, f)                      ? 256
                : wgmma_tile_128_refusal(s, device, f) == nullptr ? 128
                : gemm_small_tile(f.tile_m)                      ? f.tile_m
                                                                  : gemm_tile_m(s.m);
    g->stages = wgmma_stages(g->tile_m, s.bits);
  } else {
    g->tile_m = gemm_small_tile(f.tile_m) ? f.tile_m : gemm_tile_m(s.m);
    g->stages = gemm_stages(g->tile_m, s.bits);
  }
}

// Whether the W8A8 GEMM sums the K split of `g` in a thread-block cluster of its blocks (no
// planes, no reduce kernel): a split of kClusterSumSplit of 128-row tiles, unless forced off.
inline bool w8a8_cluster_sums(const GemmConfig& g, const GemmForced& forced) {
  return g.wgmma && g.k_split == kClusterSumSplit && g.tile_n != kKHalvesTileN && forced.cluster_sum != 0;
}

// Whether the W8A8 GEMM of `g` (its 128-row tiles and their K split chosen) runs K halves
// instead (kKHalvesTileN): on tiles of up to kW8a8HalvesMaxTileM rows split in two,
// two K blocks or more; `forced` (the override's k_halves, -1 unset) 1 takes them
// wherever the tile and K allow, 0 never.
inline bool w8a8_takes_halves(const GemmConfig& g, int64_t k_blocks, int forced) {
  if (forced == 0 || g.tile_m > kW8a8HalvesMaxTileM || k_blocks < 2) return false;
  return forced == 1 || g.k_split == 2;
}

// Whether the fused GEMM's wgmma mainloop sums the K split of `g` in a thread-block cluster
// of the tile's two blocks (cluster_pair_store) rather than in planes and a reduce kernel:
// a split of kClusterSumSplit of 128-row tiles (K halves need none), unless forced off, but
// for 4-bit codes on tiles of 64 rows or fewer.
// Against the planes, in one build (NVIDIA H100, 8192 x 8192, float16 unless said,
// scripts/ab_cases/fused_cluster_sum.txt): FP8 tile 64 M = 64 0.962x the time (bfloat16
// 0.958x), 8-bit 0.962x; tile 128 M = 128 4-bit 0.982x, 8-bit 0.954x; tile 256 0.977-0.988x
// (M = 129 1.001x); 4-bit tile 64 M = 64 1.011x, M = 32 1.027x.
inline bool fused_gemm_cluster_sums(const GemmShape& s, const GemmConfig& g, const GemmForced& forced) {
  if (!g.wgmma || g.k_split != kClusterSumSplit || g.tile_n == kKHalvesTileN || forced.cluster_sum == 0) return false;
  return forced.cluster_sum == 1 || !(s.bits == 4 && gemm_small_tile(g.tile_m));
}

// Whether the fused GEMM of `s` (its 128-row tiles and their K split chosen in `g`) runs K
// halves instead (kKHalvesTileN): the wgmma mainloop's tiles of 64 rows or fewer, split in
// two, K of two slabs or more, in the blocks instantiated with halves (fused_gemm_halves_blocks), but
// FP8 with bfloat16 activations; `forced.halves` 1 takes them wherever the tile, blocks
// and K allow, 0 never. Measured on an H100 against the split of 2 (8192 x 8192, back to
// back, same run; scripts/ab_cases/k_halves.txt, k_halves_4bit.txt): 8-bit codes against
// the split summed in its cluster, FP8 float16 M = 17, 32, 64 0.955-0.966x the time, int8
// 0.957-0.972x (float16 and bfloat16, packed zero points), FP8 bfloat16 M = 64 1.034x (its
// decode of e4m3 through float16 is the longer, and a stage of halves leaves 4 stages, not
// 6); 4-bit codes against the split in planes, blocks of 64 M = 17, 32, 64 0.97-1.00x
// (float16, and bfloat16 with packed zero points), blocks of 128 1.02-1.06x but typed zero
// points 0.97x, blocks of 32 1.02-1.03x. Since the split loads its whole slabs' four
// blocks of 64 as vectors (wgmma_consts), 4-bit halves are slower than it (same run, H100,
// scripts/ab_cases/vector_consts4.txt: the split 0.880 / 0.886 / 0.893x halves' time at
// M = 17 / 32 / 64, bfloat16 packed zero points 0.880x, typed 0.834x), so the rule takes
// them only where those vectors do not apply (k_blocks % 4 != 0; K = 8256: halves 29.9 us
// against the split's 30.7, one block at a time).
inline bool fused_gemm_halves_blocks(const GemmShape& s) {
  return s.bits == 8 ? s.block_size % gemm_slab_k(8) == 0 : s.block_size == wgmma_slab_k(64, 4, true) / 2;
}
inline bool fused_gemm_takes_halves(const GemmShape& s, const GemmConfig& g, const GemmForced& forced) {
  if (forced.halves == 0 || !g.wgmma || !gemm_small_tile(g.tile_m) || !fused_gemm_halves_blocks(s) ||
      s.row_bytes <= kGemmSlabBytes)
    return false;
  if (forced.halves == 1) return true;
  // 4-bit: the split's whole slabs load their blocks' constants as vectors where k_blocks
  // is a multiple of the blocks a slab holds (wgmma_consts; the launcher also checks the
  // rows' alignment).
  const int64_t k_blocks = (s.row_bytes * 8 / s.bits + s.block_size - 1) / s.block_size;
  const bool split_vectors = s.bits == 4 && k_blocks % (wgmma_slab_k(64, 4) / s.block_size) == 0;
  return g.k_split == 2 && !(s.fp8 && s.bf16) && !split_vectors;
}

// Weight bytes of each row per pipeline stage of `g`'s mainloop: mma.sync's slab, or the
// wgmma tile's (wgmma_slab_bytes).
inline int64_t gemm_stage_row_bytes(const GemmConfig& g, int bits) {
  return g.wgmma ? wgmma_slab_bytes(g.tile_m, bits, g.tile_n == kKHalvesTileN) : kGemmSlabBytes;
}

// Scale blocks per weight row per stage of slab_k of K as mma.sync's tile sees them (its
// kConsts, cuda/gemm/fused_gemm.cuh): 1 or 2 loaded ahead, 8 loaded per chunk where used.
inline int gemm_consts(int64_t block_size, int64_t slab_k) {
  return block_size % slab_k == 0 ? 1 : block_size % (slab_k / 2) == 0 ? 2 : 8;
}
// The scale blocks of each weight row a stage of the wgmma mainloop's `g` holds: 1, 2, 4
// or 8 (blocks of one 16-byte chunk of a whole slab), or 0 for blocks under a chunk.
inline int wgmma_stage_blocks(const GemmConfig& g, int bits, int64_t block_size) {
  const int64_t stage_k = gemm_stage_row_bytes(g, bits) * 8 / bits;
  const int64_t chunk_k = 16 * 8 / bits;
  for (int c = 1; c <= 8 && stage_k / c >= chunk_k; c *= 2)
    if (block_size % (stage_k / c) == 0) return c;
  return 0;
}
// wgmma_consts' flag on a form of 4 or 8 blocks a stage: each weight row's scales and zero
// points of the stage loaded as one vector each (else one block at a time).
constexpr int kWgmmaVectorConsts = 16;
// How the wgmma mainloop's consumers get a weight row's block constants (its kForm,
// cuda/gemm/fused_wgmma.cuh), by the blocks a stage of `g` holds: 1, 2 or 4, loaded as
// stored a stage ahead; on whole slabs (tiles of 64 rows or fewer), 4 or 8 |
// kWgmmaVectorConsts, as vectors a stage ahead, where `vectors` (the launcher's check: k_blocks a multiple of
// them and the constants' rows aligned); else 0, loaded per chunk where used (8 loaded one
// at a time a stage ahead were slower than that).
inline int wgmma_consts(const GemmConfig& g, int bits, int64_t block_size, bool vectors) {
  const int blocks = wgmma_stage_blocks(g, bits, block_size);
  if (blocks <= 2) return blocks;
  if (vectors && gemm_small_tile(g.tile_m) && g.tile_n != kKHalvesTileN) return blocks | kWgmmaVectorConsts;
  return blocks == 4 ? 4 : 0;
}

// The wgmma mainloop's commit groups a stage: groups of 8 k16 steps (128 K), or the whole
// stage (tile 256's 64 K) as one.
constexpr int wgmma_stage_groups(int tile_m, int bits, bool halves = false) {
  const int64_t steps = wgmma_slab_k(tile_m, bits, halves) / 16;
  return static_cast<int>(steps < 8 ? 1 : steps / 8);
}
// Whether the wgmma mainloop applies N-bit codes' block scales to each commit group's
// float32 sums, the codes decoded as the exact q - zp (FusedWgmmaTile::kFold), rather than
// to each weight rounded to T: tiles of 32 rows or fewer (at 64 rows the fold's
// multiply-adds match the multiplies it saves), every group in one block (one or two
// blocks a stage of `form`, wgmma_consts', at most one a group), integer zero points.
constexpr bool wgmma_folds_nbits_scales(int tile_m, int bits, int form, bool typed_zp, bool halves = false) {
  const int blocks = form & ~kWgmmaVectorConsts;
  return tile_m <= 32 && !typed_zp && (form & kWgmmaVectorConsts) == 0 && blocks >= 1 &&
         blocks <= wgmma_stage_groups(tile_m, bits, halves);
}

// A fused GEMM kernel, as its launcher picks one (cuda/gemm/fused_gemm.cuh,
// launch_gemm_format): the mainloop, the activation rows per block, how the block
// constants reach the decode (gemm_consts on mma.sync, wgmma_consts) and, on the wgmma
// tiles of 64 rows or fewer, K halves.
struct GemmKernelKey {
  bool wgmma = false;
  int tile_m = 0;
  int consts = 0;
  bool halves = false;
  constexpr bool operator==(const GemmKernelKey& o) const {
    return wgmma == o.wgmma && tile_m == o.tile_m && consts == o.consts && halves == o.halves;
  }
};
// The kernel a launch of `g` takes for codes of `bits` in blocks of `block_size`; `vectors`:
// the launcher's check that each row's constants of a stage are aligned vectors.
inline GemmKernelKey gemm_kernel_key(const GemmConfig& g, int bits, int64_t block_size, bool vectors) {
  if (!g.wgmma) return {false, g.tile_m, gemm_consts(block_size, gemm_stage_row_bytes(g, bits) * 8 / bits), false};
  return {true, g.tile_m, wgmma_consts(g, bits, block_size, vectors), g.tile_n == kKHalvesTileN};
}
inline std::string gemm_kernel_name(const GemmKernelKey& k) {
  std::string s = std::string(k.wgmma ? "wgmma" : "mma.sync") + " tile_m " + std::to_string(k.tile_m) + ", ";
  s += k.wgmma ? std::to_string(k.consts & ~kWgmmaVectorConsts) + " scale blocks a stage" +
                     (k.consts & kWgmmaVectorConsts ? " as vectors" : "")
               : std::to_string(k.consts) + " scale blocks a slab";
  return k.halves ? s + ", K halves" : s;
}

// The fused GEMM's kernels: the launchers build exactly these, each for every activation
// type and zero-point form of its weight format, and nothing else (visit_gemm_kernel). On
// mma.sync, tiles 16, 32 and 64 with 1, 2 or 8 blocks' constants a slab; on wgmma, FP8's
// tiles 16 to 128 with one block a slab, and N-bit codes' tiles 16, 32 and 64 in every
// constant form, 128 with 1 or 2 blocks a stage and 256 with 1; K halves on tiles 16, 32
// and 64 with 8-bit codes (and FP8) one block a slab, 4-bit codes two blocks a half-slab
// stage.
inline constexpr GemmKernelKey kMmaGemmKernels[] = {
    {false, 16, 1}, {false, 16, 2}, {false, 16, 8}, {false, 32, 1}, {false, 32, 2},
    {false, 32, 8}, {false, 64, 1}, {false, 64, 2}, {false, 64, 8}};
// The scale blocks a stage of K halves holds (fused_gemm_halves_blocks says which blocks):
// 8-bit codes (and FP8) one (blocks of whole slabs), 4-bit codes two (blocks of 64 in
// half-slab stages).
constexpr int k_halves_consts(int bits) { return bits == 8 ? 1 : 2; }
inline constexpr GemmKernelKey kFp8WgmmaKernels[] = {
    {true, 16, 1}, {true, 32, 1}, {true, 64, 1}, {true, 128, 1},
    {true, 16, k_halves_consts(8), true}, {true, 32, k_halves_consts(8), true}, {true, 64, k_halves_consts(8), true}};
constexpr std::array<GemmKernelKey, 24> nbits_wgmma_kernels(int bits) {
  std::array<GemmKernelKey, 24> list{};
  size_t i = 0;
  for (const int tile_m : {16, 32, 64})
    for (const int consts : {0, 1, 2, 4, 4 | kWgmmaVectorConsts, 8 | kWgmmaVectorConsts})
      list[i++] = {true, tile_m, consts};
  for (const int tile_m : {16, 32, 64}) list[i++] = {true, tile_m, k_halves_consts(bits), true};
  list[i++] = {true, 128, 1};
  list[i++] = {true, 128, 2};
  list[i++] = {true, 256, 1};
  return list;
}
inline constexpr auto kInt8WgmmaKernels = nbits_wgmma_kernels(8);
inline constexpr auto kInt4WgmmaKernels = nbits_wgmma_kernels(4);

// Calls f(std::integral_constant<size_t, I>{}) for the first index I of kList holding
// `key`, and says whether there was one: a launcher instantiates one kernel per entry of
// its list through this, so the lists above are the built kernels.
template <const auto& kList, typename F, size_t... I>
bool visit_gemm_kernel(const GemmKernelKey& key, F&& f, std::index_sequence<I...>) {
  return ((kList[I] == key && (f(std::integral_constant<size_t, I>{}), true)) || ...);
}
template <const auto& kList, typename F>
bool visit_gemm_kernel(const GemmKernelKey& key, F&& f) {
  return visit_gemm_kernel<kList>(key, std::forward<F>(f), std::make_index_sequence<std::size(kList)>{});
}

// Whether a kernel is built for `key` and weights of `bits` (FP8: `fp8`).
inline bool gemm_kernel_built(const GemmKernelKey& key, int bits, bool fp8) {
  const auto noop = [](auto) {};
  if (!key.wgmma) return visit_gemm_kernel<kMmaGemmKernels>(key, noop);
  if (fp8) return visit_gemm_kernel<kFp8WgmmaKernels>(key, noop);
  return bits == 8 ? visit_gemm_kernel<kInt8WgmmaKernels>(key, noop) : visit_gemm_kernel<kInt4WgmmaKernels>(key, noop);
}

// The whole tiling for problem `s` on `device`: the mainloop and tile, then the K split
// (forced values kept; the stages and the K split follow a forced tile_m).
inline GemmConfig plan_gemm_tiles(const GemmShape& s, const DeviceInfo& device,
                                  const GemmForced& forced = {}) {
  GemmConfig g;
  g.tile_n = kGemmTileN;
  choose_gemm_mainloop(s, device, forced, &g);
  const int64_t tiles = gemm_tiles(s.m, s.n, g.tile_m);
  const int64_t slabs = (s.row_bytes + kGemmSlabBytes - 1) / kGemmSlabBytes;
  const int per_sm = g.wgmma ? 1 : gemm_blocks_per_sm(g.tile_m, s.bits, device.sm);
  const int64_t resident = std::max(1, device.num_sms) * static_cast<int64_t>(per_sm);
  const int fill_slabs =
      static_cast<int>((g.stages * gemm_stage_row_bytes(g, s.bits) + kGemmSlabBytes - 1) / kGemmSlabBytes);
  g.k_split = forced.k_split > 0 ? forced.k_split : choose_gemm_k_split(tiles, slabs, resident, fill_slabs);
  if (fused_gemm_takes_halves(s, g, forced)) {
    g.tile_n = kKHalvesTileN;  // twice the tiles: the rule's split halved (a forced one kept)
    if (forced.k_split <= 0) g.k_split = std::max(1, g.k_split / 2);
    g.stages = wgmma_stages(g.tile_m, s.bits, true);
  }
  g.cluster_reduce = fused_gemm_cluster_sums(s, g, forced);
  return g;
}

// What the fused GEMM needs of either operator's problem (Fp8MatMulProblem,
// NBitsMatMulProblem) besides its weight layout, which each planner checks itself: why it
// does not take `p` on `d`, or nullptr. `forced`: the plan override's gemm key (-1 unset,
// 0 never, 1 wherever it applies, M <= 8 included); `max_rows`: gemm_max_rows of the
// problem (kGemmMaxRows or kWgmmaTallMaxRows). Reasons in the planner's order:
template <typename Problem>
const char* gemm_common_refusal(const Problem& p, const DeviceInfo& d, int forced,
                                int64_t max_rows = kGemmMaxRows) {
  if (p.m == 0 || p.n == 0) return "empty output";
  if (p.k == 0) return "K == 0: Y = bias";
  if (forced == 0) return "gemm=0 (plan override)";
  // The decode GEMV streams each weight row once for M <= 8 rows, at the mma's N extent.
  if (p.m <= kGemvMaxRows && forced != 1) return "M <= 8 (the decode GEMV's rows)";
  // Above kGemmMaxRows the mma.sync tiles' compute loses to dequant + cuBLAS (measured);
  // the wgmma mainloop's 256-row tile goes to kWgmmaTallMaxRows.
  static_assert(kGemmMaxRows == 128 && kWgmmaTallMaxRows == 256, "the reasons below name the bounds");
  if (p.m > max_rows)
    return max_rows == kGemmMaxRows ? "M > 128 (kGemmMaxRows): dequant + cuBLAS is faster there"
                                    : "M > 256: beyond the wgmma mainloop's 256-row tile";
  // mma.m16n8k16 on float16 / bfloat16 and cp.async: SM80's tensor cores.
  if (d.sm < 80) return "tensor cores need SM80+";
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "float32 activations (tensor cores take float16 / bfloat16)";
  // 16-byte activation loads: rows of A of whole 8-element chunks, aligned pointers.
  if (p.k % 8 != 0) return "K % 8 != 0";
  if (p.alignment < 16) return "pointers not 16-byte aligned";
  // The kernel's 32-bit row and chunk counters.
  if (p.m >= (int64_t{1} << 31) || p.k / 16 >= (int64_t{1} << 31)) return "M or K beyond 2^31";
  return nullptr;
}

}  // namespace bqmm
