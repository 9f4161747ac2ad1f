// TMA slab streaming micro-benchmark: how fast do the wgmma GEMMs' data paths
// (src/cuda/gemm/w8a8_wgmma.cuh, fused_wgmma.cuh) stream a weight, piece by piece, with
// nothing else in the kernel? A block owns a strip of 128 weight rows (the GEMMs' tile N)
// and a range of K (its split), one block per SM. Its producer copies each slab (128 rows
// x 128 bytes per TMA box, the wgmma's 128-byte swizzle, `boxes` boxes a stage) into a
// ring of shared-memory stages, and where asked:
//   * the matching activation box (kActRows rows x 128 bytes of e4m3 codes, from L2);
//   * the slab's 128 weight-row scales by cp.async, as the W8A8 GEMM's producer warpgroup
//     does: from the operator's [N, k_blocks] layout (a 4-byte copy a row, 128 sectors a
//     slab) or from [k_blocks, N] (the prepacked layout: 32 copies of 16 contiguous bytes);
//   * instead of the codes, the float16 activation quantized by the producer warpgroup
//     into the stage (kQuantize; static: times one inverse scale; dynamic: each row's amax
//     over the slab, its scale beside the weight scales), from registers loaded a slab
//     ahead or from float16 TMA boxes staged in the stage: what the W8A8 GEMM would do
//     without its quantize pass where a slab is a scale block.
// Its consumer is one warp that waits for each stage, reads one word of it and frees it,
// or the W8A8 GEMM's two consumer warpgroups (each 64 of the strip's rows, wgmma m64 x 64
// x k32 e4m3 on the stage, the sums folded with the scales, the stage freed by all 256
// threads), waiting for each slab's wgmmas before the next or, as the kernel does,
// issuing slab i + 1's first. These are emulations: codes, sums and scales are not
// checked. Launches run back to back in a CUDA graph over rotating copies of the weight
// totalling more than 4x the L2 (cold), as bqmm-profile's `b2b_us`, beside the
// profiler's floor kernel (a plain 512-byte-per-warp-instruction read of the same bytes,
// ../stream_read.cuh) in the same run. Standalone (CMake compiles it, unlinked, as a check):
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o /tmp/tma_slabs tools/microbench/tma_slabs.cu && /tmp/tma_slabs
//
// (or `MICRO=tma_slabs scripts/gpu_check.sh micro`). Prints per shape and form: us per
// launch, TB/s of weight bytes, and the share of the floor kernel's rate; docs/PERF.md
// ("The wgmma GEMMs' weight stream") has the numbers.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "../stream_read.cuh"
#include "cuda/gemm/w8a8_wgmma.cuh"  // wgmma_e4m3, wgmma.cuh's fences and descriptors
#include "microbench.cuh"            // CK

