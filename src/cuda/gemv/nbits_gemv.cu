// Fused decode GEMV of NBitsMatMul, for 0 < M <= 8:
//
//   Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//             + bias[n]
//
// At these M the op is a stream over the packed weight: N * K * bits / 8 bytes (plus the
// scales and zero points) against M * K activations that stay in L1/L2. Every weight byte
// is read exactly once, 16 bytes per load, with several loads in flight per lane, and the
// dequantized weight never goes to memory.
//
// Work split. A warp owns a tile of 16 output columns (weight rows) n0 .. n0 + 15 and all
// M <= 8 activation rows; the kKSplit warps of a block split the tile's K range and reduce
// through shared memory. Lane (g, t) = (lane / 4, lane % 4) reads weight rows n0 + g ("lo")
// and n0 + g + 8 ("hi"): 16-byte chunks of a row, 4 lanes of a quad covering 4 adjacent
// chunks (a "window" of 64 bytes per row); window w gives lane t chunk 4w + t.
//
// (gemv/common.cuh: the geometry every GEMV shares; gemv/nbits_codes.cuh: how the codes
// are decoded and multiplied.)
//
// K loop. A warp's loads for a window are its chunk of both rows (two 16-byte streaming
// loads) and, per chunk, the raw scales and zero points; activations are re-read by every
// warp of the grid and stay in L1, so they are loaded where used. A GEMV at these sizes
// is bound by how many bytes are in flight, not by arithmetic: the loads of the next
// stage are issued before the current one is decoded (double buffering in registers), so
// a warp always has one to two stages of loads outstanding.
//
// K-loop algorithms (the original design's three, a template parameter, chosen per block
// size by the planner from measurements):
//   0 unrolled:  stages of kStage windows, double-buffered, scales and zero points per
//                chunk loaded with the weights.
//   1 loop:      one window per iteration, its loads then its math: no unrolling and no
//                prefetch, the original "simple loop".
//   2 per block: stages are quantization blocks (or kStage-window parts of larger ones),
//                double-buffered; a block's scale and zero point are loaded once per row
//                and decoded once for all its windows. A block smaller than a window
//                cannot be iterated alone (a quad's lanes straddle blocks): there the
//                window is the unit and this is algorithm 0.
//
// The N-bit kernels, one file each:
//   nbits_gemv.cu    NBitsGemvKernel: register loads, the three K-loop algorithms, the
//                    tensor-core tile (float16 / bfloat16) or the FMA tile (float32); and
//                    launch_nbits_gemv, which dispatches to the other two.
//   nbits_window.cu  NBitsGemvWindowKernel: algorithm 0 on whole windows, optionally with
//                    line loads (gemv/line_loads.cuh) and two tiles per warp.
//   nbits_tma.cu     NBitsGemvTmaKernel (SM90+): the weights by TMA tiles (gemv/tma.cuh).
//   fma_gemv.cu      GemvFmaKernel on 8-bit codes (CUDA cores, M <= 2).
#include <string>
#include <type_traits>

#include "bqmm/nbits_matmul.h"
#include "cuda/cuda_check.h"
#include "cuda/gemv/nbits_tiles.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

// Windows per pipeline stage (algorithms 0 and 2). Two stages in registers: a window
// costs a lane 8 registers of weights and 4 to 6 of raw scales and zero points. The FMA
// tile's decoded chunk (64 floats for 4-bit) leaves room for one window per stage.
template <typename T>
constexpr int kStage = std::is_same_v<T, float> ? 1 : 2;

