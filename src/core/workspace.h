// Workspace layout helper shared by the planners: carves 256-byte aligned regions out of
// the caller's single workspace buffer (cuBLAS wants 256-byte aligned workspaces; the
// vector kernels want 16).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

// How the dequant + GEMM paths tile N. The weight is dequantized into a scratch of at most
// `scratch_bytes` and multiplied tile by tile: as many rows per tile as fit (at least one).
// With `overlap`, several tiles use two buffers, so that the dequantization of tile i + 1
// (memory-bound, on the handle's second stream) overlaps the GEMM of tile i (compute-bound
// at prefill sizes): each buffer then gets half the limit, and an N of at least
// kOverlapMinRows * kOverlapTiles rows is split into at least kOverlapTiles tiles even when
// it would fit, so that only the first tile's dequantization is exposed. Tiles of 256 rows
// or more are multiples of 256 rows.
struct DequantTiling {
  static constexpr int64_t kOverlapTiles = 4;
  static constexpr int64_t kOverlapMinRows = 512;

  int64_t n_tile = 0;     // rows per tile (the last may be shorter)
  int64_t num_tiles = 0;
  int buffers = 0;        // 1, or 2 when tiles overlap
  int64_t buffer_bytes = 0;  // one buffer, padded to kWorkspaceAlign

  static DequantTiling make(int64_t n, int64_t row_bytes, int64_t scratch_bytes, bool overlap) {
    DequantTiling t;
    const int64_t split = overlap && n >= kOverlapTiles * kOverlapMinRows
                              ? (n + kOverlapTiles - 1) / kOverlapTiles : n;
    int64_t rows = std::min(split, scratch_bytes / row_bytes);  // one buffer: all of N
    if (overlap && rows < n) rows = std::min(split, scratch_bytes / 2 / row_bytes);  // two buffers
    if (rows < 1) rows = 1;  // a row larger than the limit still runs, alone
    if (rows < n && rows >= 256) rows = rows / 256 * 256;
    t.n_tile = rows < n ? rows : n;
    t.num_tiles = (n + t.n_tile - 1) / t.n_tile;
    t.buffers = overlap && t.num_tiles >= 2 ? 2 : 1;
    t.buffer_bytes = static_cast<int64_t>(align_up(static_cast<size_t>(t.n_tile * row_bytes),
                                                   kWorkspaceAlign));
    return t;
  }
};

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before.
inline size_t cublas_workspace_bytes(int sm) { return sm >= 90 ? (size_t{32} << 20) : (size_t{4} << 20); }

// The dequant + GEMM part of either operator's plan (Fp8MatMulPlan, NBitsMatMulPlan: the
// same field names): N tiles of a dequantized weight of `row_bytes` per row, then the
// cuBLAS workspace and the scratch buffers taken from `layout` (after whatever the
// operator took before), and the workspace total.
template <typename Plan, typename Options>
void plan_dequant_gemm_workspace(int64_t row_bytes, const Options& options, int sm,
                                 WorkspaceLayout& layout, Plan& plan) {
  const DequantTiling tiling = DequantTiling::make(plan.problem.n, row_bytes,
                                                   options.dequant_scratch_bytes,
                                                   options.overlap_dequant);
  plan.n_tile = tiling.n_tile;
  plan.num_n_tiles = tiling.num_tiles;
  plan.scratch_buffers = tiling.buffers;
  plan.cublas_bytes = cublas_workspace_bytes(sm);
  plan.cublas_offset = layout.take(plan.cublas_bytes);
  plan.scratch_bytes = static_cast<size_t>(tiling.buffers * tiling.buffer_bytes);
  plan.scratch_offset = layout.take(plan.scratch_bytes);
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
