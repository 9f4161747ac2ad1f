// The Hopper (SM90a) warpgroup pieces both wgmma GEMMs share: the wgmma fences, commit
// and wait, the 128-byte-swizzled K-major shared-memory descriptor, the role register
// budgets (setmaxnreg) and the producer / consumer ring of mbarriers. Read
// fused_wgmma.cuh for how they fit together.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/gemm_plan.h"
#include "cuda/common.cuh"
#include "cuda/gemv/tma.cuh"  // mbarrier_*

namespace bqmm::cuda {

// ----------------------------------------------------------------- wgmma primitives
// Every wgmma instruction exists on sm_90a only; the file is built for it (CMake's
// BQMM_WGMMA_ARCHITECTURES) and traps elsewhere (the planner takes it on SM90 only).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BQMM_WGMMA_ENABLED 1
#else
#define BQMM_WGMMA_ENABLED 0
#endif

// ----------------------------------------------------------------- wgmma accumulators
// The accumulator operands of an m64nN wgmma, N / 2 floats d[] per thread: the asm's
// register list ("%0, ..., %{N/2 - 1}") and its "+f" operand list. Both wgmma GEMMs' asm
// wrappers (fused_wgmma.cuh, w8a8_wgmma.cuh) spell their instructions with these; their
// other operands are numbered from N / 2 on.
#define BQMM_WGMMA_REGS8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define BQMM_WGMMA_REGS16 BQMM_WGMMA_REGS8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define BQMM_WGMMA_REGS32 BQMM_WGMMA_REGS16 \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define BQMM_WGMMA_REGS64 BQMM_WGMMA_REGS32 \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define BQMM_WGMMA_REGS128 BQMM_WGMMA_REGS64 \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define BQMM_WGMMA_D8 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define BQMM_WGMMA_D16 \
  BQMM_WGMMA_D8, \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define BQMM_WGMMA_D32 \
  BQMM_WGMMA_D16, \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define BQMM_WGMMA_D64 \
  BQMM_WGMMA_D32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define BQMM_WGMMA_D128 \
  BQMM_WGMMA_D64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

__device__ __forceinline__ void wgmma_fence() {
#if BQMM_WGMMA_ENABLED
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if BQMM_WGMMA_ENABLED
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if BQMM_WGMMA_ENABLED
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}
// Keeps the compiler from moving accesses of v across an in-flight wgmma (and the
// instructions that compute v past a wgmma fence).
template <int kN>
__device__ __forceinline__ void fence_operands(float (&v)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(v[i])::"memory");
}
template <int kN>
__device__ __forceinline__ void fence_operands(uint32_t (&v)[kN][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(v[i][j])::"memory");
}

// The shared-memory descriptor of a K-major, 128-byte-swizzled operand at `addr`: start
// address >> 4 (bits 0-13), leading offset 1 (unused by swizzled K-major layouts), stride
// 1024 >> 4 between 8-row groups (bits 32-45), swizzle mode 128 bytes (1, bits 62-63).
// Within a swizzle atom the k16 steps are 32 bytes apart: the start address moves.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// The descriptor of the operand `bytes` (a multiple of 16) past desc's: one 32-bit add to
// the start-address field (5 uniform instructions per wgmma when each descriptor is built
// from its address). Exact while the sum stays in shared memory (below 2^18 bytes): the
// field cannot carry into the bits above it.
__device__ __forceinline__ uint64_t sw128_desc_step(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<uint32_t>(desc) + (bytes >> 4));
}

// Register budgets of the two roles (setmaxnreg): the launch gives every thread
// 65536 / kWgmmaThreads = 168; the producer gives most of its share to the consumers
// (128 x 40 + 256 x 232 = 128 x 168 + 256 x 168).
constexpr int kWgmmaProducerRegs = 40;
constexpr int kWgmmaConsumerRegs = 232;
static_assert(kWgmmaProducerThreads * kWgmmaProducerRegs + kWgmmaConsumerThreads * kWgmmaConsumerRegs <=
                  65536,
              "the register file of one SM");

