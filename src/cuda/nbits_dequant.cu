// N-bit weight dequantization for the dequant + cuBLAS path:
//
//   out[r, k] = T1((q[r, k] - zp[r, blk]) * scales[r, blk]),
//   blk = g_idx[k] when g_idx is given, else k / block_size
//
// for every input the GEMV does not take: g_idx (act order), typed (fractional) zero
// points, a partial last block, any alignment. The pass reads rows * K * bits / 8 bytes
// and writes rows * K * sizeof(T1), so it is bound by its writes; the one goal is to run
// at HBM speed:
//   * a thread owns a run of 8 consecutive codes of a row (the row comes from the grid, so
//     there is no 64-bit division per element); without g_idx a run lies in one block
//     (block_size is a multiple of 8) and takes one scale and one zero point;
//   * kVec (K % 8 == 0, 8-byte aligned B): the run is one 8- or 4-byte load and one
//     (float32: two) 16-byte store; otherwise codes are read byte by byte and written one
//     by one up to K.
// (q - zp) * scale is computed in float32, where it is exact for float16 / bfloat16 scales
// (|q - zp| < 2^9, products of at most 20 significant bits), and rounded to T1 once: the
// same weights the GEMV decodes with its packed T arithmetic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

constexpr int kDequantThreads = 256;
// Four blocks per SM at least (64 registers): with only the thread count, ptxas aims at
// full occupancy (32 registers) and spills the scalar 4-bit variant.
constexpr int kDequantMinBlocks = 4;
constexpr int kRun = 8;  // codes per thread

template <typename T>
struct DequantParams {
  const uint8_t* b;          // [rows, row_bytes]
  const T* scales;           // [rows, k_blocks]
  const uint8_t* zp_packed;  // [rows, zp_row_bytes] or nullptr
  const T* zp_typed;         // [rows, k_blocks] or nullptr
  const int32_t* g_idx;      // [K] or nullptr
  T* out;                    // [rows, K]
  int64_t rows;
  int64_t k;
  int64_t k_blocks;
  int64_t row_bytes;
  int64_t zp_row_bytes;
  uint32_t block_shift;      // log2(block_size)
};

// Code k of a row: 8-bit one byte, 4-bit element 2j in the low nibble of byte j.
template <int kBits>
__device__ __forceinline__ uint32_t code_at(const uint8_t* row, int64_t k) {
  if constexpr (kBits == 8) {
    return row[k];
  } else {
    return (row[k >> 1] >> ((k & 1) * 4)) & 0xFu;
  }
}

// The zero point of block `blk` of a row, as float32.
template <typename T, int kBits>
__device__ __forceinline__ float zero_point(const DequantParams<T>& p, int64_t row, int64_t blk) {
  if (p.zp_typed != nullptr) return to_float(p.zp_typed[row * p.k_blocks + blk]);
  if (p.zp_packed != nullptr) return static_cast<float>(code_at<kBits>(p.zp_packed + row * p.zp_row_bytes, blk));
  return static_cast<float>(1u << (kBits - 1));
}

// (q - zp) * scale of block `blk` of a row; NaN for a g_idx value outside [0, k_blocks),
// which is then never used to index.
template <typename T, int kBits>
__device__ __forceinline__ float dequant(const DequantParams<T>& p, int64_t row, int64_t blk,
                                         uint32_t q) {
  if (blk < 0 || blk >= p.k_blocks) return __int_as_float(0x7fc00000);
  return (static_cast<float>(q) - zero_point<T, kBits>(p, row, blk)) *
         to_float(p.scales[row * p.k_blocks + blk]);
}

// 8 float32 -> 8 T with one (float32: two) 16-byte store.
template <typename T>
__device__ __forceinline__ void store_run(T* dst, const float (&v)[kRun]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(float2_to_packed2<T>(v[0], v[1]), float2_to_packed2<T>(v[2], v[3]),
                   float2_to_packed2<T>(v[4], v[5]), float2_to_packed2<T>(v[6], v[7]));
  }
}