// ================================================================= kernel
// Template parameters:
//   T             T1: __half, __nv_bfloat16 (tensor-core tile) or float (FMA tile).
//   kBits         8 or 4.
//   kAlgo         the K-loop algorithm (file comment): 0 unrolled, 1 loop, 2 per block.
//   kRows         activation rows of the FMA tile (1, 2, 4, 8 >= M); the mma tile always
//                 has 8.
//   kResultScale  the tensor-core tile only: blocks of a window or more, the block scale
//                 applied to the mma result (MmaTile); false for float32.
//   kDependent    launched as a programmatic dependent of the kernel before it (the
//                 4-bit tensor-core tile, algorithm 0 only; NBitsGemvArgs::dependent).
//   kTypedZp      typed (fractional, T) zero points: each weight q * scale - zp * scale
//                 (MmaTile's kTyped; the tensor-core tile, algorithm 0, no kResultScale,
//                 plain launches only).
// Block: k_split = blockDim.x / 32 warps on one 16-column tile, warp w taking the
// windows w, w + k_split, ...; grid.x: the column tiles.
template <typename T, int kBits, int kAlgo, int kRows, bool kResultScale = false,
          bool kDependent = false, bool kTypedZp = false>
__global__ void __launch_bounds__(kMaxKSplit * kWarpSize, kMinBlocksPerSm<T>)
    NBitsGemvKernel(const GemvParams<T> p) {
  using C = Codes<kBits>;
  using Tile = std::conditional_t<std::is_same_v<T, float>, FmaTile<kBits, kRows>,
                                  MmaTile<T, kBits, kResultScale, kTypedZp>>;
  static_assert(!kTypedZp || (kAlgo == kNBitsGemvAlgoUnrolled && !kDependent && !kResultScale &&
                              !std::is_same_v<T, float>),
                "typed zero points: the tensor-core tile's algorithm 0, each weight scaled");
  const uint32_t k_split = blockDim.x / kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileCols;

  const TileRows<T> rows(p, n0, g, p.zp != nullptr);
  // The second half of a 4-bit chunk is another block only for block_size 16.
  const bool split = C::kGroups == 2 && p.block_shift == 4;

  static_assert(!kDependent || (kAlgo == kNBitsGemvAlgoUnrolled && !std::is_same_v<T, float>),
                "the dependent launch is algorithm 0's on the tensor-core tile");
  Tile tile(p, g);
  // A dependent launch lets the next kernel launch once every block has started, pulls
  // its first two stages of weights into L2 while the kernel before it finishes, and
  // reads A and writes Y only after wait_for_prior_grid (below). A separate instance:
  // compiled into the plain kernel, these calls changed its code and slowed its plain
  // launches by up to 5 % (H200).
  if constexpr (kDependent) allow_dependent_launch();

  // Chunk `chunk` (< p.chunks) of both rows into slot u of a stage and, with
  // per_chunk_quant, its scales and zero points.
  auto load_chunk = [&](auto& l, int u, uint32_t chunk, bool per_chunk_quant) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l.w[u][r] = load_stream_u4(rows.w[r] + static_cast<size_t>(chunk) * kChunkBytes);
      if (per_chunk_quant)
        l.q[u][r] = load_quant<T, kBits, kTypedZp>(rows.s[r], rows.zp[r], (chunk * C::kPerChunk) >> p.block_shift, split);
    }
  };
  // Multiplies slot u of a stage (chunk `chunk`) with the block constants of q: the
  // chunk's own (first block blk) or the stage's block blk. masked / ok: see MmaTile.
  auto multiply_chunk = [&](const auto& l, int u, uint32_t chunk, bool masked, bool ok,
                            const RawQuant<T, kBits> (&q)[2], uint32_t blk) {
    BlockConsts c[2][C::kGroups];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int grp = 0; grp < C::kGroups; ++grp) c[r][grp] = make_consts<T, kBits, kTypedZp>(q[r], blk, grp, split);
    tile.multiply(l.w[u], chunk, masked, ok, c);
  };
  auto first_block = [&](uint32_t chunk) { return (chunk * C::kPerChunk) >> p.block_shift; };

  if constexpr (kAlgo == kNBitsGemvAlgoLoop) {
    // Warp w: windows w, w + k_split, ...; lane t: chunk t of each. Only a row's last
    // window can be partial.
#pragma unroll 1
    for (uint32_t win = warp; win < p.windows; win += k_split) {
      const uint32_t chunk = win * kWindowChunks + t;
      const bool masked = (win + 1) * kWindowChunks > p.chunks;
      const uint32_t in_row = min(chunk, p.chunks - 1);
      StageLoads<T, kBits, 1> l;
      load_chunk(l, 0, in_row, true);
      multiply_chunk(l, 0, in_row, masked, chunk < p.chunks, l.q[0], first_block(in_row));
    }
  } else {
    // A warp streams a contiguous range of each row (so its requests to a DRAM page come
    // together), in stages of `width` windows: lane t takes chunk t of each window u of
    // the stage, first + 4u + t (each load of the quad reads a window's 64 contiguous
    // bytes of a row, and each mma takes one window, so with block_size >= the window's
    // codes its chunks share one block and the scale can go on the mma result). Unrolled: the warp's share of the windows, width kStage. Per block: the
    // warp's share of the blocks, a stage being one block (or a kStage-window part of a
    // larger one) whose scale and zero point are loaded once per row; blocks hold whole
    // windows, so those stages are never partial.
    constexpr int kS = kStage<T>;
    const bool per_block = kAlgo == kNBitsGemvAlgoPerBlock && p.windows_per_block > 0;
    const uint32_t wpb = per_block ? p.windows_per_block : 1;
    const uint32_t width = per_block && wpb < kS ? wpb : kS;
    const uint32_t parts = per_block ? wpb / width : 1;
    const uint32_t units = per_block ? p.windows / wpb : p.windows;  // blocks or windows
    const uint32_t per_warp = (units + k_split - 1) / k_split;
    const uint32_t unit_begin = min(warp * per_warp, units);
    const uint32_t unit_end = min(unit_begin + per_warp, units);
    const uint32_t stages = per_block ? (unit_end - unit_begin) * parts
                                      : (unit_end - unit_begin + kS - 1) / kS;
    const uint32_t end_chunk = min(unit_end * wpb * kWindowChunks, p.chunks);
    auto block_of = [&](uint32_t s) { return unit_begin + s / parts; };
    auto first_window = [&](uint32_t s) {
      return per_block ? block_of(s) * wpb + (s % parts) * width : unit_begin + s * kS;
    };
    using Loads = StageLoads<T, kBits, kS>;
    // Whether stage s has lanes past the warp's range (warp-uniform): only those stages
    // clamp their chunk indices, so the others address slot u as c0 + 4u (an immediate).
    auto partial = [&](uint32_t s) { return (first_window(s) + width) * kWindowChunks > end_chunk; };
    auto load_stage = [&](uint32_t s, Loads& l) {
      const uint32_t c0 = first_window(s) * kWindowChunks + t;
      const uint32_t last = partial(s) ? p.chunks - 1 : UINT32_MAX;
#pragma unroll
      for (int u = 0; u < kS; ++u) {
        if (u >= width) break;  // warp-uniform
        load_chunk(l, u, min(c0 + kWindowChunks * u, last), !per_block);
      }
      if (per_block) {
#pragma unroll
        for (int r = 0; r < 2; ++r) l.q[0][r] = load_quant<T, kBits>(rows.s[r], rows.zp[r], block_of(s), false);
      }
    };
    auto multiply_stage = [&](uint32_t s, const Loads& l) {
      const uint32_t c0 = first_window(s) * kWindowChunks + t;
      const bool masked = partial(s);
      const uint32_t last = masked ? p.chunks - 1 : UINT32_MAX;
#pragma unroll
      for (int u = 0; u < kS; ++u) {
        if (u >= width) break;  // warp-uniform: mma.sync needs all lanes
        const uint32_t in_row = min(c0 + kWindowChunks * u, last);
        const bool ok = c0 + kWindowChunks * u < end_chunk;
        if (per_block) {
          multiply_chunk(l, u, in_row, false, true, l.q[0], block_of(s));
        } else {
          multiply_chunk(l, u, in_row, masked, ok, l.q[u], first_block(in_row));
        }
      }
    };
    if constexpr (kDependent) {
      // The first two stages' chunks, addressed as load_stage does (prefetch_l2 says why
      // that is safe before the wait).
#pragma unroll
      for (uint32_t s = 0; s < 2; ++s) {
        const uint32_t c0 = first_window(s) * kWindowChunks + t;
        const uint32_t last = partial(s) ? p.chunks - 1 : UINT32_MAX;
#pragma unroll
        for (int u = 0; u < kS; ++u)
          if (s < stages && u < width)
#pragma unroll
            for (int r = 0; r < 2; ++r)
              prefetch_l2(rows.w[r] + static_cast<size_t>(min(c0 + kWindowChunks * u, last)) * kChunkBytes);
      }
      wait_for_prior_grid();
    }
    // Double buffering: stage s + 1's loads are in flight while stage s is multiplied.
    Loads buf[2];
    if (stages > 0) load_stage(0, buf[0]);
#pragma unroll 1
    for (uint32_t s = 0; s < stages; s += 2) {
      if (s + 1 < stages) load_stage(s + 1, buf[1]);
      multiply_stage(s, buf[0]);
      if (s + 1 >= stages) break;
      if (s + 2 < stages) load_stage(s + 2, buf[0]);
      multiply_stage(s + 1, buf[1]);
    }
  }

  float v[Tile::kValues];
  tile.values(v);
  reduce_and_store<Tile>(p, v, warp, lane, k_split, n0, rows.ok);
}

