// NBitsMatMul: executes a plan. Enqueues kernels and cuBLAS calls on the caller's stream;
// never allocates, never synchronizes, never reads device memory on the host.
#include <algorithm>
#include <cstdint>
#include <string>

#include "bqmm/nbits_matmul.h"
#include "core/check.h"
#include "core/prepack.h"
#include "core/run_prologue.h"
#include "cuda/launchers.h"
#include "cuda/run_paths.h"

namespace bqmm {
namespace {

// The args must describe the problem the plan was made for.
Status check_args_match_plan(const NBitsMatMulPlan& plan, const NBitsMatMulArgs& args) {
  const NBitsMatMulProblem& q = plan.problem;
  NBitsMatMulAttrs attrs;
  attrs.k = q.k;
  attrs.n = q.n;
  attrs.bits = q.bits;
  attrs.block_size = q.block_size;
  NBitsMatMulProblem p;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(args, attrs, &p));
  BQMM_RETURN_IF_ERROR(check_plan_matches(
      q, p,
      p.dtype == q.dtype && p.m == q.m && p.zero_points == q.zero_points &&
          p.has_g_idx == q.has_g_idx && p.has_bias == q.has_bias &&
          p.has_prepacked == q.has_prepacked));
  return check_alignment_at_least("scales", q.scale_alignment, p.scale_alignment);
}

Status run_dequant_gemm(const Handle& handle, const NBitsMatMulPlan& plan,
                        const NBitsMatMulArgs& args, uint8_t* ws, cudaStream_t stream) {
  const NBitsMatMulProblem& p = plan.problem;
  const int64_t elem = static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t k_blocks = p.k_blocks();
  const auto* b = static_cast<const uint8_t*>(args.b.data);
  const auto* scales = static_cast<const uint8_t*>(args.scales.data);
  const auto* zp = args.zero_points ? static_cast<const uint8_t*>(args.zero_points->data) : nullptr;
  // Bytes from one row of the zero points to the next.
  const int64_t zp_row_bytes =
      p.zero_points == NBitsZeroPoints::kTyped ? k_blocks * elem : p.zp_row_bytes();
  const int32_t* g_idx = args.g_idx ? static_cast<const int32_t*>(args.g_idx->data) : nullptr;
  return cuda::run_planned_dequant_gemm(
      handle, plan, args.a.data, args.y.data, args.bias ? args.bias->data : nullptr, ws,
      [&](int64_t n0, int64_t rows, void* out, cudaStream_t s) {
        cuda::NBitsDequantArgs d;
        d.dtype = p.dtype;
        d.bits = p.bits;
        d.b = b + n0 * p.row_bytes();
        d.scales = scales + n0 * k_blocks * elem;
        if (p.zero_points == NBitsZeroPoints::kPacked) d.zp_packed = zp + n0 * zp_row_bytes;
        if (p.zero_points == NBitsZeroPoints::kTyped) d.zp_typed = zp + n0 * zp_row_bytes;
        d.g_idx = g_idx;
        d.rows = rows;
        d.k = p.k;
        d.block_size = p.block_size;
        d.out = out;
        return cuda::launch_nbits_dequant(d, plan.dequant.vector, s);
      },
      stream);
}

// The fused GEMM or the mixed-input GEMM (plan.path) on the packed codes: rows of
// row_bytes() bytes (padded blocks included), T1 scales, packed, typed or default zero
// points.
Status run_gemm(const NBitsMatMulPlan& plan, const NBitsMatMulArgs& args, uint8_t* ws,
                cudaStream_t stream) {
  const NBitsMatMulProblem& p = plan.problem;
  cuda::FusedGemmArgs g;
  g.weights = p.bits == 8 ? cuda::GemmWeights::kInt8 : cuda::GemmWeights::kInt4;
  g.b = static_cast<const uint8_t*>(args.b.data);
  g.scales = args.scales.data;
  g.row_bytes = p.row_bytes();
  if (p.zero_points == NBitsZeroPoints::kPacked) {
    g.zp_packed = static_cast<const uint8_t*>(args.zero_points->data);
    g.zp_row_bytes = p.zp_row_bytes();
  }
  if (p.zero_points == NBitsZeroPoints::kTyped) g.zp_typed = args.zero_points->data;
  if (plan.path == NBitsPath::kMixedGemm) return cuda::run_planned_mixed_gemm(plan, args, args.a.data, g, ws, stream);
  return cuda::run_planned_fused_gemm(plan, args, args.a.data, g, ws, stream);
}

Status run_gemv(const NBitsMatMulPlan& plan, const NBitsMatMulArgs& args, cudaStream_t stream) {
  const NBitsMatMulProblem& p = plan.problem;
  cuda::NBitsGemvArgs g;
  g.dtype = p.dtype;
  g.bits = p.bits;
  g.a = args.a.data;
  g.b = static_cast<const uint8_t*>(args.b.data);
  g.scales = args.scales.data;
  if (p.zero_points == NBitsZeroPoints::kPacked) g.zp_packed = static_cast<const uint8_t*>(args.zero_points->data);
  if (p.zero_points == NBitsZeroPoints::kTyped) g.zp_typed = args.zero_points->data;
  g.bias = args.bias ? args.bias->data : nullptr;
  g.y = args.y.data;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.block_size = p.block_size;
  g.dependent = plan.gemv.dependent_launch;
  if (plan.gemv.fma) return cuda::launch_nbits_gemv_fma(g, plan.gemv.rows, stream);
  return cuda::launch_nbits_gemv(g, plan.gemv.algo, plan.gemv.rows, plan.gemv.k_split,
                                 plan.gemv.tma, plan.gemv.window, plan.gemv.lines,
                                 plan.gemv.tiles, plan.gemv.registers, stream);
}

}  // namespace

