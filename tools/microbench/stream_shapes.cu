// Streaming micro-benchmark: which warp load shapes reach HBM bandwidth on this GPU?
// Standalone (CMake compiles it unlinked; no bqmm code):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/stream_shapes tools/microbench/stream_shapes.cu
//   /tmp/stream_shapes
//
// Reads a 2 GiB buffer (cold: 35x the H200's L2) and prints TB/s per variant:
//   reg LxB Un   register loads, one 16-byte load per lane per instruction; an instruction
//                covers L rows x B bytes (1 x 512: 32 lanes on one row; 4 x 128; 8 x 64,
//                the shape of an mma A-fragment load), n loads in flight per lane, W warps
//                per SM (set through dynamic shared memory). "8x64pair": the two 64-byte
//                halves of each line in consecutive instructions.
//   reg smem     4 x 128 loads, then each 16 rows x 128 bytes stage goes through a swizzled
//                shared buffer and comes back by ldmatrix (the GEMV fragment path);
//                +act1 / +act8 adds per stage the activation loads of an M = 1 / M = 8 GEMV.
//   bulk         1-D TMA bulk copies (cp.async.bulk) of `piece` bytes per row, 16 rows per
//                stage, a ring of S stages per persistent CTA.
//   step         the N-bit window kernel's steps of 4 KB per warp with a decode-like delay:
//                independent IMADs (run 3) or a chase of dependent shared-memory loads
//                (run 4, "chase"), one or two steps in flight.
// docs/PERF.md summarizes what these shapes stream on the H200.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include "microbench.cuh"  // CK


__device__ __forceinline__ uint4 lds(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

constexpr int kRowBytes = 4096, kRows = 16;  // 64 KB per warp
template <int L, int U, int kOrder = 0>
__global__ void reg_stream(const uint8_t* buf, uint32_t* out) {
  const int lane = threadIdx.x % 32;
  const int64_t wid = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const uint8_t* base = buf + wid * kRowBytes * kRows;
  constexpr int G = 32 / L, P = kRows / G, kSteps = kRows * kRowBytes / 512;
  const int grp = lane / L, sub = lane % L;
  auto addr = [&](int s) {
    s = s < kSteps ? s : kSteps - 1;
    int row = (s % P) * G + grp, col = (s / P) * L * 16 + sub * 16;
    if (kOrder == 1) {  // 8x64: the two halves of each line back to back (instr 2j, 2j+1)
      const int pair = s / 2, half = s % 2;
      row = (pair % P) * G + grp; col = (pair / P) * 128 + half * 64 + sub * 16;
    }
    return base + row * kRowBytes + col;
  };
  uint4 r[U];
#pragma unroll
  for (int u = 0; u < U; ++u) r[u] = lds(addr(u));
  uint32_t acc = 0;
  for (int s = 0; s < kSteps; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      acc ^= r[u].x + r[u].y + r[u].z + r[u].w;
      r[u] = lds(addr(s + U + u));
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// 4x128 loads + STS (swizzled) + LDSM.x4 round trip per stage of 16 rows x 128 B
template <int U, int kActRows = 0>
__global__ void smem_stream(const uint8_t* buf, uint32_t* out) {
  __shared__ __align__(16) uint8_t sm[8][2][2048];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t wid = (int64_t)blockIdx.x * (blockDim.x / 32) + warp;
  const uint8_t* base = buf + wid * kRowBytes * kRows;
  constexpr int kStages = kRowBytes / 128;
  auto ld = [&](int st, int i) { st = st < kStages ? st : kStages - 1; return lds(base + (4 * i + lane / 8) * kRowBytes + st * 128 + 16 * (lane % 8)); };
  uint4 r[U][4];
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int i = 0; i < 4; ++i) r[u][i] = ld(u, i);
  uint32_t acc = 0;
  const uint32_t b0 = (uint32_t)__cvta_generic_to_shared(&sm[warp][0][0]);
  for (int s = 0; s < kStages; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t b = b0 + ((s + u) & 1) * 2048;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 4 * i + lane / 8;
        const uint32_t a = b + row * 128 + (((lane % 8) ^ (row & 7)) * 16);
        asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(a), "r"(r[u][i].x), "r"(r[u][i].y), "r"(r[u][i].z), "r"(r[u][i].w) : "memory");
        r[u][i] = ld(s + U + u, i);
      }
      if constexpr (kActRows > 0) {  // emulate M-row fp16 activations: 8 x 8-byte loads per stage (L1/L2 hits)
        const int g = lane / 4, t = lane % 4;
        const uint8_t* a_row = buf + (int64_t)(g % kActRows) * 16384 + ((wid * 5 + s + u) % 64) * 256 + 8 * t;
#pragma unroll
        for (int c = 0; c < 8; ++c) { const uint2 v = __ldg(reinterpret_cast<const uint2*>(a_row + 32 * c)); acc += v.x ^ v.y; }
      }
      __syncwarp();
#pragma unroll
      for (int c0 = 0; c0 < 8; c0 += 2) {
        const int row = (lane % 8) + 8 * ((lane / 8) % 2);
        const uint32_t a = b + row * 128 + (((c0 + lane / 16) ^ (row & 7)) * 16);
        uint32_t w0, w1, w2, w3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(a) : "memory");
        acc ^= w0 + w1 + w2 + w3;
      }
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// ---- bulk copy pipeline
__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int c) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(c));
}
__device__ __forceinline__ void mbar_expect(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(sa(b)), "r"(parity) : "memory");
}

