// Workspace layout helper shared by the planners: carves 256-byte aligned regions out of
// the caller's single workspace buffer (cuBLAS wants 256-byte aligned workspaces; the
// vector kernels want 16).
#pragma once

#include <cstddef>

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

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before.
inline size_t cublas_workspace_bytes(int sm) { return sm >= 90 ? (size_t{32} << 20) : (size_t{4} << 20); }

}  // namespace bqmm