template <int kRegs>
__device__ __forceinline__ void set_max_registers_inc() {
#if BQMM_WGMMA_ENABLED
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void set_max_registers_dec() {
#if BQMM_WGMMA_ENABLED
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}

// Slab i of a loop goes through stage i % kStages, and that stage's fill u = i / kStages
// completes phase u % 2 of its barriers. Loops carry the position rather than divide it
// out of i on every slab (a 64-bit division by kStages: about 15 instructions).
template <int kStages>
struct WgmmaRingPos {
  int stage = 0;       // i % kStages
  uint32_t phase = 0;  // (i / kStages) & 1
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
  __device__ __forceinline__ int previous_stage() const { return stage == 0 ? kStages - 1 : stage - 1; }
};

// The ring's two barriers per stage: `full` completes when a slab is ready for the
// consumers (kFullArrivals producer threads arrive once per fill), `empty` when both
// consumer warpgroups are done with it (every consumer thread arrives once per use).
template <int kStages, int kFullArrivals = kWgmmaProducerThreads>
struct WgmmaRing {
  using Pos = WgmmaRingPos<kStages>;
  uint64_t full[kStages];
  uint64_t empty[kStages];

  __device__ void init() {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kFullArrivals);
      mbarrier_init(&empty[s], kWgmmaConsumerThreads);
    }
    mbarrier_init_fence();
  }
  __device__ __forceinline__ void wait_full(const Pos& at) { mbarrier_wait(&full[at.stage], at.phase); }
  // The consumers' release of the stage's previous slab, i - kStages (needs i >= kStages).
  __device__ __forceinline__ void wait_empty(const Pos& at) { mbarrier_wait(&empty[at.stage], at.phase ^ 1u); }
  // A consumer thread's release of `stage`: its arrive (release semantics) orders its own
  // reads of the stage (scales read by ld.shared may still be in flight) before the
  // producer's refill. Every thread arrives for itself: one lane arriving for its warp
  // after a __syncwarp is as correct by the memory model, but compute-sanitizer's
  // racecheck does not follow that hand-over and reports the refill as a race.
  __device__ __forceinline__ void arrive_empty(int stage) { mbarrier_arrive(&empty[stage]); }
};

// ----------------------------------------------------------------- epilogue
// Both wgmma GEMMs' consumer warpgroups hold an m64 x kTileM accumulator each: consumer
// thread x (warp w = x / 32, lane 4 g + t) holds kAcc = kTileM / 2 floats, accumulator
// i = 4 j + 2 h + e being Y[m0 + 8 j + 2 t + e, n0 + 16 w + 8 h + g]. The store of value v
// at (row, col): Y = round_T(v + bias), or, split into planes (p.partials), plane
// blockIdx.z = v. Params: bias, y, partials, m, n as GemmParams'.
template <typename T, typename Params>
struct WgmmaEpilogue {
  const Params& p;
  int64_t n0, m0;
  int warp, g, t;

  __device__ WgmmaEpilogue(const Params& params, int64_t n_begin, int64_t m_begin, int consumer_thread)
      : p(params), n0(n_begin), m0(m_begin), warp(consumer_thread / 32), g(consumer_thread % 32 / 4),
        t(consumer_thread % 4) {}