namespace {

constexpr int kStripRows = 128;  // weight rows per block (the GEMMs' tile N)
constexpr int kBoxBytes = 128;   // bytes of a row per box (the 128-byte swizzle's width)
constexpr int kBoxTileBytes = kStripRows * kBoxBytes;

// The barriers, copies and shared-memory addresses are the library's (cuda/gemv/tma.cuh,
// cuda/gemm/fused_gemm.cuh, cuda/common.cuh).
using bqmm::cuda::cp_async16;
using bqmm::cuda::cp_async4;
using bqmm::cuda::cp_async_mbarrier_arrive;
using bqmm::cuda::mbarrier_arrive;
using bqmm::cuda::mbarrier_arrive_expect_tx;
using bqmm::cuda::mbarrier_expect_tx;
using bqmm::cuda::mbarrier_init;
using bqmm::cuda::mbarrier_init_fence;
using bqmm::cuda::mbarrier_wait;
using bqmm::cuda::smem_addr;
using bqmm::cuda::tma_copy_box;

enum Scales { kNoScales = 0, kPerRow = 1, kTransposed = 2 };
enum Consumer { kTouch = 0, kWgmmaWait = 1, kWgmmaOverlap = 2 };
enum Quantize { kCodes = 0, kStatic = 1, kDynamic = 2, kStagedStatic = 3, kStagedDynamic = 4 };
__host__ __device__ constexpr bool staged(int quantize) { return quantize >= kStagedStatic; }
__host__ __device__ constexpr bool dynamic(int quantize) { return quantize == kDynamic || quantize == kStagedDynamic; }
constexpr int kProducers = 128;
__host__ __device__ constexpr int threads_of(int consumer) { return kProducers + (consumer == kTouch ? 32 : 256); }

// The W8A8 GEMM's consumers on a tile-64 stage [128 weight rows][128 B] [64 act rows][128 B]
// [128 scales]: warpgroup c multiplies weight rows 64 c .. 64 c + 63 by the 64 activation
// rows (4 wgmma m64n64k32), then folds the sums with its rows' scales into acc.
template <int kStages, int kConsumer>
__device__ __forceinline__ void consume_wgmma(uint8_t* smem, int stage_size, uint64_t* full, uint64_t* empty,
                                              int slabs, uint32_t* out) {
  using namespace bqmm::cuda;
  const int c = (threadIdx.x - kProducers) / 128, lane = threadIdx.x % 32, warp = (threadIdx.x - kProducers) / 32;
  const uint32_t w_rows = c * 64 * 128;
  float acc[32], p0[32], p1[32];
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
  auto issue = [&](float (&part)[32], int i) {
    const int st = i % kStages;
    mbarrier_wait(&full[st], (i / kStages) & 1);
    const uint32_t base = smem_addr(smem + st * stage_size);
    const uint64_t wd = sw128_desc(base + w_rows), ad = sw128_desc(base + kBoxTileBytes);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      wgmma_e4m3<64>(part, sw128_desc_step(wd, 32 * s), sw128_desc_step(ad, 32 * s), s == 0 ? 0u : 1u);
    wgmma_commit();
  };
  auto retire = [&](float (&part)[32], int i, auto pending) {
    const int st = i % kStages;
    const float* scales = reinterpret_cast<const float*>(smem + st * stage_size + kBoxTileBytes + 64 * kBoxBytes);
    const float w0 = scales[16 * (warp % 4) + lane / 4], w1 = scales[16 * (warp % 4) + 8 + lane / 4];
    wgmma_wait<decltype(pending)::value>();
    fence_operands(part);
    mbarrier_arrive(&empty[st]);
#pragma unroll
    for (int j = 0; j < 32; ++j) acc[j] = fmaf(part[j], (j / 2) % 2 ? w1 : w0, acc[j]);
  };
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  if constexpr (kConsumer == kWgmmaWait) {
    for (int i = 0; i < slabs; ++i) {
      issue(p0, i);
      retire(p0, i, Zero{});
    }
  } else {
    issue(p0, 0);
    int i = 0;
    for (; i + 2 < slabs; i += 2) {
      issue(p1, i + 1);
      retire(p0, i, One{});
      issue(p0, i + 2);
      retire(p1, i + 1, One{});
    }
    if (i + 1 < slabs) {
      issue(p1, i + 1);
      retire(p0, i, One{});
      retire(p1, i + 1, Zero{});
    } else {
      retire(p0, i, Zero{});
    }
  }
  float sum = 0.0f;
  for (int i = 0; i < 32; ++i) sum += acc[i];
  if (sum == 1234.5f) out[0] = 1;
}

// A stage: the boxes, then the scales (512 bytes; 768 with the activation's), rounded up to the swizzle's 1024-byte
// period so that every stage's boxes start on it.
__host__ __device__ constexpr int stage_bytes(int boxes, int act_rows, int scales) {
  return (boxes * (kBoxTileBytes + act_rows * kBoxBytes) + (scales ? 512 : 0) + 1023) / 1024 * 1024;
}

// 64 float16 activations (8 x 16 bytes) -> 64 e4m3 codes (4 x 16 bytes), times `inv`.
__device__ __forceinline__ void quantize64(const uint4 (&v)[8], float inv, uint4 (&q)[4]) {
  const uint32_t* h = reinterpret_cast<const uint32_t*>(v);
  uint32_t* out = reinterpret_cast<uint32_t*>(q);
#pragma unroll
  for (int w = 0; w < 16; ++w) {  // 4 codes a word: half2 pairs 2w and 2w + 1
    uint32_t pair[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      __half2 x;
      memcpy(&x, &h[2 * w + j], 4);
      const float2 f = __half22float2(x);
      uint16_t c;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(c) : "f"(f.y * inv), "f"(f.x * inv));
      pair[j] = c;
    }
    out[w] = pair[0] | (pair[1] << 16);
  }
}

