// Fp8WeightMatMul planner: a pure function of (problem, device, options[, override]).
// The dispatch chain, cheapest applicable path first:
//   empty output -> K == 0 (bias only) -> fused decode GEMV for M <= 8 (tensor cores, else
//   CUDA cores) -> W8A8 with A quantized (SM90): cuBLASLt's block-scaled FP8 GEMM from 256
//   rows, the W8A8 GEMM on FP8 tensor cores for the other M > 8 ->
//   mixed-input GEMM for M > 128, or from 65 rows where the fused GEMM is not the faster
//   (SM90) -> the GEMV's row group of 16 rows for M = 9..16 below 128 Mi weights -> fused
//   GEMM for 8 < M <= kGemmMaxRows -> dequantize + cuBLAS.
// The QDQ of a W8A8 activation is fused into the GEMV kernels' activation load, and is a
// separate kernel into the workspace on the fused GEMM and dequant + cuBLAS paths. Each
// choice below is one small function, its comment the reason (an H200 measurement where
// one decided it).
#include <algorithm>
#include <ostream>
#include <string>

#include "bqmm/fp8_matmul.h"
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

// The two-tile kernel's start in line pairs for its 128 / 168-register comparison (as
// NBitsMatMul's 4-bit two-tile windows); the K split keeps kGemvPipelineFill.
constexpr int64_t kFp8TwoTileCompareFill = kNBitsTwoTilePipelineFill;
// The 168-register kernel's smallest K split: at 1 (one long range per warp) it lost to
// 128 registers on the H200 where the model favoured it (49152 x 5120: 6 % slower).
constexpr int kFp8WideMinKSplit = 2;

// The fused GEMV applies: each weight row streamed once for all M <= 8 rows (up to
// kGemvFusedMaxRows as row groups, below); 16-element chunks stay inside one scale block;
// rows of A and B take 16-byte loads.
bool gemv_applies(const Fp8MatMulProblem& p, const PlanOverride& o) {
  return o.gemv != 0 && p.m <= kGemvFusedMaxRows && p.k % 16 == 0 && p.block_size % 16 == 0 &&
         p.alignment >= 16;
}

// The tensor-core GEMV: 64-element K windows (a lane quad's 64 bytes of e4m3: K and
// block_size multiples of 64; K >= 256 keeps a K split busy). From M = 2 by default: at
// M = 1 the CUDA-core kernel streams faster on the H200 (the tensor-core one took 8-26 %
// longer; within 7 % at M = 2).
bool choose_tensor_cores(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  const bool applies = d.sm >= 80 && p.k % kGemvWindowBytes == 0 && p.k >= 4 * kGemvWindowBytes &&
                       p.block_size % kGemvWindowBytes == 0;
  const int64_t min_rows = o.fma == 0 ? 1 : 2;
  return applies && o.fma != 1 && p.m >= min_rows;
}

// Line loads (whole 128-byte lines staged through shared memory) wherever rows are whole
// lines: 1-7 % faster than fragment-shaped register loads at M = 2..8 on the H200.
bool choose_lines(const Fp8MatMulProblem& p, const PlanOverride& o) {
  return p.k % kGemvTmaTileBytes == 0 && o.tma != 1 && o.lines != 0;
}

// The line-load kernel, the only one with row groups (M > 8), applies.
bool row_groups_fit(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return p.m > kGemvMaxRows && gemv_applies(p, o) && choose_tensor_cores(p, d, o) &&
         choose_lines(p, o);
}

