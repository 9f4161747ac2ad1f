// The fused GEMM's Hopper mainloop without its memory side: the library's own consumer code
// (FusedWgmmaTile::consume, src/cuda/gemm/fused_wgmma.cuh: ldmatrix, decode, wgmma, the
// block constants' loads, the epilogue) fed by a producer that copies nothing (or, with
// copies, below, part of what the kernel copies). The stages hold random weights and
// activations, written once; the producer thread marks slab i's stage full as soon as the
// consumers released it (the ring's own barriers, no bytes counted), so the consumers
// never wait for memory. Standalone (CMake compiles it, unlinked, as a check):
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o /tmp/fused_mainloop tools/microbench/fused_mainloop.cu && /tmp/fused_mainloop
//
// (scripts/gpu_check.sh micro with MICRO=fused_mainloop does the same.) What it answers:
// the fused GEMM at M = 64 (8192 x 8192) runs near half the tensor cores' rate while
// neither DRAM nor the issue slots are at their limit. If this loop alone, at the same
// tiles, runs near that rate too, the consumers' path (decode latency, the wait before a
// register buffer is reused, constant loads) is the bound; near the tensor rate, the
// memory side is.
//
// One block per SM (the kernel's residency), grid = the SM count, each block its own 128
// weight rows; every block runs `slabs` slabs. Block constants: "cold", a scale block per
// block_size codes as in a real weight (their loads miss L1 as the kernel's do), or "hot",
// one block for the whole row (k_blocks = 1: every load hits L1), so the difference is
// what the constants' latency costs. Reports per variant: TFLOP/s, the SM clock (clock64
// over globaltimer), consumer cycles a slab against the tensor cores' (the slab's flops /
// 4096 per SM and clock), and that share. The numbers are the kernel's at its best case
// for memory: docs/PERF.md (Next steps) has what the GPU gave.
//
// With copies (the `copies` column, tiles 16, 128 and 256 of 4-bit codes), the producer thread
// fills each stage by TMA as the kernel's producer does, its bytes counted on `full`:
// "act" the stage's activation panels from one activation tile that every block reads
// (L2 hits, as the kernel's blocks share their activation rows), "all" those and the
// block's weight box from a weight of the blocks' rows (each byte read once, from HBM).
// The consumers' cycles a slab against "none" say what the copies' arrival and their
// writes into the shared memory the wgmma reads cost the loop. Rows named "few" run a
// block's slabs in the fused GEMM at 8192 x 8192 (tile 16 16, else 32 or 64) rather than 1024: their
// cycles a slab (and the launch's, at the consumers' clock) carry the fixed costs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda/gemm/fused_wgmma.cuh"
#include "cuda/tma.cc"  // make_tile_tensor_map (host), the kernel's tensor maps
#include "microbench.cuh"

using namespace bqmm;
using namespace bqmm::cuda;

template <typename T, GemmWeights kW>
using Scale = std::conditional_t<kW == GemmWeights::kFp8, float, T>;

// The consumers' clock at their start and end (consumer thread 0 of each block).
struct Clocks {
  long long* cycles;
  unsigned long long* nanos;
};

// What the producer copies into each stage (the file's header says why).
enum class Copies { kNone, kActivations, kAll };