// The amax of 64 float16 activations' magnitudes (finite inputs).
__device__ __forceinline__ float amax64(const uint4 (&v)[8]) {
  const uint32_t* h = reinterpret_cast<const uint32_t*>(v);
  __half2 m = __habs2(*reinterpret_cast<const __half2*>(&h[0]));
#pragma unroll
  for (int i = 1; i < 32; ++i) m = __hmax2(m, __habs2(*reinterpret_cast<const __half2*>(&h[i])));
  return fmaxf(__low2float(m), __high2float(m));
}

// Half h of activation row r (64 float16 in v) into the stage: dynamic, the row's amax
// (its two threads' combined) and its scale at `a_scales`; the codes times the inverse
// scale into the code tile at `codes` (row r's 16-byte chunk c at 16 (c ^ (r % 8))); then
// a proxy fence (the wgmma reads the codes through the async proxy) and the arrival on
// `full`.
template <int kQuantize>
__device__ __forceinline__ void quantize_into_stage(const uint4 (&v)[8], float inv, int r, int h, uint32_t codes,
                                                    uint32_t a_scales, uint64_t* full) {
  float row_inv = inv;
  if constexpr (dynamic(kQuantize)) {
    const float half_amax = amax64(v);
    const float amax = fmaxf(half_amax, __shfl_xor_sync(0xffffffffu, half_amax, 1));
    row_inv = amax > 0.0f ? 448.0f / amax : 0.0f;
    if (h == 0) asm volatile("st.shared.f32 [%0], %1;" ::"r"(a_scales + 4 * r), "f"(amax / 448.0f) : "memory");
  }
  uint4 q[4];
  quantize64(v, row_inv, q);
  const uint32_t row = codes + r * kBoxBytes;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row + 16 * ((4 * h + j) ^ (r % 8))), "r"(q[j].x),
                 "r"(q[j].y), "r"(q[j].z), "r"(q[j].w)
                 : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  mbarrier_arrive(full);
}

