// The 64-row tile's 4-bit decode beside its wgmma, without memory: whether the wgmma's A
// read from the register file (RS, as FusedWgmmaTile multiplies) holds the decode's issue
// rate down. Standalone (CMake compiles it, unlinked, as a check):
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o /tmp/rs_ss tools/microbench/rs_ss.cu && /tmp/rs_ss
//
// (scripts/gpu_check.sh micro with MICRO=rs_ss does the same.) One block of two warpgroups
// per SM, each 64 weight rows of one static 128-row stage of 4-bit codes (128 bytes a row,
// 256 K, TMA's 128-byte swizzle) and the 64 activation rows of its K (four 64-K panels, the
// wgmma's K-major swizzled layout); every slab decodes and multiplies that same stage, in
// two groups of 8 k16 steps, register buffers alternating and one group pending, as the
// tile does. Modes:
//   decode  the decode alone (ldmatrix, decode_word_fragments; its fragments kept live by a
//           store that never runs, about a branch a group), no wgmma
//   rs      the decode into the A fragments of m64n64k16 wgmma from registers (the tile)
//   ss      the same decode kept live as in decode, and m64n64k16 wgmma with A from a
//           static shared tile (SS): the same tensor work, A read from shared memory; its
//           A descriptors cost about 70 instructions a slab more than rs's (SASS: 376
//           against 292 a slab, moved into uniform registers each group)
//   mma     RS wgmma on fragments decoded once, no decode in the loop
//   st      what an SS tile would do: the decoded fragments stored (stmatrix) into the
//           warpgroup's swizzled A tile, a proxy fence and a warpgroup barrier, then ss's
//           wgmma on them; a group's A panels are rewritten only after the wait that
//           retires the wgmma group that read them (one group pending, two groups' panels)
//   il      rs with the next group's decode interleaved with this group's wgmma, as
//           CUTLASS's mixed-input mainloop transforms the next k-block between its wgmma:
//           each pair of k16 steps its own commit group (fence, two wgmma, commit), then
//           the wait that retires the pair four before it and the decode of the pair four
//           after it (same step of the next group) into the slots that retired pair read
//   mma n32, rs n32, mma n16, rs n16: mma and rs with m64n32k16 / m64n16k16 wgmma (the
//           first 32 / 16 activation rows), what tiles of 32 or 16 rows would spend
// Reported: consumer cycles a slab (warpgroup 0's thread 0) against the tensor cores'
// (1024 a slab at n = 64 and 4096 flops an SM and clock). If rs runs near decode + mma
// while ss runs near the larger of the two, the register reads are the limit; near rs,
// they are not.
// SS reads A and B from shared memory, 128 bytes an SM and clock at the tensor rate, the
// shared memory's own limit: ss cannot beat about the tensor rate.
#include <cuda_fp16.h>

#include <cstdio>
#include <random>
#include <vector>

#include "cuda/gemm/fused_wgmma.cuh"
#include "microbench.cuh"

using namespace bqmm;
using namespace bqmm::cuda;

enum class Mode { kDecode, kRs, kSs, kMma, kSt, kIl };

constexpr int kThreads = 256;                        // two warpgroups of 64 weight rows
constexpr int kSlabBytes = 128;                      // a 4-bit row's bytes a slab: 256 K
constexpr int kGroupSteps = 8;                       // a commit group
constexpr int kWeightBytes = 128 * kSlabBytes;       // 16 KB
constexpr int kPanelBytes = 64 * 128;                // 64 rows x 64 K of float16
constexpr int kActBytes = 4 * kPanelBytes;           // 32 KB
constexpr int kATileBytes = 4 * kPanelBytes;         // SS: a warpgroup's 64 decoded rows, 32 KB
constexpr int kSmem = kWeightBytes + kActBytes + 2 * kATileBytes + 1024;

// m64n64k16, A and B from shared memory (both K-major, 128-byte swizzle).
__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc) {
#if BQMM_WGMMA_ENABLED
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" BQMM_WGMMA_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : BQMM_WGMMA_D32
      : "l"(a_desc), "l"(b_desc), "r"(1u));
#endif
}

// Keeps the fragments computed: stored to shared memory under a condition that never holds
// but that the compiler cannot see through (`never`: a slab index past the last), so that
// ptxas cannot drop the decode as dead. About one branch a group.
__device__ __forceinline__ void keep(const uint32_t (&a)[kGroupSteps][4], bool never, uint32_t scratch) {
  if (never) {
#pragma unroll
    for (int s = 0; s < kGroupSteps; ++s)
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(scratch + 16 * s), "r"(a[s][0]), "r"(a[s][1]),
                   "r"(a[s][2]), "r"(a[s][3])
                   : "memory");
  }
}