// Tile = 16 rows x kTileRow bytes (contiguous rows); stage = 16 pieces of `piece` bytes
// (one per row, at the same column). Persistent CTAs, ring of S stages.
constexpr int kTileRow = 8192;
template <int S>
__global__ void bulk_stream(const uint8_t* buf, int64_t tiles, int piece, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[S];
  const int stage_bytes = 16 * piece;
  const int per_tile = kTileRow / piece;
  const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t stages = my_tiles * per_tile;
  auto issue = [&](int64_t s) {
    const int slot = s % S;
    const int64_t tile = blockIdx.x + (s / per_tile) * gridDim.x;
    const int col = (s % per_tile) * piece;
    mbar_expect(&full[slot], stage_bytes);
    for (int r = 0; r < 16; ++r)
      bulk_g2s(smem + slot * stage_bytes + r * piece, buf + tile * 16 * kTileRow + r * kTileRow + col, piece, &full[slot]);
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) mbar_init(&full[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int64_t s = 0; s < S && s < stages; ++s) issue(s);
  uint32_t acc = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int slot = s % S;
    mbar_wait(&full[slot], (s / S) & 1);
    const uint4* src = reinterpret_cast<const uint4*>(smem + slot * stage_bytes);
    for (int i = threadIdx.x; i < stage_bytes / 16; i += blockDim.x) {
      const uint4 v = src[i];
      acc ^= v.x + v.y + v.z + v.w;
    }
    __syncthreads();
    if (threadIdx.x == 0 && s + S < stages) issue(s + S);
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// ---- the window kernel's steps with a decode-like delay
// The N-bit two-tile window kernel (28672 x 8192, 4-bit) streams its weights at 3.81 TB/s
// without its decode and 3.05 with it, with the same bytes in flight (H200). This replays its weight stream: a matrix of rows of kRowStride bytes, warp
// w taking kStepRows rows and the (w % kSplit)-th part of each row, in steps of 4 KB
// (kStepRows rows x 4096 / kStepRows bytes: 32 x 128 is the kernel's two tiles of one pair,
// 16 x 256 one tile of two pairs), 8 load instructions of (32 / L) rows x 16 L bytes per
// step held in 32 registers; between a step's arrival and its successor's issue nothing,
// and after the issue kDelay dependent-free ALU instructions (four IMAD chains), the
// kernel's decode (~530 instructions per step) stand-in.
// Warp w's part of the step matrix and the address of load instruction i (0..7) of step s
// (past the last step: the last again).
template <int L, int kStepRows, int kRowStride, int kSplit>
struct WarpSteps {
  static constexpr int kPart = kRowStride / kSplit;   // bytes of a row per warp
  static constexpr int kStepCols = 4096 / kStepRows;  // bytes of a row per step
  static constexpr int G = 32 / L;                    // rows per instruction
  static constexpr int kRowGroups = kStepRows / G;    // instructions per column block of a step
  static constexpr int kSteps = kPart / kStepCols;
  static_assert(kRowGroups * (kStepCols / (16 * L)) == 8, "8 instructions per step");
  const uint8_t* base;
  int grp, sub;
  __device__ WarpSteps(const uint8_t* buf) {
    const int lane = threadIdx.x % 32;
    const int64_t wid = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    base = buf + (wid / kSplit) * kStepRows * kRowStride + (wid % kSplit) * kPart;
    grp = lane / L;
    sub = lane % L;
  }
  __device__ const uint8_t* addr(int s, int i) const {
    s = s < kSteps ? s : kSteps - 1;
    const int row = (i % kRowGroups) * G + grp;
    const int col = s * kStepCols + (i / kRowGroups) * L * 16 + sub * 16;
    return base + (int64_t)row * kRowStride + col;
  }
};

template <int L, int kStepRows, int kRowStride, int kSplit, int kDelay>
__global__ void step_stream(const uint8_t* buf, uint32_t* out) {
  using W = WarpSteps<L, kStepRows, kRowStride, kSplit>;
  constexpr int kSteps = W::kSteps;
  const W w(buf);
  const int lane = threadIdx.x % 32;
  auto addr = [&](int s, int i) { return w.addr(s, i); };
  uint4 r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) r[i] = lds(addr(0, i));
  uint32_t acc = 0, c[4] = {1u * lane, 2u * lane, 3u * lane, 4u * lane};
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc ^= r[i].x + r[i].y + r[i].z + r[i].w;
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = lds(addr(s + 1, i));
#pragma unroll 4
    for (int d = 0; d < kDelay / 4; ++d)
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = c[j] * 1664525u + (acc ^ j);
  }
  acc ^= c[0] ^ c[1] ^ c[2] ^ c[3];
  if (acc == 0x12345678u) out[0] = acc;
}

