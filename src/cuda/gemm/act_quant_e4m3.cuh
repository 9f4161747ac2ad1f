// The W8A8 GEMMs' activation quantize pass (w8a8_wgmma.cu, w8a8_cublaslt.cu): A's e4m3
// codes, bit for bit the QDQ's, and with dynamic quantization its per-(row, K block)
// scales amax / 448.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace act_quant {

constexpr int kQuantThreads = 256;

// Lanes per (row, K block) group when each lane holds `chunks` 16-byte chunks (8
// activations each): the largest power of two up to block_size / (8 chunks), at most a
// warp, so that a group never straddles two warps (shuffles stay inside it).
// group_lanes_log2 is its log2 in a few integer instructions: the kernel shifts by it, as
// a division by a run-time count cost the one-chunk form 2-22 % of its time (H100).
__host__ __device__ inline int group_lanes_log2(int64_t block_size, int chunks) {
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(32, block_size / (8 * chunks)));
#ifdef __CUDA_ARCH__
  return 31 - __clz(static_cast<int>(most));
#else
  int log2 = 0;
  while ((int64_t{2} << log2) <= most) ++log2;
  return log2;
#endif
}
__host__ __device__ inline int group_lanes(int64_t block_size, int chunks) {
  return 1 << group_lanes_log2(block_size, chunks);
}
// Blocks of the grid along a row: a group per K block.
inline int64_t blocks_per_row(int64_t block_size, int chunks, int64_t k_blocks) {
  return (k_blocks * group_lanes(block_size, chunks) + kQuantThreads - 1) / kQuantThreads;
}

// 16 bytes (8 activations) of row `row` at element i; zeros for a GEMM's padding rows
// (row >= m), which A does not have.
template <typename T>
__device__ __forceinline__ uint4 load_chunk(const T* a, int64_t m, int64_t k, int64_t row, int64_t i) {
  return row < m ? __ldg(reinterpret_cast<const uint4*>(a + row * k + i)) : make_uint4(0, 0, 0, 0);
}

// The 8 activations of a chunk as float32.
template <typename T>
__device__ __forceinline__ void chunk_to_float(const uint4 v, float (&x)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = packed2_to_float2<T>(w[j]);
    x[2 * j] = f.x;
    x[2 * j + 1] = f.y;
  }
}

// The block's amax as bits: the sign cleared, a 16-bit activation's bits order as its
// magnitude does (zeros, subnormals, normals, infinity), and every NaN's lie above
// infinity's. So an unsigned max of the bits, two activations per 32-bit word
// (VIMNMX.U16x2), finds max |x| exactly, and a NaN anywhere in the block wins it: no
// conversion, compare or vote per activation. `bits` holds the running max of each half.
__device__ __forceinline__ uint32_t chunk_abs_max_bits(const uint4 v, uint32_t bits) {
  constexpr uint32_t kAbs = 0x7fff7fffu;
  return __vmaxu2(__vmaxu2(__vmaxu2(bits, v.x & kAbs), __vmaxu2(v.y & kAbs, v.z & kAbs)), v.w & kAbs);
}
// The scale amax / 448 of a block's max bits (both halves, reduced over the group), NaN
// where they are a NaN's: as float32 arithmetic on the activations would give it.
template <typename T>
__device__ __forceinline__ float scale_of_abs_max_bits(uint32_t bits) {
  const uint32_t m = max(bits & 0xffffu, bits >> 16);
  constexpr uint32_t kInfBits = std::is_same_v<T, __half> ? 0x7c00u : 0x7f80u;
  if (m > kInfBits) return __int_as_float(0x7fc00000);
  float amax;
  if constexpr (std::is_same_v<T, __half>) {
    amax = __half2float(__ushort_as_half(static_cast<unsigned short>(m)));
  } else {
    amax = __uint_as_float(m << 16);  // bfloat16 is the top half of a float32
  }
  return amax / 448.0f;
}

// A chunk's 8 codes e4m3_satfinite_rne(x * inv), as the QDQ rounds them.
template <typename T>
__device__ __forceinline__ uint2 chunk_codes(const uint4 v, float inv) {
  float x[8];
  chunk_to_float<T>(v, x);
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t pair =
        __nv_cvt_float2_to_fp8x2(make_float2(x[2 * j] * inv, x[2 * j + 1] * inv), __NV_SATFINITE, __NV_E4M3);
    q[j / 2] |= pair << (16 * (j % 2));
  }
  return make_uint2(q[0], q[1]);
}