// Group `grp`'s fragments of warp `warp % 4` -> the warpgroup's A tile at `atile` (K-major,
// 128-byte swizzle; panels 2 grp and 2 grp + 1), one stmatrix.x4 a k16 step: lane l gives
// the address of row l % 8 of matrix l / 8 (matrices: rows 0-7 / 8-15 by k 0-7 / 8-15, as
// the A fragment's registers 0..3), then the fence that shows the writes to wgmma and the
// warpgroup's barrier (named barrier 1 + warpgroup).
__device__ __forceinline__ void store_group(uint32_t atile, int warp, int lane, int grp,
                                            const uint32_t (&a)[kGroupSteps][4]) {
  const int mat = lane / 8;
  const int row = 16 * (warp % 4) + lane % 8 + 8 * (mat % 2);
#pragma unroll
  for (int s = 0; s < kGroupSteps; ++s) {
    const int kk = grp * kGroupSteps + s;
    const int chunk = (kk % 4) * 2 + mat / 2;
    const uint32_t addr = atile + (kk / 4) * kPanelBytes + row * 128 + ((chunk ^ (row % 8)) * 16);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a[s][0]),
                 "r"(a[s][1]), "r"(a[s][2]), "r"(a[s][3])
                 : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("bar.sync %0, 128;" ::"r"(1 + warp / 4) : "memory");
}

// The library's 64-row tile of 4-bit codes, one scale block a stage: its stage layout.
using Tile = FusedWgmmaTile<__half, GemmWeights::kInt4, 64, 1, false>;
static_assert(Tile::kSlabBytes == kSlabBytes, "a stage of whole 128-byte slabs");

// Half q of group `grp` of the stage's rows 16 warp .. 16 warp + 15: its ldmatrix (chunks
// 4 grp + 2 q and the next), then word pair i of it -> A fragments of steps 4 q + 2 i and
// 4 q + 2 i + 1 (as FusedWgmmaTile::decode_group with one scale block a slab).
__device__ __forceinline__ void load_half(uint32_t wbase, int warp, int lane, int grp, int q, uint32_t (&r)[4]) {
  const int row = 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);
  const int chunk = grp * 4 + 2 * q + lane / 16;
  ldmatrix_x4(wbase + row * kSlabBytes + 16 * Tile::weight_piece(row, chunk), r);
}
__device__ __forceinline__ void decode_pair(const uint32_t (&r)[4], int q, int i,
                                            const RawConsts<GemmWeights::kInt4, __half>& c,
                                            uint32_t (&a)[kGroupSteps][4]) {
  uint32_t frag[2][4];
  decode_word_fragments<__half, GemmWeights::kInt4, false>(r[2 * i], r[2 * i + 1], c, c, 0, frag);
  const int step = (2 * q + i) * 2;
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[step + s][e] = frag[s][e];
}

// Group `grp` -> A fragments.
__device__ __forceinline__ void decode_group(uint32_t wbase, int warp, int lane, int grp,
                                             const RawConsts<GemmWeights::kInt4, __half>& c,
                                             uint32_t (&a)[kGroupSteps][4]) {
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    uint32_t r[4];
    load_half(wbase, warp, lane, grp, q, r);
#pragma unroll
    for (int i = 0; i < 2; ++i) decode_pair(r, q, i, c, a);
  }
}

// Group `grp`'s 8 wgmma m64n{kN}k16 (A from the fragments, or kSs from the static A tile at
// a0; B from the first kN activation rows, panels of kN rows), one commit group, then wait
// until one group is pending (its register buffer free).
template <Mode kMode, int kN>
__device__ __forceinline__ void multiply_group(int grp, uint64_t a0, uint64_t b0, uint32_t (&a)[kGroupSteps][4],
                                               float (&d)[kN / 2]) {
  static_assert(kN == 64 || (kMode != Mode::kSs && kMode != Mode::kSt), "SS at n = 64 only");
  uint64_t bd[kGroupSteps], ad[kGroupSteps];
#pragma unroll
  for (int s = 0; s < kGroupSteps; ++s) {
    const int kk = grp * kGroupSteps + s;
    bd[s] = sw128_desc_step(b0, (kk / 4) * kN * 128 + (kk % 4) * 32);
    ad[s] = sw128_desc_step(a0, (kk / 4) * kPanelBytes + (kk % 4) * 32);
  }
  if constexpr (kMode != Mode::kSs && kMode != Mode::kSt) fence_operands(a);
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < kGroupSteps; ++s) {
    if constexpr (kMode == Mode::kSs || kMode == Mode::kSt)
      wgmma_ss(d, ad[s], bd[s]);
    else
      wgmma_rs<__half, kN>(d, a[s], bd[s], 1u);
  }
  wgmma_commit();
  fence_operands(d);
  wgmma_wait<1>();
}