// One row group (M = 9..16, each decoded weight fragment multiplied with two 8-row halves)
// in the fused GEMM's place, unless the GEMM is forced (fused_gemm_forced): on weights
// below 128 Mi (one tile per warp; on larger weights the fused GEMM's time, within 0.2 %,
// with two), and with float16 activations on weights of 64 Mi or more up to 12 rows (at
// 8192 x 8192 float16 M = 16 it took 1.04x the fused GEMM's time; elsewhere 0.79-0.98x on
// the H200, back to back; docs/DESIGN.md, "Row groups").
constexpr int64_t kFp8RowGroupLargeCodes = int64_t{64} << 20;
constexpr int64_t kFp8RowGroupLargeFloat16MaxRows = 12;
bool row_group_preferred(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  const bool large_float16 = p.dtype == DType::kFloat16 && p.n * p.k >= kFp8RowGroupLargeCodes;
  const int64_t max_rows = large_float16 ? kFp8RowGroupLargeFloat16MaxRows : kGemvGroupRows;
  return p.m <= max_rows && !fused_gemm_forced(o) && !gemv_tma_pays(p.n, p.k) &&
         row_groups_fit(p, d, o);
}

// M > 8 takes the row groups where they fit: up to 16 rows where preferred (above), and
// up to kGemvFusedMaxRows with the fused GEMM forced off (gemm=0).
bool row_groups_apply(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return (o.gemm == 0 && row_groups_fit(p, d, o)) || row_group_preferred(p, d, o);
}

// The fused GEMM's conditions (both operators' in gemm_common_refusal: M > 8, SM80+,
// aligned rows of whole 8-element chunks), then FP8's weight layout: rows of B of whole
// 16-byte chunks (K % 16 == 0, the kernel's cp.async loads of e4m3) that never straddle a
// scale block (block_size % 16 == 0: one b_scale per chunk). W8A8 applies too: A is
// QDQ'd into the workspace first (plan_fused_gemm).
const char* fused_gemm_refusal(const Fp8MatMulProblem& p, const DeviceInfo& d,
                               const PlanOverride& o) {
  if (const char* why = gemm_common_refusal(p, d, o.gemm)) return why;
  static_assert(kGemvGroupRows == 16 && kFp8RowGroupLargeFloat16MaxRows == 12,
                "the reason below names the bounds");
  if (row_group_preferred(p, d, o))
    return "M <= 16 below 128 Mi weights (float16 from 64 Mi: M <= 12): the GEMV's row group "
           "of 16 is faster there";
  if (p.k % 16 != 0) return "K % 16 != 0 (rows of B not whole 16-byte chunks)";
  if (p.block_size % 16 != 0) return "block_size % 16 != 0 (a chunk would span two scales)";
  return nullptr;
}

bool fused_gemm_applies(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  return fused_gemm_refusal(p, d, o) == nullptr;
}

// The W8A8 GEMM on FP8 tensor cores (core/gemm_plan.h, kW8a8*): A quantized (statically or
// dynamically), M >= kW8a8MinRows (forced: any M), on an SM90 build and device; each
// 128-K slab
// inside one scale block (block_size % 128 == 0: the kernel folds a block's sums with its
// scales), rows of B of whole 16-byte copies (K % 16 == 0) from 16-byte aligned pointers.
const char* w8a8_gemm_refusal(const Fp8MatMulProblem& p, const DeviceInfo& d,
                              const PlanOverride& o) {
  if (!p.quantizes_activation()) return "A is not quantized (no a_scale, no dynamic_act_quant)";
  if (p.m == 0 || p.n == 0) return "empty output";
  if (p.k == 0) return "K == 0: Y = bias";
  if (o.w8a8 == 0) return "w8a8=0 (plan override)";
  static_assert(kW8a8MinRows == kGemvMaxRows + 1 && kGemvMaxRows == 8, "the reason below names the bound");
  if (p.m < kW8a8MinRows && o.w8a8 != 1) return "M <= 8 (the decode GEMV's rows)";
  if (d.sm != 90) return "not an SM90 device (wgmma code is sm_90a only)";
  if (!wgmma_built()) return "this build has no SM90 in CUDA_ARCHITECTURES";
  static_assert(kW8a8SlabK == 128, "the reason below names the slab");
  if (p.block_size % kW8a8SlabK != 0) return "block_size % 128 != 0 (a 128-K slab would span two scales)";
  if (p.k % 16 != 0) return "K % 16 != 0 (rows of B not whole 16-byte chunks)";
  if (p.alignment < 16) return "pointers not 16-byte aligned";
  if (p.m >= (int64_t{1} << 31)) return "M beyond 2^31";
  if (o.tile_m == 16 || o.tile_m == 256)
    return "tile_m=16 or 256 (plan override): its tiles are 32, 64 and 128 rows";
  return nullptr;
}

