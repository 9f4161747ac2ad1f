// Fp8WeightMatMul planner: pure function of (problem, device, options) -> plan.
// The dispatch chain of the original design, cheapest applicable path first:
//   empty output -> K == 0 (bias only) -> fused decode GEMV (tensor cores, else CUDA
//   cores) -> dequantize + cuBLAS.
// The QDQ of a W8A8 activation is fused into the GEMV kernels' activation load, and is a
// separate kernel into the workspace only on the dequant + cuBLAS path.
#include <algorithm>
#include <ostream>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "core/env.h"
#include "core/check.h"
#include "core/gemv_split.h"
#include "core/workspace.h"

namespace bqmm {
namespace {

constexpr int64_t kGemvMaxRows = 8;  // the mma "N" extent; the FMA kernel's largest row group
// The two-tile kernel's start in line pairs (128 codes of a row each, as NBitsMatMul's
// 4-bit windows), for its 128 / 168-register comparison only; the K split keeps the
// model's kGemvPipelineFill.
constexpr int64_t kFp8TwoTileCompareFill = kNBitsTwoTilePipelineFill;
// The 168-register two-tile kernel's smallest k_split (measured: at 1, one long range per
// warp, it lost to 128 registers where the model favoured it).
constexpr int kFp8WideMinKSplit = 2;
}  // namespace

const char* fp8_path_name(Fp8Path path) {
  switch (path) {
    case Fp8Path::kEmpty: return "empty";
    case Fp8Path::kBiasOnly: return "bias_only";
    case Fp8Path::kGemvFma: return "gemv_fma";
    case Fp8Path::kGemvMma: return "gemv_mma";
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
            << (p.has_a_scale ? " w8a8" : "") << " align=" << p.alignment;
}

std::ostream& operator<<(std::ostream& os, const Fp8MatMulPlan& plan) {
  os << "Fp8MatMulPlan{path=" << fp8_path_name(plan.path) << "; " << plan.problem << "; "
     << plan.device;
  if (plan.path == Fp8Path::kDequantGemm) {
    os << "; qdq_activation=" << (plan.qdq_activation ? "yes" : "no")
       << "; dequant=" << (plan.dequant_vec16 ? "vec16" : "scalar") << "; n_tile=" << plan.n_tile
       << " x " << plan.num_n_tiles << " in " << plan.scratch_buffers << " buffer(s)";
  }
  if (plan.path == Fp8Path::kGemvFma) os << "; rows_per_warp=" << plan.gemv_rows_per_warp;
  if (plan.path == Fp8Path::kGemvMma)
    os << "; k_split=" << plan.gemv_k_split << "; tma=" << (plan.gemv_tma ? 1 : 0)
       << "; lines=" << (plan.gemv_lines ? 1 : 0) << "; tiles=" << plan.gemv_tiles_per_warp;
  if (plan.path == Fp8Path::kGemvMma && plan.gemv_registers > 0)
    os << "; regs=" << plan.gemv_registers;
  os << "; workspace=" << plan.workspace_bytes << "B";
  if (plan.workspace_bytes > 0) {
    os << " (act " << plan.act_bytes << "@" << plan.act_offset << ", cublas "
       << plan.cublas_bytes << "@" << plan.cublas_offset << ", scratch " << plan.scratch_bytes
       << "@" << plan.scratch_offset << ")";
  }
  return os << "}";
}

Status fp8_matmul_options_from_env(Fp8MatMulOptions* opts) {
  BQMM_RETURN_IF_ERROR(
      env::read_dequant_options(&opts->dequant_scratch_bytes, &opts->overlap_dequant));
  int64_t mma = -1;
  BQMM_RETURN_IF_ERROR(env::read_int("BQMM_FP8_GEMV_MMA", 0, 1, &mma));
  if (mma >= 0) opts->allow_gemv_mma = mma == 1;
  if (mma == 1) opts->gemv_mma_min_rows = 1;
  BQMM_RETURN_IF_ERROR(env::read_k_split("BQMM_FP8_GEMV_KSPLIT", &opts->gemv_k_split));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_FP8_GEMV_TMA", 0, 1, &opts->gemv_tma));
  BQMM_RETURN_IF_ERROR(env::read_int_option("BQMM_FP8_GEMV_LINES", 0, 1, &opts->gemv_lines));
  BQMM_RETURN_IF_ERROR(
      env::read_int_option("BQMM_FP8_GEMV_TILES", 1, 2, &opts->gemv_tiles_per_warp));
  return env::read_gemv_registers("BQMM_FP8_GEMV_REGISTERS", &opts->gemv_registers);
}

Status plan_fp8_matmul(const Fp8MatMulProblem& p, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, Fp8MatMulPlan* out) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return Status(StatusCode::kInvalidArgument,
                  std::string("problem.dtype: expected float16 or bfloat16 but got ") +
                      dtype_name(p.dtype));
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.block_size <= 0)
    return Status(StatusCode::kInvalidArgument,
                  "problem: expected M, N, K >= 0 and block_size > 0");
  BQMM_RETURN_IF_ERROR(check::shared_options(options));
  if (options.gemv_mma_min_rows < 1)
    return Status(StatusCode::kInvalidArgument,
                  "options.gemv_mma_min_rows: expected >= 1 but got " +
                      std::to_string(options.gemv_mma_min_rows));

  Fp8MatMulPlan plan;
  plan.problem = p;
  plan.device = device;

  if (plan_trivial_path(Fp8Path::kEmpty, Fp8Path::kBiasOnly, plan)) {
    *out = plan;
    return Status::Ok();
  }

