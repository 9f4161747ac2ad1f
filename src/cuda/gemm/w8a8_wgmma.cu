// W8A8 on FP8 tensor cores (w8a8_wgmma.cuh): the activation quantize pass, the GEMM's
// instantiations (float16 and bfloat16, static and dynamic scales) and their launch.
// Built for sm_90a only (CMake's BQMM_WGMMA_ARCHITECTURES), like fp8_wgmma.cu.
#include "cuda/gemm/w8a8_wgmma.cuh"
#include "cuda/gemm/act_quant_e4m3.cuh"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

template <typename T, bool kDynamic, int kTileM, bool kHalves>
Status launch_typed(const Fp8KernelArgs& args, const GemmConfig& config, const W8A8Workspace& ws,
                    cudaStream_t stream) {
  const int k_split = config.k_split;
  const bool cluster = config.cluster_reduce;  // k_split == kClusterSumSplit (checked)
  const int64_t k_blocks = (args.k + args.block_size - 1) / args.block_size;
  // One block covering K is K rounded up to a slab, whatever block_size says (it may be
  // beyond int); every other block_size is at most K.
  const int64_t block = k_blocks == 1 ? (args.k + kW8a8SlabK - 1) / kW8a8SlabK * kW8a8SlabK : args.block_size;
  const int64_t m_pad = w8a8_m_pad(args.m);
  BQMM_RETURN_IF_ERROR((launch_act_quant_e4m3<T, kDynamic>(args, args.m, block, k_blocks, m_pad, ws.codes,
                                                           kDynamic ? ws.scales : nullptr, stream)));

  W8A8Params<T> p{};
  // Boxes of the block's weight rows (kGemmTileN, or kKHalvesTileN with K halves) and
  // of kTileM activation rows, 128 bytes of K each.
  constexpr int kTileN = W8A8Stage<kTileM, kHalves>::kTileN;
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(args.b, args.n, args.k, &p.w_map, kTileN));
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(ws.codes, args.m, args.k, &p.a_map, kTileM));
  p.a = ws.codes;
  p.a_scales = kDynamic ? ws.scales : nullptr;
  p.a_scale = kDynamic ? nullptr : args.a_scale;
  p.b = args.b;
  p.b_scales = args.b_scale;
  p.bias = static_cast<const T*>(args.bias);
  p.y = static_cast<T*>(args.y);
  p.partials = k_split > 1 && !cluster ? ws.partials : nullptr;
  p.cluster_sum = cluster;
  p.m = static_cast<int>(args.m);
  p.n = args.n;
  p.k = args.k;
  p.m_pad = m_pad;
  p.row_bytes = args.k;
  p.k_blocks = k_blocks;
  p.block_slabs = static_cast<int>(block / kW8a8SlabK);
  const int64_t blocks_per_split = (k_blocks + k_split - 1) / k_split;
  p.slabs_per_split = static_cast<int>(blocks_per_split * p.block_slabs);
  p.dependent = config.dependent_launch && dependent_launch_supported();

  const int64_t tiles = (args.m + kTileM - 1) / kTileM * ((args.n + kTileN - 1) / kTileN);
  const dim3 grid(static_cast<unsigned>(tiles), 1, static_cast<unsigned>(k_split));
  const auto kernel = W8A8WgmmaKernel<T, kDynamic, kTileM, kHalves>;
  constexpr int kSmem = static_cast<int>(w8a8_smem_bytes(kTileM, kTileN));
  BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem));
  BQMM_RETURN_IF_ERROR(launch_kernel_ex(kernel, grid, dim3(kWgmmaThreads), kSmem, stream, config.dependent_launch,
                                        cluster ? unsigned{kClusterSumSplit} : 1u, "W8A8WgmmaKernel", p));
  if (k_split == 1 || cluster) return Status::Ok();
  return launch_k_split_reduce<T>(ws.partials, p.bias, p.y, args.m, args.n, k_split,
                                  /*dependent=*/true, stream);
}

// The kernel of one (type, mode), at the tile the plan chose (K halves: tiles of 32 and
// 64 rows, the ones plans take them on).
template <typename T, bool kDynamic>
Status launch_tile(const Fp8KernelArgs& args, const GemmConfig& config, const W8A8Workspace& ws, cudaStream_t stream) {
  static_assert(kW8a8HalvesMaxTileM == 64, "the K halves' tiles below");
  const bool halves = config.tile_n == kKHalvesTileN;
  switch (config.tile_m) {
    case 32:
      return halves ? launch_typed<T, kDynamic, 32, true>(args, config, ws, stream)
                    : launch_typed<T, kDynamic, 32, false>(args, config, ws, stream);
    case 64:
      return halves ? launch_typed<T, kDynamic, 64, true>(args, config, ws, stream)
                    : launch_typed<T, kDynamic, 64, false>(args, config, ws, stream);
    default:
      return launch_typed<T, kDynamic, kW8a8TileM, false>(args, config, ws, stream);
  }
}

}  // namespace

Status launch_w8a8_gemm(const Fp8KernelArgs& args, bool dynamic, const GemmConfig& config, const W8A8Workspace& ws,
                        cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  const int tile_m = config.tile_m, k_split = config.k_split;
  const bool halves = config.tile_n == kKHalvesTileN;
  if (args.block_size % kW8a8SlabK != 0 || args.k % 16 != 0 || k_split < 1 ||
      (tile_m != 32 && tile_m != 64 && tile_m != kW8a8TileM) ||
      (config.tile_n != kGemmTileN && !(halves && tile_m <= kW8a8HalvesMaxTileM)) ||
      (config.cluster_reduce && (k_split != kClusterSumSplit || halves)))
    return Status(StatusCode::kInternal,
                  "launch_w8a8_gemm: block_size % 128, K % 16, k_split >= 1 (2 summed in a cluster, "
                  "128-row tiles), tile_m 32, 64 or 128, tile_n 128 or (tile_m <= 64) 64");
  return dispatch_half_types(args.dtype, "w8a8 gemm", [&](auto tag) {
    using T = decltype(tag);
    return dynamic ? launch_tile<T, true>(args, config, ws, stream) : launch_tile<T, false>(args, config, ws, stream);
  });
}

}  // namespace bqmm::cuda