// Weight rows per scale cuBLASLt's block-scaled GEMM reads: 128 (its 128 x 128 blocks)
// where the caller promises that aligned groups of a multiple of 128 rows share their
// scales, else 1.
int w8a8_scale_rows(const Fp8MatMulProblem& p) { return p.b_scale_block_rows % 128 == 0 ? 128 : 1; }

// cuBLASLt's FP8 GEMM with block scales (core/gemm_plan.h, kW8a8Cublaslt*) in the W8A8
// GEMMs' place (after the W8A8 GEMM's refusal): both modes, from kW8a8CublasltMinRows rows
// (static with per-row weight scales from kW8a8CublasltStaticPerRowMinRows; forced: any
// M above 8), its scale blocks of 128 K the operator's blocks, rows of Y of whole 16-byte
// units. cuBLASLt ships these kernels for SM90 only.
const char* w8a8_cublaslt_refusal(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o) {
  if (const char* why = w8a8_gemm_refusal(p, d, o)) return why;
  if (o.w8a8_cublaslt == 0) return "w8a8_cublaslt=0 (plan override)";
  if (o.tile_m > 0 || o.gemm_k_split > 0 || o.k_halves == 1)
    return "tile_m / gemm_k_split / k_halves forced (the W8A8 GEMM's keys)";
  if (o.w8a8_cublaslt != 1) {
    static_assert(kW8a8CublasltMinRows == 256 && kW8a8CublasltStaticPerRowMinRows == 512,
                  "the reasons below name the bounds");
    if (p.m < kW8a8CublasltMinRows) return "M < 256: the W8A8 GEMMs' tiles are faster there";
    if (!p.dynamic_act_quant && w8a8_scale_rows(p) == 1 && p.m < kW8a8CublasltStaticPerRowMinRows)
      return "static a_scale, per-row weight scales and M < 512: the W8A8 GEMM's one activation scale is faster";
  }
  if (p.block_size != 128) return "block_size != 128 (cuBLASLt's scale blocks are 128 K)";
  if (p.n % 8 != 0) return "N % 8 != 0 (rows of Y not whole 16-byte units)";
  if (p.m >= (int64_t{1} << 31) - kW8a8CublasltRowMultiple || p.n >= (int64_t{1} << 31) || p.k >= (int64_t{1} << 31))
    return "M, N or K beyond 2^31";
  return nullptr;
}

// Quantize A (codes and scales for M rounded up to 4 rows, the rows past M zero) -> the
// weight's scales in cuBLASLt's layout (128 x 128 blocks gathered, or per row transposed
// unless prepacked) -> cuBLASLt's block-scaled FP8 GEMM, the bias in its epilogue; where
// M % 4 != 0, into the scratch and M rows copied to Y.
void plan_w8a8_cublaslt(const Fp8MatMulProblem& p, const PlanOverride& o, Fp8MatMulPlan* plan) {
  GemmConfig& g = plan->gemm;
  g.scale_rows = w8a8_scale_rows(p);
  g.lt_algo = o.lt_algo >= 0 ? o.lt_algo : 0;
  const int64_t rows = w8a8_cublaslt_rows(p.m);
  WorkspaceRegions& r = plan->regions;
  WorkspaceLayout layout;
  r.codes_bytes = static_cast<size_t>(rows * p.k);
  r.codes_offset = layout.take(r.codes_bytes);
  r.act_scales_bytes = static_cast<size_t>(p.k_blocks() * rows) * sizeof(float);
  r.act_scales_offset = layout.take(r.act_scales_bytes);
  const int64_t scales = g.scale_rows == 128 ? w8a8_cublaslt_block_scales(p.n, p.k_blocks())
                                             : (p.has_prepacked ? 0 : p.k_blocks() * p.n);
  r.scales_bytes = static_cast<size_t>(scales) * sizeof(float);
  r.scales_offset = layout.take(r.scales_bytes);
  r.scratch_bytes = rows != p.m ? static_cast<size_t>(rows * p.n) * dtype_size(p.dtype) : 0;
  r.scratch_offset = layout.take(r.scratch_bytes);
  r.cublas_bytes = cublas_workspace_bytes(plan->device.sm);
  r.cublas_offset = layout.take(r.cublas_bytes);
  plan->workspace_bytes = layout.total();
}