// ================================================================= launcher
// The instantiated configurations, (T, bits, algo, rows, kResultScale): every one a plan
// can reach (the planner's gemv_algo picks the algorithm, default 0; float32's rows are
// 1, 2, 4 or 8 >= M; the tensor-core tile always has 8 rows, kResultScale where blocks
// hold a whole window). Each 4-bit tensor-core configuration of algorithm 0 also has a
// dependent-launch instance (kDependent).
#define BQMM_NBITS_ALGOS(X, T, B, R, RS) X(T, B, 0, R, RS) X(T, B, 1, R, RS) X(T, B, 2, R, RS)
#define BQMM_NBITS_FLOAT_CONFIGS(X)                                               \
  BQMM_NBITS_ALGOS(X, float, 4, 1, false) BQMM_NBITS_ALGOS(X, float, 4, 2, false) \
  BQMM_NBITS_ALGOS(X, float, 4, 4, false) BQMM_NBITS_ALGOS(X, float, 4, 8, false) \
  BQMM_NBITS_ALGOS(X, float, 8, 1, false) BQMM_NBITS_ALGOS(X, float, 8, 2, false) \
  BQMM_NBITS_ALGOS(X, float, 8, 4, false) BQMM_NBITS_ALGOS(X, float, 8, 8, false)