// A group of lanes per (row, K block) (group_lanes), lane l holding the block's chunks l,
// l + lanes, .. (kChunks of them) in each of kRows rows at once, each chunk loaded once by
// one 16-byte load and written as 8 bytes of codes (K % 16 == 0 and 16-byte aligned rows,
// the planner's conditions). The pass is a stream of A, so what paces it is the loads in
// flight and the instructions a byte: a thread issues all its chunks' loads together and
// keeps them in registers until their codes are written; more chunks a lane also pay the
// group's reduction and the scale's divisions once for more bytes. A block longer than the
// lanes' held chunks (8 x lanes x kChunks) reloads its further chunks, from L1 or L2.
// Its scale: dynamic amax / 448 (NaN where the block holds one; the amax reduced over the
// group), static a_scale; codes e4m3_satfinite_rne(a * inv), bit for bit the QDQ's. The
// scales (static: a_scale in every entry) go to column `blk` of [k_blocks, m_pad] where
// `scales` is given. Rows m .. rows - 1 (a GEMM's padding) get codes and scales 0 (their
// chunks read as zeros: amax 0; static: scale 0, inverse 0). Grid: x the row's groups, y
// groups of kRows rows (striding by gridDim.y).
template <typename T, bool kDynamic, int kRows, int kChunks>
__global__ void __launch_bounds__(kQuantThreads)
    ActQuantE4m3Kernel(const T* __restrict__ a, const float* __restrict__ a_scale, int64_t m, int64_t rows,
                       int64_t k, int block_size, int k_blocks, int64_t m_pad, uint8_t* __restrict__ codes,
                       float* __restrict__ scales) {
  allow_dependent_launch();  // a GEMM launched as its dependent waits for it before reading A's codes
  const int lanes_log2 = group_lanes_log2(block_size, kChunks);
  const int lanes = 1 << lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const int blk = static_cast<int>((blockIdx.x * kQuantThreads + threadIdx.x) >> lanes_log2);
  if (blk >= k_blocks) return;  // whole groups leave together
  // The group's lanes: shuffles stay inside them.
  const unsigned mask = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1) << (threadIdx.x % 32 - lane);
  const int64_t begin = static_cast<int64_t>(blk) * block_size;
  const int64_t end = blk + 1 < k_blocks ? begin + block_size : k;
  const int64_t first = begin + 8 * lane;  // the lane's first chunk; chunks at or past `end` are not read
  const int64_t step = 8 * lanes;
  const int64_t further = first + kChunks * step;  // the lane's first chunk not held in registers
  float static_scale = 0.0f;
  if constexpr (!kDynamic) static_scale = *a_scale;
  for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows; row0 < rows;
       row0 += static_cast<int64_t>(gridDim.y) * kRows) {
    uint4 held[kRows][kChunks];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        held[r][c] =
            first + c * step < end ? load_chunk(a, m, k, row0 + r, first + c * step) : make_uint4(0, 0, 0, 0);
    float scale[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) scale[r] = row0 + r < m ? static_scale : 0.0f;
    if constexpr (kDynamic) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint32_t bits = 0;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) bits = chunk_abs_max_bits(held[r][c], bits);
        for (int64_t i = further; i < end; i += step)
          bits = chunk_abs_max_bits(load_chunk(a, m, k, row0 + r, i), bits);
        for (int o = lanes / 2; o > 0; o /= 2) bits = __vmaxu2(bits, __shfl_xor_sync(mask, bits, o));
        scale[r] = scale_of_abs_max_bits<T>(bits);
      }
    }
    if (scales != nullptr) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)  // row r's scale from lane r % lanes
        if ((r & (lanes - 1)) == lane && row0 + r < rows) scales[blk * m_pad + row0 + r] = scale[r];
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = row0 + r;
      if (row >= rows) break;
      const float inv = qdq_inv_scale(scale[r]);
      uint8_t* dst = codes + row * k;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        if (first + c * step < end)
          *reinterpret_cast<uint2*>(dst + first + c * step) = chunk_codes<T>(held[r][c], inv);
      for (int64_t i = further; i < end; i += step)
        *reinterpret_cast<uint2*>(dst + i) = chunk_codes<T>(load_chunk(a, m, k, row, i), inv);
    }
  }
}

template <typename T, bool kDynamic, int kRows, int kChunks>
Status launch_act_quant(const Fp8KernelArgs& args, int64_t rows, int64_t block, int64_t k_blocks, int64_t m_pad,
                        uint8_t* codes, float* scales, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(blocks_per_row(block, kChunks, k_blocks)),
                  static_cast<unsigned>(std::min<int64_t>((rows + kRows - 1) / kRows, 65535)));
  act_quant::ActQuantE4m3Kernel<T, kDynamic, kRows, kChunks><<<grid, kQuantThreads, 0, stream>>>(
      static_cast<const T*>(args.a), args.a_scale, args.m, rows, args.k, static_cast<int>(block),
      static_cast<int>(k_blocks), m_pad, codes, scales);
  return check_launch("ActQuantE4m3Kernel");
}

// Two rows a thread by two chunks a lane from this many blocks of that form on (A of 256
// rows by K = 8192 at block 128), one by one below, both modes: measured on an H100
// (docs/PERF.md, "The quantize pass"), the rule takes 0.67-0.95x the time of one row a
// thread in dynamic mode where the larger form runs with A in L2, 0.90-0.98x from HBM at
// 1024 rows or more, static 0.86-1.03x; on smaller grids the larger form leaves SMs idle.
constexpr int64_t kTwoByTwoFromBlocks = 256;

}  // namespace act_quant

// The pass over A of `args` in K blocks of `block` (k_blocks of them): codes [rows, K]
// bytes, and where `scales` is given the scales [k_blocks, m_pad] (static: a_scale in
// each); rows >= M (rows <= m_pad) zero.
template <typename T, bool kDynamic>
Status launch_act_quant_e4m3(const Fp8KernelArgs& args, int64_t rows, int64_t block, int64_t k_blocks,
                             int64_t m_pad, uint8_t* codes, float* scales, cudaStream_t stream) {
  using namespace act_quant;
  if (blocks_per_row(block, 2, k_blocks) * ((rows + 1) / 2) >= kTwoByTwoFromBlocks)
    return launch_act_quant<T, kDynamic, 2, 2>(args, rows, block, k_blocks, m_pad, codes, scales, stream);
  return launch_act_quant<T, kDynamic, 1, 1>(args, rows, block, k_blocks, m_pad, codes, scales, stream);
}

}  // namespace bqmm::cuda