template <typename T, GemmWeights kW, int kTileM, int kConsts, bool kTypedZp>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    MainloopKernel(const __grid_constant__ FusedWgmmaParams<T, Scale<T, kW>> p, int64_t slabs,
                   const uint32_t* __restrict__ fill, Clocks clocks, Copies copies, int64_t act_slabs) {
#if BQMM_WGMMA_ENABLED
  using Tile = FusedWgmmaTile<T, kW, kTileM, kConsts, kTypedZp>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ typename Tile::Ring ring;
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + kWgmmaAlignBytes - 1) &
                                             ~uintptr_t{kWgmmaAlignBytes - 1});
  // Every stage's bytes once: the weights and activations every slab decodes and multiplies.
  constexpr int kWords = Tile::kStages * Tile::kStageBytes / 4;
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = fill[i % 65536];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // these writes -> wgmma's reads
  if (threadIdx.x == 0) ring.init();
  __syncthreads();
  const int64_t n0 = int64_t{blockIdx.x} * kGemmTileN;
  if (threadIdx.x < kWgmmaProducerThreads) {
    set_max_registers_dec<kWgmmaProducerRegs>();
    if (threadIdx.x != 0) return;
    typename Tile::RingPos at;
    for (int64_t i = 0; i < slabs; ++i, at.advance()) {
      if (i >= Tile::kStages) ring.wait_empty(at);
      uint64_t* full = &ring.full[at.stage];
      if (copies == Copies::kNone) {
        mbarrier_arrive(full);  // the one arrival, no bytes
        continue;
      }
      const bool weights = copies == Copies::kAll;
      const uint32_t stage = smem_addr(smem + at.stage * Tile::kStageBytes);
      mbarrier_arrive_expect_tx(full, (weights ? Tile::kWeightBytes : 0) + Tile::kActPartBytes);
      if (weights)
        tma_copy_box(&p.w_map, stage, full, static_cast<int32_t>(i * Tile::kSlabBytes), static_cast<int32_t>(n0));
      const auto x0 = static_cast<int32_t>(i % act_slabs * Tile::kSlabK * static_cast<int64_t>(sizeof(T)));
      for (int panel = 0; panel < Tile::kPanels; ++panel)
        tma_copy_box(&p.a_map, stage + Tile::kWeightBytes + panel * Tile::kPanelBytes, full, x0 + 128 * panel, 0);
    }
  } else {
    set_max_registers_inc<kWgmmaConsumerRegs>();
    const int thread = threadIdx.x - kWgmmaProducerThreads;
    const Tile tile(p, smem, ring, thread, n0, 0);
    const ClockStamp start = clock_stamp();
    tile.consume(0, slabs);
    const ClockStamp end = clock_stamp();
    if (thread == 0) {
      clocks.cycles[blockIdx.x] = end.cycles - start.cycles;
      clocks.nanos[blockIdx.x] = end.ns - start.ns;
    }
  }
#else
  __trap();
#endif
}

// Device memory shared by the variants: random stage bytes, scales and zero points for the
// largest row count, the output.
struct Buffers {
  int sms = 0;
  int64_t slabs = 0;
  uint32_t* fill = nullptr;   // 65536 random words
  void* scales = nullptr;     // [rows, k_blocks] of float or T (random, 0.01 .. 0.02)
  uint8_t* zp = nullptr;      // [rows, k_blocks] bytes: packed zero points or typed T
  void* y = nullptr;          // [kTileM <= 256, rows] of T
  uint8_t* act = nullptr;     // copies: the activation tile, [256, kActSlabs stages of 64 K] of T
  uint8_t* weight = nullptr;  // copies "all": [rows, slabs x 128 bytes]
  Clocks clocks{};
};

// The activation tile's K in stages of 64 K: 4 MB at 256 rows, the activation rows of an
// 8192-wide K, which every block re-reads from L2 as in the kernel.
constexpr int64_t kActSlabs = 128;

constexpr int64_t kMaxKBlocks = 8192;  // cold constants: K / block_size, at most this

