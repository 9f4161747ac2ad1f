// NBitsMatMul planner: a pure function of (problem, device, options[, override]).
// Dispatch chain, cheapest applicable path first:
//   empty output -> K == 0 (bias only) -> fused decode GEMV for M <= 8 (its row group of
//   16 rows to M = 16) -> mixed-input GEMM for M > 256, or from 65 rows where the fused GEMM
//   is not the faster (SM90) -> fused GEMM for 8 < M <= kGemmMaxRows (to 256 on the wgmma
//   mainloop's 256-row tile) -> dequantize + cuBLAS.
// The GEMV streams the packed weight once for all M <= 8 rows, the fused GEMM once per
// block column of up to 256 rows (its tile_m); everything they do not take (g_idx,
// float32 above 8 rows and float32 with typed zero points, unaligned rows; the GEMV also
// a partial last block) goes through the dequant + cuBLAS path, which handles every valid
// input.
//
// The GEMV has four kernels (DESIGN.md): the CUDA-core kernel (8-bit, M <= 2), the
// register-load tensor-core tile (three K-loop algorithms; float32 on CUDA cores), the
// TMA tile (SM90) and the whole-window kernel, whose weights come by line loads where
// rows are whole 128-byte lines, with one or two 16-column tiles per warp. Each choice
// below is one small function, its comment the reason (an H200 measurement where one
// decided it).
#include <algorithm>
#include <limits>
#include <ostream>
#include <string>

#include "bqmm/nbits_matmul.h"
#include "core/check.h"
#include "core/env.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/gemv_split.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"
#include "core/plan_print.h"
#include "core/workspace.h"

