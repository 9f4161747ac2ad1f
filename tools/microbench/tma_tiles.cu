// TMA tile streaming micro-benchmark: each warp streams 16 rows x 8 KB in 2-D tensor-map
// boxes of 16 rows x 128 bytes (SWIZZLE_128B) into a per-warp ring of S shared-memory slots
// (one mbarrier each), reads each back with 4 x ldmatrix.x4 (plus, for "actM", the
// activation loads of an M-row GEMV), and lane 0 refills the slot: the weight stream of
// Fp8GemvTmaKernel (src/cuda/gemv/fp8_tma.cu) without its math. Standalone (CMake compiles
// it, unlinked, as a check):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/tma_tiles tools/microbench/tma_tiles.cu
//   /tmp/tma_tiles
//
// docs/PERF.md summarizes its H200 results.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include "microbench.cuh"  // CK


__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

constexpr int kRowBytes = 8192;
template <int kS, int kWarps, int kAct>
__global__ void __launch_bounds__(kWarps * 32) tma_stream(const __grid_constant__ CUtensorMap tmap, const uint8_t* act, uint32_t* out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t bar[kWarps][kS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t wid = (int64_t)blockIdx.x * kWarps + warp;
  const int row0 = (int)(wid * 16);
  uint8_t* ring = smem + warp * kS * 2048;
  constexpr int kStages = kRowBytes / 128;
  auto issue = [&](int st) {
    const int slot = st % kS;
    const uint32_t b = sa(&bar[warp][slot]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(2048) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(sa(ring + slot * 2048)), "l"(&tmap), "r"(st * 128), "r"(row0), "r"(b) : "memory");
  };
  if (lane == 0) {
    for (int i = 0; i < kS; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(&bar[warp][i])), "r"(1));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  if (lane == 0) for (int i = 0; i < kS; ++i) issue(i);
  uint32_t acc = 0;
  for (int st = 0; st < kStages; ++st) {
    const int slot = st % kS;
    const uint32_t b = sa(&bar[warp][slot]);
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(b), "r"((st / kS) & 1) : "memory");
    if constexpr (kAct > 0) {
      const int g = lane / 4, t = lane % 4;
      const uint8_t* a_row = act + (int64_t)(g % kAct) * 16384 + ((wid * 5 + st) % 64) * 256 + 16 * t;
#pragma unroll
      for (int j = 0; j < 4; ++j) { const uint4 v = __ldg(reinterpret_cast<const uint4*>(a_row + 64 * j)); acc += v.x ^ v.w; }
    }
    const uint32_t base = sa(ring + slot * 2048);
#pragma unroll
    for (int c0 = 0; c0 < 8; c0 += 2) {
      const int row = (lane % 8) + 8 * ((lane / 8) % 2);
      const uint32_t a = base + row * 128 + (((c0 + lane / 16) ^ (row & 7)) * 16);
      uint32_t w0, w1, w2, w3;
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(a) : "memory");
      acc ^= w0 + w1 + w2 + w3;
    }
    __syncwarp();
    if (lane == 0 && st + kS < kStages) issue(st + kS);
  }
  if (acc == 0x12345678u) out[0] = acc;
}

int main() {
  const int64_t bytes = int64_t{2} << 30;
  const int64_t rows = bytes / kRowBytes;
  uint8_t* buf; uint32_t* out;
  CK(cudaMalloc(&buf, bytes)); CK(cudaMalloc(&out, 4));
  CK(cudaMemset(buf, 1, bytes));
  void* fn = nullptr; cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  CUtensorMap tmap;
  cuuint64_t dims[2] = {(cuuint64_t)kRowBytes, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)kRowBytes};
  cuuint32_t box[2] = {128, 16}, estr[2] = {1, 1};
  CUresult r = encode(&tmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, buf, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); return 1; }
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto run = [&](auto kern, const char* name, int warps, int S) {
    const int smem = warps * S * 2048 + 1024;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, warps * 32, smem));
    const int64_t total_warps = rows / 16;
    float best = 1e9;
    for (int i = 0; i < 6; ++i) {
      CK(cudaEventRecord(e0)); kern<<<total_warps / warps, warps * 32, smem>>>(tmap, buf, out); CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i) best = std::min(best, ms);
    }
    CK(cudaGetLastError());
    printf("tma %-10s S=%d warps/blk=%d occ=%d warps/SM inflight/SM=%3d KB: %.3f ms %.2f TB/s\n", name, S, warps, occ * warps,
           occ * warps * S * 2, best, bytes / best / 1e9);
  };
  run(tma_stream<2, 4, 0>, "", 4, 2);
  run(tma_stream<4, 4, 0>, "", 4, 4);
  run(tma_stream<6, 4, 0>, "", 4, 6);
  run(tma_stream<8, 4, 0>, "", 4, 8);
  run(tma_stream<4, 4, 1>, "act1", 4, 4);
  run(tma_stream<4, 4, 8>, "act8", 4, 4);
  run(tma_stream<6, 4, 8>, "act8", 4, 6);
  run(tma_stream<4, 8, 8>, "act8", 8, 4);
  return 0;
}
