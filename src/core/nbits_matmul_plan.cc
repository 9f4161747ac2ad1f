// NBitsMatMul planner: pure function of (problem, device, options) -> plan.
// Dispatch chain, cheapest applicable path first:
//   empty output -> K == 0 (bias only) -> fused decode GEMV -> dequantize + cuBLAS.
// The GEMV streams the packed weight once for all M <= 8 rows; everything it does not
// take (larger M, g_idx, typed zero points, a partial last block, unaligned rows) goes
// through the dequant + cuBLAS path, which handles every valid input.
#include <algorithm>
#include <limits>
#include <ostream>
#include <string>

#include "bqmm/nbits_matmul.h"
#include "core/env.h"
#include "core/check.h"
#include "core/gemv_split.h"
#include "core/workspace.h"

namespace bqmm {
namespace {

constexpr int64_t kGemvMaxRows = 8;       // the mma N extent; the FMA tile's largest row group
constexpr int64_t kGemvChunkBytes = 16;   // one 16-byte weight load per lane per row
constexpr int64_t kGemvFmaMaxRows = 2;    // the CUDA-core kernel's instantiated row groups
// Warps of float32's FMA tile an SM holds at once (up to 255 registers per thread); the
// tensor-core tiles hold kGemvTensorCoreWarpsPerSm (core/gemv_split.h).
constexpr int64_t kGemvWarpsPerSmFloat = 8;

// The fastest K-loop algorithm per (bits, block_size) measured on an H200 at M = 1,
// N = K = 8192, float16 (docs/PERF.md, "NBitsMatMul GEMV: K-loop algorithms", graph-timed
// 2026-11-29: 8-bit after the scale-on-result tile, 4-bit after the window kernel, which
// is algorithm 0 for blocks of 128 codes or more), indexed by log2(block_size) - 4 for
// block sizes 16..256; larger blocks take the 256 entry. The unrolled loop wins
// everywhere: 8-bit by 28 to 31 % over the plain loop and 14 to 106 % over per-block
// stages; 4-bit by 10 to 29 % over the loop and 6 to 90 % over per-block stages.
constexpr int kDefaultGemvAlgo8Bit[5] = {0, 0, 0, 0, 0};
constexpr int kDefaultGemvAlgo4Bit[5] = {0, 0, 0, 0, 0};

int default_gemv_algo(int bits, int64_t block_size) {
  int i = 0;
  while (i < 4 && (int64_t{16} << i) < block_size) ++i;
  return bits == 8 ? kDefaultGemvAlgo8Bit[i] : kDefaultGemvAlgo4Bit[i];
}

Status invalid(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }

}  // namespace

const char* nbits_path_name(NBitsPath path) {
  switch (path) {
    case NBitsPath::kEmpty: return "empty";
    case NBitsPath::kBiasOnly: return "bias_only";
    case NBitsPath::kGemv: return "gemv";
    case NBitsPath::kDequantGemm: return "dequant_gemm";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const NBitsMatMulProblem& p) {
  return os << "nbits int" << p.bits << " " << dtype_name(p.dtype) << " M=" << p.m
            << " N=" << p.n << " K=" << p.k << " block_size=" << p.block_size
            << " zero_points=" << nbits_zero_points_name(p.zero_points)
            << (p.has_g_idx ? " g_idx" : "") << (p.has_bias ? " bias" : "")
            << " align=" << p.alignment << " scale_align=" << p.scale_alignment;
}

std::ostream& operator<<(std::ostream& os, const NBitsMatMulPlan& plan) {
  os << "NBitsMatMulPlan{path=" << nbits_path_name(plan.path) << "; " << plan.problem << "; "
     << plan.device;
  if (plan.path == NBitsPath::kDequantGemm) {
    os << "; dequant=" << (plan.dequant_vec8 ? "vec8" : "scalar") << "; n_tile=" << plan.n_tile
       << " x " << plan.num_n_tiles << " in " << plan.scratch_buffers << " buffer(s)";
  }
  if (plan.path == NBitsPath::kGemv && plan.gemv_fma) {
    os << "; fma=1; rows=" << plan.gemv_rows;
  } else if (plan.path == NBitsPath::kGemv) {
    os << "; algo=" << plan.gemv_algo << "; rows=" << plan.gemv_rows
       << "; k_split=" << plan.gemv_k_split << "; tma=" << (plan.gemv_tma ? 1 : 0)
       << "; window=" << (plan.gemv_window ? 1 : 0) << "; lines=" << (plan.gemv_lines ? 1 : 0)
       << "; tiles=" << plan.gemv_tiles_per_warp;
    if (plan.gemv_registers > 0) os << "; regs=" << plan.gemv_registers;
  }
  os << "; workspace=" << plan.workspace_bytes << "B";
  if (plan.workspace_bytes > 0) {
    os << " (cublas " << plan.cublas_bytes << "@" << plan.cublas_offset << ", scratch "
       << plan.scratch_bytes << "@" << plan.scratch_offset << ")";
  }
  return os << "}";
}

Status nbits_matmul_options_from_env(NBitsMatMulOptions* opts) {
  BQMM_RETURN_IF_ERROR(
      env::read_dequant_options(&opts->dequant_scratch_bytes, &opts->overlap_dequant));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_NBITS_GEMV_ALGO", 0, 2, &opts->gemv_algo));
  BQMM_RETURN_IF_ERROR(env::read_k_split("BQMM_NBITS_GEMV_KSPLIT", &opts->gemv_k_split));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_NBITS_GEMV_TMA", 0, 1, &opts->gemv_tma));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_NBITS_GEMV_FMA", 0, 1, &opts->gemv_fma));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_NBITS_GEMV_WINDOW", 0, 1, &opts->gemv_window));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_NBITS_GEMV_LINES", 0, 1, &opts->gemv_lines));
  BQMM_RETURN_IF_ERROR(
      env::read_int_option("BQMM_NBITS_GEMV_TILES", 1, 2, &opts->gemv_tiles_per_warp));
  return env::read_gemv_registers("BQMM_NBITS_GEMV_REGISTERS", &opts->gemv_registers);
}