  __device__ __forceinline__ int64_t col(int h) const { return n0 + 16 * warp + 8 * h + g; }
  __device__ __forceinline__ int64_t row(int j, int e) const { return m0 + 8 * j + 2 * t + e; }
  // Column h's values at rows r0 + 8 j, j < kRows (value(j)): the plane's or, with the
  // column's bias, Y's. One branch on the destination and a running address a column, so
  // that an element costs its bound check, conversion and store.
  template <int kRows, typename Value>
  __device__ __forceinline__ void store_column(int h, int64_t r0, Value value) const {
    const int64_t c = col(h);
    if (c >= p.n) return;
    const int64_t step = 8 * p.n;
    // Rows left from r0, in 32 bits (at most the column's 8 kRows).
    const int64_t left64 = p.m - r0;
    const int left = left64 < 0 ? 0 : left64 > 8 * kRows ? 8 * kRows : static_cast<int>(left64);
    if (p.partials != nullptr) {
      float* dst = p.partials + (static_cast<int64_t>(blockIdx.z) * p.m + r0) * p.n + c;
#pragma unroll
      for (int j = 0; j < kRows; ++j, dst += step)
        if (8 * j < left) *dst = value(j);
    } else {
      const float b = p.bias != nullptr ? to_float(p.bias[c]) : 0.0f;
      T* dst = p.y + r0 * p.n + c;
#pragma unroll
      for (int j = 0; j < kRows; ++j, dst += step)
        if (8 * j < left) *dst = from_float<T>(value(j) + b);
    }
  }
  // Every accumulator, times `factor`.
  template <int kAcc>
  __device__ __forceinline__ void store(const float (&acc)[kAcc], float factor) const {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        store_column<kAcc / 4>(h, row(0, e), [&](int j) { return acc[4 * j + 2 * h + e] * factor; });
  }
  // The accumulators of rows e = kE alone: v[q] is accumulator 2 q + kE (j = q / 2, h = q % 2).
  template <int kE, int kHalf>
  __device__ __forceinline__ void store_rows(const float (&v)[kHalf]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) store_column<kHalf / 2>(h, row(0, kE), [&](int j) { return v[2 * j + h]; });
  }
};

// A K split of kClusterSumSplit summed in the tile's thread-block cluster of its two blocks
// (along z), in place of the planes and the reduce kernel; both wgmma GEMMs. Accumulator
// i = 2 q + o belongs to rank o, which adds both splits' values in split order (as the
// reduce kernel adds planes: the same sums) and stores it, so the two share the adds and
// the stores. Each block writes its values (times `factor`) into row q of its sender
// region (region `rank`) of the owner's shared memory: its own by a local store, the
// peer's through distributed shared memory, one mapped base and constant offsets. A row
// is a float per consumer thread; `rows` is this thread's float in region 0's first row,
// region 1 starts `region_bytes` on. The regions are free once both blocks are past their
// main loops (the first barrier; the producers join both, run_wgmma_roles); the caller
// places them where nothing is copied after that.
constexpr uint32_t kClusterSumRowBytes = kWgmmaConsumerThreads * 4;
template <int kAcc, typename Epilogue>
__device__ __forceinline__ void cluster_pair_store(const float (&acc)[kAcc], float factor, const Epilogue& out,
                                                   uint32_t rows, uint32_t region_bytes) {
  static_assert(kClusterSumSplit == 2, "a sender region for each of the two blocks");
  const uint32_t rank = cluster_block_rank();
  const uint32_t mine = rows + rank * region_bytes;  // this block's sender rows
  const uint32_t peer = map_cluster_addr(mine, rank ^ 1u);
  cluster_sync();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const float v = acc[i] * factor;
    const uint32_t row = (i / 2) * kClusterSumRowBytes;
    if (static_cast<uint32_t>(i % 2) == rank) {
      asm volatile("st.shared.f32 [%0], %1;" ::"r"(mine + row), "f"(v) : "memory");
    } else {
      store_cluster_f32(peer + row, v);
    }
  }
  cluster_sync();
  // Every load before the first store, and the stores at constant accumulator indices (a
  // branch on the rank): a loop over run-time indices, each element's loads, row, column
  // and bias in turn, made the 256-row tile take 1.10x the time (H100, 8192 x 8192).
  float sum[kAcc / 2];
#pragma unroll
  for (int q = 0; q < kAcc / 2; ++q) {
    float first, second;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(first) : "r"(rows + q * kClusterSumRowBytes));
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(second) : "r"(rows + region_bytes + q * kClusterSumRowBytes));
    sum[q] = first + second;
  }
  if (rank == 0) {
    out.template store_rows<0>(sum);
  } else {
    out.template store_rows<1>(sum);
  }
}