Status run_nbits_matmul(const Handle& handle, const NBitsMatMulPlan& plan,
                        const NBitsMatMulArgs& args, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  return cuda::run_plan(
      plan, args, check_args_match_plan(plan, args), workspace, workspace_bytes, stream,
      [&]() -> Status {
        switch (plan.path) {
          case NBitsPath::kEmpty:
          case NBitsPath::kBiasOnly:
            break;  // run by run_plan
          case NBitsPath::kGemv:
            return run_gemv(plan, args, stream);
          case NBitsPath::kMixedGemm:
          case NBitsPath::kFusedGemm:
            return run_gemm(plan, args, static_cast<uint8_t*>(workspace), stream);
          case NBitsPath::kDequantGemm:
            return run_dequant_gemm(handle, plan, args, static_cast<uint8_t*>(workspace), stream);
        }
        return Status(StatusCode::kInternal, "run_nbits_matmul: unknown path");
      });
}

Status prepack_nbits_matmul(const NBitsMatMulAttrs& attrs, const TensorView& scales,
                            const std::optional<TensorView>& zero_points,
                            const MutableTensorView& prepacked, cudaStream_t stream) {
  NBitsMatMulProblem p;
  BQMM_RETURN_IF_ERROR(validate_nbits_prepack(attrs, scales, zero_points, prepacked, &p));
  cuda::FusedGemmArgs g;
  g.weights = p.bits == 8 ? cuda::GemmWeights::kInt8 : cuda::GemmWeights::kInt4;
  g.dtype = p.dtype;
  g.scales = scales.data;
  if (p.zero_points == NBitsZeroPoints::kPacked) {
    g.zp_packed = static_cast<const uint8_t*>(zero_points->data);
    g.zp_row_bytes = p.zp_row_bytes();
  }
  if (p.zero_points == NBitsZeroPoints::kTyped) g.zp_typed = zero_points->data;
  g.n = p.n;
  g.k_blocks = p.k_blocks();
  return cuda::launch_mixed_scales(g, prepacked.data, stream);
}

}  // namespace bqmm
