// The run() paths both operators share, on either operator's plan and arguments
// (Fp8MatMulPlan / Fp8MatMulArgs, NBitsMatMulPlan / NBitsMatMulArgs: the same field and
// path names): nothing for M or N = 0, Y = bias for K = 0, the fused GEMM's launch and the
// dequant + GEMM loop.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "core/run_prologue.h"
#include "cuda/launchers.h"
#include "cuda/tiled_dequant_gemm.h"

namespace bqmm::cuda {

// Every operator's run(): the common start (core/run_prologue.h; `matches` is the
// operator's check of the arguments against the plan), the shared paths kEmpty and
// kBiasOnly, then `own()` for the operator's own paths.
template <typename Plan, typename Args, typename Own>
Status run_plan(const Plan& plan, const Args& args, const Status& matches, const void* workspace,
                size_t workspace_bytes, cudaStream_t stream, Own&& own) {
  BQMM_RETURN_IF_ERROR(begin_run(plan, args, matches, workspace, workspace_bytes));
  using Path = decltype(plan.path);
  if (plan.path == Path::kEmpty) return Status::Ok();
  if (plan.path == Path::kBiasOnly)
    return launch_fill_bias(plan.problem.dtype, args.y.data,
                            args.bias ? args.bias->data : nullptr, plan.problem.m,
                            plan.problem.n, stream);
  return own();
}

// The GEMMs' problem fields of `g` from the plan and the call: the sizes, A `a` (the input,
// or FP8 W8A8's QDQ copy), the bias and Y; the operator has set the weight's fields.
template <typename Plan, typename Args>
void fill_gemm_problem(const Plan& plan, const Args& args, const void* a, FusedGemmArgs* g) {
  const auto& p = plan.problem;
  g->dtype = p.dtype;
  g->a = a;
  g->bias = args.bias ? args.bias->data : nullptr;
  g->y = args.y.data;
  g->m = p.m;
  g->n = p.n;
  g->k = p.k;
  g->block_size = p.block_size;
  g->k_blocks = p.k_blocks();
}

// The planned fused GEMM on A `a` (the input, or FP8 W8A8's QDQ copy): `g` carries the
// operator's weight fields (weights, b, scales, row_bytes, N-bit zero points); the sizes,
// bias and Y are filled here, and with a K split the partial sums go to the plan's region
// of the workspace `ws`.
template <typename Plan, typename Args>
Status run_planned_fused_gemm(const Plan& plan, const Args& args, const void* a,
                              FusedGemmArgs g, uint8_t* ws, cudaStream_t stream) {
  fill_gemm_problem(plan, args, a, &g);
  if (plan.regions.act_order_bytes > 0) g.a_ordered = ws + plan.regions.act_order_offset;
  float* partials = plan.regions.partial_bytes > 0
                        ? reinterpret_cast<float*>(ws + plan.regions.partial_offset)
                        : nullptr;
  return launch_fused_gemm(g, plan.gemm, partials, stream);
}

// The planned mixed-input GEMM on A `a` (the input, or FP8 W8A8's QDQ copy): `g` carries
// the operator's weight fields as for the fused GEMM (typed zero points too); the scales
// are read from the operator's prepacked input where it is given, else rewritten into the
// plan's region of the workspace `ws` first.
template <typename Plan, typename Args>
Status run_planned_mixed_gemm(const Plan& plan, const Args& args, const void* a, FusedGemmArgs g,
                              uint8_t* ws, cudaStream_t stream) {
  fill_gemm_problem(plan, args, a, &g);
  MixedGemmLaunch launch;
  launch.tile_m = plan.gemm.tile_m;
  launch.stream_k = plan.gemm.stream_k;
  launch.swizzle = plan.gemm.swizzle;
  launch.num_sms = plan.device.num_sms;
  if (args.prepacked) {
    launch.prepacked = args.prepacked->data;
  } else {
    launch.scales = ws + plan.regions.scales_offset;
  }
  launch.partials = ws + plan.regions.partial_offset;
  launch.partial_bytes = plan.regions.partial_bytes;
  return launch_mixed_gemm(g, launch, stream);
}

// The planned dequant + GEMM path on A `a` (the input, or its QDQ copy), Y `y` and
// workspace `ws`, then the bias (or nullptr) added in a second pass (cuBLAS's output is
// rounded to T once before it).
template <typename Plan>
Status run_planned_dequant_gemm(const Handle& handle, const Plan& plan, const void* a, void* y,
                                const void* bias, uint8_t* ws, const DequantTile& dequant,
                                cudaStream_t stream) {
  TiledDequantGemm t;
  t.dtype = plan.problem.dtype;
  t.m = plan.problem.m;
  t.n = plan.problem.n;
  t.k = plan.problem.k;
  t.a = a;
  t.y = y;
  t.n_tile = plan.dequant.n_tile;
  t.scratch = ws + plan.regions.scratch_offset;
  t.cublas_workspace = ws + plan.regions.cublas_offset;
  t.cublas_workspace_bytes = plan.regions.cublas_bytes;
  BQMM_RETURN_IF_ERROR(run_tiled_dequant_gemm(handle, t, dequant, stream));
  if (bias == nullptr) return Status::Ok();
  return launch_bias_add(t.dtype, y, bias, t.m, t.n, stream);
}

}  // namespace bqmm::cuda
