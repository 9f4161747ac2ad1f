// The fastest pure read of a byte buffer on the H200 (tools/microbench/stream_shapes.cu):
// each warp instruction reads 512 contiguous bytes (32 lanes x 16 bytes, past L1), 8 loads
// in flight per lane, each warp over its own contiguous range. The floor bqmm-profile
// reports beside every case (profile_floor.cu) and the launch-floor microbenchmark
// (microbench/launch_floor.cu) both stream with it. Header-only device code, no bqmm
// dependency.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace stream_read {

constexpr int kUnroll = 8;  // 16-byte loads in flight per lane

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The calling warp's range [begin, end) of `words` 16-byte words: the grid's warps take
// equal contiguous ranges in order (the last ones possibly empty).
struct WarpRange {
  size_t begin, end;
};
template <int kThreads>
__device__ __forceinline__ WarpRange warp_range(size_t words) {
  const size_t warps = static_cast<size_t>(gridDim.x) * (kThreads / 32);
  const size_t warp = static_cast<size_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const size_t per = (words + warps - 1) / warps;
  const size_t begin = warp * per < words ? warp * per : words;
  const size_t end = begin + per < words ? begin + per : words;
  return {begin, end};
}

// Reads words [r.begin, r.end) of `buf` (lane l: begin + l, begin + l + 32, ...) and returns
// a value depending on all of them, which the caller must consume (stored only if it equals
// a constant: the loads cannot be dropped and practically nothing is written).
__device__ __forceinline__ uint32_t read_range(const uint4* buf, WarpRange r, int lane) {
  uint32_t acc = 0;
  size_t i = r.begin + lane;
  for (; i + (kUnroll - 1) * 32 < r.end; i += kUnroll * 32) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_stream(buf + i + u * 32);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < r.end; i += 32) {
    const uint4 v = load_stream(buf + i);
    acc ^= v.x + v.y + v.z + v.w;
  }
  return acc;
}

constexpr uint32_t kNeverStored = 0x9e3779b9u;  // the value read_range's result is compared with

// The floor kernel of the profiler and the microbenchmarks: blocks of kThreads reading
// `words` 16-byte words of buf (warp_range, read_range), writing `sink` practically never.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) read_kernel(const uint4* __restrict__ buf, size_t words,
                                                        uint32_t* __restrict__ sink) {
  const WarpRange r = warp_range<kThreads>(words);
  const uint32_t acc = read_range(buf, r, threadIdx.x % 32);
  if (acc == kNeverStored) sink[0] = acc;
}

}  // namespace stream_read