#define BQMM_NBITS_HALF_CONFIGS(X, T)                                   \
  BQMM_NBITS_ALGOS(X, T, 4, 8, false) BQMM_NBITS_ALGOS(X, T, 4, 8, true) \
  BQMM_NBITS_ALGOS(X, T, 8, 8, false) BQMM_NBITS_ALGOS(X, T, 8, 8, true)

template <typename T>
Status launch_register_tile(const NBitsGemvArgs& args, int algo, int rows, int k_split,
                            cudaStream_t stream) {
  const GemvParams<T> p = make_nbits_params<T>(args);
  const dim3 grid(static_cast<unsigned>((args.n + kTileCols - 1) / kTileCols));
  const dim3 block(k_split * kWarpSize);
  // Scale on the mma result when a window's chunks share one block.
  const int window_codes = args.bits == 4 ? Codes<4>::kPerWindow : Codes<8>::kPerWindow;
  const bool result_scale = !std::is_same_v<T, float> && args.block_size >= window_codes;
  // Typed zero points: algorithm 0 of the tensor-core tile, each weight scaled, instances of
  // their own (launch_nbits_gemv has refused every other configuration).
  if constexpr (!std::is_same_v<T, float>) {
    if (args.zp_typed != nullptr) {
      if (args.bits == 4) {
        NBitsGemvKernel<T, 4, kNBitsGemvAlgoUnrolled, kMmaRows, false, false, true><<<grid, block, 0, stream>>>(p);
      } else {
        NBitsGemvKernel<T, 8, kNBitsGemvAlgoUnrolled, kMmaRows, false, false, true><<<grid, block, 0, stream>>>(p);
      }
      return check_launch("NBitsGemvKernel (typed zero points)");
    }
  }
#define BQMM_LAUNCH_IF(T_, B, A, R, RS)                                                      \
  if (args.bits == B && algo == A && rows == R && result_scale == RS) {                      \
    if constexpr (B == 4 && A == kNBitsGemvAlgoUnrolled && !std::is_same_v<T_, float>) {     \
      if (args.dependent)                                                                    \
        return launch_kernel(NBitsGemvKernel<T_, B, A, R, RS, true>, grid, block, 0, stream, \
                             true, "NBitsGemvKernel", p);                                    \
    }                                                                                        \
    NBitsGemvKernel<T_, B, A, R, RS><<<grid, block, 0, stream>>>(p);                         \
    return check_launch("NBitsGemvKernel");                                                  \
  }
  if constexpr (std::is_same_v<T, float>) {
    BQMM_NBITS_FLOAT_CONFIGS(BQMM_LAUNCH_IF)
  } else {
    BQMM_NBITS_HALF_CONFIGS(BQMM_LAUNCH_IF, T)
  }
#undef BQMM_LAUNCH_IF
  return Status(StatusCode::kInternal,
                std::string("launch_nbits_gemv: no NBitsGemvKernel for ") +
                    dtype_name(args.dtype) + ", " + std::to_string(args.bits) + "-bit, algo " +
                    std::to_string(algo) + ", rows " + std::to_string(rows) +
                    (result_scale ? ", scale on the result" : ""));
}

}  // namespace

