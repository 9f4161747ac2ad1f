// NBitsMatMul's TMA kernel, NBitsGemvTmaKernel (decode GEMV, 0 < M <= 8; the operator,
// the tile geometry and the code decoding: nbits_gemv.cu, gemv/common.cuh,
// gemv/nbits_codes.cuh).
//
// SM90+, float16 / bfloat16, blocks of at least half a tile's codes (8-bit: 64, 4-bit:
// 128; the planner's choice for large weights, core/gemv_split.h): the tensor-core GEMV
// with the weight stream of gemv/tma.cuh, the loop of Fp8GemvTmaKernel (fp8_mma.cu, which
// says why) with the N-bit decode. Warp w of
// the block takes the 128-byte tiles w, w + k_split, ... of its 16 rows (a tile: 8 chunks
// of 16 bytes, 128 8-bit or 256 4-bit codes per row); lane 0 keeps kNBitsTmaDepth of them
// in flight in the warp's shared-memory ring. ldmatrix_tile_chunks gives lane (g, t) word
// t of chunk c of rows g and g + 8: its codes are chunk c's 4t .. 4t + 3 (8-bit) or
// 8t .. 8t + 7 (4-bit), decoded and multiplied exactly as MmaTile's scale-on-result words
// (mma_word_unscaled) with the activations of the same codes, one 8- or 16-byte load.
// Chunks 0-3 and 4-7 of a tile each lie in one block: their unscaled sums take the block
// scale in float32 (apply_block_scales). A row's last tile may be partial (row_bytes
// % 128 != 0): its missing chunks arrive as zeros and are skipped (warp-uniform, on a
// code path of its own). The activations, scales and zero points of a tile are loaded
// one (4-bit) or two (8-bit) tiles ahead.
//
//
// How it got here (H200, M = 1, float16, 28672 x 8192): operands loaded at the point of
// use ran at half the speed of the register-load kernel; loading them tiles ahead, full
// tiles without chunk tests, one lop3 per nibble pair and each lane's own constants shared
// by shuffles brought it level with or past it. Nsight Compute on the 4-bit tile:
// issue-bound at ~16 warps per SM (0.6 instructions per cycle per scheduler), ~300 SASS
// instructions per 16-row x 256-code tile.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/nbits_tiles.cuh"
#include "cuda/gemv/tma.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kNBitsTmaDepth = 4;  // tiles in flight per warp (16 warps x 4 x 2 KB per SM)
static_assert(kTmaBoxRows == kTileCols, "a TMA tile is one warp tile's rows");