namespace bqmm {
namespace {

constexpr int64_t kGemvFmaMaxRows = 2;  // the CUDA-core kernel's instantiated row groups
// Warps of float32's FMA tile an SM holds at once (up to 255 registers per thread).
constexpr int64_t kGemvWarpsPerSmFloat = 8;

Status invalid(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }

// What the GEMV rules below look at, computed once per problem.
struct GemvFacts {
  bool half = false;        // float16 / bfloat16: tensor cores (float32: CUDA cores)
  bool fp16 = false;
  bool bf16 = false;
  bool zp = false;          // packed zero points (asymmetric checkpoints)
  bool typed_zp = false;    // typed (fractional) zero points: the register tile only
  bool large = false;       // N x K >= 128 Mi codes (gemv_tma_pays)
  bool many_tiles = false;  // more 16-column tiles than 16 warps per SM hold at k_split 8
  bool many_tile_pairs = false;  // the same of two-tile (32-column) blocks
  int64_t window_codes = 0;  // codes of one 64-byte window: 128 4-bit, 64 8-bit
};

GemvFacts gemv_facts(const NBitsMatMulProblem& p, const DeviceInfo& d) {
  GemvFacts f;
  f.half = p.dtype != DType::kFloat32;
  f.fp16 = p.dtype == DType::kFloat16;
  f.bf16 = p.dtype == DType::kBFloat16;
  f.zp = p.zero_points == NBitsZeroPoints::kPacked;
  f.typed_zp = p.zero_points == NBitsZeroPoints::kTyped;
  f.large = gemv_tma_pays(p.n, p.k);
  const int64_t tiles = (p.n + kGemvTileCols - 1) / kGemvTileCols;
  // More column blocks than 16 warps per SM hold at k_split 8.
  auto overfill = [&](int64_t blocks) {
    return blocks * kGemvMaxKSplit > kGemvTensorCoreWarpsPerSm * std::max(1, d.num_sms);
  };
  f.many_tiles = overfill(tiles);
  f.many_tile_pairs = overfill((tiles + 1) / 2);
  f.window_codes = kGemvWindowBytes * 8 / p.bits;
  return f;
}

// The fused GEMV applies: blocks by position (no g_idx), whole blocks, rows of B that take
// 16-byte loads, 16-byte aligned A and B, 32-bit K counters; the tensor cores (float16 /
// bfloat16) need SM80. Typed (fractional) zero points only at decode rows on the tensor
// cores (the register tile, which scales each weight: q * scale - zp * scale).
bool gemv_applies(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  const bool typed_ok = p.dtype != DType::kFloat32 && p.m <= kGemvMaxRows;
  return o.gemv != 0 && p.m <= kGemvFusedMaxRows && !p.has_g_idx &&
         (p.zero_points != NBitsZeroPoints::kTyped || typed_ok) && p.k % p.block_size == 0 &&
         p.row_bytes() % kGemvChunkBytes == 0 && p.alignment >= 16 &&
         p.k <= std::numeric_limits<int32_t>::max() &&
         (p.dtype == DType::kFloat32 || d.sm >= 80);
}

// Rows of whole 128-byte lines, blocks of a 16-byte chunk or more, and on blocks of one
// window 4-byte aligned scales (a row's two scales of a pair come as one load): the window
// kernel can take its weights by line loads.
bool lines_apply(const NBitsMatMulProblem& p, const GemvFacts& f, bool whole_windows) {
  return whole_windows && p.block_size >= kGemvChunkBytes * 8 / p.bits &&
         p.row_bytes() % kGemvTmaTileBytes == 0 &&
         (p.block_size != f.window_codes || p.scale_alignment >= 4);
}

// The window kernel's largest blocks (nbits_window_max_k_split: 16 or 12 warps) pay on
// rows of at least 96 windows (6 a warp at 16).
constexpr int64_t kNBitsLargeSplitMinWindows = 6 * kNBitsWindowMaxKSplit;
bool long_rows(const NBitsMatMulProblem& p) {
  return p.row_bytes() / kGemvWindowBytes >= kNBitsLargeSplitMinWindows;
}

// Blocks of 12 warps (the one-tile window kernel at 80 registers, 24 warps per SM): 8-bit
// bfloat16 codes by line loads at M = 2..8 on grids a split of 8 leaves at 16 warps per SM
// (not many_tiles) with rows of at least 96 windows. Measured on the H200 (same run,
// against the plans before): 4096 x 14336 M = 2 9 % faster than the CUDA-core kernel, M = 4
// and 8 5 % faster than line loads at a split of 8, with packed zero points M = 4 3 %;
// 4096 x 4096 (32 line pairs) even. 4-bit with packed zero points (the window kernel at 12
// in the register tile's place) -2 to +3 %: not taken.
bool split12_faster(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return p.bits == 8 && f.bf16 && p.m >= 2 && !f.many_tiles && long_rows(p);
}

// The CUDA-core kernel (8-bit, M <= 2): faster at M = 1, and at M = 2 in bfloat16 (whose
// tensor-core decode goes through float32) except where line loads take bfloat16 M = 2
// (zero points, large weights, grids of many tiles: 3-10 % faster there; split12_faster's
// long rows on small grids, in blocks of 12 warps: 9 %). Not when the
// algorithm or TMA tiles are forced: those choose among the tensor-core kernels.
bool choose_fma(const NBitsMatMulProblem& p, const GemvFacts& f, const PlanOverride& o) {
  const bool applies = f.half && p.bits == 8 && p.m <= kGemvFmaMaxRows && !f.typed_zp;
  const bool bf16_lines_at_two_rows = f.bf16 && p.m == 2 &&
                                      (f.zp || f.large || f.many_tiles || split12_faster(p, f)) &&
                                      p.row_bytes() % kGemvTmaTileBytes == 0 &&
                                      o.window != 0 && o.lines != 0;
  const bool faster = p.m == 1 || (f.bf16 && !bf16_lines_at_two_rows);
  return applies && (o.fma == 1 || (o.fma < 0 && faster && o.algo < 0 && o.tma < 0));
}

// The K-loop algorithm: the unrolled loop (0) was fastest at every block size on the H200
// (8-bit 28-31 % over the plain loop, 4-bit 10-29 %); 1 and 2 stay selectable.
int choose_algo(const PlanOverride& o) { return o.algo >= 0 ? o.algo : kNBitsGemvAlgoUnrolled; }

// Activation rows per warp tile: the mma tile always has 8; float32's FMA tile is sized
// to M.
int choose_rows(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return f.half || p.m > 4 ? 8 : p.m > 2 ? 4 : static_cast<int>(p.m);
}

// TMA tiles apply on SM90 to the tensor-core tile with blocks of at least half a
// 128-byte tile (each half takes one scale).
bool tma_applies(const NBitsMatMulProblem& p, const DeviceInfo& d, const GemvFacts& f) {
  const int64_t half_tile_codes = kGemvTmaTileBytes / 2 * 8 / p.bits;
  return f.half && p.block_size >= half_tile_codes && gemv_tma_fits(d.sm, p.n, p.row_bytes());
}

// TMA tiles pay on large weights (a long stream per warp amortizes their start); 8-bit
// only to M = 4 (at M = 8 the activations' L1 traffic made them 12 % slower).
bool tma_faster(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return f.large && (p.bits == 4 || p.m <= 4);
}

// 4-bit blocks below a window (32 or 64 codes): the window kernel without line loads does
// not take them, so the block-128 rules below leave these problems on the register tile,
// which loads a scale (and a zero point) every block. Line loads instead, measured on an
// H100 (same-run sweeps, two repeats, scripts/sweep_cases/nbits4_small_blocks_lines.txt
// and nbits4_small_blocks_rule.txt, against the register tile):
// * packed zero points: one tile at M <= 4 0.88-0.96x the time (4096 x 4096, 4096 x 14336,
//   8192 x 8192), and at M = 8 on rows of 96 windows or more (4096 x 14336 0.955x; 4096 x
//   4096 1.02x); two tiles at M = 8 on grids of many tiles (8192 x 8192 0.90x);
// * without: on rows of 96 windows or more and grids of few tiles (4096 x 14336), one tile
//   at M <= 4 0.95-0.98x and two tiles at M > 4 0.91-0.93x (4096 x 4096: 1.04x, kept on
//   the register tile); grids of many tiles take two tiles below at every M.
bool small_block_rows(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return p.bits == 4 && p.block_size < f.window_codes;
}
bool small_block_two_tiles(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return small_block_rows(p, f) && p.m > 4 && (f.zp ? f.many_tiles : long_rows(p) && !f.many_tiles);
}
bool small_block_lines(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return small_block_rows(p, f) && (f.zp ? p.m <= 4 || long_rows(p) : long_rows(p) && !f.many_tiles);
}

// Two 16-column tiles per warp (line loads only): where measured faster than one tile
// (H200). Smaller grids lose (the grid halves).
// * Packed zero points: on large weights 4-bit and 8-bit float16 (6-20 %); 4-bit also on
//   grids of many tile pairs (N > 8448 on 132 SMs), against the register tile at M = 1, 4,
//   8, both types: 10240 x 4096 24-27 % faster, 14336 x 4096 4-11 %, 28672 x 4096 12-17 %;
//   at N = 8192 1-8 % slower with K = 4096, 2-5 % faster with K = 8192; 6144 x 4096 5-15 %
//   and 5120 x 8192 bfloat16 7-10 % slower.
// * Without: on large weights 4-bit at every M, 8-bit from M = 2 (float16) or 5 (bfloat16)
//   (2-17 %); on grids of many tiles 4-bit above M = 4 or with blocks smaller than a
//   window, 8-bit bfloat16 (2-16 %).
bool two_tiles_faster(const NBitsMatMulProblem& p, const GemvFacts& f) {
  if (f.zp) return p.bits == 4 ? f.large || f.many_tile_pairs || small_block_two_tiles(p, f) : f.large && f.fp16;
  if (f.large) return p.bits == 4 || p.m >= (f.fp16 ? 2 : 5);
  return (f.many_tiles && (p.bits == 4 ? p.m > 4 || small_block_rows(p, f) : !f.fp16)) ||
         small_block_two_tiles(p, f);
}

// Line loads (4 rows x 128 bytes per warp instruction, the shape that streams fastest):
// with two tiles; 4-bit at M <= 4 (M <= 2 with zero points) on large weights (10-20 %
// faster; at M = 8 the L1 is busy with activations) and in blocks below a window where
// small_block_lines says (above); 8-bit wherever the tensor cores run,
// but float16 where TMA tiles pay (they were 0.3-3 % faster there with one tile).
bool lines_faster(const NBitsMatMulProblem& p, const DeviceInfo& d, const GemvFacts& f,
                  bool two_tiles) {
  if (two_tiles) return true;
  if (p.bits == 4) return (p.m <= (f.zp ? 2 : 4) && f.large) || small_block_lines(p, f);
  return f.bf16 || !(tma_applies(p, d, f) && tma_faster(p, f));
}

// The window kernel without line loads: 4-bit without zero points where the grid has more
// warps than the 128-register tiles hold (5-19 % faster there, up to 7 % slower on small
// grids); with zero points or 8-bit it lost everywhere.
bool window_faster(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return p.bits == 4 && f.many_tiles && !f.zp;
}

// The window kernel at a K split of up to 16 warps (kNBitsWindowMaxKSplit; 4-bit, no zero
// points, no line loads: 64 registers, 32 warps per SM) on rows of at least 6 windows a
// warp at 16. The plan's model may then split by 16 (window_split16); the planner takes it
// where the register tile's grid is small (not many_tiles: a split of 8 fills at most its
// 16 warps per SM, half the window kernel's 32; window_split16_faster). Measured on the
// H200 against the register tile (two same-run A/Bs): 4096 x 14336 (7 windows a warp)
// float16 M = 1..4 8-11 % faster, M = 8 5-6 %, bfloat16 M = 1..4 4-7 %, M = 8 even; with 2
// windows a warp (4096 x 4096) 4-15 % slower, and at 6144 x 4096 (two waves) 39-43 %.
bool split16_rows(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return p.bits == 4 && !f.zp && long_rows(p);
}
bool window_split16(const NBitsMatMulProblem& p, const GemvFacts& f, const GemvConfig& g) {
  return g.window && !g.lines && split16_rows(p, f);
}
bool window_split16_faster(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return split16_rows(p, f) && !f.many_tiles;
}

// Rows of whole 64-byte windows for algorithm 0 on the tensor cores: the window kernel's
// domain.
bool whole_windows(const NBitsMatMulProblem& p, const GemvFacts& f, int algo) {
  return f.half && algo == kNBitsGemvAlgoUnrolled && p.row_bytes() % kGemvWindowBytes == 0;
}

// M > 8 (row groups): only the window kernel with line loads has them.
bool row_groups_fit(const NBitsMatMulProblem& p, const GemvFacts& f, const PlanOverride& o) {
  return p.m > kGemvMaxRows && lines_apply(p, f, whole_windows(p, f, choose_algo(o))) &&
         o.window != 0 && o.lines != 0 && o.tma != 1;
}

// The fused GEMM's view of the problem: rows of `bits`-bit codes.
GemmShape gemm_shape(const NBitsMatMulProblem& p) {
  return {p.m, p.n, p.row_bytes(), static_cast<int>(p.bits), false, p.block_size, p.dtype == DType::kBFloat16};
}

// The fused GEMM's reasons not to take a problem, but for the row group's preference
// (below): both operators' conditions (gemm_common_refusal: M > 8, SM80+, float16 /
// bfloat16, aligned rows of whole 8-element chunks), then the N-bit weight layout it
// decodes: blocks by position (g_idx's act order needs a gather of scales per k: dequant
// + cuBLAS) and rows of B of whole 16-byte chunks (its cp.async loads). Every zero-point
// form: packed and default ones decode as round_T((q - zp) * scale) (or, where
// wgmma_folds_nbits_scales, as q - zp with the scale on float32 sums), typed (fractional)
// ones as round_T(q * scale + round_T(-zp * scale)), the decode GEMV's and the mixed-input
// GEMM's form. A partial last block is within the launcher's contract (cuda/launchers.h:
// K % 8 == 0 and rows of whole 16-byte chunks, padding included).
const char* fused_gemm_common_refusal(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return gemm_common_refusal(p, d, o.gemm, gemm_max_rows(gemm_shape(p), d, gemm_forced(o)));
}
const char* fused_gemm_layout_refusal(const NBitsMatMulProblem& p) {
  if (p.has_g_idx) return "g_idx (act order)";
  if (p.row_bytes() % 16 != 0) return "rows of B not a multiple of 16 bytes";
  return nullptr;
}

// 4-bit codes in blocks of 128 or more at M = 13..16 where the fused GEMM runs on wgmma
// (SM90): its 16-row tile rather than the row group. H100, back to back, one build
// (scripts/ab_cases/row_group_vs_t16.txt, two runs within 0.5 %): 0.85-0.92x the row
// group's time at M = 16 on the four prefill shapes, both activation types, packed zero
// points 0.81x; M = 12 0.98x, M = 9 1.03x, blocks of 32 1.07x, 8-bit codes 1.17-1.24x
// (blocks of 64 not measured: the row group; of 256 not measured: as 128).
constexpr int64_t kWgmmaTile16MinRows = 13;
bool wgmma_tile_16_preferred(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return p.bits == 4 && p.block_size >= 128 && p.m >= kWgmmaTile16MinRows &&
         fused_gemm_common_refusal(p, d, o) == nullptr && fused_gemm_layout_refusal(p) == nullptr &&
         wgmma_refusal(gemm_shape(p), d, gemm_forced(o)) == nullptr;
}

// One row group (M = 9..16: each decoded word multiplied with two 8-row halves) in the
// fused GEMM's place, unless the GEMM is forced (fused_gemm_forced) or its wgmma tile 16
// is the faster (above): on the H200, back to back, 0.79-0.92x the time of mma.sync's
// tile 16 for 8-bit and 0.80-0.99x for 4-bit on the four prefill shapes (4-bit bfloat16
// 4096 x 14336: 1.01x); docs/DESIGN.md, "Row groups".
bool row_group_preferred(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return p.m <= kGemvGroupRows && !fused_gemm_forced(o) && !wgmma_tile_16_preferred(p, d, o) &&
         gemv_applies(p, d, o) && row_groups_fit(p, gemv_facts(p, d), o);
}

// M > 8 takes the row groups where they fit: up to 16 rows where preferred (above), and
// up to kGemvFusedMaxRows with the fused GEMM forced off (gemm=0).
bool row_groups_apply(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return (o.gemm == 0 && row_groups_fit(p, gemv_facts(p, d), o)) || row_group_preferred(p, d, o);
}

// Tiles per warp of the row groups: two for 4-bit (the decode shared by both tiles'
// activation loads: 1-27 % faster than one tile at M = 16 on the four prefill shapes,
// equal at M = 9) and for 8-bit on large weights or above 16 rows; else one (8-bit
// 4096 x 14336 M = 16 18.9 against 24.4 us with two).
int row_group_tiles(const NBitsMatMulProblem& p, const GemvFacts& f) {
  return p.bits == 4 || f.large || p.m > kGemvGroupRows ? 2 : 1;
}

// The fused GEMM's first reason not to take a problem (above), nullptr where it does.
const char* fused_gemm_refusal(const NBitsMatMulProblem& p, const DeviceInfo& d,
                               const PlanOverride& o) {
  if (const char* why = fused_gemm_common_refusal(p, d, o)) return why;
  static_assert(kGemvGroupRows == 16, "the reason below names the bound");
  if (row_group_preferred(p, d, o)) return "M <= 16: the GEMV's row group of 16 is faster there";
  return fused_gemm_layout_refusal(p);
}

bool fused_gemm_applies(const NBitsMatMulProblem& p, const DeviceInfo& d,
                        const PlanOverride& o) {
  return fused_gemm_refusal(p, d, o) == nullptr;
}

// The weight stream of the tensor-core GEMV: window kernel (with or without line loads,
// one or two tiles) or the register-load tile, and TMA tiles for the latter. Row groups
// (M > 8) take line loads, with two tiles by the same rule. Typed zero points: the
// register-load tile only.
void choose_stream(const NBitsMatMulProblem& p, const DeviceInfo& d, const GemvFacts& f,
                   const PlanOverride& o, GemvConfig* g) {
  if (f.typed_zp) return;  // the register tile (fields 0)
  if (p.m > kGemvMaxRows) {
    g->lines = g->window = true;
    g->tiles = o.tiles > 0 ? o.tiles : row_group_tiles(p, f);
    return;
  }
  const bool windows_ok = whole_windows(p, f, g->algo);
  const bool window_applies = windows_ok && p.block_size >= f.window_codes;
  const bool lines_ok = lines_apply(p, f, windows_ok);
  const bool two_tiles = lines_ok && (o.tiles == 2 || (o.tiles < 0 && two_tiles_faster(p, f)));
  g->lines = lines_ok && o.window != 0 &&
             (o.lines == 1 || (o.lines < 0 && o.tma != 1 && lines_faster(p, d, f, two_tiles)));
  g->window = g->lines ||
              (window_applies &&
               (o.window == 1 || (o.window < 0 && o.tma != 1 &&
                                  (window_faster(p, f) || window_split16_faster(p, f)))));
  g->tiles = g->lines && two_tiles ? 2 : 1;
  g->tma = !g->window && tma_applies(p, d, f) &&
           (o.tma == 1 || (o.tma < 0 && tma_faster(p, f)));
}

// The 4-bit register tile on float16 / bfloat16 (algorithm 0) launches as a programmatic
// dependent of the kernel before it where the caller allows it
// (NBitsMatMulOptions::gemv_dependent_launch, or gemv_pdl=1; SM90 and later): its first
// weights are pulled into L2 while that kernel finishes. Measured on the H200 (one build,
// the 4-bit decode suites without and with packed zero points, gemv_pdl=1 against 0, the
// plain kernel's code unchanged): in chains of the operator alone its 32 cases
// 0.949-1.009x (4096 x 4096 float16 M = 1 6.0 -> 5.8 us; packed 8192 x 8192 bfloat16 M =
// 4 16.2 -> 15.4), but after a kernel that does not let it start early (bqmm-profile
// --between-kernel, scripts/ab_cases/gemv_pdl_between.txt) 1.07-1.17x (4096 x 4096
// float16 M = 1 6.9 -> 7.9 us), and 0.6-1.4 us slower per run between events: so only
// where the caller knows what runs before it. The window kernel
// without line loads was up to 17 % slower as a dependent (14336 x 4096 at k_split 4),
// with line loads -4 to +6 %: it and TMA tiles keep plain launches, as 8-bit does (its
// decode plans never take the register tile).
bool dependent_launch_applies(const NBitsMatMulProblem& p, const DeviceInfo& d,
                              const GemvFacts& f, const GemvConfig& g) {
  return gemv_dependent_launch_possible(d) && p.bits == 4 && f.half &&
         g.algo == kNBitsGemvAlgoUnrolled && !g.fma && !g.tma && !g.window && !f.typed_zp;
}

// Warps of the chosen kernel an SM holds (its launch bounds).
int64_t warps_per_sm(const NBitsMatMulProblem& p, const GemvFacts& f, const GemvConfig& g) {
  if (!f.half) return kGemvWarpsPerSmFloat;
  if (g.window) return nbits_window_warps_per_sm(p.bits, f.zp, f.fp16, g.tiles, p.m > kGemvMaxRows);
  return kGemvTensorCoreWarpsPerSm;
}

// The K split (core/gemv_split.h's wave model) and, with two tiles, the register bound.
// 4-bit two tiles start at a fill of 6 windows (measured across N). On large weights where
// the split leaves one partial wave of >= 3/4 of the resident warps, 4-bit two tiles at
// 128 registers take twice the split in bfloat16 at M <= 4 and in float16 at M = 1
// without zero points (4-9 % faster at 28672 x 8192; 1-13 % slower where the wave is full).
Status choose_k_split(const NBitsMatMulProblem& p, const DeviceInfo& d, const GemvFacts& f,
                      const PlanOverride& o, GemvConfig* g) {
  const bool two_tiles_4bit = g->tiles == 2 && p.bits == 4;
  // Each row group is a copy of the grid.
  GemvSplitModel model = gemv_split_model(
      p.n * g->row_groups, gemv_k_units(p.row_bytes(), g->tma), d.num_sms,
      warps_per_sm(p, f, *g), g->tiles,
      two_tiles_4bit ? kNBitsTwoTilePipelineFill : kGemvPipelineFill);
  const bool split16 = window_split16(p, f, *g);
  if (split16) model.max_k_split = kNBitsWindowMaxKSplit;
  // Forced splits above 8: 12 on the one-tile window kernels at 80 registers, 16 where the
  // model may split by 16.
  const bool split12 =
      g->window && nbits_window_max_k_split(p.bits, f.zp, f.fp16, g->lines, g->tiles, false,
                                            p.m > kGemvMaxRows) == kNBitsWindow80MaxKSplit;
  if (o.k_split > kGemvMaxKSplit &&
      !(split16 || (split12 && o.k_split == kNBitsWindow80MaxKSplit)))
    return Status(StatusCode::kInvalidArgument,
                  "plan override: k_split=" + std::to_string(o.k_split) + ": this plan's GEMV "
                      "takes up to " + std::to_string(kGemvMaxKSplit) + "; 12 only on the "
                      "window kernel's one tile at 80 registers (8-bit bfloat16 codes, 4-bit "
                      "packed zero points), 16 only on the 4-bit window kernel without line "
                      "loads or zero points (window=1,lines=0) on rows of at least " +
                      std::to_string(kNBitsLargeSplitMinWindows) + " windows");
  g->k_split = choose_gemv_k_split(model);
  if (g->tiles == 2) {
    GemvSplitModel narrow = model;
    narrow.pipeline_fill = kNBitsTwoTilePipelineFill;
    BQMM_RETURN_IF_ERROR(choose_gemv_registers(narrow, d.num_sms, o.registers, o.k_split,
                                               &g->registers, &g->k_split));
  }
  const int64_t double_up_to_m = f.bf16 ? 4 : f.zp ? 0 : 1;
  if (two_tiles_4bit && g->registers != kGemvWideRegisters && p.m <= double_up_to_m &&
      f.large && gemv_split_partial_wave(model, g->k_split))
    g->k_split = std::min(2 * g->k_split, kGemvMaxKSplit);
  if (split12 && g->lines && split12_faster(p, f)) g->k_split = kNBitsWindow80MaxKSplit;
  if (o.k_split > 0) g->k_split = o.k_split;
  return Status::Ok();
}

// `dependent`: the caller allows a dependent launch (dependent_launch_applies).
Status plan_gemv(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                 bool dependent, GemvConfig* g) {
  const GemvFacts f = gemv_facts(p, d);
  g->tiles = 1;
  if (choose_fma(p, f, o)) {
    g->fma = true;
    g->rows = static_cast<int>(p.m);
    return Status::Ok();
  }
  g->algo = f.typed_zp ? kNBitsGemvAlgoUnrolled : choose_algo(o);  // typed: algorithm 0 only
  g->rows = choose_rows(p, f);
  g->row_groups = static_cast<int>(gemv_row_groups(p.m));
  choose_stream(p, d, f, o, g);
  BQMM_RETURN_IF_ERROR(choose_k_split(p, d, f, o, g));
  g->dependent_launch = dependent && dependent_launch_applies(p, d, f, *g);
  return Status::Ok();
}

// The fused GEMM: the tiling rule of core/gemm_plan.h for `bits`-bit rows, as the override
// forces it; with a K split, the float32 partial sums in the workspace.
void plan_fused_gemm(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                     NBitsMatMulPlan* plan) {
  plan->gemm = plan_gemm_tiles(gemm_shape(p), d, gemm_forced(o));
  WorkspaceLayout layout;
  plan_fused_gemm_workspace(layout, *plan);
}

// The mixed-input GEMM (core/gemm_plan.h) on the codes as stored: its own refusal after
// NBitsMatMul's, blocks by position (g_idx's act order would need a gather of scales per k).
const char* mixed_gemm_refusal_of(const NBitsMatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  if (p.m > kGemvMaxRows && p.has_g_idx) return "g_idx (act order)";
  const GemmShape fused = gemm_shape(p);
  return mixed_gemm_refusal(p, static_cast<int>(p.bits), p.row_bytes(), d, o.mixed,
                            fused_gemm_applies(p, d, o) ? &fused : nullptr);
}

// Its tile by the wave rule or as the override forces it; the scales and zeros (every
// zero-point form folded into -zp * scale) in the workspace, typed as the GEMM reads them.
void plan_mixed_gemm(const PlanOverride& o, NBitsMatMulPlan* plan) {
  WorkspaceLayout layout;
  const NBitsMatMulProblem& p = plan->problem;
  plan_mixed_gemm_workspace(mixed_forced(o), mixed_nbits_scales_dtype(p.dtype, p.bits), /*zeros=*/true, layout,
                            *plan);
}

// Dequantize B in N tiles -> cuBLAS -> bias. The vector kernel reads 8 codes with one
// load (8 or 4 bytes of B) and writes them with 16-byte stores into rows of K * sizeof(T1).
void plan_dequant_gemm(const NBitsMatMulProblem& p, const DeviceInfo& d,
                       const NBitsMatMulOptions& options, NBitsMatMulPlan* plan) {
  plan->dequant.vector = p.k % 8 == 0 && p.alignment >= 8;
  WorkspaceLayout layout;
  plan_dequant_gemm_workspace(p.k * static_cast<int64_t>(dtype_size(p.dtype)),
                              options.dequant_scratch_bytes, d.sm, layout, *plan);
}

}  // namespace

const char* nbits_path_name(NBitsPath path) {
  switch (path) {
    case NBitsPath::kEmpty: return "empty";
    case NBitsPath::kBiasOnly: return "bias_only";
    case NBitsPath::kGemv: return "gemv";
    case NBitsPath::kMixedGemm: return "mixed_gemm";
    case NBitsPath::kFusedGemm: return "fused_gemm";
    case NBitsPath::kDequantGemm: return "dequant_gemm";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const NBitsMatMulProblem& p) {
  return os << "nbits int" << p.bits << " " << dtype_name(p.dtype) << " M=" << p.m
            << " N=" << p.n << " K=" << p.k << " block_size=" << p.block_size
            << " zero_points=" << nbits_zero_points_name(p.zero_points)
            << (p.has_g_idx ? " g_idx" : "") << (p.has_bias ? " bias" : "")
            << (p.has_prepacked ? " prepacked" : "") << " align=" << p.alignment << " scale_align=" << p.scale_alignment;
}

std::ostream& operator<<(std::ostream& os, const NBitsMatMulPlan& plan) {
  os << "NBitsMatMulPlan{path=" << nbits_path_name(plan.path) << "; " << plan.problem << "; "
     << plan.device;
  if (plan.path == NBitsPath::kDequantGemm) print_dequant(os, plan.dequant, "vec8");
  if (plan.path == NBitsPath::kFusedGemm) {
    print_gemm(os, plan.gemm);
    // The wgmma tiles that scale each group's float32 sums (the weights not rounded to
    // T1). Vector constants (a launch-time choice) hold 4 blocks a stage or more and never
    // fold, so the kernel without them decides.
    const int bits = static_cast<int>(plan.problem.bits);
    const GemmKernelKey k = gemm_kernel_key(plan.gemm, bits, plan.problem.block_size, false);
    if (k.wgmma && wgmma_folds_nbits_scales(k.tile_m, bits, k.consts,
                                            plan.problem.zero_points == NBitsZeroPoints::kTyped, k.halves))
      os << "; scales_on=sums";
  }
  if (plan.path == NBitsPath::kMixedGemm) print_mixed_scales(print_mixed_gemm(os, plan.gemm), plan.problem.has_prepacked);
  if (plan.path == NBitsPath::kGemv && plan.gemv.fma) {
    os << "; fma=1; rows=" << plan.gemv.rows;
  } else if (plan.path == NBitsPath::kGemv) {
    os << "; algo=" << plan.gemv.algo << "; rows=" << plan.gemv.rows;
    print_tensor_core_gemv(os, plan.gemv, true, plan.problem.m > kGemvMaxRows);
  }
  return print_workspace(os, plan.regions, plan.workspace_bytes) << "}";
}

const char* nbits_mixed_gemm_refusal(const NBitsMatMulProblem& p, const DeviceInfo& device,
                                     const PlanOverride& o) {
  return mixed_gemm_refusal_of(p, device, o);
}

const char* nbits_fused_gemm_refusal(const NBitsMatMulProblem& p, const DeviceInfo& device,
                                     const PlanOverride& o) {
  return fused_gemm_refusal(p, device, o);
}

const char* nbits_wgmma_refusal(const NBitsMatMulProblem& p, const DeviceInfo& device,
                                const PlanOverride& o) {
  return wgmma_refusal(gemm_shape(p), device, gemm_forced(o));
}

const char* nbits_wgmma_tile_128_refusal(const NBitsMatMulProblem& p, const DeviceInfo& device,
                                         const PlanOverride& o) {
  return wgmma_tile_128_refusal(gemm_shape(p), device, gemm_forced(o));
}

Status nbits_matmul_options_from_env(NBitsMatMulOptions* opts) {
  BQMM_RETURN_IF_ERROR(env::read_scratch_bytes(&opts->dequant_scratch_bytes));
  return env::read_gemv_dependent_launch(&opts->gemv_dependent_launch);
}

Status plan_nbits_matmul(const NBitsMatMulProblem& p, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, NBitsMatMulPlan* out) {
  return plan_nbits_matmul(p, device, options, PlanOverride{}, out);
}

Status plan_nbits_matmul(const NBitsMatMulProblem& p, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, const PlanOverride& o,
                         NBitsMatMulPlan* out) {
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return invalid(std::string("problem.dtype: expected float32, float16 or bfloat16 but got ") +
                   dtype_name(p.dtype));
  if (p.bits != 4 && p.bits != 8)
    return Status(p.bits == 2 ? StatusCode::kNotSupported : StatusCode::kInvalidArgument,
                  "problem.bits: expected 4 or 8 but got " + std::to_string(p.bits));
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.block_size < 16 ||
      (p.block_size & (p.block_size - 1)) != 0)
    return invalid("problem: expected M, N, K >= 0 and block_size a power of two >= 16");
  BQMM_RETURN_IF_ERROR(check::scratch_bytes(options.dequant_scratch_bytes));
  BQMM_RETURN_IF_ERROR(check_plan_override(o, "NBitsMatMul",
                                           {"w8a8", "w8a8_cublaslt", "lt_algo", "w8a8_pdl"}));

  NBitsMatMulPlan plan;
  plan.problem = p;
  plan.device = device;
  if (plan_trivial_path(NBitsPath::kEmpty, NBitsPath::kBiasOnly, plan)) {
    *out = plan;
    return Status::Ok();
  }
  if (mixed_gemm_refusal_of(p, device, o) == nullptr) {
    plan.path = NBitsPath::kMixedGemm;
    plan_mixed_gemm(o, &plan);
  } else if (fused_gemm_applies(p, device, o)) {
    plan.path = NBitsPath::kFusedGemm;
    plan_fused_gemm(p, device, o, &plan);
  } else if (gemv_applies(p, device, o) &&
             (p.m <= kGemvMaxRows || row_groups_apply(p, device, o))) {
    plan.path = NBitsPath::kGemv;
    const bool dependent = gemv_dependent_allowed(o, options.gemv_dependent_launch);
    BQMM_RETURN_IF_ERROR(plan_gemv(p, device, o, dependent, &plan.gemv));
  } else {
    plan.path = NBitsPath::kDequantGemm;
    plan_dequant_gemm(p, device, options, &plan);
  }
  *out = plan;
  return Status::Ok();
}

}  // namespace bqmm
