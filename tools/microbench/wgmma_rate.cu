// Tensor-core rate micro-benchmark: what the wgmma shapes of the fused GEMM's Hopper
// mainloop (src/cuda/gemm/fused_wgmma.cuh) and of the W8A8 GEMM (w8a8_wgmma.cuh: e4m3 x
// e4m3, both operands from shared memory) sustain on a whole GPU, with nothing else in
// the loop: the flops floor of those GEMMs at the rows where the multiply, not the
// weight stream, sets their time. Standalone (CMake compiles it, unlinked, as a check):
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o /tmp/wgmma_rate tools/microbench/wgmma_rate.cu && /tmp/wgmma_rate
//
// One block per SM (200 KB of dynamic shared memory keeps a second one out), grid = the
// SM count, C consumer warpgroups per block (1 or 2, the GEMMs' 2). Each warpgroup
// issues groups of 8 wgmma m64nNk16 (float16 or bfloat16, float32 accumulators, one
// 128-K slab of the activation tile: two 64-K panels of N rows x 128 bytes, swizzled as
// the kernel's) or m64nNk32 e4m3 (the same two panels, 256 K), commits, and waits until
// one group is pending, as the fused GEMM's 8-bit slab step does. A comes from registers (RS, the fused GEMM's form: the decoded weight)
// or from shared memory (SS, a dense GEMM's form). ALU: after issuing a group, each
// thread runs that many dependent half2 multiply-adds on other registers before the wait,
// standing in for the next slab's decode (about 150 instructions a warp a slab in the
// kernel, ~70 of them the conversions), to see whether the warpgroups' alternation hides
// it. Operands are random (the tensor cores' power, hence the clock, depends on the
// data), or zero where the name says so. Each launch runs about 13 ms; "sustained" runs
// 16 times as long, about as long as the profiler's back-to-back timing of one M = 4096
// case keeps the tensor cores busy (400 calls of about 0.5 ms). Reports per variant:
// TFLOP/s, the SM clock the kernel saw (clock64 over globaltimer), and flops per SM per
// clock against the tensor cores' dense peak per clock (SM90: 4096 float16 / bfloat16,
// 8192 e4m3). docs/PERF.md ("The tensor-core rate") has the numbers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda/gemm/fused_wgmma.cuh"  // wgmma_rs, wgmma.cuh's fences and descriptors
#include "cuda/gemm/w8a8_wgmma.cuh"   // wgmma_e4m3
#include "microbench.cuh"

using namespace bqmm::cuda;

constexpr int kSmemBytes = 200 * 1024;  // one block per SM
constexpr int kGroupSteps = 8;          // wgmma per commit group (256 bytes of each row)

// The operand type tag of the e4m3 x e4m3 form (always from shared memory, as the W8A8
// GEMM's); otherwise T is the 16-bit type.
struct E4m3 {};
template <typename T>
constexpr bool kIsE4m3 = std::is_same_v<T, E4m3>;
template <typename T>
constexpr int kStepK = kIsE4m3<T> ? 32 : 16;          // K per wgmma (32 bytes of each row)
template <typename T>
constexpr double kPeakPerClock = kIsE4m3<T> ? 8192 : 4096;  // dense flops per SM per clock

// m64nNk16 with A from shared memory too (SS), N = 64 or 128.
#define WR_SS_N64(TY)                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" BQMM_WGMMA_REGS32 \
               "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                                          \
               : BQMM_WGMMA_D32                                                            \
               : "l"(adesc), "l"(bdesc), "r"(accumulate))
#define WR_SS_N128(TY)                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" BQMM_WGMMA_REGS64 \
               "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                                           \
               : BQMM_WGMMA_D64                                                             \
               : "l"(adesc), "l"(bdesc), "r"(accumulate))
template <typename T, int kN>
__device__ __forceinline__ void wgmma_ss(float (&d)[kN / 2], uint64_t adesc, uint64_t bdesc,
                                         uint32_t accumulate) {
#if BQMM_WGMMA_ENABLED
  if constexpr (kN == 64) {
    if constexpr (std::is_same_v<T, __half>) {
      WR_SS_N64("f16");
    } else {
      WR_SS_N64("bf16");
    }
  } else {
    if constexpr (std::is_same_v<T, __half>) {
      WR_SS_N128("f16");
    } else {
      WR_SS_N128("bf16");
    }
  }
#endif
}