// ================================================================= kernel
// Template parameters:
//   T      T1: __half or __nv_bfloat16.
//   kBits  8 or 4.
// Block: k_split = blockDim.x / 32 warps on one 16-column tile; dynamic shared memory:
// k_split rings of kNBitsTmaDepth 2 KB slots (tma_ring_smem_bytes).
template <typename T, int kBits>
__global__ void __launch_bounds__(kMaxKSplit * kWarpSize, kMinBlocksPerSm<T>)
    NBitsGemvTmaKernel(const __grid_constant__ CUtensorMap map, const GemvParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kTileChunks = kTmaBoxBytes / kChunkBytes;  // 8 chunks of a tile row
  using C = Codes<kBits>;
  using Tile = MmaTile<T, kBits, true>;
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  extern __shared__ uint8_t tma_smem[];
  __shared__ uint64_t full[kMaxKSplit][kNBitsTmaDepth];
  const TmaTileRing<kNBitsTmaDepth> ring(tma_smem, static_cast<int>(warp), full[warp]);

  // This warp's tiles: warp, warp + k_split, ... (`count` of them).
  const WarpTiles tiles(p.row_bytes, warp, k_split);
  const int count = tiles.count;
  const int32_t y0 = static_cast<int32_t>(n0);
  ring.start(&map, tiles, y0, lane);

  // Rows lo = n0 + g and hi = n0 + g + 8; rows past N read the scales and zero points of
  // row N - 1 into sums that are never stored. Activation row g, or M - 1 for g >= M.
  const bool row_ok[2] = {n0 + g < p.n, n0 + g + 8 < p.n};
  // Lane t of a quad loads the scale and zero point of row (t < 2 ? lo : hi), tile half
  // t % 2 (one load each instead of four), and the quad shares them by shuffles.
  const int64_t col_mine = (t < 2 ? row_ok[0] : row_ok[1]) ? n0 + g + 8 * (t / 2) : p.n - 1;
  const T* const s_mine = p.scales + col_mine * p.k_blocks;
  const uint8_t* const zp_mine = p.zp != nullptr ? p.zp + col_mine * p.zp_row_bytes : nullptr;
  const T* const a_row = p.a + static_cast<int64_t>(g < p.m ? g : p.m - 1) * p.k + t * C::kPerWord;
  // Only a row's last tile can be partial (row_bytes % 128 != 0): if this warp has it,
  // it is its tile `partial_i` with `partial_chunks` chunks of codes. Every other tile
  // takes the code path without chunk tests (Full), whose loads and mma steps the
  // compiler can interleave freely (the tests' branches split them apart).
  const int partial_i = tiles.partial;
  const int partial_chunks = static_cast<int>((p.row_bytes % kTmaBoxBytes) / kChunkBytes);
  using Full = std::true_type;
  using Partial = std::false_type;

  // Tile i's operands in buffer i % kOperandBuffers, loaded kOperandBuffers - 1 tiles
  // ahead: at M = 8 the activations come from L2 and the scales from DRAM, as slowly as
  // the weights under a full stream, so a load at the point of use stalls the warp for
  // the whole latency once per tile (the first version did: half the speed of the
  // register-load kernel). Activations: the lane's word of each chunk, 4 codes (8-bit,
  // 8 bytes) or 8 (4-bit, 16 bytes); chunks past a partial tile's end are not loaded
  // (they lie past the activation row). 4-bit takes two buffers (its tile is twice the
  // math, and three would pass 128 registers).
  using ActVec = std::conditional_t<kBits == 8, uint2, uint4>;
  constexpr int kOperandBuffers = kBits == 8 ? 3 : 2;
  ActVec act[kOperandBuffers][kTileChunks];
  RawQuant<T, kBits> quant[kOperandBuffers];
  // The block of this lane's tile half t % 2 of the tile at byte0 (a half past the row's
  // end takes the last block's constants, never used).
  auto own_block = [&](uint32_t byte0) {
    const uint32_t byte = min(byte0 + (t % 2) * (kTmaBoxBytes / 2), static_cast<uint32_t>(p.row_bytes) - 1);
    return (byte * (8 / kBits)) >> p.block_shift;
  };
  auto load_operands_as = [&](auto full, int b, int i) {
    const uint32_t byte0 = tiles.x(i);
    const int chunks = decltype(full)::value ? kTileChunks : partial_chunks;
    const T* src = a_row + static_cast<int64_t>(byte0) * (8 / kBits);
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c)
      if (c < chunks) act[b][c] = __ldg(reinterpret_cast<const ActVec*>(src + c * C::kPerChunk));
    quant[b] = load_quant<T, kBits>(s_mine, zp_mine, own_block(byte0), false);
  };
  auto load_operands = [&](int b, int i) {
    if (i == partial_i)
      load_operands_as(Partial(), b, i);
    else
      load_operands_as(Full(), b, i);
  };
  // The block constants of the tile in buffer b (first byte byte0): each lane decodes its
  // own (row, half) once, and row r's (0: lo, 1: hi) constants of half h are then read
  // from quad lane 2r + h (decoding all four in every lane cost ~30 instructions a tile).
  auto own_consts = [&](int b, uint32_t byte0) {
    return make_consts<T, kBits>(quant[b], own_block(byte0), 0, false);
  };
  auto shared_consts = [&](const BlockConsts& own, int r, int h) {
    const int src = (lane & ~3) + 2 * r + h;
    BlockConsts c;
    c.scale = __shfl_sync(0xffffffffu, own.scale, src);
    c.zero = __shfl_sync(0xffffffffu, own.zero, src);
    c.zero_hi = kBits == 4 && std::is_same_v<T, __half> ? __shfl_sync(0xffffffffu, own.zero_hi, src) : 0u;
    return c;
  };

  float acc[4] = {};
  auto multiply_tile = [&](auto full, int b, int i, uint32_t slot) {
    const uint32_t byte0 = tiles.x(i);
    const int chunks = decltype(full)::value ? kTileChunks : partial_chunks;
    const BlockConsts own = own_consts(b, byte0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (4 * h >= chunks) break;  // warp-uniform
      const BlockConsts c_lo = shared_consts(own, 0, h);
      const BlockConsts c_hi = shared_consts(own, 1, h);
      float part[4] = {}, part16[4] = {};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        if (4 * h + 2 * q >= chunks) break;  // warp-uniform
        uint32_t w[4];
        ldmatrix_tile_chunks(slot, 4 * h + 2 * q, lane, w);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 4 * h + 2 * q + e;
          if (c >= chunks) break;  // warp-uniform
          uint32_t pa[C::kPerWord / 2];
          if constexpr (kBits == 8) {
            pair_act8(act[b][c].x, act[b][c].y, pa);
          } else {
            pair_act4(act[b][c], pa);
          }
          mma_word_unscaled<T, kBits>(w[2 * e], w[2 * e + 1], c_lo, c_hi, pa, part, part16);
        }
      }
      apply_block_scales<T, kBits>(acc, part, part16, c_lo, c_hi);
    }
  };
  auto consume = [&](int b, int i) {
    if (i + kOperandBuffers - 1 < count)
      load_operands((b + kOperandBuffers - 1) % kOperandBuffers, i + kOperandBuffers - 1);
    const uint32_t slot = ring.wait(i);
    if (i == partial_i)
      multiply_tile(Partial(), b, i, slot);
    else
      multiply_tile(Full(), b, i, slot);
    ring.refill(&map, tiles, i, y0, lane);
  };
