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
// This thread's shared-memory writes (cp.async included) made visible to the async proxy
// that wgmma reads B through; a barrier after it publishes them to the other threads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
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

// The ring's two barriers per stage: `full` completes when the producer's copies of a
// slab have landed (every producer thread arrives once per fill), `empty` when both
// consumer warpgroups are done with it (one arrival per consumer warp).
template <int kStages>
struct WgmmaRing {
  uint64_t full[kStages];
  uint64_t empty[kStages];

  __device__ void init() {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kWgmmaProducerThreads);
      mbarrier_init(&empty[s], kWgmmaConsumerThreads / 32);
    }
    mbarrier_init_fence();
  }
  // Fill u = i / kStages of a stage completes phase u of its barriers.
  __device__ __forceinline__ void wait_full(int64_t i) {
    mbarrier_wait(&full[i % kStages], static_cast<uint32_t>(i / kStages) & 1u);
  }
  __device__ __forceinline__ void wait_empty(int64_t i) {  // the use before slab i's
    mbarrier_wait(&empty[i % kStages], static_cast<uint32_t>(i / kStages - 1) & 1u);
  }
  __device__ __forceinline__ void arrive_full(int64_t i) { mbarrier_arrive(&full[i % kStages]); }
  __device__ __forceinline__ void arrive_empty(int64_t i) { mbarrier_arrive(&empty[i % kStages]); }
};

// A warp-specialized block's body, for both wgmma kernels: thread 0 initializes the ring,
// then the roles part (the block's only barrier): warpgroup 0 gives registers away and
// produces, warpgroups 1 and 2 take them and consume the block's tile [n0, m0] over slabs
// [slab_begin, slab_end). `Tile` has a constructor (params, aligned smem, ring, the
// thread's index within its role, n0, m0), produce() and consume(). `raw_smem`: the
// dynamic shared memory, aligned here to kWgmmaAlignBytes (the launch adds that much).
template <typename Tile, typename Params>
__device__ __forceinline__ void run_wgmma_roles(const Params& p, uint8_t* raw_smem,
                                                WgmmaRing<Tile::kStages>& ring, int64_t n0, int64_t m0,
                                                int64_t slab_begin, int64_t slab_end) {
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_smem) + kWgmmaAlignBytes - 1) &
                                             ~uintptr_t{kWgmmaAlignBytes - 1});
  if (threadIdx.x == 0) ring.init();
  __syncthreads();
  if (threadIdx.x < kWgmmaProducerThreads) {
    set_max_registers_dec<kWgmmaProducerRegs>();
    const Tile tile(p, smem, ring, threadIdx.x, n0, m0);
    tile.produce(slab_begin, slab_end);
  } else {
    set_max_registers_inc<kWgmmaConsumerRegs>();
    const Tile tile(p, smem, ring, threadIdx.x - kWgmmaProducerThreads, n0, m0);
    tile.consume(slab_begin, slab_end);
  }
}

}  // namespace bqmm::cuda
