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
#include <cstdint>

#include "bqmm/device.h"
#include "bqmm/plan_parts.h"
#include "bqmm/tensor.h"
#include "core/gemv_split.h"

namespace bqmm {

// The most activation rows both planners give the fused GEMM; above, dequant + cuBLAS.
// Measured on the H200 (fp16, block 128, back to back, 8192 x 8192): the fused GEMM's
// mma.sync tiles run at 170-220 TFLOP/s, so it wins while the weight stream weighs most:
// M = 128 FP8 79 us against 91 for dequant + cuBLAS, 8-bit 89 against 110, 4-bit 100
// against 109; at M = 256 it would take about twice that against 100-120.
constexpr int64_t kGemmMaxRows = 128;

constexpr int kGemmTileN = 128;              // output columns per block
constexpr int64_t kGemmSlabBytes = 128;      // weight bytes per row per stage
constexpr int kGemmWarps = 8;                // warps per block, every tile
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

// The smallest instantiated tile_m (16, 32, 64) holding M rows; 64 above.
constexpr int gemm_tile_m(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }

// The K split. A block's time is about (its slabs + the pipeline's fill of `stages`
// slabs); the grid runs in waves of (SMs x resident blocks), and a partial last wave costs
// a whole one. The split (a power of two up to kGemmMaxKSplit, at most one per slab) with
// the least (waves x block time) wins, the smaller on a tie: each split also writes and
// re-reads an M x N float32 plane.
inline int64_t gemm_split_cost(int64_t tiles, int64_t slabs, int64_t resident, int stages,
                               int split) {
  const int64_t waves = (tiles * split + resident - 1) / resident;
  return waves * ((slabs + split - 1) / split + stages);
}
inline int choose_gemm_k_split(int64_t tiles, int64_t slabs, int64_t resident, int stages) {
  int best = 1;
  int64_t best_cost = gemm_split_cost(tiles, slabs, resident, stages, 1);
  for (int split = 2; split <= kGemmMaxKSplit && split <= slabs; split *= 2) {
    const int64_t cost = gemm_split_cost(tiles, slabs, resident, stages, split);
    if (cost < best_cost) {
      best = split;
      best_cost = cost;
    }
  }
  return best;
}

// The whole tiling for an M x N problem of `bits`-bit weights (rows of `row_bytes`) on
// `device`. `tile_m`, `k_split`: forced values (the plan override's tile_m, gemm_k_split),
// or 0 for the rule's; the stages and the K split follow a forced tile_m.
inline GemmConfig plan_gemm_tiles(int64_t m, int64_t n, int64_t row_bytes, int bits,
                                  const DeviceInfo& device, int tile_m = 0, int k_split = 0) {
  GemmConfig g;
  g.tile_m = tile_m > 0 ? tile_m : gemm_tile_m(m);
  g.tile_n = kGemmTileN;
  g.stages = gemm_stages(g.tile_m, bits);
  const int64_t tiles = ((m + g.tile_m - 1) / g.tile_m) * ((n + g.tile_n - 1) / g.tile_n);
  const int64_t slabs = (row_bytes + kGemmSlabBytes - 1) / kGemmSlabBytes;
  const int64_t resident =
      std::max(1, device.num_sms) * static_cast<int64_t>(gemm_blocks_per_sm(g.tile_m, bits, device.sm));
  g.k_split = k_split > 0 ? k_split : choose_gemm_k_split(tiles, slabs, resident, g.stages);
  return g;
}

// What the fused GEMM needs of either operator's problem (Fp8MatMulProblem,
// NBitsMatMulProblem) besides its weight layout, which each planner checks itself: why it
// does not take `p` on `d`, or nullptr. `forced`: the plan override's gemm key (-1 unset,
// 0 never, 1 wherever it applies, M <= 8 included). Reasons in the planner's order:
template <typename Problem>
const char* gemm_common_refusal(const Problem& p, const DeviceInfo& d, int forced) {
  if (p.m == 0 || p.n == 0) return "empty output";
  if (p.k == 0) return "K == 0: Y = bias";
  if (forced == 0) return "gemm=0 (plan override)";
  // The decode GEMV streams each weight row once for M <= 8 rows, at the mma's N extent.
  if (p.m <= kGemvMaxRows && forced != 1) return "M <= 8 (the decode GEMV's rows)";
  // Above kGemmMaxRows the mma.sync tiles' compute loses to dequant + cuBLAS (measured).
  static_assert(kGemmMaxRows == 128, "the reason below names the bound");
  if (p.m > kGemmMaxRows) return "M > 128 (kGemmMaxRows): dequant + cuBLAS is faster there";
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
