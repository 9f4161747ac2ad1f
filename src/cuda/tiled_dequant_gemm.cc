#include "cuda/tiled_dequant_gemm.h"

#include <algorithm>

#include "core/workspace.h"
#include "cuda/cublas_gemm.h"
#include "cuda/cuda_check.h"
#include "cuda/handle_overlap.h"

namespace bqmm::cuda {

Status run_tiled_dequant_gemm(const Handle& handle, const TiledDequantGemm& t,
                              const DequantTile& dequant, cudaStream_t stream) {
  const size_t elem = dtype_size(t.dtype);
  // The planner's buffer stride (DequantTiling::buffer_bytes).
  const size_t buffer_bytes = align_up(static_cast<size_t>(t.n_tile * t.k) * elem, kWorkspaceAlign);
  const Handle::Overlap& o = handle.overlap();
  const bool overlap = t.buffers == 2;
  // The second stream starts after everything the caller enqueued before this call
  // (the weights, the QDQ'd activation).
  if (overlap) {
    BQMM_CUDA_RETURN(cudaEventRecord(o.fork, stream));
    BQMM_CUDA_RETURN(cudaStreamWaitEvent(o.stream, o.fork, 0));
  }
  int64_t tile = 0;
  for (int64_t n0 = 0; n0 < t.n; n0 += t.n_tile, ++tile) {
    const int64_t rows = std::min(t.n_tile, t.n - n0);
    const int b = overlap ? static_cast<int>(tile % 2) : 0;
    void* buffer = t.scratch + b * buffer_bytes;
    if (overlap) {
      // Buffer b was last read by the GEMM of tile - 2.
      if (tile >= 2) BQMM_CUDA_RETURN(cudaStreamWaitEvent(o.stream, o.consumed[b], 0));
      BQMM_RETURN_IF_ERROR(dequant(n0, rows, buffer, o.stream));
      BQMM_CUDA_RETURN(cudaEventRecord(o.dequantized[b], o.stream));
      BQMM_CUDA_RETURN(cudaStreamWaitEvent(stream, o.dequantized[b], 0));
    } else {
      BQMM_RETURN_IF_ERROR(dequant(n0, rows, buffer, stream));
    }
    GemmRowMajorArgs g;
    g.dtype = t.dtype;
    g.m = t.m;
    g.n = rows;
    g.k = t.k;
    g.a = t.a;
    g.w = buffer;
    g.y = static_cast<uint8_t*>(t.y) + n0 * static_cast<int64_t>(elem);
    g.ldy = t.n;
    BQMM_RETURN_IF_ERROR(
        gemm_row_major_awt(handle, g, t.cublas_workspace, t.cublas_workspace_bytes, stream));
    if (overlap) BQMM_CUDA_RETURN(cudaEventRecord(o.consumed[b], stream));
  }
  // Every dequantization was waited for by a GEMM on `stream`: the second stream has
  // joined back, and nothing of this call remains outside `stream`.
  return Status::Ok();
}

}  // namespace bqmm::cuda