// Grid: x over the runs of a row, y over rows (strided past 65535 rows).
template <typename T, int kBits, bool kVec>
__global__ void __launch_bounds__(kDequantThreads, kDequantMinBlocks)
    DequantNBitsKernel(const DequantParams<T> p) {
  const int64_t runs = (p.k + kRun - 1) / kRun;
  const int64_t run = static_cast<int64_t>(blockIdx.x) * kDequantThreads + threadIdx.x;
  if (run >= runs) return;
  const int64_t k0 = run * kRun;
  for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
    const uint8_t* b_row = p.b + row * p.row_bytes;
    T* out_row = p.out + row * p.k;
    uint32_t q[kRun];
    if constexpr (kVec) {
      // 8 codes: 8 bytes (8-bit) or 4 bytes (4-bit), low bits first.
      if constexpr (kBits == 8) {
        const uint2 v = *reinterpret_cast<const uint2*>(b_row + k0);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          q[i] = (v.x >> (8 * i)) & 0xFFu;
          q[4 + i] = (v.y >> (8 * i)) & 0xFFu;
        }
      } else {
        const uint32_t v = *reinterpret_cast<const uint32_t*>(b_row + k0 / 2);
#pragma unroll
        for (int i = 0; i < kRun; ++i) q[i] = (v >> (4 * i)) & 0xFu;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kRun; ++i) q[i] = k0 + i < p.k ? code_at<kBits>(b_row, k0 + i) : 0u;
    }

    float v[kRun];
    if (p.g_idx == nullptr) {
      // The run lies in one block: one scale, one zero point.
      const int64_t blk = k0 >> p.block_shift;
      const float zp = zero_point<T, kBits>(p, row, blk);
      const float s = to_float(p.scales[row * p.k_blocks + blk]);
#pragma unroll
      for (int i = 0; i < kRun; ++i) v[i] = (static_cast<float>(q[i]) - zp) * s;
    } else {
#pragma unroll
      for (int i = 0; i < kRun; ++i)
        v[i] = k0 + i < p.k ? dequant<T, kBits>(p, row, __ldg(p.g_idx + k0 + i), q[i]) : 0.0f;
    }

    if constexpr (kVec) {
      store_run(out_row + k0, v);
    } else {
#pragma unroll
      for (int i = 0; i < kRun; ++i)
        if (k0 + i < p.k) out_row[k0 + i] = from_float<T>(v[i]);
    }
  }
}

template <typename T, int kBits>
Status launch(const NBitsDequantArgs& args, bool vec8, cudaStream_t stream) {
  DequantParams<T> p;
  p.b = args.b;
  p.scales = static_cast<const T*>(args.scales);
  p.zp_packed = args.zp_packed;
  p.zp_typed = static_cast<const T*>(args.zp_typed);
  p.g_idx = args.g_idx;
  p.out = static_cast<T*>(args.out);
  p.rows = args.rows;
  p.k = args.k;
  p.k_blocks = args.k / args.block_size + (args.k % args.block_size != 0 ? 1 : 0);
  p.row_bytes = p.k_blocks * args.block_size * kBits / 8;
  p.zp_row_bytes = (p.k_blocks * kBits + 7) / 8;
  p.block_shift = 0;
  while ((int64_t{1} << p.block_shift) < args.block_size) ++p.block_shift;
  const int64_t runs = (args.k + kRun - 1) / kRun;
  const int64_t blocks_x = (runs + kDequantThreads - 1) / kDequantThreads;
  if (blocks_x > 0x7fffffff)
    return Status(StatusCode::kInternal, "launch_nbits_dequant: K = " + std::to_string(args.k) +
                                             " exceeds the grid");
  const dim3 grid(static_cast<unsigned>(blocks_x),
                  static_cast<unsigned>(args.rows < 65535 ? args.rows : 65535));
  if (vec8) {
    DequantNBitsKernel<T, kBits, true><<<grid, kDequantThreads, 0, stream>>>(p);
  } else {
    DequantNBitsKernel<T, kBits, false><<<grid, kDequantThreads, 0, stream>>>(p);
  }
  return check_launch("DequantNBitsKernel");
}

}  // namespace

Status launch_nbits_dequant(const NBitsDequantArgs& args, bool vec8, cudaStream_t stream) {
  if (args.rows == 0 || args.k == 0) return Status::Ok();
  if (args.bits != 4 && args.bits != 8)
    return Status(StatusCode::kInternal,
                  "launch_nbits_dequant: bits " + std::to_string(args.bits));
  if (vec8 && args.k % kRun != 0)
    return Status(StatusCode::kInternal, "launch_nbits_dequant: vec8 needs K % 8 == 0");
  return dispatch_float_types(args.dtype, "launch_nbits_dequant", [&](auto tag) -> Status {
    using T = decltype(tag);
    return args.bits == 8 ? launch<T, 8>(args, vec8, stream) : launch<T, 4>(args, vec8, stream);
  });
}

}  // namespace bqmm::cuda