// TMA tiles where line loads do not apply (K % 128 == 64) and the weight is long enough to
// amortize their start (N x K >= 128 Mi: 5-15 % faster than register loads there).
bool choose_tma(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                bool lines) {
  const bool wanted = o.tma == 1 || (o.tma < 0 && gemv_tma_pays(p.n, p.k));
  return gemv_tma_fits(d.sm, p.n, p.k) && wanted && !lines;
}

// Two 16-column tiles per warp on N x K >= 128 Mi: 2-8 % faster than TMA tiles and 6-12 %
// than one tile at 28672 x 8192; smaller weights lose (the grid halves).
int choose_tiles(const Fp8MatMulProblem& p, const PlanOverride& o, bool lines) {
  if (!lines) return 1;
  if (o.tiles > 0) return o.tiles;
  return gemv_tma_pays(p.n, p.k) ? 2 : 1;
}

// The two-tile kernel's register bound: 168 (12 warps per SM) where the wave model says
// it is faster, in float16 only (bfloat16's decode costs more per weight: 1-24 % slower)
// and at k_split >= 2. Updates k_split where 168 is taken.
Status choose_registers(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                        GemvSplitModel model, GemvConfig* g) {
  model.pipeline_fill = kFp8TwoTileCompareFill;
  const int forced = o.registers < 0 && p.dtype == DType::kBFloat16 ? kGemvTwoTileRegisters
                                                                     : o.registers;
  return choose_gemv_registers(model, d.num_sms, forced, o.k_split, &g->registers, &g->k_split,
                               kFp8WideMinKSplit);
}

// A programmatic dependent launch of the kernel before it where the caller allows it
// (Fp8MatMulOptions::gemv_dependent_launch, or gemv_pdl=1): one tile of line loads without
// static W8A8 at M <= 8 on SM90, its first pairs pulled into L2 while that kernel
// finishes, as NBitsMatMul's 4-bit register tile launches (nbits_matmul_plan.cc). Measured
// on the H200 (scripts/ab_cases/fp8_gemv_pdl.txt, gemv_pdl=1 against plain launches, one
// build): in chains of the operator alone 0.937-1.000x (4096 x 14336 M = 4 17.0 -> 15.9
// us), after a kernel that does not let it start early 0.99-1.13x (4096 x 4096 M = 2
// and 8: +1 us).
bool dependent_launch_applies(const Fp8MatMulProblem& p, const DeviceInfo& d, bool dependent,
                              const GemvConfig& g) {
  return dependent && gemv_dependent_launch_possible(d) && g.lines && !g.tma && g.tiles == 1 &&
         !p.has_a_scale && p.m <= kGemvMaxRows;
}