  // Decode GEMV: each weight row streamed once for all M <= 8 rows. 16-element chunks
  // must stay inside one scale block, and rows of A and B must take 16-byte loads.
  const bool gemv = options.allow_gemv && p.m <= kGemvMaxRows && p.k % 16 == 0 &&
                    p.block_size % 16 == 0 && p.alignment >= 16;
  if (gemv) {
    // Tensor cores: a 64-element K window per lane load, so K and block_size are
    // multiples of 64; K >= 256 keeps every warp of the K split busy. Below
    // gemv_mma_min_rows rows (M = 1 by default) the CUDA-core kernel is the faster stream.
    const bool mma = options.allow_gemv_mma && p.m >= options.gemv_mma_min_rows &&
                     device.sm >= 80 && p.k % 64 == 0 && p.k >= 256 && p.block_size % 64 == 0;
    if (mma) {
      plan.path = Fp8Path::kGemvMma;
      // Three weight streams (DESIGN.md): fragment-shaped register loads, whole 128-byte
      // lines by register loads staged through shared memory ("lines", rows of whole
      // lines), and on SM90+ 16-row x 128-byte tiles by the tensor memory accelerator
      // (its coordinates are 32-bit). Measured on the H200 (docs/PERF.md): line loads
      // wherever they apply, 1-7 % faster than fragment loads at M = 2..8 on every decode
      // shape below 128 Mi codes (2026-11-30); on larger weights (28672 x 8192) with two
      // 16-column tiles per warp, 2-8 % faster than TMA tiles and 6-12 % faster than line
      // loads of one tile (2026-11-30b), which stay 0-30 % faster below 128 Mi (fewer
      // warps: the grid halves). TMA tiles where they pay but line loads do not apply
      // (K % 128 == 64) or when forced; forced, line loads replace TMA tiles unless those
      // are forced too.
      const bool tma_fits = gemv_tma_fits(device.sm, p.n, p.k);
      const bool large = gemv_tma_pays(p.n, p.k);
      const bool tma_wanted = tma_fits && (options.gemv_tma == 1 || (options.gemv_tma < 0 && large));
      const bool lines_applies = p.k % kGemvTmaTileBytes == 0;
      plan.gemv_lines = lines_applies && options.gemv_tma != 1 && options.gemv_lines != 0;
      plan.gemv_tma = tma_wanted && !plan.gemv_lines;
      plan.gemv_tiles_per_warp =
          !plan.gemv_lines ? 1 : options.gemv_tiles_per_warp > 0 ? options.gemv_tiles_per_warp
                                                                 : large ? 2 : 1;
      // K split over the kernel's units (128-byte TMA tiles or line pairs, else windows)
      // and its warps (one per tiles_per_warp 16-column tiles).
      const GemvSplitModel split_model =
          gemv_split_model(p.n, gemv_k_units(p.k, plan.gemv_tma || plan.gemv_lines),
                           device.num_sms, kGemvTensorCoreWarpsPerSm, plan.gemv_tiles_per_warp);
      plan.gemv_k_split = choose_gemv_k_split(split_model);
      // Two tiles at 168 registers where the wave model says so (core/gemv_split.h, as
      // NBitsMatMul's two-tile kernel; both forms costed with a start of
      // kFp8TwoTileCompareFill line pairs), in float16 and at k_split 2 or 4 only.
      // Measured (H200, docs/PERF.md 2026-11-30h, 128 registers at the planner's split
      // against 168 at the model's): float16 M = 2..8 at 20480, 24576 and 36864 x 8192
      // 4-11 % faster; at k_split 1 (one long range per warp) 6 % slower (49152 x 5120; 2
      // there ties 128); bfloat16, whose FP8 decode costs more per weight, lost 1-6 % at
      // 20480 and 36864 and 24 % at 45056 x 8192 (k_split 1).
      if (plan.gemv_tiles_per_warp == 2) {
        GemvSplitModel narrow = split_model;
        narrow.pipeline_fill = kFp8TwoTileCompareFill;
        const int registers = options.gemv_registers < 0 && p.dtype == DType::kBFloat16
                                  ? kGemvTwoTileRegisters
                                  : options.gemv_registers;
        BQMM_RETURN_IF_ERROR(choose_gemv_registers(narrow, device.num_sms, registers,
                                                   options.gemv_k_split, &plan.gemv_registers,
                                                   &plan.gemv_k_split, kFp8WideMinKSplit));
      }
      if (options.gemv_k_split > 0) plan.gemv_k_split = options.gemv_k_split;
    } else {
      plan.path = Fp8Path::kGemvFma;
      plan.gemv_rows_per_warp = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
    }
    *out = plan;
    return Status::Ok();
  }

  // Default path: [QDQ A] -> dequantize B in N tiles -> cuBLAS -> bias.
  plan.path = Fp8Path::kDequantGemm;
  const size_t elem = dtype_size(p.dtype);
  plan.qdq_activation = p.has_a_scale;
  // The vector kernel takes aligned 8-byte pieces of 16-element chunks of B and indexes
  // within a row in 32 bits.
  plan.dequant_vec16 = p.k % 16 == 0 && p.alignment >= 16 && p.k < (int64_t{1} << 31);

  WorkspaceLayout layout;
  plan.act_bytes = plan.qdq_activation ? static_cast<size_t>(p.m * p.k) * elem : 0;
  plan.act_offset = layout.take(plan.act_bytes);
  plan_dequant_gemm_workspace(p.k * static_cast<int64_t>(elem), options, device.sm, layout, plan);
  *out = plan;
  return Status::Ok();
}

}  // namespace bqmm