// The producer warpgroup with the activation quantized in it (the W8A8 tile-64 stage:
// [128 weight rows][128 B] [64 code rows][128 B, swizzled] [128 weight scales]
// [64 activation scales]): thread x takes half x % 2 of activation row x / 2 (64 K), its
// next slab's loads in flight while it quantizes this one. The stage's `full` takes the
// weight box's bytes, 128 arrivals when the weight scales land and 128 when the codes
// are written (after a proxy fence: the wgmma reads them through the async proxy).
template <int kStages, int kQuantize>
__device__ __forceinline__ void produce_quantized(const CUtensorMap* w_map, uint8_t* smem, int stage_size,
                                                  uint64_t* full, uint64_t* empty, int strip, int z, int slabs,
                                                  const float* scales, int64_t k_blocks, const __half* act,
                                                  int64_t k, float inv) {
  const int x = threadIdx.x, r = x / 2, h = x % 2;
  const __half* src = act + r * k + 64 * h;
  uint4 cur[8], next[8];
  auto load = [&](uint4 (&v)[8], int slab) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __ldg(reinterpret_cast<const uint4*>(src + slab * 128) + j);
  };
  load(cur, z * slabs);
  for (int i = 0; i < slabs; ++i) {
    const int st = i % kStages, slab = z * slabs + i;
    if (i + 1 < slabs) load(next, slab + 1);
    if (i >= kStages) mbarrier_wait(&empty[st], ((i / kStages) - 1) & 1);
    const uint32_t base = smem_addr(smem + st * stage_size);
    if (x == 0) {
      mbarrier_expect_tx(&full[st], kBoxTileBytes);
      tma_copy_box(w_map, base, &full[st], slab * kBoxBytes, strip * kStripRows);
    }
    const uint32_t w_scales = base + kBoxTileBytes + 64 * kBoxBytes;
    cp_async4(w_scales + 4 * x, scales + (int64_t{strip} * kStripRows + x) * k_blocks + slab, true);
    cp_async_mbarrier_arrive(&full[st]);
    quantize_into_stage<kQuantize>(cur, inv, r, h, base + kBoxTileBytes, w_scales + 512, &full[st]);
#pragma unroll
    for (int j = 0; j < 8; ++j) cur[j] = next[j];
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// The same from staged float16 boxes: a stage is [128 weight rows][128 B] [64 code rows]
// [128 B, swizzled] [128 weight scales] [64 activation scales] (to 1024 B) [2 boxes of 64
// rows x 64 float16, 128-byte swizzle] (one unswizzled box of 256-byte rows took 5x as
// long: its rows land on the same banks);
// thread 0 copies slab j's weight box (on `full`) and float16 box (on `staged`) S - 1
// slabs ahead of the one quantized (slab j's stage is freed once the consumers have
// issued slab j - S + 1, which needs this thread's codes of it: no further ahead).
template <int kStages, int kQuantize>
__device__ __forceinline__ void produce_staged(const CUtensorMap* w_map, const CUtensorMap* a16_map, uint8_t* smem,
                                               int stage_size, uint64_t* full, uint64_t* empty, uint64_t* staged_bars,
                                               int strip, int z, int slabs, const float* scales, int64_t k_blocks,
                                               float inv) {
  constexpr int kCodesOffset = kBoxTileBytes, kWScalesOffset = kCodesOffset + 64 * kBoxBytes;
  constexpr int kF16Offset = stage_bytes(1, 64, kPerRow);
  const int x = threadIdx.x, r = x / 2, h = x % 2;
  auto issue = [&](int j) {  // slab j's copies (every producer thread: its weight scale)
    const int st = j % kStages, slab = z * slabs + j;
    if (j >= kStages) mbarrier_wait(&empty[st], ((j / kStages) - 1) & 1);
    const uint32_t base = smem_addr(smem + st * stage_size);
    if (x == 0) {
      mbarrier_expect_tx(&full[st], kBoxTileBytes);
      tma_copy_box(w_map, base, &full[st], slab * kBoxBytes, strip * kStripRows);
      mbarrier_arrive_expect_tx(&staged_bars[st], 64 * 256);
      for (int half = 0; half < 2; ++half)  // two 128-byte-swizzled boxes of 64 K
        tma_copy_box(a16_map, base + kF16Offset + half * 64 * 128, &staged_bars[st], slab * 128 + 64 * half, 0);
    }
    cp_async4(base + kWScalesOffset + 4 * x, scales + (int64_t{strip} * kStripRows + x) * k_blocks + slab, true);
    cp_async_mbarrier_arrive(&full[st]);
  };
  for (int j = 0; j < kStages - 1 && j < slabs; ++j) issue(j);
  for (int i = 0; i < slabs; ++i) {
    const int st = i % kStages;
    const uint32_t base = smem_addr(smem + st * stage_size);
    mbarrier_wait(&staged_bars[st], (i / kStages) & 1);
    // This thread's 64 float16: row r of box h, 16-byte chunk c at 16 (c ^ (r % 8)).
    uint4 v[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uint32_t a = base + kF16Offset + h * 64 * 128 + r * 128 + 16 * (c ^ (r % 8));
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[c].x), "=r"(v[c].y), "=r"(v[c].z), "=r"(v[c].w)
                   : "r"(a));
    }
    quantize_into_stage<kQuantize>(v, inv, r, h, base + kCodesOffset, base + kWScalesOffset + 512, &full[st]);
    if (i + kStages - 1 < slabs) issue(i + kStages - 1);
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}


// Block (strip s, split z) streams slabs [z * slabs, (z + 1) * slabs) of strip s; a slab
// is kBoxes boxes of 128 bytes per row. Warps 0-3 produce (thread 0 the boxes), warp 4
// consumes. `scales`: this launch's copy of the weight scales, [n, k_blocks] (kPerRow) or
// [k_blocks, n] (kTransposed).
template <int kBoxes, int kStages, int kActRows, int kScales = kNoScales, int kConsumer = kTouch,
          int kQuantize = kCodes>