// The static stage: the block's shared memory, aligned to the swizzle atom, filled from
// `fill` and shown to wgmma's reads; its shared-memory address.
__device__ __forceinline__ uint32_t fill_stage(const uint32_t* __restrict__ fill) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  for (int i = threadIdx.x; i < (kSmem - 1024) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = fill[i % 65536];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // these writes -> wgmma's reads
  __syncthreads();
  return smem_addr(smem);
}

// Every block of the stage: scale 0.0625, zero point 8.
__device__ __forceinline__ RawConsts<GemmWeights::kInt4, __half> stage_consts() {
  RawConsts<GemmWeights::kInt4, __half> c{};
  c.bits = 0x2c00u | (0x88u << 16);
  return c;
}

// After the last wgmma: thread 0's cycles since `start`, and each thread's sums to `sink`
// (so that no wgmma is dead).
template <int kAcc>
__device__ __forceinline__ void report(const ClockStamp& start, float (&d)[kAcc], long long* cycles, float* sink) {
  wgmma_wait<0>();
  fence_operands(d);
  const ClockStamp end = clock_stamp();
  if (threadIdx.x == 0) cycles[blockIdx.x] = end.cycles - start.cycles;
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) s += d[i];
  sink[blockIdx.x * kThreads + threadIdx.x] = s;
}

template <Mode kMode, int kN>
__global__ void __launch_bounds__(kThreads, 1)
    RsSsKernel(int64_t slabs, const uint32_t* __restrict__ fill, long long* cycles, float* sink) {
#if BQMM_WGMMA_ENABLED
  const uint32_t wbase = fill_stage(fill);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint64_t b0 = sw128_desc(wbase + kWeightBytes);
  const uint64_t a0 = sw128_desc(wbase + kWeightBytes + kActBytes + (warp / 4) * kATileBytes);
  RawConsts<GemmWeights::kInt4, __half> c = stage_consts();
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  uint32_t a[2][kGroupSteps][4];
  decode_group(wbase, warp, lane, 0, c, a[0]);
  decode_group(wbase, warp, lane, 1, c, a[1]);
  const ClockStamp start = clock_stamp();
#pragma unroll 1
  for (int64_t i = 0; i < slabs; ++i) {
    // Opaque each slab, as the kernel's stage base and constants are: otherwise the
    // compiler hoists the loop-invariant decode out of the loop.
    uint32_t wb = wbase;
    asm volatile("" : "+r"(wb), "+r"(c.bits));
#pragma unroll
    for (int grp = 0; grp < 2; ++grp) {
      if constexpr (kMode != Mode::kMma) decode_group(wb, warp, lane, grp, c, a[grp]);
      if constexpr (kMode == Mode::kDecode || kMode == Mode::kSs)
        keep(a[grp], i == slabs, wbase + kWeightBytes + kActBytes + (threadIdx.x % 128) * 128);
      if constexpr (kMode == Mode::kSt)
        store_group(wbase + kWeightBytes + kActBytes + (warp / 4) * kATileBytes, warp, lane, grp, a[grp]);
      if constexpr (kMode != Mode::kDecode) multiply_group<kMode, kN>(grp, a0, b0, a[grp], d);
    }
  }
  report(start, d, cycles, sink);
#else
  __trap();
#endif
}

// il: pair P (0..3) of group `grp`: its two wgmma from `a` as one commit group, the wait
// that retires the pair issued four before it, then pair P of the next group `next_grp`
// into `next` (the ldmatrix of its half first, at even P), into the slots that retired
// pair read.
__device__ __forceinline__ void multiply_pair_decode_next(int grp, int pair, uint64_t b0, uint32_t (&a)[kGroupSteps][4],
                                                          float (&d)[32], uint32_t wbase, int warp, int lane,
                                                          int next_grp, const RawConsts<GemmWeights::kInt4, __half>& c,
                                                          uint32_t (&r)[4], uint32_t (&next)[kGroupSteps][4]) {
  fence_operands(a);
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int s = 2 * pair; s < 2 * pair + 2; ++s) {
    const int kk = grp * kGroupSteps + s;
    wgmma_rs<__half, 64>(d, a[s], sw128_desc_step(b0, (kk / 4) * kPanelBytes + (kk % 4) * 32), 1u);
  }
  wgmma_commit();
  fence_operands(d);
  wgmma_wait<4>();
  fence_operands(next);
  if (pair % 2 == 0) load_half(wbase, warp, lane, next_grp, pair / 2, r);
  decode_pair(r, pair / 2, pair % 2, c, next);
}