#pragma unroll
  for (int u = 0; u < kOperandBuffers - 1; ++u)
    if (u < count) load_operands(u, u);
  int i = 0;
  for (; i + kOperandBuffers - 1 < count; i += kOperandBuffers) {
#pragma unroll
    for (int u = 0; u < kOperandBuffers; ++u) consume(u, i + u);
  }
#pragma unroll
  for (int u = 0; u < kOperandBuffers - 1; ++u)
    if (i + u < count) consume(u, i + u);

  float v[Tile::kValues] = {acc[0], acc[1], acc[2], acc[3]};
  reduce_and_store<Tile>(p, v, warp, lane, k_split, n0, row_ok);
#else
  __trap();  // SM90+ only; the planner never asks for it below
#endif
}

// ================================================================= launcher
// The instantiated configurations (T, bits): every one a plan can reach on SM90+.
// CMakeLists.txt builds this file for the SM90+ architectures only (the planner takes TMA
// tiles there only); built for an older one (a build without SM90), the kernels are traps.
#define BQMM_NBITS_TMA_CONFIGS(X, T) X(T, 4) X(T, 8)

template <typename T>
Status launch_tma(const NBitsGemvArgs& args, int k_split, cudaStream_t stream) {
  const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
  if (args.block_size < window_codes)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: TMA tiles need blocks of " +
                                             std::to_string(window_codes) +
                                             " codes or more, not " +
                                             std::to_string(args.block_size));
  const GemvParams<T> p = make_nbits_params<T>(args);
  CUtensorMap map;
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(args.b, args.n, p.row_bytes, &map));
  const int smem = tma_ring_smem_bytes(k_split, kNBitsTmaDepth);
  const dim3 grid(static_cast<unsigned>((args.n + kTileCols - 1) / kTileCols));
#define BQMM_LAUNCH_IF(T_, B)                                                               \
  if (args.bits == B) {                                                                     \
    BQMM_RETURN_IF_ERROR(                                                                   \
        allow_dynamic_smem(reinterpret_cast<const void*>(NBitsGemvTmaKernel<T_, B>), smem)); \
    NBitsGemvTmaKernel<T_, B><<<grid, k_split * kWarpSize, smem, stream>>>(map, p);         \
    return check_launch("NBitsGemvTmaKernel");                                              \
  }
  BQMM_NBITS_TMA_CONFIGS(BQMM_LAUNCH_IF, T)
#undef BQMM_LAUNCH_IF
  return Status(StatusCode::kInternal, "launch_nbits_gemv: no NBitsGemvTmaKernel for " +
                                           std::to_string(args.bits) + "-bit codes");
}

}  // namespace

Status launch_nbits_gemv_tma(const NBitsGemvArgs& args, int k_split, cudaStream_t stream) {
  return dispatch_half_types(args.dtype, "launch_nbits_gemv (TMA tiles)", [&](auto tag) -> Status {
    return launch_tma<decltype(tag)>(args, k_split, stream);
  });
}

}  // namespace bqmm::cuda