__global__ void __launch_bounds__(threads_of(kConsumer), 1)
    slab_kernel(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap a_map,
                const __grid_constant__ CUtensorMap a16_map, int split, int slabs, const float* scales, int64_t n,
                int64_t k_blocks, const __half* act16, float inv, uint32_t* out) {
  static_assert(kScales == kNoScales || kBoxes == 1, "one scale block a stage");
  static_assert(kConsumer == kTouch || (kBoxes == 1 && kActRows == 64 && kScales != kNoScales),
                "the wgmma consumers: the W8A8 GEMM's tile 64 stage");
  constexpr int kStageBytes = stage_bytes(kBoxes, kActRows, kScales) + (staged(kQuantize) ? 64 * 256 : 0);
  static_assert(kQuantize == kCodes || kConsumer == kWgmmaOverlap, "quantized in the producer: the kernel's form");
  constexpr int kFullArrivals = kQuantize ? 2 * kProducers : kScales ? kProducers : 1;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages], staged_bar[kStages];
  const int strip = blockIdx.x / split, z = blockIdx.x % split;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbarrier_init(&full[i], kFullArrivals);
      mbarrier_init(&empty[i], kConsumer == kTouch ? 1 : 256);
      mbarrier_init(&staged_bar[i], 1);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (staged(kQuantize) && threadIdx.x < kProducers) {
    produce_staged<kStages, kQuantize>(&w_map, &a16_map, smem, kStageBytes, full, empty, staged_bar, strip, z, slabs,
                                       scales, k_blocks, inv);
  } else if (kQuantize != kCodes && threadIdx.x < kProducers) {
    produce_quantized<kStages, kQuantize>(&w_map, smem, kStageBytes, full, empty, strip, z, slabs, scales, k_blocks,
                                          act16, k_blocks * 128, inv);
  } else if (threadIdx.x < kProducers && (kScales != kNoScales || threadIdx.x == 0)) {
    constexpr int kTmaBytes = kBoxes * (kBoxTileBytes + kActRows * kBoxBytes);
    const int x = threadIdx.x;
    for (int i = 0; i < slabs; ++i) {
      const int st = i % kStages;
      if (i >= kStages) mbarrier_wait(&empty[st], ((i / kStages) - 1) & 1);
      const uint32_t base = smem_addr(smem + st * kStageBytes);
      const int slab = z * slabs + i;
      const int k0 = slab * kBoxes * kBoxBytes;
      if (x == 0) {
        if constexpr (kScales != kNoScales) {
          mbarrier_expect_tx(&full[st], kTmaBytes);
        } else {
          mbarrier_arrive_expect_tx(&full[st], kTmaBytes);
        }
        for (int b = 0; b < kBoxes; ++b) {
          tma_copy_box(&w_map, base + b * kBoxTileBytes, &full[st], k0 + b * kBoxBytes, strip * kStripRows);
          if constexpr (kActRows > 0)
            tma_copy_box(&a_map, base + kBoxes * kBoxTileBytes + b * kActRows * kBoxBytes, &full[st], k0 + b * kBoxBytes,
                    0);
        }
      }
      if constexpr (kScales != kNoScales) {
        const uint32_t dst = base + kTmaBytes;
        const int64_t row0 = int64_t{strip} * kStripRows;
        if constexpr (kScales == kPerRow) {
          cp_async4(dst + 4 * x, scales + (row0 + x) * k_blocks + slab, true);
        } else if (x < 32) {
          cp_async16(dst + 16 * x, scales + slab * n + row0 + 4 * x, true);
        }
        cp_async_mbarrier_arrive(&full[st]);
      }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
  } else if (kConsumer != kTouch && threadIdx.x >= kProducers) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    consume_wgmma<kStages, kConsumer>(smem, kStageBytes, full, empty, slabs, out);
#endif
  } else if (threadIdx.x >= kProducers) {
    uint32_t acc = 0;
    for (int i = 0; i < slabs; ++i) {
      const int st = i % kStages;
      mbarrier_wait(&full[st], (i / kStages) & 1);
      acc += reinterpret_cast<const uint32_t*>(smem + st * kStageBytes)[threadIdx.x - kProducers];
      __syncwarp();
      if (threadIdx.x == kProducers) mbarrier_arrive(&empty[st]);
    }
    if (acc == stream_read::kNeverStored) out[0] = acc;
  }
}


PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// A [rows, k] byte matrix in boxes of box_rows x 128 bytes, 128-byte swizzle (the GEMMs').
CUtensorMap make_map(const uint8_t* base, int64_t rows, int64_t k, int box_rows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(k)};
  cuuint32_t box[2] = {static_cast<cuuint32_t>(kBoxBytes), static_cast<cuuint32_t>(box_rows)}, estr[2] = {1, 1};
  const CUresult r = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(base), dims, strides, box,
                               estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(r));
    exit(1);
  }
  return map;
}

struct Shape {
  int64_t n, k;
  int copies;
  const uint8_t* pool;
  const uint8_t* act;
  const __half* act16;  // 64 x k float16 activations (kQuantize)
  const float* scales;  // `copies` copies of n x k / 128 floats, rotating with the weight's
  uint32_t* out;
};

// Microseconds per launch: `launch(i)` 40 times back to back in one graph, the fastest of 3
// replays.
template <typename Launch>
double b2b_us(cudaStream_t stream, Launch launch) {
  return graph_b2b_us(stream, launch, /*warmup=*/5, /*repeat=*/40, /*reps=*/3);
}

double floor_us(const Shape& s, int sms, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(s.n * s.k);
  return b2b_us(stream, [&](int i) {
    stream_read::read_kernel<256><<<4 * sms, 256, 0, stream>>>(reinterpret_cast<const uint4*>(s.pool + (i % s.copies) * bytes),
                                              bytes / 16, s.out);
  });
}

CUtensorMap a16_map;  // the float16 activation [64, 8192], boxes of 64 rows x 64 (128-byte swizzle)

template <int kBoxes, int kStages, int kActRows, int kScales = kNoScales, int kConsumer = kTouch,
          int kQuantize = kCodes>