// smem: [B: 2 panels of kN rows x 128 B][A: 2 panels of 64 rows x 128 B] (SS reads A
// there; RS ignores it), filled from `src` (random bytes).
template <typename T, int kN, int kConsumers, bool kSs, int kAlu>
__global__ void __launch_bounds__(128 * kConsumers, 1)
    rate_kernel(const uint32_t* __restrict__ src, int iters, float* out, long long* cycles,
                unsigned long long* nanos) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  constexpr int kBBytes = 2 * kN * 128, kABytes = 2 * 64 * 128;
  for (int i = threadIdx.x; i < (kBBytes + kABytes) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = src[i];
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic writes -> wgmma reads
  __syncthreads();

  const int lane = threadIdx.x % 128;
  uint32_t a[kGroupSteps][4];
#pragma unroll
  for (int s = 0; s < kGroupSteps; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[s][j] = src[(kBBytes + kABytes) / 4 + (lane * 32 + s * 4 + j) % 4096];
  uint32_t x = src[lane], y = src[lane + 128];  // the ALU chain's operands
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  uint64_t bdesc[kGroupSteps], adesc[kGroupSteps];
  const uint64_t b0 = sw128_desc(smem_addr(smem)), a0 = sw128_desc(smem_addr(smem + kBBytes));
#pragma unroll
  for (int s = 0; s < kGroupSteps; ++s) {
    bdesc[s] = sw128_desc_step(b0, (s / 4) * kN * 128 + (s % 4) * 32);
    adesc[s] = sw128_desc_step(a0, (s / 4) * 64 * 128 + (s % 4) * 32);
  }

  __syncthreads();
  const ClockStamp start = clock_stamp();
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
    fence_operands(a);
    fence_operands(d);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kGroupSteps; ++s) {
      if constexpr (kIsE4m3<T>) {
        static_assert(kSs, "e4m3 from shared memory only");
        wgmma_e4m3<kN>(d, adesc[s], bdesc[s], 1u);
      } else if constexpr (kSs) {
        wgmma_ss<T, kN>(d, adesc[s], bdesc[s], 1u);
      } else {
        wgmma_rs<T, kN>(d, a[s], bdesc[s], 1u);
      }
    }
    wgmma_commit();
    fence_operands(d);
#pragma unroll
    for (int i = 0; i < kAlu; ++i) asm volatile("fma.rn.f16x2 %0, %0, %1, %1;" : "+r"(x) : "r"(y));
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  fence_operands(d);
  const ClockStamp end = clock_stamp();
  float sum = __uint_as_float(x);
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) sum += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the work alive
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = end.cycles - start.cycles;
    nanos[blockIdx.x] = end.ns - start.ns;
  }
}

struct Buffers {
  float* out;
  long long* cycles;
  unsigned long long* nanos;
  int sms;
};

// `src`: the operands' bits (random or zero); `length`: launches `length` times the usual
// 20000 iterations (16: "sustained").
template <typename T, int kN, int kConsumers, bool kSs, int kAlu>
void run(const Buffers& b, const uint32_t* src, const char* name, int length = 1) {
  auto kernel = rate_kernel<T, kN, kConsumers, kSs, kAlu>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes + 1024));
  const int iters = 20000 * length;
  kernel<<<b.sms, 128 * kConsumers, kSmemBytes + 1024>>>(src, iters / 10, b.out, b.cycles, b.nanos);  // warm-up
  CK(cudaGetLastError());
  long long cyc = 0;
  unsigned long long ns = 0;
  const float ms = best_ms(
      3, [&] { kernel<<<b.sms, 128 * kConsumers, kSmemBytes + 1024>>>(src, iters, b.out, b.cycles, b.nanos); },
      [&] {
        CK(cudaMemcpy(&cyc, b.cycles, sizeof(cyc), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&ns, b.nanos, sizeof(ns), cudaMemcpyDeviceToHost));
      });
  const double flops = 2.0 * 64 * kN * kStepK<T> * kGroupSteps * double(iters) * kConsumers * b.sms;
  const double tflops = flops / (ms * 1e-3) / 1e12;
  const double mhz = double(cyc) / double(ns) * 1e3;
  const double per_clk = flops / b.sms / double(cyc);
  printf("%-40s %7.1f TFLOP/s  %5.0f MHz  %6.0f flops/SM/clk (%5.1f %% of %.0f)\n", name, tflops, mhz, per_clk,
         100.0 * per_clk / kPeakPerClock<T>, kPeakPerClock<T>);
}

