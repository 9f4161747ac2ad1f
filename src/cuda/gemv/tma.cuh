// The Hopper (SM90) tensor memory accelerator for the decode GEMVs: a weight matrix
// [rows, row_bytes] of bytes described once per call by a tensor map, and a warp's
// 16-row x 128-byte tiles copied by one instruction into shared memory, completion
// tracked by an mbarrier per ring slot.
//
// Why: register loads in mma-fragment shape (8 rows x 64 bytes per warp instruction)
// stream 2.5-3.3 TB/s on the H200 for 2-8 loads in flight per lane and 16-48 warps per
// SM, 4 x 128-byte rows 3.9-4.4 and 512 contiguous bytes 4.3-4.6 (memcpy 4.23). A TMA ring
// of 16-row x 128-byte boxes read back with ldmatrix, with the M = 8 activation loads of
// a GEMV beside it, streams 4.0-4.1 TB/s (tools/microbench, 2 GiB cold),
// and it takes no registers and no load instructions: the bytes in flight
// sit in shared memory, and the L1 load pipe is left to the activations.
//
// Layout: SWIZZLE_128B, so 16-byte chunk c of tile row r lands at r * 128 +
// 16 * (c ^ (r % 8)) of a 1024-byte aligned slot: the eight rows an ldmatrix matrix reads
// sit in eight different bank groups. Rows past the matrix and bytes past row_bytes are
// filled with zeros by the copy (so tiles need no clamping).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "bqmm/status.h"
#include "core/gemv_split.h"
#if defined(__CUDACC__)
#include "cuda/common.cuh"  // smem_addr
#endif

namespace bqmm::cuda {

constexpr int kTmaBoxRows = 16;  // tile rows per copy (the mma M extent)
// Bytes of each row per copy (the swizzle span); the planners' unit of K (core/gemv_split.h).
constexpr int kTmaBoxBytes = static_cast<int>(kGemvTmaTileBytes);
constexpr int kTmaSlotBytes = kTmaBoxRows * kTmaBoxBytes;  // 2 KB
constexpr int kTmaSlotAlign = 1024;  // SWIZZLE_128B's shared-memory alignment

// Host: the tensor map of a row-major [rows, row_bytes] byte matrix at `base` with boxes
// of `box_rows` (16 for the GEMVs' tiles, 128 for the GEMMs'; at most 256) rows x
// `box_bytes` (128, swizzled in 128-byte spans; 64, in 64-byte spans: 16-byte piece c of
// box row r at 16 (c ^ ((r / 2) % 4)) within its row; or 32, in 32-byte spans: piece c at
// 16 (c ^ ((r / 4) % 2))). Needs a 16-byte aligned base and
// row_bytes % 16 == 0 (the planners guarantee both). Host-only work (no device call,
// graph-capture safe).
Status make_tile_tensor_map(const void* base, int64_t rows, int64_t row_bytes, CUtensorMap* out,
                            int box_rows = kTmaBoxRows, int box_bytes = kTmaBoxBytes);

// Dynamic shared memory of a block whose `warps` warps each own a ring of `depth` slots
// (TmaTileRing), with room to align the first slot.
constexpr int tma_ring_smem_bytes(int warps, int depth) {
  return warps * depth * kTmaSlotBytes + kTmaSlotAlign;
}

// ----------------------------------------------------------------- device side
#if defined(__CUDACC__)
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// Makes the initializations visible to the async proxy (the copies complete on them).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival on `bar` that also raises the bytes its current phase waits for by `bytes`
// (the copies that deliver them are started after it, by this thread).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
// Lane 0 of the owning warp: arm `bar` for one 2 KB tile and start the copy of the tile
// whose first byte is (x bytes into the row, row y) into `slot`.
__device__ __forceinline__ void tma_load_tile(const CUtensorMap* map, void* slot, uint64_t* bar,
                                              int32_t x, int32_t y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  mbarrier_arrive_expect_tx(bar, kTmaSlotBytes);
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(slot)),
      "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
#else
  __trap();  // the planner asks for TMA tiles on SM90+ only
#endif
}

// Raises the bytes the current phase of `bar` waits for by `bytes` without arriving (the
// copies that deliver them are started after it, by this thread).
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#else
  __trap();
#endif
}
// Starts the copy of the box at (x bytes into the row, row y) into `dst` (its bytes counted
// on `bar`, armed by mbarrier_expect_tx before).
__device__ __forceinline__ void tma_copy_box(const CUtensorMap* map, uint32_t dst, uint64_t* bar, int32_t x,
                                             int32_t y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}
// One arrival on `bar` once all of this thread's earlier cp.async copies have landed
// (counted among the barrier's expected arrivals).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Lane 0, first thing: fetch the tensor map (a kernel parameter) into the TMA unit's cache
// while the barriers are set up, so the first copy does not wait for it.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
#endif
}

