// Line loads: the weight stream of the register-load tensor-core GEMV tiles (FP8's
// Fp8GemvMmaKernel and the N-bit NBitsGemvWindowKernel) in the shape that streams.
//
// Why: an mma A fragment gives lane (g, t) rows g and g + 8, so a lane that loads only
// what it multiplies makes each warp instruction read 8 rows x 64 bytes, a shape that
// streams 2.5-3.3 TB/s on the H200 against 3.9-4.4 for 4 rows x 128 bytes
// (tools/microbench/stream_shapes.cu). Here a warp reads a pair of 64-byte
// windows of its 16 rows (16 rows x 128 bytes) with 4 instructions of 4 whole 128-byte
// rows each (lane l: row 4i + l / 8, chunk l % 8), stores the pair to its 2 KB of shared
// memory and reads it back in fragment order (lane (g, t): chunk t of each window of rows
// g and g + 8): 4 more memory instructions per pair, and the same 16 registers in flight
// per lane as two windows of fragment loads.
//
// Layout: chunk c (16 bytes) of row r at 16-byte slot 8r + (c ^ 4 (r & 1)). A quarter warp
// writes one row (8 slots) and reads two adjacent rows' 4 chunks of one window (8 slots):
// neither side has a bank conflict.
//
// Use, per pair: load (registers in flight) ... stage (store, __syncwarp) ... load the next
// pair ... lo / hi of both windows ... release (__syncwarp before the next stage
// overwrites the buffer). The caller owns the K loop; rows past N read row N - 1 (their
// sums are never stored).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "core/gemv_split.h"
#include "cuda/common.cuh"

namespace bqmm::cuda {

constexpr int kLineRows = 16;                               // a tile's rows (the mma M extent)
constexpr int kLinePairBytes = 128;                         // bytes of a row per pair
constexpr int kLineBufferBytes = kLineRows * kLinePairBytes;  // 2 KB of shared memory per warp
static_assert(kLineRows == kGemvTileCols, "a line-load buffer holds one warp tile's rows");
static_assert(kLinePairBytes == 2 * kGemvWindowBytes && kLinePairBytes == kGemvTmaTileBytes,
              "a pair is two 64-byte windows, the planners' 128-byte line (kGemvTmaTileBytes)");

// Both two-tile launchers' check of the register bound a plan asks for (its `registers`): 0
// (the kernel's own), or with two tiles of line loads kGemvTwoTileRegisters or
// kGemvWideRegisters, the latter at k_split <= kGemvWideMaxKSplit. Sets *wide. The planners
// ask for nothing else: a violation is a bug, reported (kInternal, naming `who`) rather
// than launched.
inline Status check_line_tiles_registers(const char* who, int registers, bool two_tiles,
                                         int k_split, bool* wide) {
  *wide = registers == kGemvWideRegisters;
  if (registers != 0 && !(two_tiles && (*wide || registers == kGemvTwoTileRegisters)))
    return Status(StatusCode::kInternal,
                  std::string(who) + ": a register bound of " + std::to_string(registers) +
                      " without two tiles of line loads (0, or with them " +
                      std::to_string(kGemvTwoTileRegisters) + " or " +
                      std::to_string(kGemvWideRegisters) + ")");
  if (*wide && k_split > kGemvWideMaxKSplit)
    return Status(StatusCode::kInternal, std::string(who) + ": k_split " +
                                             std::to_string(k_split) + " at " +
                                             std::to_string(kGemvWideRegisters) +
                                             " registers (at most " +
                                             std::to_string(kGemvWideMaxKSplit) + ")");
  return Status::Ok();
}

#if defined(__CUDACC__)
class LinePairs {
 public:
  // buf: this warp's 2 KB (16-byte aligned); rows n0 .. n0 + 15 of a [n, row_bytes] matrix.
  __device__ LinePairs(uint4* buf, const uint8_t* b, int64_t n0, int64_t n, int64_t row_bytes,
                       int lane) {
    const int lr = lane / 8, lc = lane % 8;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = n0 + 4 * i + lr;
      src_[i] = b + (row < n ? row : n - 1) * row_bytes + lc * 16;
    }
    st_ = buf + lr * 8 + (lc ^ ((lr & 1) << 2));  // row 4i + lr: + 32 i
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) rd_[h] = buf + g * 8 + ((4 * h + t) ^ ((g & 1) << 2));  // hi: + 64
  }

  // The lane's 4 loads of the pair at byte `offset` of every row.
  __device__ __forceinline__ void load(uint4 (&raw)[4], size_t offset) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) raw[i] = load_stream_u4(src_[i] + offset);
  }
  // The lines load() at `offset` reads, pulled into L2 (prefetch_l2: safe before a
  // dependent launch's wait).
  __device__ __forceinline__ void prefetch(size_t offset) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) prefetch_l2(src_[i] + offset);
  }
    // Stores a loaded pair; after it every lane may read the pair.
  __device__ __forceinline__ void stage(const uint4 (&raw)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) st_[32 * i] = raw[i];
    __syncwarp();
  }
  // Lane (g, t)'s 16 bytes of window h (0, 1) of the staged pair: chunk t of row g (lo) and
  // of row g + 8 (hi).
  __device__ __forceinline__ uint4 lo(int h) const { return rd_[h][0]; }
  __device__ __forceinline__ uint4 hi(int h) const { return rd_[h][64]; }
  // Every lane has read the staged pair: the buffer may be staged again.
  __device__ __forceinline__ void release() const { __syncwarp(); }

 private:
  const uint8_t* src_[4];
  uint4* st_;
  const uint4* rd_[2];
};

// kTiles (1 or 2) adjacent 16-row tiles of one warp, rows n0 + 16 j .. of tile j, each with
// its own LinePairs and 2 KB of the warp's kTiles x 2 KB at buf. lines[j] is tile j's
// stream (j a compile-time constant at every use; with one tile the second member is the
// first's twin, never used, and compiled away).
template <int kTiles>
class LineTiles {
 public:
  __device__ LineTiles(uint4* buf, const uint8_t* b, int64_t n0, int64_t n, int64_t row_bytes,
                       int lane)
      : first_(buf, b, n0, n, row_bytes, lane),
        last_(buf + (kTiles - 1) * (kLineBufferBytes / 16), b, n0 + (kTiles - 1) * kLineRows, n,
              row_bytes, lane) {}
  __device__ __forceinline__ const LinePairs& operator[](int j) const {
    return j == 0 ? first_ : last_;
  }
  // Every lane has read every tile's staged pair.
  __device__ __forceinline__ void release() const { first_.release(); }

 private:
  LinePairs first_, last_;
};
#endif  // __CUDACC__

}  // namespace bqmm::cuda
