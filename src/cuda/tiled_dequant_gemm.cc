#include "cuda/tiled_dequant_gemm.h"

#include <algorithm>

#include "cuda/cublas_gemm.h"

namespace bqmm::cuda {

Status run_tiled_dequant_gemm(const Handle& handle, const TiledDequantGemm& t,
                              const DequantTile& dequant, cudaStream_t stream) {
  const size_t elem = dtype_size(t.dtype);
  for (int64_t n0 = 0; n0 < t.n; n0 += t.n_tile) {
    const int64_t rows = std::min(t.n_tile, t.n - n0);
    BQMM_RETURN_IF_ERROR(dequant(n0, rows, t.scratch, stream));
    GemmRowMajorArgs g;
    g.dtype = t.dtype;
    g.m = t.m;
    g.n = rows;
    g.k = t.k;
    g.a = t.a;
    g.w = t.scratch;
    g.y = static_cast<uint8_t*>(t.y) + n0 * static_cast<int64_t>(elem);
    g.ldy = t.n;
    BQMM_RETURN_IF_ERROR(
        gemm_row_major_awt(handle, g, t.cublas_workspace, t.cublas_workspace_bytes, stream));
  }
  return Status::Ok();
}

}  // namespace bqmm::cuda