Status plan_nbits_matmul(const NBitsMatMulProblem& p, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, NBitsMatMulPlan* out) {
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return invalid(std::string("problem.dtype: expected float32, float16 or bfloat16 but got ") +
                   dtype_name(p.dtype));
  if (p.bits != 4 && p.bits != 8)
    return Status(p.bits == 2 ? StatusCode::kNotSupported : StatusCode::kInvalidArgument,
                  "problem.bits: expected 4 or 8 but got " + std::to_string(p.bits));
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.block_size < 16 ||
      (p.block_size & (p.block_size - 1)) != 0)
    return invalid("problem: expected M, N, K >= 0 and block_size a power of two >= 16");
  BQMM_RETURN_IF_ERROR(check::shared_options(options));
  if (options.gemv_algo < -1 || options.gemv_algo > 2)
    return invalid("options.gemv_algo: expected -1 (default), 0, 1 or 2 but got " +
                   std::to_string(options.gemv_algo));
  BQMM_RETURN_IF_ERROR(check::int_in_range("options.gemv_fma", options.gemv_fma, -1, 1,
                                           "-1 (planner's choice), 0 or 1"));
  BQMM_RETURN_IF_ERROR(check::int_in_range("options.gemv_window", options.gemv_window, -1, 1,
                                           "-1 (planner's choice), 0 or 1"));

  NBitsMatMulPlan plan;
  plan.problem = p;
  plan.device = device;

  if (plan_trivial_path(NBitsPath::kEmpty, NBitsPath::kBiasOnly, plan)) {
    *out = plan;
    return Status::Ok();
  }

  // Decode GEMV: integer zero points and blocks by position (no g_idx), whole blocks only
  // (K % block_size == 0), rows of B that take 16-byte loads, 16-byte aligned A and B.
  // float16 / bfloat16 run on tensor cores (SM80+); float32 on CUDA cores. The 32-bit
  // K counters of the kernel bound K.
  const bool half_type = p.dtype != DType::kFloat32;
  const bool gemv = options.allow_gemv && p.m <= kGemvMaxRows && !p.has_g_idx &&
                    p.zero_points != NBitsZeroPoints::kTyped && p.k % p.block_size == 0 &&
                    p.row_bytes() % kGemvChunkBytes == 0 && p.alignment >= 16 &&
                    p.k <= std::numeric_limits<int32_t>::max() &&
                    (!half_type || device.sm >= 80);
  if (gemv) {
    plan.path = NBitsPath::kGemv;
    // Grids of more 16-column tiles than 16 warps per SM hold at k_split 8 (the window
    // kernel's rule, below).
    const int64_t tiles = (p.n + kGemvTileCols - 1) / kGemvTileCols;
    const bool many_tiles =
        tiles * kGemvMaxKSplit > kGemvTensorCoreWarpsPerSm * std::max(1, device.num_sms);
    // Weights of 128 Mi codes or more (core/gemv_split.h: the TMA tiles' size rule, which
    // the other large-weight rules below share).
    const bool large = gemv_tma_pays(p.n, p.k);
    const bool fp16 = p.dtype == DType::kFloat16;
    // Packed zero points (asymmetric checkpoints) have rules of their own below, from the
    // decode suite run with them and every kernel forced (H200, docs/PERF.md "Zero points").
    const bool zp = p.zero_points == NBitsZeroPoints::kPacked;
    // The CUDA-core kernel (8-bit, float16 / bfloat16, M <= 2); unless forced, where it
    // was faster on the H200 (docs/PERF.md): M = 1, and M = 2 in bfloat16, whose
    // tensor-core decode goes through float32 (in float16 the tensor cores win at M = 2
    // by up to 5 %), but not where the window kernel's line loads (below) take bfloat16
    // M = 2: without a zero-point tensor on large weights (N x K >= 128 Mi) they were 5 %
    // faster (28672 x 8192) and, with two tiles per warp on grids of many tiles, 3-7 %
    // (14336 x 4096, 8192 x 8192), on the other decode shapes 1-4 % either way; with packed
    // zero points 3-10 % faster wherever line loads apply but at 4096 x 4096 (within 1 %).
    // Not when gemv_algo or gemv_tma is set: those choose among the tensor-core kernels.
    const bool fma_applies = half_type && p.bits == 8 && p.m <= kGemvFmaMaxRows;
    const bool bf16_lines_at_two_rows =
        p.dtype == DType::kBFloat16 && p.m == 2 && (zp || large || many_tiles) &&
        p.row_bytes() % kGemvTmaTileBytes == 0 && options.gemv_window != 0 &&
        options.gemv_lines != 0;
    const bool fma_faster =
        p.m == 1 || (p.dtype == DType::kBFloat16 && !bf16_lines_at_two_rows);
    const bool fma_default = fma_faster && options.gemv_algo < 0 && options.gemv_tma < 0;
    plan.gemv_fma =
        fma_applies && (options.gemv_fma == 1 || (options.gemv_fma < 0 && fma_default));
    if (plan.gemv_fma) {
      plan.gemv_rows = static_cast<int>(p.m);
      *out = plan;
      return Status::Ok();
    }
    plan.gemv_algo =
        options.gemv_algo >= 0 ? options.gemv_algo : default_gemv_algo(p.bits, p.block_size);
    // The mma tile always has 8 activation rows; the FMA tile is sized to M.
    plan.gemv_rows = half_type || p.m > 4 ? 8 : p.m > 2 ? 4 : static_cast<int>(p.m);
    // TMA tiles where the kernel applies (SM90, the tensor-core tile, blocks no smaller
    // than half a 128-byte tile's codes: each half takes one scale) and, unless forced,
    // where they pay (core/gemv_split.h): 8-bit only up to M = 4 (at M = 8 the
    // activations' L1 traffic per tile made it 12 % slower at 28672 x 8192, H200).
    const int64_t half_tile_codes = kGemvTmaTileBytes / 2 * 8 / p.bits;
    const bool tma_applies = half_type && p.block_size >= half_tile_codes &&
                             gemv_tma_fits(device.sm, p.n, p.row_bytes());
    const bool tma_faster = large && (p.bits == 4 || p.m <= 4);
    plan.gemv_tma = tma_applies && (options.gemv_tma == 1 || (options.gemv_tma < 0 && tma_faster));
    // The window kernel: tensor-core tiles of algorithm 0 whose windows each lie in one
    // block (block_size >= a window's codes: 128 4-bit, 64 8-bit) on rows of whole
    // windows. It holds more warps per SM than the other tiles (32 at 64 registers; 24 at
    // 80 with packed zero points or 8-bit bfloat16; 8-bit float16 16 at 128), which pays
    // for 4-bit where the grid has
    // more warps than they hold (ceil(N / 16) tiles x 8 > 16 warps x SMs); measured on the
    // H200 (docs/PERF.md) 5-19 % faster there at every decode shape, and up to 7 % slower
    // on N = 4096 x K = 14336 (256 tiles), so by default only there, not where TMA tiles
    // are forced, and not with packed zero points (at 80 registers: at M = 1 up to 8 %
    // slower than the register tile, at M = 8 up to 20 %; on large weights line loads take
    // them, below). It replaces the TMA tile. 8-bit takes it only with line loads (below):
    // without them it was slower than the default kernels at every decode shape and M
    // (float16 1-25 %, bfloat16 6-58 %).
    const int64_t window_codes = kGemvWindowBytes * 8 / p.bits;
    const bool whole_windows = half_type && plan.gemv_algo == kNBitsGemvAlgoUnrolled &&
                               p.row_bytes() % kGemvWindowBytes == 0;
    const bool window_applies = whole_windows && p.block_size >= window_codes;
    const bool window_faster = p.bits == 4 && many_tiles && !zp;
    // Line loads: the window kernel on rows of whole 128-byte lines, its weights read 4
    // rows x 128 bytes per warp instruction and staged through shared memory. Measured on
    // the H200 (docs/PERF.md):
    // * 4-bit, at M <= 4 on large weights (N x K >= 128 Mi, as TMA tiles): 10-20 % faster
    //   (28672 x 8192: M = 1, 2 against the window kernel, M = 4 11 % in one run against
    //   it); on the smaller decode shapes -4 to +5 %; at M = 8 5-14 % slower (the
    //   activations of more rows and the shared-memory round trip share the L1). With
    //   packed zero points (measured at M <= 2 only, so taken there): 8 % faster at 28672 x
    //   8192, M = 2 (and with two tiles, below, at every M).
    // * 8-bit wherever the tensor cores run (by default M >= 2 in float16; in bfloat16
    //   M >= 3, and M = 2 on N x K >= 128 Mi, grids of many tiles or with packed zero
    //   points: above, the CUDA-core kernel). With packed zero points line loads were 2-5 %
    //   faster than the register tile below 128 Mi codes in float16, 3-15 % in bfloat16
    //   but at N = 4096 (-2 to +1 %). Without a zero-point tensor, with one tile
    //   per warp float16 lost to TMA tiles on N x K >= 128 Mi at M <= 4, two tiles (below)
    //   win there:
    //   - bfloat16 (80 registers, 24 warps per SM): at M = 4 and 8 1-12 % faster than the
    //     register or TMA tile on every decode shape, 3-17 % faster than the register
    //     tile forced at M = 1, 2;
    //   - float16 (128 registers, 16 warps per SM; at 80 it lost up to 23 %): 3-8 %
    //     faster than the register tile at M = 2..8 below 128 Mi codes and 2 % at M = 8 of
    //     28672 x 8192, but 0.3-3 % slower than TMA tiles at its M = 2, 4.
    // * Two 16-column tiles per warp (FP8's tile does the same):
    //   - on N x K >= 128 Mi without a zero-point tensor (28672 x 8192, 2026-11-30b,
    //     against the default kernels of the tree before): 4-bit at M = 4, 8 9-17 %
    //     faster, at M = 1, 2 -8 to +1 %; 8-bit float16 from M = 2 2-9 % faster (in place
    //     of TMA tiles at M <= 4); 8-bit bfloat16 at M = 8 2 % faster, at M = 2, 4 2-3 %
    //     slower than one tile;
    //   - below, without one, on grids of many tiles (the window kernel's rule; 14336 x
    //     4096, 8192 x 8192): 4-bit at M = 8 2-11 % faster than the window kernel, 8-bit
    //     bfloat16 at M = 2..8 3-10 % faster than the kernels taken before (the CUDA-core
    //     kernel at M = 2, one tile of line loads from M = 3: at 24 warps per SM 8192 x
    //     8192 took 1.3 waves, two tiles one); 8-bit float16 0-3 %, left at one tile;
    //     N = 4096: slower (the grid halves).
    //   - with packed zero points, on N x K >= 128 Mi: 4-bit 6-20 % faster than the kernels
    //     taken before (line loads of one tile at M <= 2, TMA tiles above) at every M,
    //     8-bit float16 from M = 2 6-15 % (against TMA tiles at M <= 4, the register tile
    //     at M = 8); 8-bit bfloat16 lost 1-9 % to one tile. Below 128 Mi not taken: within
    //     2 % of one tile (8-bit) or of the register tile (4-bit) at most shapes, slower at
    //     N = 4096 and 4-bit 8192 x 8192 M = 1, faster at 4-bit float16 14336 x 4096 M = 1.
    //   With them line loads are taken where one tile was not (4-bit M > 4, 8-bit float16
    //   in place of TMA).
    // * Blocks smaller than a window down to a lane's 16-byte chunk (4-bit 32, 64 codes;
    //   8-bit 16, 32; each weight scaled before the mma, as the register tile does for
    //   them): the same rules (no zero-point tensor, decode suite at blocks of 32 and 64,
    //   2026-11-30c), where they were 6-32 % faster than the register tile on N x K >=
    //   128 Mi and grids of many tiles (4-bit 28672 x 8192: 61-72 -> 43-50 us), within
    //   -8 to +3 % at N = 4096; 8-bit bfloat16 M = 2 as with larger blocks (2-11 % faster
    //   than the CUDA-core kernel on those grids). 4-bit grids of many tiles at M <= 4,
    //   where larger blocks take the window kernel without line loads: two tiles (13-16 %
    //   faster than the register tile, equal to or 1-6 % faster than one tile in float16).
    //   With packed zero points small blocks follow the zero-point rules above, unmeasured.
    const bool small_blocks = p.block_size < window_codes;
    // Blocks of one window (4-bit 128 codes, 8-bit 64): the pair's two scales of a row come
    // as one 4-byte load (NBitsGemvWindowKernel's scale pairs), which needs 4-byte aligned
    // scales; with less, the kernels without line loads.
    const bool lines_applies = whole_windows && p.block_size >= kGemvChunkBytes * 8 / p.bits &&
                               p.row_bytes() % kGemvTmaTileBytes == 0 &&
                               (p.block_size != window_codes || p.scale_alignment >= 4);
    const bool two_tiles_faster =
        zp      ? large && (p.bits == 4 || fp16)
        : large ? p.bits == 4 || p.m >= (fp16 ? 2 : 5)
                : many_tiles && (p.bits == 4 ? p.m > 4 || small_blocks : !fp16);
    const bool two_tiles_wanted =
        lines_applies && (options.gemv_tiles_per_warp == 2 ||
                          (options.gemv_tiles_per_warp < 0 && two_tiles_faster));
    const bool lines_faster =
        two_tiles_wanted ||
        (p.bits == 4 ? p.m <= (zp ? 2 : 4) && large
                     : p.dtype == DType::kBFloat16 || !(tma_applies && tma_faster));
    const bool lines_wanted =
        lines_applies && options.gemv_window != 0 &&
        (options.gemv_lines == 1 || (options.gemv_lines < 0 && options.gemv_tma != 1 && lines_faster));
    plan.gemv_window =
        lines_wanted ||
        (window_applies && (options.gemv_window == 1 ||
                            (options.gemv_window < 0 && options.gemv_tma != 1 && window_faster)));
    plan.gemv_lines = lines_wanted;
    plan.gemv_tiles_per_warp = plan.gemv_lines && two_tiles_wanted ? 2 : 1;
    if (plan.gemv_window) plan.gemv_tma = false;
    // K split (core/gemv_split.h) over the kernel's units of K (TMA tiles or 64-byte
    // windows) and its warps (one per tiles_per_warp 16-column tiles): float32's FMA tile
    // holds fewer warps per SM, the window kernel more (two tiles: 16).
    const int64_t warps_per_sm =
        !half_type ? kGemvWarpsPerSmFloat
        : plan.gemv_window ? nbits_window_warps_per_sm(p.bits, zp, fp16, plan.gemv_tiles_per_warp)
                           : kGemvTensorCoreWarpsPerSm;
    // 4-bit on two tiles: a warp's start costs 6 windows, not 2. Measured (H200,
    // 2026-11-30e, K = 8192, M = 1, 4, 8, both types, every k_split forced): with 2 the
    // model took k_split 8 at N = 22528 (2.7 waves; 4-12 % slower than 0.67 of one of 2);
    // with 6 it picks the fastest split at 16896 (1 wave of 4), 22528 (0.67 of 2), 33792
    // (1 of 2) and 45056 (2.7 of 4) and the same as before at 28672.
    const bool two_tiles_4bit = plan.gemv_tiles_per_warp == 2 && p.bits == 4;
    const GemvSplitModel split_model = gemv_split_model(
        p.n, gemv_k_units(p.row_bytes(), plan.gemv_tma), device.num_sms, warps_per_sm,
        plan.gemv_tiles_per_warp, two_tiles_4bit ? kNBitsTwoTilePipelineFill : kGemvPipelineFill);
    plan.gemv_k_split = choose_gemv_k_split(split_model);
    // 4-bit on two tiles on N x K >= 128 Mi where the model's split leaves one partial wave
    // of 3/4 of the resident warps or more (28672 x 8192: 0.85): twice the split (1.7 waves)
    // in bfloat16 at M <= 4 and in float16 at M = 1 without a zero-point tensor. Not where
    // the model's split fills a wave or leaves less of one (16896, 22528, 33792, 45056 x
    // 8192, 2026-11-30e: doubling was 1-13 % slower there).
    // Measured at 28672 x 8192 (H200):
    // * bfloat16: k_split 4 7-8 % faster than 2 at M = 1, 2, 6 % at M = 4 (2026-11-30b);
    // * float16 with zero points: 4 was 5-9 % faster at M = 1, 4 (2026-11-30c); since the
    //   one-byte-per-pair zero-point decode (2026-11-30d) 3-4 % slower at M = 3, 4 (47.9 /
    //   48.8 against 46.6 / 46.9 us, two repeats), 5 % faster at M = 2 (43.8 against 46.1);
    //   since scale pairs (2026-11-30f) 0.6 % slower at M = 1 and 2 % at M = 2 (43.8-43.9
    //   / 44.5-44.6 against 43.6 / 43.7 us), 4 % at M = 4;
    // * float16 without: at M = 1 faster in three runs (1 %, 6 %, 2.3 %), at M = 2 within
    //   1 %, at M = 4 4 % slower;
    // * M = 8: 2 was 1-8 % faster everywhere. Not below 128 Mi: at 14336 x 4096 (blocks of
    //   32 codes) 8 instead of 4 was 12-19 % slower at M <= 4.
    // Two tiles at 168 registers (12 warps per SM, k_split <= 4) where the wave model says
    // they are faster than at 128 (16 warps): its cost at 12 warps weighed by
    // kGemvWideCostPercent against the best at 16, both at the two-tile start of 6
    // windows (8-bit's split model starts at 2; with it 128 registers stayed at 20480 x
    // 8192, where 168 ran 11-15 % faster). In effect: where the grid takes no more waves at
    // 12 warps per SM than at 16. Measured (H200, docs/PERF.md 2026-11-30h, against 128
    // registers at the planner's split): where the rule takes 168, 6-17 % faster in the
    // sweep that set the weight (4-bit N = 20480 to 36864 x 8192 and 10240 x 16384, both
    // types, M = 1..8, packed zero points; 8-bit at 20480 and 36864, M = 2, 8), and on 11
    // held-out shapes 3.6-11.7 % faster in 8, within 1 % in 2, 2.8 % slower in one
    // (bfloat16 M = 2, 18432 x 16384); where it keeps 128 (28672 x 8192, 14336 x 4096 M =
    // 8, 26624 and 51200 x 8192) 168 was 4-26 % slower. The 128-register kernel's doubled
    // split (below) helped 168 in bfloat16 at M = 1, N = 20480, not at 24576 or M = 4:
    // not applied.
    if (plan.gemv_tiles_per_warp == 2) {
      GemvSplitModel narrow = split_model;
      narrow.pipeline_fill = kNBitsTwoTilePipelineFill;
      BQMM_RETURN_IF_ERROR(choose_gemv_registers(narrow, device.num_sms, options.gemv_registers,
                                                 options.gemv_k_split, &plan.gemv_registers,
                                                 &plan.gemv_k_split));
    }
    const int double_up_to_m = p.dtype == DType::kBFloat16 ? 4 : zp ? 0 : 1;
    if (two_tiles_4bit && plan.gemv_registers != kGemvWideRegisters &&
        p.m <= double_up_to_m && large && gemv_split_partial_wave(split_model, plan.gemv_k_split))
      plan.gemv_k_split = std::min(2 * plan.gemv_k_split, kGemvMaxKSplit);
    if (options.gemv_k_split > 0) plan.gemv_k_split = options.gemv_k_split;
    *out = plan;
    return Status::Ok();
  }

  // Default path: dequantize B in N tiles -> cuBLAS -> bias.
  plan.path = NBitsPath::kDequantGemm;
  // The vector kernel reads 8 codes with one load (8 or 4 bytes of B) and writes them
  // with 16-byte stores into rows of K * sizeof(T1) bytes.
  plan.dequant_vec8 = p.k % 8 == 0 && p.alignment >= 8;
  WorkspaceLayout layout;
  plan_dequant_gemm_workspace(p.k * static_cast<int64_t>(dtype_size(p.dtype)), options,
                              device.sm, layout, plan);
  *out = plan;
  return Status::Ok();
}

}  // namespace bqmm