// `dependent`: the caller allows a dependent launch (dependent_launch_applies).
Status plan_tensor_core_gemv(const Fp8MatMulProblem& p, const DeviceInfo& d,
                             const PlanOverride& o, bool dependent, GemvConfig* g) {
  g->lines = choose_lines(p, o);
  g->tma = choose_tma(p, d, o, g->lines);
  g->tiles = choose_tiles(p, o, g->lines);
  g->row_groups = static_cast<int>(gemv_row_groups(p.m));
  // The K split's units: 128-byte TMA tiles or line pairs, else 64-byte windows; each row
  // group is a copy of the grid.
  const GemvSplitModel model =
      gemv_split_model(p.n * g->row_groups, gemv_k_units(p.k, g->tma || g->lines), d.num_sms,
                       kGemvTensorCoreWarpsPerSm, g->tiles);
  g->k_split = choose_gemv_k_split(model);
  if (g->tiles == 2) BQMM_RETURN_IF_ERROR(choose_registers(p, d, o, model, g));
  if (o.k_split > kGemvMaxKSplit)
    return Status(StatusCode::kInvalidArgument,
                  "plan override: the FP8 GEMVs take k_split up to " +
                      std::to_string(kGemvMaxKSplit) + ", not " + std::to_string(o.k_split));
  if (o.k_split > 0) g->k_split = o.k_split;
  g->dependent_launch = dependent_launch_applies(p, d, dependent, *g);
  return Status::Ok();
}

// The CUDA-core kernel likewise, only where forced (gemv_pdl=1): at one row per warp
// without static W8A8 on SM90, its first iteration's weights pulled into L2 before the
// wait. In chains of the operator alone it was not a gain (H200, M = 1: 4096 x 4096 6.4
// -> 6.6 us, 28672 x 8192 56.0 -> 56.0, 8192 x 8192 bfloat16 17.5 -> 16.9), so the
// caller's option leaves it plain.
bool fma_dependent_launch_applies(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                                  const GemvConfig& g) {
  return o.gemv_pdl == 1 && gemv_dependent_launch_possible(d) && g.rows == 1 && !p.has_a_scale;
}

// The CUDA-core kernel's activation rows per warp: the smallest of 1, 2, 4, 8 >= M.
int fma_rows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// The region of the QDQ'd activation A' = QDQ(A), [M, K] of T, first in the workspace:
// static W8A8 off the GEMV (whose kernels fuse the static QDQ into their activation load),
// and dynamic quantization on every path (its scales need a pass over each K block
// first). The paths read A' from there; act_bytes > 0 says that they do.
void take_act_region(const Fp8MatMulProblem& p, WorkspaceLayout& layout, Fp8MatMulPlan* plan) {
  const size_t elem = dtype_size(p.dtype);
  plan->regions.act_bytes =
      p.quantizes_activation() ? static_cast<size_t>(p.m * p.k) * elem : 0;
  plan->regions.act_offset = layout.take(plan->regions.act_bytes);
}

// The decode GEMV's workspace: A' with dynamic quantization, else none.
void plan_gemv_workspace(const Fp8MatMulProblem& p, Fp8MatMulPlan* plan) {
  if (!p.dynamic_act_quant) return;
  WorkspaceLayout layout;
  take_act_region(p, layout, plan);
  plan->workspace_bytes = layout.total();
}

// The fused GEMM's view of the problem: e4m3 rows of K bytes.
GemmShape gemm_shape(const Fp8MatMulProblem& p) {
  return {p.m, p.n, p.k, 8, true, p.block_size, p.dtype == DType::kBFloat16};
}

// [QDQ A] -> fused GEMM: the tiling rule of core/gemm_plan.h (e4m3: 8-bit rows), as the
// override forces it; with a K split, the float32 partial sums after A'.
void plan_fused_gemm(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                     Fp8MatMulPlan* plan) {
  plan->gemm = plan_gemm_tiles(gemm_shape(p), d, gemm_forced(o));
  WorkspaceLayout layout;
  take_act_region(p, layout, plan);
  plan_fused_gemm_workspace(layout, *plan);
}

