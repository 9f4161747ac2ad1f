// Workspace layout helper shared by the planners: carves 256-byte aligned regions out of
// the caller's single workspace buffer (cuBLAS wants 256-byte aligned workspaces; the
// vector kernels want 16).
#pragma once

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

// Rows of the dequantized-weight scratch of the dequant + GEMM paths: as many [K] rows of
// `row_bytes` as fit in `scratch_bytes` (at least one, at most n). Tiles of 256 rows or
// more are rounded down to a multiple of 256 so cuBLAS sees whole tiles.
inline int64_t dequant_n_tile(int64_t n, int64_t row_bytes, int64_t scratch_bytes) {
  int64_t n_tile = scratch_bytes / row_bytes;
  if (n_tile < 1) n_tile = 1;
  if (n_tile < n && n_tile >= 256) n_tile = n_tile / 256 * 256;
  return n_tile < n ? n_tile : n;
}

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before.
inline size_t cublas_workspace_bytes(int sm) { return sm >= 90 ? (size_t{32} << 20) : (size_t{4} << 20); }

}  // namespace bqmm