void run_form(const Shape& s, const std::vector<CUtensorMap>& w_maps, const CUtensorMap& a_map, int split,
              int blocks_per_sm, double floor, cudaStream_t stream) {
  auto kernel = slab_kernel<kBoxes, kStages, kActRows, kScales, kConsumer, kQuantize>;
  constexpr int kStageBytes = stage_bytes(kBoxes, kActRows, kScales) + (staged(kQuantize) ? 64 * 256 : 0);
  // At least the ring; more keeps further blocks off the SM (as the GEMMs' other stages do).
  const int smem = std::max(kStages * kStageBytes, 227 * 1024 / blocks_per_sm - 2048) + 1024;
  if (smem > 227 * 1024 + 1024) return;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int64_t slab_bytes = int64_t{kBoxes} * kBoxBytes;
  const int slabs = static_cast<int>(s.k / slab_bytes / split);
  const int blocks = static_cast<int>(s.n / kStripRows) * split;
  const int64_t k_blocks = s.k / 128;
  const double us = b2b_us(stream, [&](int i) {
    kernel<<<blocks, threads_of(kConsumer), smem, stream>>>(w_maps[i % s.copies], a_map, a16_map, split, slabs,
                                               s.scales + (i % s.copies) * s.n * k_blocks, s.n, k_blocks, s.act16,
                                               1.0f, s.out);
  });
  const double tbps = s.n * s.k / (us * 1e-6) / 1e12;
  const char* scales = kScales == kPerRow ? "per row [N, kb]" : kScales == kTransposed ? "[kb, N]" : "none";
  const char* consumer = kQuantize == kStatic    ? "quantized, st."
                         : kQuantize == kDynamic ? "quantized, dyn."
                         : kQuantize == kStagedStatic ? "staged q., st."
                         : kQuantize == kStagedDynamic ? "staged q., dyn."
                         : kConsumer == kTouch   ? "touch"
                         : kConsumer == kWgmmaWait ? "wgmma, wait"
                                                   : "wgmma, overlap";
  printf("  %d x 128 B a stage, %2d stages (%3d KB), act %3d rows, scales %-15s, %-14s, split %d, %3d blocks, %d/SM: "
         "%7.2f us %5.2f TB/s %3.0f %% of floor\n",
         kBoxes, kStages, kStages * kStageBytes / 1024, kActRows, scales, consumer, split, blocks, blocks_per_sm, us,
         tbps, 100.0 * floor / us);
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  const size_t pool_bytes = size_t{1} << 30;
  uint8_t *pool, *act;
  uint32_t* out;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 1, pool_bytes));
  CK(cudaMalloc(&act, 128 * 8192));
  CK(cudaMemset(act, 1, 128 * 8192));
  CK(cudaMalloc(&out, 4));
  float* scales;  // up to 4 copies of 28672 x 64 block scales
  const size_t scale_floats = size_t{4} * 28672 * 64;
  CK(cudaMalloc(&scales, scale_floats * sizeof(float)));
  {
    std::vector<float> host(scale_floats, 1.0f);
    CK(cudaMemcpy(scales, host.data(), scale_floats * sizeof(float), cudaMemcpyHostToDevice));
  }
  __half* act16;  // 64 x 8192 float16 in [-2, 2)
  {
    std::vector<__half> host(64 * 8192);
    std::mt19937 rng(5);
    for (auto& v : host) v = __float2half(static_cast<float>(rng() % 4096) / 1024.0f - 2.0f);
    CK(cudaMalloc(&act16, host.size() * sizeof(__half)));
    CK(cudaMemcpy(act16, host.data(), host.size() * sizeof(__half), cudaMemcpyHostToDevice));
    cuuint64_t dims[2] = {8192, 64}, strides[1] = {8192 * 2};
    cuuint32_t box[2] = {64, 64}, estr[2] = {1, 1};
    if (encoder()(&a16_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, act16, dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      printf("cuTensorMapEncodeTiled (float16 activation) failed\n");
      return 1;
    }
  }
  printf("%s, %d SMs, L2 %zu MB; back to back in a CUDA graph, cold (rotating copies > 4x L2)\n", prop.name, sms,
         l2 >> 20);
  for (const int64_t n : {int64_t{8192}, int64_t{28672}}) {
    const int64_t k = 8192;
    const size_t bytes = static_cast<size_t>(n * k);
    const int copies = static_cast<int>(std::min(pool_bytes / bytes, 4 * l2 / bytes + 1));
    Shape s{n, k, std::min(copies, 4), pool, act, act16, scales, out};
    std::vector<CUtensorMap> w_maps;
    for (int c = 0; c < copies; ++c) w_maps.push_back(make_map(pool + c * bytes, n, k, kStripRows));
    const CUtensorMap a64 = make_map(act, 64, k, 64), a128 = make_map(act, 128, k, 128);
    const double floor = floor_us(s, sms, stream);
    printf("%lld x %lld (%zu MB, %d copies): floor kernel %.2f us %.2f TB/s\n", static_cast<long long>(n),
           static_cast<long long>(k), bytes >> 20, copies, floor, bytes / (floor * 1e-6) / 1e12);
    // The W8A8 GEMM at M = 64 (tile 64: 6 stages of 24 KB) and its neighbours.
    run_form<1, 6, 0>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kPerRow>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kTransposed>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kPerRow, kWgmmaWait>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kPerRow, kWgmmaOverlap>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 8, 64, kPerRow, kWgmmaOverlap>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kPerRow, kWgmmaOverlap, kStatic>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 64, kPerRow, kWgmmaOverlap, kDynamic>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 4, 64, kPerRow, kWgmmaOverlap, kStagedStatic>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 5, 64, kPerRow, kWgmmaOverlap, kStagedStatic>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 5, 64, kPerRow, kWgmmaOverlap, kStagedDynamic>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 12, 0>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 8, 64>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<2, 4, 64>(s, w_maps, a64, 2, 1, floor, stream);
    run_form<1, 6, 0>(s, w_maps, a64, 1, 1, floor, stream);
    run_form<1, 6, 0>(s, w_maps, a64, 4, 2, floor, stream);
    run_form<1, 4, 64>(s, w_maps, a64, 4, 2, floor, stream);
    // M = 256 on tile 128 (6 stages of 32 KB), unsplit.
    run_form<1, 6, 128>(s, w_maps, a128, 1, 1, floor, stream);
    run_form<1, 6, 128, kPerRow>(s, w_maps, a128, 1, 1, floor, stream);
    run_form<1, 6, 128, kTransposed>(s, w_maps, a128, 1, 1, floor, stream);
    run_form<1, 6, 128>(s, w_maps, a128, 2, 1, floor, stream);
  }
  return 0;
}