// il's kernel: a slab's groups 0 and 1 from buffers 0 and 1; while group 0's pairs issue,
// group 1 decodes into buffer 1, and while group 1's issue, the next slab's group 0 into
// buffer 0.
__global__ void __launch_bounds__(kThreads, 1)
    IlKernel(int64_t slabs, const uint32_t* __restrict__ fill, long long* cycles, float* sink) {
#if BQMM_WGMMA_ENABLED
  const uint32_t wbase = fill_stage(fill);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint64_t b0 = sw128_desc(wbase + kWeightBytes);
  RawConsts<GemmWeights::kInt4, __half> c = stage_consts();
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;
  uint32_t a[2][kGroupSteps][4];
  uint32_t r[4];
  decode_group(wbase, warp, lane, 0, c, a[0]);
  const ClockStamp start = clock_stamp();
#pragma unroll 1
  for (int64_t i = 0; i < slabs; ++i) {
    uint32_t wb = wbase;
    asm volatile("" : "+r"(wb), "+r"(c.bits));
#pragma unroll
    for (int grp = 0; grp < 2; ++grp)
#pragma unroll
      for (int pair = 0; pair < 4; ++pair)
        multiply_pair_decode_next(grp, pair, b0, a[grp], d, wb, warp, lane, 1 - grp, c, r, a[1 - grp]);
  }
  report(start, d, cycles, sink);
#else
  __trap();
#endif
}

template <Mode kMode, int kN = 64>
void run(int sms, int64_t slabs, const uint32_t* fill, long long* cycles, float* sink, const char* name) {
  const auto kernel = kMode == Mode::kIl ? IlKernel : RsSsKernel<kMode, kN>;
  const double tensor = 1024.0 * kN / 64;  // the tensor cores' cycles a slab
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  kernel<<<sms, kThreads, kSmem>>>(slabs / 10, fill, cycles, sink);  // warm-up
  CK(cudaGetLastError());
  long long cyc = 0;
  const float ms = best_ms(
      3, [&] { kernel<<<sms, kThreads, kSmem>>>(slabs, fill, cycles, sink); },
      [&] { CK(cudaMemcpy(&cyc, cycles, sizeof(cyc), cudaMemcpyDeviceToHost)); });
  const double slab_cycles = double(cyc) / double(slabs);
  printf("%-7s %7.0f cycles/slab (tensor %4.0f: %5.1f %%)  %.3f ms\n", name, slab_cycles, tensor,
         100.0 * tensor / slab_cycles, ms);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t slabs = 2048;
  printf("%s, %d SMs; 4-bit tile 64, float16, block 128, %lld slabs a block\n", prop.name, sms,
         static_cast<long long>(slabs));
  // Stage bytes: float16-like words with small exponents (finite as float16; 4-bit codes
  // as they come), as fused_mainloop's.
  std::mt19937 rng(7);
  std::vector<uint32_t> host(65536);
  for (auto& v : host) v = rng() & 0xBBBBBBBBu;
  uint32_t* fill = nullptr;
  long long* cycles = nullptr;
  float* sink = nullptr;
  CK(cudaMalloc(&fill, host.size() * 4));
  CK(cudaMemcpy(fill, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&cycles, static_cast<size_t>(sms) * sizeof(long long)));
  CK(cudaMalloc(&sink, static_cast<size_t>(sms) * kThreads * sizeof(float)));
  run<Mode::kDecode>(sms, slabs, fill, cycles, sink, "decode");
  run<Mode::kMma>(sms, slabs, fill, cycles, sink, "mma");
  run<Mode::kRs>(sms, slabs, fill, cycles, sink, "rs");
  run<Mode::kSs>(sms, slabs, fill, cycles, sink, "ss");
  run<Mode::kSt>(sms, slabs, fill, cycles, sink, "st");
  run<Mode::kIl>(sms, slabs, fill, cycles, sink, "il");
  run<Mode::kMma, 32>(sms, slabs, fill, cycles, sink, "mma n32");
  run<Mode::kRs, 32>(sms, slabs, fill, cycles, sink, "rs n32");
  run<Mode::kMma, 16>(sms, slabs, fill, cycles, sink, "mma n16");
  run<Mode::kRs, 16>(sms, slabs, fill, cycles, sink, "rs n16");
  return 0;
}
