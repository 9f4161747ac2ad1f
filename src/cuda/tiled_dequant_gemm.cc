#include "cuda/tiled_dequant_gemm.h"

#include <algorithm>

#include "core/tile_schedule.h"
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
  const int64_t num_tiles = (t.n + t.n_tile - 1) / t.n_tile;
  for (const TileStep& step : tile_schedule(num_tiles, t.buffers == 2)) {
    cudaStream_t on = step.second_stream ? o.stream : stream;
    const int b = step.buffer;
    // Tile and buffer of the dequant and GEMM steps (the others name neither or only b).
    const int64_t n0 = step.tile >= 0 ? step.tile * t.n_tile : 0;
    const int64_t rows = std::min(t.n_tile, t.n - n0);
    void* buffer = b >= 0 ? t.scratch + static_cast<size_t>(b) * buffer_bytes : nullptr;
    switch (step.kind) {
      case TileStep::kRecordFork:
        BQMM_CUDA_RETURN(cudaEventRecord(o.fork, on));
        break;
      case TileStep::kWaitFork:
        BQMM_CUDA_RETURN(cudaStreamWaitEvent(on, o.fork, 0));
        break;
      case TileStep::kWaitConsumed:
        BQMM_CUDA_RETURN(cudaStreamWaitEvent(on, o.consumed[b], 0));
        break;
      case TileStep::kDequant:
        BQMM_RETURN_IF_ERROR(dequant(n0, rows, buffer, on));
        break;
      case TileStep::kRecordDequantized:
        BQMM_CUDA_RETURN(cudaEventRecord(o.dequantized[b], on));
        break;
      case TileStep::kWaitDequantized:
        BQMM_CUDA_RETURN(cudaStreamWaitEvent(on, o.dequantized[b], 0));
        break;
      case TileStep::kGemm: {
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
            gemm_row_major_awt(handle, g, t.cublas_workspace, t.cublas_workspace_bytes, on));
        break;
      }
      case TileStep::kRecordConsumed:
        BQMM_CUDA_RETURN(cudaEventRecord(o.consumed[b], on));
        break;
    }
  }
  // Every dequantization was waited for by a GEMM on `stream`: the second stream has
  // joined back, and nothing of this call remains outside `stream`.
  return Status::Ok();
}

}  // namespace bqmm::cuda