// Every lane: wait until the tile of phase `parity` has landed in the slot of `bar`.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}

// One arrival on `bar` (release: this thread's earlier shared-memory accesses happen
// before a waiter's later ones).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// A warp's tiles of a row (GemvWarpTiles, core/gemv_split.h: count, partial) and where
// tile i of them starts: x(i) bytes into the row.
struct WarpTiles : GemvWarpTiles {
  uint32_t first = 0, stride = 0;

  __device__ WarpTiles(int64_t row_bytes, uint32_t warp, uint32_t k_split)
      : GemvWarpTiles(row_bytes, warp, k_split), first(warp), stride(k_split) {}
  __device__ uint32_t x(int i) const {
    return (first + static_cast<uint32_t>(i) * stride) * kTmaBoxBytes;
  }
};

// A warp's ring of kDepth tile slots (in the kernel's dynamic shared memory, 2 KB each,
// 1024-byte aligned) and their mbarriers (in the kernel's static shared memory). Tile i of
// the warp's sequence goes to slot i % kDepth; its copy completes phase i / kDepth of
// that slot's barrier.
template <int kDepth>
struct TmaTileRing {
  uint8_t* slots;  // this warp's kDepth slots
  uint64_t* bars;  // this warp's kDepth barriers

  // The warp's ring: `dynamic_smem` is the kernel's extern shared array (sized
  // warps * kDepth * kTmaSlotBytes + kTmaSlotAlign), `warp_bars` its kDepth barriers.
  __device__ TmaTileRing(uint8_t* dynamic_smem, int warp, uint64_t* warp_bars)
      : slots(reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dynamic_smem) +
                                          kTmaSlotAlign - 1) &
                                         ~uintptr_t{kTmaSlotAlign - 1}) +
              warp * kDepth * kTmaSlotBytes),
        bars(warp_bars) {}

  // Lane 0, once: fetch the tensor map and set up the barriers.
  __device__ void init(const CUtensorMap* map) const {
    tma_prefetch_map(map);
#pragma unroll
    for (int u = 0; u < kDepth; ++u) mbarrier_init(&bars[u], 1);
    mbarrier_init_fence();
  }
  // Lane 0: start the copy of tile i of the sequence, the box at (x bytes, row y).
  __device__ void load(const CUtensorMap* map, int i, int32_t x, int32_t y) const {
    tma_load_tile(map, slots + (i % kDepth) * kTmaSlotBytes, &bars[i % kDepth], x, y);
  }
  // The whole warp: lane 0 sets the ring up and starts the copies of the first kDepth
  // tiles of `tiles` (rows y .. y + 15).
  __device__ void start(const CUtensorMap* map, const WarpTiles& tiles, int32_t y, int lane) const {
    if (lane == 0) {
      init(map);
#pragma unroll
      for (int u = 0; u < kDepth; ++u)
        if (u < tiles.count) load(map, u, static_cast<int32_t>(tiles.x(u)), y);
    }
    __syncwarp();
  }
  // The whole warp, after every lane's last read of tile i: lane 0 starts tile i + kDepth
  // into the slot tile i leaves (the __syncwarp orders the reads before the copy).
  __device__ void refill(const CUtensorMap* map, const WarpTiles& tiles, int i, int32_t y,
                         int lane) const {
    __syncwarp();
    if (lane == 0 && i + kDepth < tiles.count)
      load(map, i + kDepth, static_cast<int32_t>(tiles.x(i + kDepth)), y);
  }
  // Every lane: wait for tile i; returns its slot's shared address.
  __device__ uint32_t wait(int i) const {
    mbarrier_wait(&bars[i % kDepth], static_cast<uint32_t>(i / kDepth) & 1);
    return smem_addr(slots + (i % kDepth) * kTmaSlotBytes);
  }
};

// Chunks c0 and c0 + 1 of a landed tile in mma A-fragment order: w[0] = chunk c0 of row g,
// w[1] = chunk c0 of row g + 8, w[2] = chunk c0 + 1 of row g, w[3] = chunk c0 + 1 of row
// g + 8, each the lane's word t (bytes 4t .. 4t + 3 of the chunk), g = lane / 4,
// t = lane % 4. Lanes 8q .. 8q + 7 address matrix q's rows.
__device__ __forceinline__ void ldmatrix_tile_chunks(uint32_t slot, int c0, int lane,
                                                     uint32_t (&w)[4]) {
  const int row = (lane % 8) + 8 * ((lane / 8) % 2);
  const int chunk = c0 + lane / 16;
  const uint32_t addr = slot + row * kTmaBoxBytes + ((chunk ^ (row % 8)) * 16);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
               : "r"(addr)
               : "memory");
}

#endif  // __CUDACC__

}  // namespace bqmm::cuda
