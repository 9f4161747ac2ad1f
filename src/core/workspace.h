// Workspace layout helper shared by the planners: carves 256-byte aligned regions out of
// the caller's single workspace buffer (cuBLAS wants 256-byte aligned workspaces; the
// vector kernels want 16).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "bqmm/tensor.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"

namespace bqmm {

constexpr size_t kWorkspaceAlign = 256;

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

class WorkspaceLayout {
 public:
  // Reserves `bytes` (0 reserves nothing) and returns its offset.
  size_t take(size_t bytes) {
    if (bytes == 0) return 0;
    const size_t off = end_;
    end_ = align_up(end_ + bytes, kWorkspaceAlign);
    return off;
  }
  size_t total() const { return end_; }

 private:
  size_t end_ = 0;
};

// How the dequant + GEMM paths tile N: the weight is dequantized into a scratch of at
// most `scratch_bytes` and multiplied tile by tile, as many rows per tile as fit (at least
// one). Tiles of 256 rows or more are multiples of 256 rows.
struct DequantTiling {
  int64_t n_tile = 0;        // rows per tile (the last may be shorter)
  int64_t num_tiles = 0;
  int64_t buffer_bytes = 0;  // the scratch, padded to kWorkspaceAlign

  static DequantTiling make(int64_t n, int64_t row_bytes, int64_t scratch_bytes) {
    DequantTiling t;
    int64_t rows = std::min(n, scratch_bytes / row_bytes);
    if (rows < 1) rows = 1;  // a row larger than the limit still runs, alone
    if (rows < n && rows >= 256) rows = rows / 256 * 256;
    t.n_tile = rows;
    t.num_tiles = (n + t.n_tile - 1) / t.n_tile;
    t.buffer_bytes = static_cast<int64_t>(align_up(static_cast<size_t>(t.n_tile * row_bytes),
                                                   kWorkspaceAlign));
    return t;
  }
};

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before.
inline size_t cublas_workspace_bytes(int sm) { return sm >= 90 ? (size_t{32} << 20) : (size_t{4} << 20); }

// The dequant + GEMM part of either operator's plan: N tiles of a dequantized weight of
// `row_bytes` per row, then the cuBLAS workspace and the scratch taken from `layout`
// (after whatever the operator took before), and the workspace total.
template <typename Plan>
void plan_dequant_gemm_workspace(int64_t row_bytes, int64_t scratch_bytes, int sm,
                                 WorkspaceLayout& layout, Plan& plan) {
  const DequantTiling tiling = DequantTiling::make(plan.problem.n, row_bytes, scratch_bytes);
  plan.dequant.n_tile = tiling.n_tile;
  plan.dequant.num_n_tiles = tiling.num_tiles;
  plan.regions.cublas_bytes = cublas_workspace_bytes(sm);
  plan.regions.cublas_offset = layout.take(plan.regions.cublas_bytes);
  plan.regions.scratch_bytes = static_cast<size_t>(tiling.buffer_bytes);
  plan.regions.scratch_offset = layout.take(plan.regions.scratch_bytes);
  plan.workspace_bytes = layout.total();
}

// The float32 partial sums [k_split, M, N] of a K split > 1 (the fused and W8A8 GEMMs;
// none where the W8A8 GEMM sums its split in a cluster); then the workspace total.
template <typename Plan>
void plan_gemm_partials(WorkspaceLayout& layout, Plan& plan) {
  const int64_t split = plan.gemm.k_split;
  const int64_t partials = split > 1 && !plan.gemm.cluster_reduce ? split * plan.problem.m * plan.problem.n : 0;
  plan.regions.partial_bytes = static_cast<size_t>(partials) * sizeof(float);
  plan.regions.partial_offset = layout.take(plan.regions.partial_bytes);
  plan.workspace_bytes = layout.total();
}

// The fused GEMM part of either operator's plan: on the Hopper mainloop
// (plan.gemm.wgmma) the activation in its K order (gemm_act_order_bytes), with a K split
// (plan.gemm.k_split > 1) the float32 partial sums [k_split, M, N] that the second kernel
// adds, taken from `layout` (after whatever the operator took before); then the workspace
// total.
template <typename Plan>
void plan_fused_gemm_workspace(WorkspaceLayout& layout, Plan& plan) {
  const auto& p = plan.problem;
  plan.regions.act_order_bytes =
      plan.gemm.wgmma ? static_cast<size_t>(gemm_act_order_bytes(p.m, p.k, plan.gemm.tile_m, dtype_size(p.dtype))) : 0;
  plan.regions.act_order_offset = layout.take(plan.regions.act_order_bytes);
  plan_gemm_partials(layout, plan);
}

// The mixed-input GEMM part of either operator's plan: its tile, schedule and tile order
// (the rules of core/mixed_plan.h, among the candidates `forced` leaves), then the scales
// [k_blocks, N] of `scales_dtype` (`zeros`: and as many zeros after them; none where the
// problem has them prepacked) and stream-K's partial tiles taken from `layout` (after
// whatever the operator took before); then the workspace total.
template <typename Plan>
void plan_mixed_gemm_workspace(const MixedForced& forced, DType scales_dtype, bool zeros, WorkspaceLayout& layout,
                               Plan& plan) {
  const auto& p = plan.problem;
  plan.gemm.wgmma = true;
  const MixedSchedule schedule = choose_mixed_schedule(p.m, p.n, p.k, plan.device.num_sms, forced);
  plan.gemm.stream_k = schedule.stream_k;
  plan.gemm.tile_m = schedule.tile_m;
  plan.gemm.tile_n = kMixedTileN;
  plan.gemm.swizzle = mixed_swizzle(p.m, p.n, schedule, forced);
  plan.regions.scales_bytes =
      p.has_prepacked ? 0 : static_cast<size_t>(mixed_scales_bytes(p.n, p.k_blocks(), scales_dtype, zeros));
  plan.regions.scales_offset = layout.take(plan.regions.scales_bytes);
  plan.regions.partial_bytes =
      schedule.stream_k ? static_cast<size_t>(mixed_stream_k_bytes(p.m, p.n, schedule.tile_m)) : 0;
  plan.regions.partial_offset = layout.take(plan.regions.partial_bytes);
  plan.workspace_bytes = layout.total();
}

// The paths every operator plans before its own: nothing to do for M or N = 0, Y = bias
// (or zeros) for K = 0. Returns whether `plan` took one of them.
template <typename Plan, typename Path>
bool plan_trivial_path(Path empty, Path bias_only, Plan& plan) {
  if (plan.problem.m == 0 || plan.problem.n == 0) {
    plan.path = empty;
    return true;
  }
  if (plan.problem.k == 0) {
    plan.path = bias_only;
    return true;
  }
  return false;
}

}  // namespace bqmm
