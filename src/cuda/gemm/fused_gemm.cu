// launch_fused_gemm (cuda/launchers.h): the checks of what the kernels assume, then the
// per-format launchers (fp8_gemm.cu, nbits_gemm.cu). The planners never ask for anything
// these checks refuse; a refusal is a bug, reported as kInternal rather than launched.
#include <string>

#include "cuda/gemm/fused_gemm.cuh"

namespace bqmm::cuda {
namespace {

Status refuse(const std::string& why) {
  return Status(StatusCode::kInternal, "launch_fused_gemm: " + why);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status check_args(const FusedGemmArgs& a, const GemmConfig& c, const float* partials) {
  const int bits = gemm_weight_bits(a.weights);
  if (c.wgmma && !wgmma_tile_supported(c.tile_m, bits, a.weights == GemmWeights::kFp8, a.block_size))
    return refuse("no wgmma tile_m " + std::to_string(c.tile_m) + " for " + std::to_string(bits) +
                  "-bit weights of block_size " + std::to_string(a.block_size));
  if (!c.wgmma && !gemm_small_tile(c.tile_m))
    return refuse("tile_m " + std::to_string(c.tile_m) + " (16, 32 or 64)");
  const bool halves = c.tile_n == kKHalvesTileN;
  if (c.tile_n != kGemmTileN && !(halves && c.wgmma && gemm_small_tile(c.tile_m)))
    return refuse("tile_n " + std::to_string(c.tile_n) +
                  " (128, or 64: K halves on wgmma's tiles of 64 rows or fewer)");
  if (c.k_split < 1 || c.k_split > kGemmMaxKSplit)
    return refuse("k_split " + std::to_string(c.k_split));
  if (c.cluster_reduce && !(c.wgmma && c.k_split == kClusterSumSplit && !halves))
    return refuse("cluster_reduce: the wgmma mainloop's K split of " + std::to_string(kClusterSumSplit) +
                  " of 128-row tiles only");
  if (c.k_split > 1 && !c.cluster_reduce && partials == nullptr) return refuse("k_split > 1 without partials");
  if (a.k % 8 != 0) return refuse("K = " + std::to_string(a.k) + " is not a multiple of 8");
  if (a.row_bytes % 16 != 0) return refuse("rows of B are not whole 16-byte chunks");
  if (!aligned16(a.a) || !aligned16(a.b)) return refuse("A and B must be 16-byte aligned");
  if (c.wgmma && (a.a_ordered == nullptr || !aligned16(a.a_ordered)))
    return refuse("the wgmma mainloop needs 16-byte aligned room for A in its K order");
  if (a.zp_typed != nullptr && (a.weights == GemmWeights::kFp8 || a.zp_packed != nullptr))
    return refuse("typed zero points: N-bit weights only, and not with packed ones");
  if (a.weights == GemmWeights::kFp8 && a.block_size % 16 != 0)
    return refuse("FP8 block_size " + std::to_string(a.block_size) + " % 16 != 0");
  if (a.weights != GemmWeights::kFp8 &&
      (a.block_size < 16 || (a.block_size & (a.block_size - 1)) != 0))
    return refuse("N-bit block_size " + std::to_string(a.block_size));
  if (a.m >= (int64_t{1} << 31) || a.k / 16 >= (int64_t{1} << 31))
    return refuse("M or K beyond the kernel's 32-bit counters");
  const int64_t tiles = gemm_tiles(a.m, a.n, c.tile_m);
  if (tiles >= (int64_t{1} << 31)) return refuse("grid too large");
  return Status::Ok();
}

}  // namespace

Status launch_fused_gemm(const FusedGemmArgs& args, const GemmConfig& config, float* partials,
                         cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  BQMM_RETURN_IF_ERROR(check_args(args, config, partials));
  if (args.weights == GemmWeights::kFp8)
    return launch_fused_gemm_fp8(args, config, partials, stream);
  return launch_fused_gemm_nbits(args, config, partials, stream);
}

}  // namespace bqmm::cuda
