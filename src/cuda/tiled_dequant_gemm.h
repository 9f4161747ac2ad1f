// The dequant + GEMM loop shared by both operators: for each N tile, dequantize the
// weight rows into the scratch, then Y[:, tile] = A * W_tile^T with cuBLAS, all on the
// caller's stream (stream order keeps each tile's dequantization after the previous
// tile's GEMM has read the scratch).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm::cuda {

struct TiledDequantGemm {
  DType dtype = DType::kFloat16;  // T of A, the dequantized weight and Y
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;        // [M, K]
  void* y = nullptr;              // [M, N]
  int64_t n_tile = 0;
  uint8_t* scratch = nullptr;     // [n_tile, K] of T
  void* cublas_workspace = nullptr;
  size_t cublas_workspace_bytes = 0;
};

// Writes rows [n0, n0 + rows) of the dequantized weight to `out` ([rows, K] of T) on `stream`.
using DequantTile = std::function<Status(int64_t n0, int64_t rows, void* out, cudaStream_t stream)>;

Status run_tiled_dequant_gemm(const Handle& handle, const TiledDequantGemm& t,
                              const DequantTile& dequant, cudaStream_t stream);

}  // namespace bqmm::cuda