template <typename T, GemmWeights kW, int kTileM, int kConsts, bool kTypedZp>
void run(const Buffers& b, int block_size, bool packed_zp, const char* name, Copies copies = Copies::kNone) {
  using F = GemmFormat<kW>;
  using S = Scale<T, kW>;
  using Tile = FusedWgmmaTile<T, kW, kTileM, kConsts, kTypedZp>;
  const int64_t k = b.slabs * Tile::kSlabK;  // the tile's slabs (a stage's K)
  const int64_t rows = int64_t{b.sms} * kGemmTileN;
  const auto kernel = MainloopKernel<T, kW, kTileM, kConsts, kTypedZp>;
  constexpr int kSmem = static_cast<int>(wgmma_smem_bytes(kTileM, F::kBits));
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  for (const bool hot : {false, true}) {
    const int64_t k_blocks = hot ? 1 : (k + block_size - 1) / block_size;
    if (k_blocks > kMaxKBlocks) {
      printf("%s: K / block_size above %lld\n", name, static_cast<long long>(kMaxKBlocks));
      exit(1);
    }
    FusedWgmmaParams<T, S> p{};
    p.scales = static_cast<const S*>(b.scales);
    p.zp = kW == GemmWeights::kFp8 || (!packed_zp && !kTypedZp) ? nullptr : b.zp;
    p.y = static_cast<T*>(b.y);
    p.m = kTileM;
    p.n = rows;
    p.k = k;
    p.row_bytes = b.slabs * Tile::kSlabBytes;
    p.k_blocks = k_blocks;
    p.zp_row_bytes = kTypedZp ? k_blocks * static_cast<int64_t>(sizeof(T))
                              : (F::kBits == 8 ? k_blocks : (k_blocks + 1) / 2);
    p.block_shift = 0;
    while ((int64_t{1} << p.block_shift) < (hot ? k : block_size)) ++p.block_shift;
    p.block_div = FastDivU32(static_cast<uint32_t>((hot ? k : block_size) / 16));
    p.slabs_per_split = static_cast<int>(b.slabs);
    const int64_t act_slabs = kActSlabs * 64 / Tile::kSlabK;  // the tile's stages in its K
    if (copies != Copies::kNone) {
      const Status w = make_tile_tensor_map(b.weight, rows, p.row_bytes, &p.w_map, kGemmTileN, Tile::kSlabBytes);
      const Status a = make_tile_tensor_map(b.act, kTileM, act_slabs * Tile::kSlabK * static_cast<int64_t>(sizeof(T)),
                                            &p.a_map, kTileM);
      if (!w.ok() || !a.ok()) {
        printf("%s: %s\n", name, (w.ok() ? a : w).message().c_str());
        exit(1);
      }
    }
    kernel<<<b.sms, kWgmmaThreads, kSmem>>>(p, b.slabs / 10, b.fill, b.clocks, copies, act_slabs);  // warm-up
    CK(cudaGetLastError());
    long long cyc = 0;
    unsigned long long ns = 0;
    const float ms = best_ms(
        3, [&] { kernel<<<b.sms, kWgmmaThreads, kSmem>>>(p, b.slabs, b.fill, b.clocks, copies, act_slabs); },
        [&] {
          CK(cudaMemcpy(&cyc, b.clocks.cycles, sizeof(cyc), cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(&ns, b.clocks.nanos, sizeof(ns), cudaMemcpyDeviceToHost));
        });
    const double slab_flops = 2.0 * kTileM * kGemmTileN * Tile::kSlabK;
    const double flops = slab_flops * double(b.slabs) * b.sms;
    const double tensor_cycles = slab_flops / 4096.0;  // a slab at the tensor cores' rate
    const double slab_cycles = double(cyc) / double(b.slabs);
    const char* copied = copies == Copies::kNone ? "none" : copies == Copies::kActivations ? "act" : "all";
    const double hz = double(cyc) / double(ns) * 1e9;
    // The launch's whole time a slab at the consumers' clock: with few slabs a block, what
    // the launch, the first stages' arrival and the epilogue add to the loop.
    const double launch_cycles = ms * 1e-3 * hz / double(b.slabs);
    printf("%-32s %-4s %-4s %4lld slabs %7.1f TFLOP/s  %5.0f MHz  %6.0f cycles/slab (tensor %5.0f: %5.1f %%; launch %6.0f)  "
           "stages %d\n",
           name, hot ? "hot" : "cold", copied, static_cast<long long>(b.slabs), flops / (ms * 1e-3) / 1e12, hz * 1e-6,
           slab_cycles, tensor_cycles, 100.0 * tensor_cycles / slab_cycles, launch_cycles, Tile::kStages);
  }
}

int main() {
  Buffers b;
  CK(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  b.slabs = 1024;  // about a millisecond a variant; K / block_size stays within kMaxKBlocks
  printf("%s, %d SMs; FusedWgmmaTile::consume, %lld slabs a block; copies: none, act(ivations), all\n",
         prop.name, b.sms, static_cast<long long>(b.slabs));
  std::mt19937 rng(7);
  // Stage bytes: float16-like words with small exponents (finite as float16, bfloat16 and,
  // byte by byte, e4m3: no byte 0x7F / 0xFF), so that the tensor cores' power, which sets
  // the clock, sees real-looking data.
  std::vector<uint32_t> fill(65536);
  for (auto& v : fill) v = rng() & 0xBBBBBBBBu;
  const int64_t rows = int64_t{b.sms} * kGemmTileN;
  std::vector<float> scales_f(rows * kMaxKBlocks);
  for (size_t i = 0; i < scales_f.size(); ++i)
    scales_f[i] = 0.01f + 0.01f * static_cast<float>((i * 2654435761u) % 1000) / 1000.0f;
  std::vector<uint8_t> zp(rows * kMaxKBlocks * 2);
  for (size_t i = 0; i < zp.size(); ++i) zp[i] = static_cast<uint8_t>((i * 2246822519u) >> 13);
  CK(cudaMalloc(&b.fill, fill.size() * 4));
  CK(cudaMemcpy(b.fill, fill.data(), fill.size() * 4, cudaMemcpyHostToDevice));
  // One scales buffer for every variant: float32 values, read as float (FP8) or, for T
  // scales, rewritten below per type.
  CK(cudaMalloc(&b.scales, scales_f.size() * 4));
  CK(cudaMalloc(&b.zp, zp.size()));
  CK(cudaMemcpy(b.zp, zp.data(), zp.size(), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.y, static_cast<size_t>(256) * rows * 2));
  // The copies' sources: random bytes (float16-like, as `fill`).
  const size_t act_bytes = static_cast<size_t>(256) * kActSlabs * 64 * 2;
  const size_t weight_bytes = static_cast<size_t>(rows) * b.slabs * 128;
  CK(cudaMalloc(&b.act, act_bytes));
  CK(cudaMalloc(&b.weight, weight_bytes));
  std::vector<uint32_t> pattern(4 << 20);  // 16 MB: `fill` repeated
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = fill[i % fill.size()];
  const size_t pattern_bytes = pattern.size() * 4;
  for (size_t at = 0; at < weight_bytes; at += pattern_bytes) {
    const size_t n = std::min(pattern_bytes, weight_bytes - at);
    CK(cudaMemcpy(b.weight + at, pattern.data(), n, cudaMemcpyHostToDevice));
    if (at < act_bytes) CK(cudaMemcpy(b.act + at, pattern.data(), std::min(n, act_bytes - at), cudaMemcpyHostToDevice));
  }
  CK(cudaMalloc(&b.clocks.cycles, static_cast<size_t>(b.sms) * sizeof(long long)));
  CK(cudaMalloc(&b.clocks.nanos, static_cast<size_t>(b.sms) * sizeof(unsigned long long)));
  const auto scales_as = [&](auto tag) {
    using S = decltype(tag);
    std::vector<S> s(scales_f.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<S>(scales_f[i]);
    CK(cudaMemcpy(b.scales, s.data(), s.size() * sizeof(S), cudaMemcpyHostToDevice));
  };
  // Typed zero points are T values: the random bytes read as T pairs are finite (small
  // exponents) only where masked, so give them float16 / bfloat16 values near 8.
  const auto typed_zp_as = [&](auto tag) {
    using S = decltype(tag);
    std::vector<S> z(zp.size() / 2);
    for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<S>(7.5f + static_cast<float>(zp[i] % 16) / 16.0f);
    CK(cudaMemcpy(b.zp, z.data(), z.size() * sizeof(S), cudaMemcpyHostToDevice));
  };
  using GW = GemmWeights;
  scales_as(float{});
  run<__half, GW::kFp8, 64, 1, false>(b, 128, false, "fp8 f16 tile 64 block 128");
  run<__nv_bfloat16, GW::kFp8, 64, 1, false>(b, 128, false, "fp8 bf16 tile 64 block 128");
  scales_as(__half{});
  CK(cudaMemcpy(b.zp, zp.data(), zp.size(), cudaMemcpyHostToDevice));
  run<__half, GW::kInt8, 64, 1, false>(b, 128, false, "int8 f16 tile 64 block 128");
  run<__half, GW::kInt8, 128, 1, false>(b, 128, false, "int8 f16 tile 128 block 128");
  run<__half, GW::kInt8, 256, 1, false>(b, 128, false, "int8 f16 tile 256 block 128");
  run<__half, GW::kInt4, 64, 2, false>(b, 128, false, "int4 f16 tile 64 block 128");
  run<__half, GW::kInt4, 128, 1, false>(b, 128, false, "int4 f16 tile 128 block 128");
  run<__half, GW::kInt4, 256, 1, false>(b, 128, false, "int4 f16 tile 256 block 128");
  // The 16-row tile (4-bit M = 13..16, its groups folded): its consumers alone, then fed
  // from HBM; at that M the decode, not the tensor work, fills a slab.
  run<__half, GW::kInt4, 16, 2, false>(b, 128, false, "int4 f16 tile 16 block 128");
  for (const Copies c : {Copies::kActivations, Copies::kAll}) {
    run<__half, GW::kInt4, 16, 2, false>(b, 128, false, "int4 f16 tile 16 block 128", c);
    run<__half, GW::kInt4, 128, 1, false>(b, 128, false, "int4 f16 tile 128 block 128", c);
    run<__half, GW::kInt4, 256, 1, false>(b, 128, false, "int4 f16 tile 256 block 128", c);
  }
  {
    // "few": a block's slabs in the fused GEMM at 8192 x 8192 (K split 2), where the
    // consumers' fixed costs (the first stages' arrival, the epilogue) show per slab.
    Buffers few = b;
    few.slabs = 16;  // tile 16's stages of 256 K over K = 4096
    run<__half, GW::kInt4, 16, 2, false>(few, 128, false, "int4 f16 tile 16 block 128 few", Copies::kAll);
    for (const int64_t slabs : {int64_t{32}, int64_t{64}}) {
      few.slabs = slabs;
      run<__half, GW::kInt4, 64, 2, false>(few, 128, false, "int4 f16 tile 64 block 128 few", Copies::kAll);
      run<__half, GW::kInt4, 256, 1, false>(few, 128, false, "int4 f16 tile 256 block 128 few", Copies::kAll);
    }
  }
  run<__half, GW::kInt4, 64, 2, false>(b, 128, true, "int4 f16 tile 64 block 128 zp");
  run<__half, GW::kInt4, 64, 1, false>(b, 256, false, "int4 f16 tile 64 block 256");
  run<__half, GW::kInt4, 64, 8, false>(b, 32, false, "int4 f16 tile 64 block 32");
  typed_zp_as(__half{});
  run<__half, GW::kInt4, 64, 2, true>(b, 128, false, "int4 f16 tile 64 block 128 typed");
  scales_as(__nv_bfloat16{});
  CK(cudaMemcpy(b.zp, zp.data(), zp.size(), cudaMemcpyHostToDevice));
  run<__nv_bfloat16, GW::kInt8, 64, 1, false>(b, 128, false, "int8 bf16 tile 64 block 128");
  run<__nv_bfloat16, GW::kInt4, 64, 2, false>(b, 128, false, "int4 bf16 tile 64 block 128");
  run<__nv_bfloat16, GW::kInt4, 16, 2, false>(b, 128, false, "int4 bf16 tile 16 block 128");
  return 0;
}