Status launch_nbits_gemv(const NBitsGemvArgs& args, int algo, int rows, int k_split, bool tma,
                         bool window, bool lines, int tiles_per_warp, int registers,
                         cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  // M > 8: row groups, which only the window kernel's line loads have.
  const bool row_groups = args.m > kMmaRows;
  if (row_groups && !(window && lines))
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: M = " + std::to_string(args.m) +
                      " > 8 takes row groups, which only the window kernel's line loads have, "
                      "not " + (window ? "the window kernel without line loads"
                                       : tma ? "TMA tiles" : "the register tile"));
  BQMM_RETURN_IF_ERROR(check_nbits_gemv_args(args, rows, k_split, row_groups));
  // The one kernel with a dependent-launch instance (kDependent): the 4-bit tensor-core
  // register tile, algorithm 0, float16 / bfloat16.
  if (args.dependent && (window || tma || args.bits != 4 || algo != kNBitsGemvAlgoUnrolled ||
                         args.dtype == DType::kFloat32))
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: a dependent launch only of the 4-bit tensor-core register "
                  "tile's algorithm 0 (float16 / bfloat16), not " +
                      std::string(window ? "the window kernel"
                                  : tma  ? "TMA tiles"
                                         : std::to_string(args.bits) + "-bit, algo " +
                                               std::to_string(algo) + ", " +
                                               dtype_name(args.dtype)));
  // Typed zero points: only the tensor-core register tile's algorithm 0 (float16 /
  // bfloat16), launched plainly.
  if (args.zp_typed != nullptr &&
      (window || tma || algo != kNBitsGemvAlgoUnrolled || args.dtype == DType::kFloat32 ||
       args.dependent || args.zp_packed != nullptr))
    return Status(StatusCode::kInternal,
                  "launch_nbits_gemv: typed zero points only on the tensor-core register tile's "
                  "algorithm 0 (float16 / bfloat16), launched plainly, without packed ones");
  if (window) return launch_nbits_gemv_window(args, k_split, lines, tiles_per_warp, registers, stream);
  if (k_split > kMaxKSplit)
    return Status(StatusCode::kInternal, "launch_nbits_gemv: k_split " + std::to_string(k_split) +
                                             " only on the window kernel");
  if (tma) return launch_nbits_gemv_tma(args, k_split, stream);
  return dispatch_float_types(args.dtype, "launch_nbits_gemv", [&](auto tag) -> Status {
    return launch_register_tile<decltype(tag)>(args, algo, rows, k_split, stream);
  });
}

}  // namespace bqmm::cuda