int main() {
  Buffers b;
  CK(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs; wgmma m64nNk16 / m64nNk32 (e4m3), groups of 8, wait until one group pends\n", prop.name,
         b.sms);
  // Operand bits: float16 / bfloat16 in [-1, 1)-ish (sign, small exponents); e4m3 with a
  // random sign, mantissa and even exponent (never 15, so never NaN); zeros.
  std::vector<uint32_t> f16_bits(64 * 1024), e4m3_bits(64 * 1024), zero_bits(64 * 1024, 0u);
  std::mt19937 rng(7);
  for (auto& v : f16_bits) v = (rng() & 0xBBFFBBFFu);  // float16: exponents <= 0b01110, finite
  for (auto& v : e4m3_bits) v = (rng() & 0xF7F7F7F7u);
  auto upload = [](const std::vector<uint32_t>& host) {
    uint32_t* dev = nullptr;
    CK(cudaMalloc(&dev, host.size() * 4));
    CK(cudaMemcpy(dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    return dev;
  };
  const uint32_t* f16 = upload(f16_bits);
  const uint32_t* e4m3 = upload(e4m3_bits);
  const uint32_t* zeros = upload(zero_bits);
  CK(cudaMalloc(&b.out, static_cast<size_t>(b.sms) * 256 * sizeof(float)));
  CK(cudaMalloc(&b.cycles, static_cast<size_t>(b.sms) * sizeof(long long)));
  CK(cudaMalloc(&b.nanos, static_cast<size_t>(b.sms) * sizeof(unsigned long long)));

  run<__half, 64, 2, false, 0>(b, f16, "RS n64  f16 2 warpgroups");
  run<__half, 128, 2, false, 0>(b, f16, "RS n128 f16 2 warpgroups");
  run<__nv_bfloat16, 128, 2, false, 0>(b, f16, "RS n128 bf16 2 warpgroups");
  run<__half, 128, 1, false, 0>(b, f16, "RS n128 f16 1 warpgroup");
  run<__half, 64, 2, true, 0>(b, f16, "SS n64  f16 2 warpgroups");
  run<__half, 128, 2, true, 0>(b, f16, "SS n128 f16 2 warpgroups");
  run<__half, 64, 2, false, 70>(b, f16, "RS n64  f16 2 wg + 70 ALU/group");
  run<__half, 128, 2, false, 70>(b, f16, "RS n128 f16 2 wg + 70 ALU/group");
  run<__half, 128, 2, false, 150>(b, f16, "RS n128 f16 2 wg + 150 ALU/group");
  run<__half, 128, 2, false, 300>(b, f16, "RS n128 f16 2 wg + 300 ALU/group");
  run<__half, 128, 2, false, 0>(b, f16, "RS n128 f16 2 warpgroups, sustained", 16);
  // The W8A8 GEMM's forms: tile_m 64 and 128 (its N), two consumer warpgroups.
  run<E4m3, 64, 2, true, 0>(b, e4m3, "SS n64  e4m3 2 warpgroups");
  run<E4m3, 128, 2, true, 0>(b, e4m3, "SS n128 e4m3 2 warpgroups");
  run<E4m3, 128, 2, true, 0>(b, zeros, "SS n128 e4m3 2 warpgroups, zeros");
  run<E4m3, 128, 2, true, 0>(b, e4m3, "SS n128 e4m3 2 warpgroups, sustained", 16);
  run<E4m3, 128, 2, true, 0>(b, zeros, "SS n128 e4m3 2 wg, zeros, sustained", 16);
  return 0;
}