// Quantize A -> the W8A8 GEMM: tiles of w8a8_tile_m(M) x kGemmTileN, the K split in whole
// scale blocks (each split folds its own blocks) by the fused GEMM's wave model with the
// partial sums' planes priced in (kW8a8PlaneBytesPerSlab), or as the override forces it;
// the codes, the dynamic scales and the partial sums in the workspace; where the split is 2
// on tiles of up to 64 rows, unsplit K halves in 64-row tiles instead (w8a8_takes_halves;
// forced, half the split). The GEMM is a
// programmatic dependent of the quantize pass on tiles of 32 rows (M <= 32), where it
// measured 3-4 % faster (its first stages' weights stream while the pass runs); on larger
// tiles it measured within 1.2 % either way (H200), so they launch plainly.
void plan_w8a8_gemm(const Fp8MatMulProblem& p, const DeviceInfo& d, const PlanOverride& o,
                    Fp8MatMulPlan* plan) {
  GemmConfig& g = plan->gemm;
  g.wgmma = true;
  g.tile_m = o.tile_m > 0 ? o.tile_m : w8a8_tile_m(p.m);
  g.tile_n = kGemmTileN;
  g.stages = w8a8_stages(g.tile_m);
  g.dependent_launch = o.w8a8_pdl >= 0 ? o.w8a8_pdl == 1 : g.tile_m <= kW8a8PdlTileM;
  const int64_t tiles = (p.m + g.tile_m - 1) / g.tile_m * ((p.n + g.tile_n - 1) / g.tile_n);
  g.k_split = o.gemm_k_split > 0
                  ? o.gemm_k_split
                  : choose_gemm_k_split(tiles, p.k_blocks(), std::max(1, d.num_sms), g.stages,
                                        p.block_size / kW8a8SlabK,
                                        p.m * p.n * int64_t{4} / kW8a8PlaneBytesPerSlab);
  if (w8a8_takes_halves(g, p.k_blocks(), o.k_halves)) {
    g.tile_n = kKHalvesTileN;  // twice the tiles: half the split (as forced, if forced)
    if (o.gemm_k_split <= 0) g.k_split = std::max(1, g.k_split / 2);
    g.stages = w8a8_stages(g.tile_m, g.tile_n);
  }
  g.cluster_reduce = w8a8_cluster_sums(g, gemm_forced(o));
  WorkspaceRegions& r = plan->regions;
  WorkspaceLayout layout;
  r.codes_bytes = static_cast<size_t>(p.m * p.k);
  r.codes_offset = layout.take(r.codes_bytes);
  r.act_scales_bytes =
      p.dynamic_act_quant ? static_cast<size_t>(p.k_blocks() * w8a8_m_pad(p.m)) * sizeof(float) : 0;
  r.act_scales_offset = layout.take(r.act_scales_bytes);
  plan_gemm_partials(layout, *plan);
}

// [QDQ A] -> the mixed-input GEMM (core/gemm_plan.h): its tile by the wave rule or as the
// override forces it; A' and the transposed scales in the workspace.
void plan_mixed_gemm(const Fp8MatMulProblem& p, const PlanOverride& o, Fp8MatMulPlan* plan) {
  WorkspaceLayout layout;
  take_act_region(p, layout, plan);
  plan_mixed_gemm_workspace(mixed_forced(o), DType::kFloat32, /*zeros=*/false, layout, *plan);
}

// [QDQ A] -> dequantize B in N tiles -> cuBLAS -> bias. The vector dequant kernel takes
// aligned 8-byte pieces of 16-element chunks of B and indexes a row in 32 bits.
void plan_dequant_gemm(const Fp8MatMulProblem& p, const DeviceInfo& d,
                       const Fp8MatMulOptions& options, Fp8MatMulPlan* plan) {
  const size_t elem = dtype_size(p.dtype);
  plan->dequant.qdq_activation = p.quantizes_activation();
  plan->dequant.vector = p.k % 16 == 0 && p.alignment >= 16 && p.k < (int64_t{1} << 31);
  WorkspaceLayout layout;
  take_act_region(p, layout, plan);
  plan_dequant_gemm_workspace(p.k * static_cast<int64_t>(elem), options.dequant_scratch_bytes,
                              d.sm, layout, *plan);
}

}  // namespace