// ----------------------------------------------------------------- K halves
// Both wgmma GEMMs' K halves (core/gemm_plan.h, kKHalvesTileN): a block of 64 weight rows
// whose consumer warpgroup c takes the c-th half of the block's K; stage fill i holds
// unit i of each half. The first slab of the second half of [begin, end), in `unit`s of
// slabs (whole scale blocks, or single slabs) rounded so the first half is the larger.
__device__ __forceinline__ int64_t k_halves_mid(int64_t begin, int64_t end, int64_t unit) {
  const int64_t units = (end - begin + unit - 1) / unit;
  const int64_t mid = begin + (units + 1) / 2 * unit;
  return mid < end ? mid : end;
}

// The second half's warpgroup, past its slabs: the fills [from, fills) carry none of its
// slabs; it releases each as it comes (the producer waits for both warpgroups).
template <typename Ring>
__device__ __forceinline__ void k_halves_release(Ring& ring, int64_t from, int64_t fills) {
  typename Ring::Pos at;
  for (int64_t i = 0; i < from; ++i) at.advance();
#pragma unroll 1
  for (int64_t i = from; i < fills; ++i, at.advance()) {
    ring.wait_full(at);
    ring.arrive_empty(at.stage);
  }
}

// A barrier of the two consumer warpgroups alone (named barrier 1; the producer is not in it).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kWgmmaConsumerThreads) : "memory");
}

// The second half's sums added to the first's, in this order, through shared memory at
// `region` (kAcc floats per thread of a warpgroup, free once both warpgroups are past
// their loops: the caller places it where every copy has landed and been read). `part`:
// the thread's warpgroup (0, 1), x its thread within it. Returns whether this warpgroup
// stores the tile (the first).
template <int kAcc>
__device__ __forceinline__ bool k_halves_add(float (&acc)[kAcc], int part, int x, uint32_t region) {
  constexpr uint32_t kRowBytes = kWgmmaConsumerThreads / 2 * 4;
  const uint32_t base = region + 4 * x;
  consumer_sync();
  if (part == 1) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i)
      asm volatile("st.shared.f32 [%0], %1;" ::"r"(base + i * kRowBytes), "f"(acc[i]) : "memory");
  }
  consumer_sync();
  if (part == 1) return false;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    float second;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(second) : "r"(base + i * kRowBytes));
    acc[i] += second;
  }
  return true;
}

// A warp-specialized block's body, for both wgmma kernels: thread 0 initializes the ring,
// then the roles part (the block's only barrier): warpgroup 0 gives registers away and
// produces, warpgroups 1 and 2 take them and consume the block's tile [n0, m0] over slabs
// [slab_begin, slab_end); where a cluster sums the K split (`cluster_sum`) the producers
// then join the consumers' two cluster barriers. `Tile` has a constructor (params, aligned
// smem, ring, the thread's index within its role, n0, m0), its ring type `Ring` (a
// WgmmaRing), produce() and consume(). `raw_smem`: the dynamic shared memory, aligned here to kWgmmaAlignBytes
// (the launch adds that much).
template <typename Tile, typename Params>
__device__ __forceinline__ void run_wgmma_roles(const Params& p, uint8_t* raw_smem,
                                                typename Tile::Ring& ring, int64_t n0, int64_t m0,
                                                int64_t slab_begin, int64_t slab_end, bool cluster_sum) {
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_smem) + kWgmmaAlignBytes - 1) &
                                             ~uintptr_t{kWgmmaAlignBytes - 1});
  if (threadIdx.x == 0) ring.init();
  __syncthreads();
  if (threadIdx.x < kWgmmaProducerThreads) {
    set_max_registers_dec<kWgmmaProducerRegs>();
    const Tile tile(p, smem, ring, threadIdx.x, n0, m0);
    tile.produce(slab_begin, slab_end);
    if (cluster_sum) {  // the consumers' two barriers
      cluster_sync();
      cluster_sync();
    }
  } else {
    set_max_registers_inc<kWgmmaConsumerRegs>();
    const Tile tile(p, smem, ring, threadIdx.x - kWgmmaProducerThreads, n0, m0);
    tile.consume(slab_begin, slab_end);
  }
}

}  // namespace bqmm::cuda