// "chase": the same steps with a decode stand-in that is latency, not issue: a
// chain of kChase dependent shared-memory loads (~30 cycles each) that starts from the
// step's data, so a warp is busy ~30 kChase cycles per step at a low issue rate (the
// kernel issues 0.51 per cycle and scheduler with 3.4 warps each). kAhead steps in flight
// (1: the kernel's; 2: twice the registers).
template <int L, int kStepRows, int kRowStride, int kSplit, int kChase, int kAhead>
__global__ void chase_stream(const uint8_t* buf, uint32_t* out) {
  extern __shared__ uint32_t chase[];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) chase[i] = (i * 97 + 13) & 1023;
  __syncthreads();
  using W = WarpSteps<L, kStepRows, kRowStride, kSplit>;
  constexpr int kSteps = W::kSteps;
  const W w(buf);
  auto addr = [&](int s, int i) { return w.addr(s, i); };
  uint4 r[kAhead][8];
#pragma unroll
  for (int a = 0; a < kAhead; ++a)
#pragma unroll
    for (int i = 0; i < 8; ++i) r[a][i] = lds(addr(a, i));
  uint32_t acc = 0;
  for (int s = 0; s < kSteps; s += kAhead) {
#pragma unroll
    for (int a = 0; a < kAhead; ++a) {
      uint32_t x = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) x ^= r[a][i].x + r[a][i].y + r[a][i].z + r[a][i].w;
#pragma unroll
      for (int i = 0; i < 8; ++i) r[a][i] = lds(addr(s + kAhead + a, i));
      uint32_t p = x & 1023;
#pragma unroll 8
      for (int d = 0; d < kChase; ++d) p = chase[p];
      acc ^= p + x;
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

int main() {
  const int64_t bytes = int64_t{2} << 30;
  uint8_t* buf; uint32_t* out;
  CK(cudaMalloc(&buf, bytes)); CK(cudaMalloc(&out, 4));
  CK(cudaMemset(buf, 1, bytes));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto timeit = [&](auto launch) {
    float best = 1e9;
    for (int i = 0; i < 6; ++i) {
      CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i) best = std::min(best, ms);
    }
    CK(cudaGetLastError());
    return best;
  };
  { // copy reference: 1 GiB -> 1 GiB
    float ms = timeit([&] { CK(cudaMemcpyAsync(buf + bytes / 2, buf, bytes / 2, cudaMemcpyDeviceToDevice)); });
    printf("memcpy D2D 1GiB: %.3f ms  copy BW (r+w) %.2f TB/s\n", ms, 2.0 * (bytes / 2) / ms / 1e9);
  }
  auto run_reg = [&](auto kern, const char* name, int warps_per_sm) {
    const int blocks_per_sm = warps_per_sm / 8;
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kern));
    int smem = (227 * 1024) / blocks_per_sm - 2048 - (int)fa.sharedSizeBytes;
    if (smem > 227 * 1024) smem = 227 * 1024;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, 256, smem));
    const int64_t warps = bytes / (kRowBytes * kRows);
    float ms = timeit([&] { kern<<<warps / 8, 256, smem>>>(buf, out); });
    printf("reg %-12s W=%2d (occ %2d warps): %.3f ms %.2f TB/s\n", name, warps_per_sm, occ * 8, ms, bytes / ms / 1e9);
  };
  for (int W : {16, 32, 64}) {  // run 1: shape x loads in flight x warps per SM
    run_reg(reg_stream<32, 2>, "1x512 U2", W); run_reg(reg_stream<32, 4>, "1x512 U4", W); run_reg(reg_stream<32, 8>, "1x512 U8", W);
    run_reg(reg_stream<8, 2>, "4x128 U2", W); run_reg(reg_stream<8, 4>, "4x128 U4", W); run_reg(reg_stream<8, 8>, "4x128 U8", W);
    run_reg(reg_stream<4, 2>, "8x64 U2", W); run_reg(reg_stream<4, 4>, "8x64 U4", W); run_reg(reg_stream<4, 8>, "8x64 U8", W);
  }
  for (int W : {16, 32}) {  // run 2: half lines back to back, the shared-memory round trip
    run_reg(reg_stream<4, 2, 1>, "8x64pair U2", W); run_reg(reg_stream<4, 4, 1>, "8x64pair U4", W); run_reg(reg_stream<4, 8, 1>, "8x64pair U8", W);
    run_reg(smem_stream<1>, "smem U1", W); run_reg(smem_stream<2>, "smem U2", W);
    run_reg(smem_stream<2, 1>, "smem+act1 U2", W); run_reg(smem_stream<2, 8>, "smem+act8 U2", W);
  }
  // run 3: the window kernel's steps (16 warps per SM, as its 128 registers allow), with and
  // without a decode-like delay: 32 rows x 128 bytes (4 x 128 per instruction, the kernel's
  // two tiles, K split 2 of 4096-byte rows) against 16 rows x 256 bytes (2 x 256 or 4 x 128
  // per instruction, one tile of two pairs).
  auto run_step = [&](auto kern, const char* name, int step_rows, int split, int stride = 4096) {
    const int warps_per_sm = 16, blocks_per_sm = warps_per_sm / 8;
    int smem = (227 * 1024) / blocks_per_sm - 2048;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int64_t warps = bytes / (int64_t{step_rows} * stride / split);
    float ms = timeit([&] { kern<<<warps / 8, 256, smem>>>(buf, out); });
    printf("step %-26s W=16: %.3f ms %.2f TB/s\n", name, ms, bytes / ms / 1e9);
  };
  run_step(step_stream<8, 32, 4096, 2, 0>, "32x128 (4x128) delay 0", 32, 2);
  run_step(step_stream<8, 32, 4096, 2, 256>, "32x128 (4x128) delay 256", 32, 2);
  run_step(step_stream<8, 32, 4096, 2, 512>, "32x128 (4x128) delay 512", 32, 2);
  run_step(step_stream<16, 16, 4096, 2, 0>, "16x256 (2x256) delay 0", 16, 2);
  run_step(step_stream<16, 16, 4096, 2, 256>, "16x256 (2x256) delay 256", 16, 2);
  run_step(step_stream<16, 16, 4096, 2, 512>, "16x256 (2x256) delay 512", 16, 2);
  run_step(step_stream<8, 16, 4096, 2, 512>, "16x256 (4x128) delay 512", 16, 2);
  run_step(step_stream<8, 32, 4096, 2, 1024>, "32x128 (4x128) delay 1024", 32, 2);
  run_step(step_stream<16, 16, 4096, 2, 1024>, "16x256 (2x256) delay 1024", 16, 2);
  run_step(step_stream<8, 32, 16384, 4, 512>, "32x128 (4x128) K4 delay 512", 32, 4, 16384);
  run_step(step_stream<16, 16, 16384, 4, 512>, "16x256 (2x256) K4 delay 512", 16, 4, 16384);
  // run 4: latency-type decode stand-in (see chase_stream), 32 x 128 against 16 x 256 bytes
  // per step, one or two steps in flight.
  run_step(chase_stream<8, 32, 4096, 2, 0, 1>, "chase 32x128 d0 a1", 32, 2);
  run_step(chase_stream<8, 32, 4096, 2, 64, 1>, "chase 32x128 d64 a1", 32, 2);
  run_step(chase_stream<8, 32, 4096, 2, 100, 1>, "chase 32x128 d100 a1", 32, 2);
  run_step(chase_stream<8, 32, 4096, 2, 140, 1>, "chase 32x128 d140 a1", 32, 2);
  run_step(chase_stream<16, 16, 4096, 2, 64, 1>, "chase 16x256 d64 a1", 16, 2);
  run_step(chase_stream<16, 16, 4096, 2, 100, 1>, "chase 16x256 d100 a1", 16, 2);
  run_step(chase_stream<16, 16, 4096, 2, 140, 1>, "chase 16x256 d140 a1", 16, 2);
  run_step(chase_stream<8, 32, 4096, 2, 64, 2>, "chase 32x128 d64 a2", 32, 2);
  run_step(chase_stream<8, 32, 4096, 2, 100, 2>, "chase 32x128 d100 a2", 32, 2);
  run_step(chase_stream<8, 32, 4096, 2, 140, 2>, "chase 32x128 d140 a2", 32, 2);
  run_step(chase_stream<8, 32, 4096, 4, 100, 1>, "chase 32x128 K4 d100 a1", 32, 4);
  auto run_bulk = [&](auto kern, int S, int piece, int ctas_per_sm, int threads) {
    const int smem = S * 16 * piece;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, threads, smem));
    const int64_t tiles = bytes / (16 * kTileRow);
    float ms = timeit([&] { kern<<<sms * ctas_per_sm, threads, smem>>>(buf, tiles, piece, out); });
    printf("bulk S=%d piece=%5d stage=%6d CTA/SM=%d (occ %d) thr=%d inflight/SM=%3d KB: %.3f ms %.2f TB/s\n", S, piece, 16 * piece,
           ctas_per_sm, occ, threads, S * 16 * piece * ctas_per_sm / 1024, ms, bytes / ms / 1e9);
  };
  for (int piece : {256, 512, 1024}) {
    for (int c : {1, 2, 4}) {
      if (4 * 16 * piece * c <= 200 * 1024) run_bulk(bulk_stream<4>, 4, piece, c, 256);
      if (8 * 16 * piece * c <= 200 * 1024) run_bulk(bulk_stream<8>, 8, piece, c, 256);
    }
  }
  run_bulk(bulk_stream<8>, 8, 512, 2, 128);
  run_bulk(bulk_stream<4>, 4, 2048, 1, 256);
  run_bulk(bulk_stream<6>, 6, 2048, 1, 256);
  return 0;
}