const char* fp8_path_name(Fp8Path path) {
  switch (path) {
    case Fp8Path::kEmpty: return "empty";
    case Fp8Path::kBiasOnly: return "bias_only";
    case Fp8Path::kGemvFma: return "gemv_fma";
    case Fp8Path::kGemvMma: return "gemv_mma";
    case Fp8Path::kW8a8Cublaslt: return "w8a8_cublaslt";
    case Fp8Path::kW8a8Gemm: return "w8a8_gemm";
    case Fp8Path::kMixedGemm: return "mixed_gemm";
    case Fp8Path::kFusedGemm: return "fused_gemm";
    case Fp8Path::kDequantGemm: return "dequant_gemm";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const DeviceInfo& d) {
  return os << "sm" << d.sm << "/" << d.num_sms << "SMs";
}

std::ostream& operator<<(std::ostream& os, const Fp8MatMulProblem& p) {
  return os << "fp8 " << dtype_name(p.dtype) << " M=" << p.m << " N=" << p.n << " K=" << p.k
            << " block_size=" << p.block_size << (p.has_bias ? " bias" : "")
            << (p.has_a_scale ? " w8a8" : "") << (p.dynamic_act_quant ? " dynamic_act_quant" : "")
            << (p.b_scale_block_rows != 1 ? " b_scale_block_rows=" + std::to_string(p.b_scale_block_rows) : "")
            << (p.has_prepacked ? " prepacked" : "") << " align=" << p.alignment;
}

std::ostream& operator<<(std::ostream& os, const Fp8MatMulPlan& plan) {
  os << "Fp8MatMulPlan{path=" << fp8_path_name(plan.path) << "; " << plan.problem << "; "
     << plan.device;
  if (plan.path == Fp8Path::kDequantGemm) {
    os << "; qdq_activation=" << (plan.dequant.qdq_activation ? "yes" : "no");
    print_dequant(os, plan.dequant, "vec16");
  }
  if (plan.path == Fp8Path::kGemvFma) {
    os << "; rows_per_warp=" << plan.gemv.rows;
    if (plan.gemv.dependent_launch) os << "; dependent_launch=yes";
  }
  if (plan.path == Fp8Path::kGemvMma)
    print_tensor_core_gemv(os, plan.gemv, false, plan.problem.m > kGemvMaxRows);
  if (plan.path == Fp8Path::kFusedGemm) {
    os << "; qdq_activation=" << (plan.regions.act_bytes > 0 ? "yes" : "no");
    print_gemm(os, plan.gemm);
  }
  if (plan.path == Fp8Path::kW8a8Gemm) {
    os << "; act_scales=" << (plan.problem.dynamic_act_quant ? "dynamic" : "static");
    print_gemm(os, plan.gemm);
    if (plan.gemm.dependent_launch) os << "; dependent_launch=yes";
  }
  if (plan.path == Fp8Path::kW8a8Cublaslt) {
    os << "; act_scales=" << (plan.problem.dynamic_act_quant ? "dynamic" : "static")
       << "; weight_scales=" << (plan.gemm.scale_rows == 128 ? "per_128_rows" : "per_row")
       << "; lt_algo=" << plan.gemm.lt_algo;
    if (plan.gemm.scale_rows == 1) print_mixed_scales(os, plan.problem.has_prepacked);
  }
  if (plan.path == Fp8Path::kMixedGemm) {
    os << "; qdq_activation=" << (plan.regions.act_bytes > 0 ? "yes" : "no");
    print_mixed_gemm(os, plan.gemm);
    print_mixed_scales(os, plan.problem.has_prepacked);
  }
  return print_workspace(os, plan.regions, plan.workspace_bytes) << "}";
}

const char* fp8_fused_gemm_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                                   const PlanOverride& o) {
  return fused_gemm_refusal(p, device, o);
}

const char* fp8_w8a8_gemm_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                                  const PlanOverride& o) {
  return w8a8_gemm_refusal(p, device, o);
}

const char* fp8_w8a8_cublaslt_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                                      const PlanOverride& o) {
  return w8a8_cublaslt_refusal(p, device, o);
}

