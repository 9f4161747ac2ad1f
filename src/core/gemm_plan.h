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
#include <limits>

#include "bqmm/device.h"
#include "bqmm/plan_parts.h"
#include "bqmm/tensor.h"
#include "core/gemv_split.h"

namespace bqmm {

// The most activation rows both planners give the fused GEMM; above, dequant + cuBLAS.
// No bound yet: measurements against dequant + cuBLAS on the prefill shapes will set it.
constexpr int64_t kGemmMaxRows = std::numeric_limits<int64_t>::max();

constexpr int kGemmTileN = 128;              // output columns per block
constexpr int64_t kGemmSlabBytes = 128;      // weight bytes per row per stage
constexpr int kGemmMaxKSplit = 16;
constexpr int kGemmMaxStages = 4;
// Shared memory a block may take on every SM80+ device the library builds for (A100:
// 163 KB per block, H100 / H200: 227 KB).
constexpr int64_t kGemmMaxSmemBytes = 160 * 1024;

constexpr int64_t gemm_slab_k(int bits) { return kGemmSlabBytes * 8 / bits; }

// The activation tile's row pitch in shared memory: the slab's halves plus a pad that
// makes the B-fragment loads conflict-free (cuda/gemm/fused_gemm.cuh says how).
constexpr int64_t gemm_act_pitch_bytes(int bits) {
  return gemm_slab_k(bits) * 2 + (bits == 4 ? 64 : 32);
}
constexpr int64_t gemm_stage_bytes(int tile_m, int bits) {
  return kGemmTileN * kGemmSlabBytes + tile_m * gemm_act_pitch_bytes(bits);
}
// As many stages as fit (at most kGemmMaxStages).
constexpr int gemm_stages(int tile_m, int bits) {
  return static_cast<int>(std::min<int64_t>(kGemmMaxStages,
                                            kGemmMaxSmemBytes / gemm_stage_bytes(tile_m, bits)));
}
constexpr int64_t gemm_smem_bytes(int tile_m, int bits) {
  return gemm_stages(tile_m, bits) * gemm_stage_bytes(tile_m, bits);
}

// The smallest instantiated tile_m (16, 32, 64) holding M rows; 64 above.
constexpr int gemm_tile_m(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }

// The K split: blocks of the (M, N) tile grid are too few to keep every SM streaming when
// tiles < SMs; split K (a power of two) until the grid covers the SMs once, keeping at
// least kGemmMinSlabsPerSplit slabs per block so that each block's pipeline fills.
constexpr int64_t kGemmMinSlabsPerSplit = 4;
inline int choose_gemm_k_split(int64_t tiles, int64_t slabs, int num_sms) {
  int split = 1;
  while (split < kGemmMaxKSplit && tiles * split < std::max(1, num_sms) &&
         slabs / (2 * split) >= kGemmMinSlabsPerSplit)
    split *= 2;
  return split;
}

// The whole tiling for an M x N x K problem of `bits`-bit weights on `num_sms` SMs.
// `tile_m`, `k_split`: forced values (the plan override's tile_m, gemm_k_split), or 0 for
// the rule's; the stages and the K split follow a forced tile_m.
inline GemmConfig plan_gemm_tiles(int64_t m, int64_t n, int64_t k, int bits, int num_sms,
                                  int tile_m = 0, int k_split = 0) {
  GemmConfig g;
  g.tile_m = tile_m > 0 ? tile_m : gemm_tile_m(m);
  g.tile_n = kGemmTileN;
  g.stages = gemm_stages(g.tile_m, bits);
  const int64_t tiles = ((m + g.tile_m - 1) / g.tile_m) * ((n + g.tile_n - 1) / g.tile_n);
  const int64_t slabs = (k + gemm_slab_k(bits) - 1) / gemm_slab_k(bits);
  g.k_split = k_split > 0 ? k_split : choose_gemm_k_split(tiles, slabs, num_sms);
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
  if (p.m > kGemmMaxRows) return "M above kGemmMaxRows";
  // mma.m16n8k16 on float16 / bfloat16 and cp.async: SM80's tensor cores.
  if (d.sm < 80) return "tensor cores need SM80+";
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "float32 activations (tensor cores take float16 / bfloat16)";
  // 16-byte activation loads: rows of A of whole 8-element chunks, aligned pointers.
  if (p.k % 8 != 0) return "K % 8 != 0";
  if (p.alignment < 16) return "pointers not 16-byte aligned";
  return nullptr;
}

}  // namespace bqmm