const char* fp8_mixed_gemm_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                                   const PlanOverride& o) {
  const GemmShape fused = gemm_shape(p);
  return mixed_gemm_refusal(p, 8, p.k, device, o.mixed,
                            fused_gemm_applies(p, device, o) ? &fused : nullptr);
}

const char* fp8_wgmma_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                              const PlanOverride& o) {
  return wgmma_refusal(gemm_shape(p), device, gemm_forced(o));
}

const char* fp8_wgmma_tile_128_refusal(const Fp8MatMulProblem& p, const DeviceInfo& device,
                                       const PlanOverride& o) {
  return wgmma_tile_128_refusal(gemm_shape(p), device, gemm_forced(o));
}

Status fp8_matmul_options_from_env(Fp8MatMulOptions* opts) {
  BQMM_RETURN_IF_ERROR(env::read_scratch_bytes(&opts->dequant_scratch_bytes));
  return env::read_gemv_dependent_launch(&opts->gemv_dependent_launch);
}

Status plan_fp8_matmul(const Fp8MatMulProblem& p, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, Fp8MatMulPlan* out) {
  return plan_fp8_matmul(p, device, options, PlanOverride{}, out);
}

Status plan_fp8_matmul(const Fp8MatMulProblem& p, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, const PlanOverride& o,
                       Fp8MatMulPlan* out) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return Status(StatusCode::kInvalidArgument,
                  std::string("problem.dtype: expected float16 or bfloat16 but got ") +
                      dtype_name(p.dtype));
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.block_size <= 0)
    return Status(StatusCode::kInvalidArgument,
                  "problem: expected M, N, K >= 0 and block_size > 0");
  BQMM_RETURN_IF_ERROR(check::scratch_bytes(options.dequant_scratch_bytes));
  BQMM_RETURN_IF_ERROR(check_plan_override(o, "Fp8WeightMatMul", {"algo", "window"}));

  Fp8MatMulPlan plan;
  plan.problem = p;
  plan.device = device;
  if (plan_trivial_path(Fp8Path::kEmpty, Fp8Path::kBiasOnly, plan)) {
    *out = plan;
    return Status::Ok();
  }
  if (w8a8_cublaslt_refusal(p, device, o) == nullptr) {
    plan.path = Fp8Path::kW8a8Cublaslt;
    plan_w8a8_cublaslt(p, o, &plan);
  } else if (w8a8_gemm_refusal(p, device, o) == nullptr) {
    plan.path = Fp8Path::kW8a8Gemm;
    plan_w8a8_gemm(p, device, o, &plan);
  } else if (fp8_mixed_gemm_refusal(p, device, o) == nullptr) {
    plan.path = Fp8Path::kMixedGemm;
    plan_mixed_gemm(p, o, &plan);
  } else if (fused_gemm_applies(p, device, o)) {
    plan.path = Fp8Path::kFusedGemm;
    plan_fused_gemm(p, device, o, &plan);
  } else if (!gemv_applies(p, o) || (p.m > kGemvMaxRows && !row_groups_apply(p, device, o))) {
    plan.path = Fp8Path::kDequantGemm;
    plan_dequant_gemm(p, device, options, &plan);
  } else if (choose_tensor_cores(p, device, o)) {
    plan.path = Fp8Path::kGemvMma;
    const bool dependent = gemv_dependent_allowed(o, options.gemv_dependent_launch);
    BQMM_RETURN_IF_ERROR(plan_tensor_core_gemv(p, device, o, dependent, &plan.gemv));
    plan_gemv_workspace(p, &plan);
  } else {
    plan.path = Fp8Path::kGemvFma;
    plan.gemv.fma = true;
    plan.gemv.rows = fma_rows(p.m);
    plan.gemv.dependent_launch = fma_dependent_launch_applies(p, device, o, plan.gemv);
    plan_gemv_workspace(p, &plan);
  }
  *out = plan;
  return Status::Ok();
}

}  // namespace bqmm
