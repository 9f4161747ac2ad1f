// A probe for M = 9..16: is the activation as the mma's A operand, read from shared
// memory by ldmatrix, with the weight as its B operand decoded straight from the ORT layout
// (no prepack), faster than the GEMV's row group of 16, which runs far above the weight's
// streaming floor there? 4-bit and 8-bit integer codes and FP8 e4m3, float16 activations,
// blocks of 128. docs/PERF.md (Next steps) has the row group's times and what this probe
// gave.
// Standalone (CMake compiles it unlinked; no bqmm code but the profiler's ../stream_read.cuh):
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/rows16_probe tools/microbench/rows16_probe.cu && /tmp/rows16_probe [--full]
//
// (scripts/gpu_check.sh micro with MICRO=rows16_probe does the same, without --full.) Two
// weight streams: the next window's weights and scales in registers (one window in
// flight), or a ring of 3 or 4 windows per warp in shared memory filled by cp.async, the
// scales staged with the activations. --full adds blocks of 4 warps and the same kernel
// with two and four 16-row tiles (M = 32, 64: each decoded word multiplied with every
// tile), which asks the same of the fused GEMM's range (M = 17..64, the wgmma GEMM).
//
// The row group multiplies each decoded weight word with the activation pairs of two 8-row
// halves, each lane loading its activations (L1 / L2) and pairing them with PRMTs per
// column tile. Here one block of W warps owns W x 32 weight rows (columns of Y) over one
// slice of K; the block first copies its slice of the 16 activation rows into shared
// memory, once, in an order that makes every ldmatrix.x4 an mma A fragment whose k
// positions match the weight pairs the lop3 decode produces (below), so the activations
// cost a warp one ldmatrix per 16 rows x 16 k for all its 4 column subtiles, and no PRMT.
//
// K order (K is a reduction axis: any permutation applied to both operands keeps the
// sum). Lane (g, t) of a warp loads, for each of its 4 subtiles of 8 weight rows, row g's
// 16 bytes t of each 64-byte window: word w = codes 32t + 8w + j, j = 0..7 (ORT packing:
// code 2i in byte i's low nibble). The lop3 decode gives pairs P_i = (j = i, j = i + 4),
// i = 0..3. mma X of word w takes b0 = P_0, b1 = P_1, mma Y b0 = P_2, b1 = P_3, so the A
// fragment of X must hold at logical k 2t, 2t + 1 the codes 32t + 8w + {0, 4} and at
// 2t + 8, 2t + 9 the codes 32t + 8w + {1, 5}. Shared memory holds, per activation row and
// 128-code window, 16 groups of 8 halves: group 4w + i = codes 32t + 8w + i + 4e at half
// 2t + e (t = 0..3, e = 0..1). ldmatrix's 8 x 8 matrices: X = groups 4w + 0 (logical k
// 0..7) and 4w + 1 (k 8..15), Y = groups 4w + 2 and 4w + 3, rows 0..7 and 8..15 each.
//
// Numerics as the library's scale-on-result decode (float16, default zero points): each
// pair exact in float16 (4-bit q - 8: low nibbles (1024 + q) - 1032, high nibbles
// (1024 + 16 q) / 16 - 72 in one multiply-add; 8-bit q - 128: (1024 + q) - 1152; e4m3 by
// the conversion instruction), FP32 sums per window, times the block scale in float32.
// Every variant is checked against a float64 reference before it is timed.
//
// Split K: S blocks along y each take K / S and either add their FP32 sums into Y32 with
// atomics (not deterministic), or, as a kernel of the library would, form one
// thread-block cluster (S <= 8) whose ranks sum the blocks' tiles through distributed
// shared memory in rank order and store Y in float16. Timing: 100 runs back to
// back in one CUDA graph over copies of the weight (codes and scales) whose total exceeds
// 4x the L2, as bqmm-profile's b2b_us, beside the floor: the fastest pure read of the same
// bytes under the same timing (stream_read.cuh). Y32 is not zeroed between timed runs;
// each variant is also timed without the atomics (sums computed, not added). Each line
// gives the grid's blocks and the blocks the device holds at once (the occupancy API; the
// cluster form counts whole clusters): fewer resident than launched is more than one wave.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../stream_read.cuh"
#include "microbench.cuh"  // CK

namespace {

constexpr int kMaxRows = 64;     // activation rows of the host data (a kernel stages 16 kR)
constexpr int kBlock = 128;      // codes per scale block
constexpr int kPadBytes = 16;    // per activation row in shared memory: ldmatrix conflict-free

// The weight's codes: 4-bit and 8-bit integers (default zero points 8, 128; float16 scales)
// or FP8 e4m3 (float32 scales). A lane reads 16 bytes of a row's 64-byte window: 32 4-bit
// codes or 16 8-bit ones.
enum class Codes { kInt4, kInt8, kE4m3 };
template <Codes C>
struct Format {
  static constexpr int kBits = C == Codes::kInt4 ? 4 : 8;
  static constexpr int kWindowCodes = 64 * 8 / kBits;  // a 64-byte window of a row
  using Scale = std::conditional_t<C == Codes::kE4m3, float, __half>;
};
template <Codes C>
const char* format_name() {
  return C == Codes::kInt4 ? "4-bit" : C == Codes::kInt8 ? "8-bit" : "FP8 e4m3";
}
__device__ __forceinline__ float scale_float(__half s) { return __half2float(s); }
__device__ __forceinline__ float scale_float(float s) { return s; }

struct Problem {
  int m, n, k, splits;
  const uint8_t* codes;   // [n][k * bits / 8]
  const void* scales;     // [n][k / 128] of Format::Scale
  const __half* a;        // [m][k]
  float* y;               // [m][n], FP32 sums (atomics)
  bool store;             // false: the sums are not added to Y (timing of the rest alone)
  __half* yh;             // [m][n], the cluster-summed form's output
};

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t x, uint32_t mask, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "r"(mask), "r"(magic));
  return r;
}
__device__ __forceinline__ uint32_t h2_bits(__half2 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __half2 bits_h2(uint32_t v) { return *reinterpret_cast<__half2*>(&v); }

// 4-bit: one word's pairs (j, j + 4), j = 0..3, as exact q - 8 in float16.
__device__ __forceinline__ void decode_word(uint32_t q, uint32_t (&p)[4]) {
  const __half2 k1032 = bits_h2(0x64086408u), sixteenth = bits_h2(0x2C002C00u),
                neg72 = bits_h2(0xD480D480u);
  const uint32_t q_hi = q >> 8;
  p[0] = h2_bits(__hsub2(bits_h2(lop3_and_or(q, 0x000F000Fu, 0x64006400u)), k1032));
  p[1] = h2_bits(__hfma2(bits_h2(lop3_and_or(q, 0x00F000F0u, 0x64006400u)), sixteenth, neg72));
  p[2] = h2_bits(__hsub2(bits_h2(lop3_and_or(q_hi, 0x000F000Fu, 0x64006400u)), k1032));
  p[3] = h2_bits(__hfma2(bits_h2(lop3_and_or(q_hi, 0x00F000F0u, 0x64006400u)), sixteenth, neg72));
}

// 8-bit: one word's pairs (0, 1), (2, 3) as exact q - 128 in float16 (1024 + q by the
// magic byte, minus 1152).
__device__ __forceinline__ void decode_word8(uint32_t q, uint32_t (&p)[2]) {
  const __half2 k1152 = bits_h2(0x64806480u);
  p[0] = h2_bits(__hsub2(bits_h2(__byte_perm(q, 0x64646464u, 0x4140u)), k1152));
  p[1] = h2_bits(__hsub2(bits_h2(__byte_perm(q, 0x64646464u, 0x4342u)), k1152));
}
// e4m3: one word's pairs (0, 1), (2, 3) in float16 (exact).
__device__ __forceinline__ void decode_word_e4m3(uint32_t q, uint32_t (&p)[2]) {
  asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 %0, lo;\n\tcvt.rn.f16x2.e4m3x2 %1, hi;\n\t}"
      : "=r"(p[0]), "=r"(p[1])
      : "r"(q));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr));
}

// 16 bytes global -> shared past L1, asynchronously (cp.async groups).
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Thread-block clusters (SM90): every thread of the cluster's blocks arrives, shared-memory
// writes before it visible to the cluster after it; a block's rank; the cluster-window
// address of a shared-memory address of block `rank`, and a float loaded there.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ float load_cluster_f32(uint32_t addr, uint32_t rank) {
  uint32_t mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(addr), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(mapped) : "memory");
  return v;
}

// One window's loads of a lane: its 16 bytes of each subtile's row g, and the block scales
// of the two columns 2t, 2t + 1 of each subtile its mma results hold.
template <Codes C, int kSubtiles>
struct WindowLoads {
  uint4 w[kSubtiles];
  typename Format<C>::Scale s[kSubtiles][2];
};

// kR: 16-row tiles of activation rows (M <= 16 kR; rows >= M staged as zeros), each
// decoded weight word multiplied with all of them; kSubtiles: 8-row weight subtiles per
// warp. kStages: 0, the next window's weights and scales in registers (one window in
// flight); else each warp's ring of kStages windows in shared memory, filled by cp.async
// kStages - 1 windows ahead (every lane reads back only the bytes it copied, so its own
// wait_group is all the ordering needed), and the block's scales staged in shared memory
// with the activations. kCluster: the K split's blocks are one thread-block cluster along y
// that sums their FP32 tiles through distributed shared memory in rank order
// (deterministic) and stores Y in float16, as a kernel of the library would; else FP32
// atomics into Y32.
//
// K order of 8-bit and e4m3 codes: word w of lane t's 16 bytes = codes 16t + 4w + j, j =
// 0..3, decoded to pairs (0, 1), (2, 3): one mma per word, b0 = (0, 1) at logical k 2t,
// 2t + 1 and b1 = (2, 3) at 2t + 8, 2t + 9. Shared memory holds per row and 64-code window
// 4 groups of 16 halves (32 bytes): group w's halves 2t + e = codes 16t + 4w + e, halves
// 8 + 2t + e = codes 16t + 4w + 2 + e; its ldmatrix.x4 is the word's A fragment.
template <Codes C, int kWarps, int kR, int kSubtiles, int kStages, bool kCluster>
__global__ void __launch_bounds__(kWarps * 32) rows16_kernel(Problem p) {
  using F = Format<C>;
  using Scale = typename F::Scale;
  constexpr int kRows = 16 * kR;
  constexpr int kWindowHalves = F::kWindowCodes;  // activation halves a row and window
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k_slice = p.k / p.splits, k0 = blockIdx.y * k_slice;
  const int windows = k_slice / F::kWindowCodes;
  const int row_bytes = k_slice * 2 + kPadBytes;
  const int n_warp = (blockIdx.x * kWarps + warp) * 8 * kSubtiles;
  const int k_blocks = p.k / kBlock;

  // Rows past N are clamped (their results are not stored).
  const Scale* scales = static_cast<const Scale*>(p.scales);
  const uint8_t* wrow[kSubtiles];
  const Scale* srow[kSubtiles][2];
#pragma unroll
  for (int s = 0; s < kSubtiles; ++s) {
    const int n = min(n_warp + 8 * s + g, p.n - 1);
    wrow[s] = p.codes + static_cast<size_t>(n) * (p.k / 8 * F::kBits) + k0 / 8 * F::kBits + 16 * t;
#pragma unroll
    for (int e = 0; e < 2; ++e)
      srow[s][e] = scales + static_cast<size_t>(min(n_warp + 8 * s + 2 * t + e, p.n - 1)) * k_blocks +
                   k0 / kBlock;
  }
  auto block_of = [&](int win) { return win * F::kWindowCodes / kBlock; };  // in the slice
  auto load = [&](int win, WindowLoads<C, kSubtiles>& l) {
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      l.w[s] = stream_read::load_stream(reinterpret_cast<const uint4*>(wrow[s] + 64 * win));
      l.s[s][0] = srow[s][0][block_of(win)];
      l.s[s][1] = srow[s][1][block_of(win)];
    }
  };
  WindowLoads<C, kSubtiles> buf[2];
  // The ring (kStages > 0): after the activations and the block's scales.
  const int act_bytes = kRows * row_bytes;
  const int block_cols = kWarps * 8 * kSubtiles;
  Scale* block_scales = reinterpret_cast<Scale*>(smem + act_bytes);  // [block col][window]
  uint8_t* ring = smem + act_bytes + (block_cols * windows * sizeof(Scale) + 15) / 16 * 16 +
                  warp * kStages * kSubtiles * 512 + lane * 16;
  constexpr int kRing = kStages > 0 ? kStages : 1;
  auto copy_window = [&](int win) {
    if (win < windows) {
#pragma unroll
      for (int s = 0; s < kSubtiles; ++s)
        copy_async16(ring + ((win % kRing) * kSubtiles + s) * 512, wrow[s] + 64 * win);
    }
    commit_copies();  // empty past the last window: the group count stays uniform
  };
  if constexpr (kStages == 0) {
    load(0, buf[0]);  // in flight while the activations are staged
  } else {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) copy_window(i);
    const int n_block = blockIdx.x * block_cols;
    for (int i = threadIdx.x; i < block_cols * windows; i += kWarps * 32) {
      const int c = i / windows, win = i % windows;
      block_scales[i] = scales[static_cast<size_t>(min(n_block + c, p.n - 1)) * k_blocks + k0 / kBlock + block_of(win)];
    }
  }

  // Stage the block's slice of the activations, a thread unit 8 of a row's activations,
  // 8u .. 8u + 7 of a window. 4-bit: u = 4t' + w', its pairs (j, j + 4) to group 4w' + j
  // at slot t'. 8-bit and e4m3: u = 2t' + h, pairs (0, 1), (2, 3) to group 2h at halves
  // 2t' and 8 + 2t', pairs (4, 5), (6, 7) to group 2h + 1 likewise.
  const int units = kRows * k_slice / 8;
  constexpr int kUnitsPerWindow = kWindowHalves / 8;
  for (int i = threadIdx.x; i < units; i += kWarps * 32) {
    const int row = i / (k_slice / 8), c8 = i % (k_slice / 8);
    const int win = c8 / kUnitsPerWindow, u = c8 % kUnitsPerWindow;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < p.m) v = *reinterpret_cast<const uint4*>(p.a + static_cast<size_t>(row) * p.k + k0 + 8 * c8);
    uint8_t* window = smem + row * row_bytes + win * kWindowHalves * 2;
    if constexpr (C == Codes::kInt4) {
      uint32_t* dst = reinterpret_cast<uint32_t*>(window + (u % 4) * 64 + (u / 4) * 4);
      dst[0] = __byte_perm(v.x, v.z, 0x5410u);   // (0, 4) -> group 4w' + 0
      dst[4] = __byte_perm(v.x, v.z, 0x7632u);   // (1, 5) -> group 4w' + 1
      dst[8] = __byte_perm(v.y, v.w, 0x5410u);   // (2, 6)
      dst[12] = __byte_perm(v.y, v.w, 0x7632u);  // (3, 7)
    } else {
      uint32_t* dst = reinterpret_cast<uint32_t*>(window + (u % 2) * 64 + (u / 2) * 4);
      dst[0] = v.x;   // (0, 1) -> group 2h, halves 2t'
      dst[4] = v.y;   // (2, 3) -> group 2h, halves 8 + 2t'
      dst[8] = v.z;   // (4, 5) -> group 2h + 1
      dst[12] = v.w;  // (6, 7)
    }
  }
  __syncthreads();

  // ldmatrix row addresses: matrix j = lane / 8 (rows 8 (j % 2) + lane % 8, group j / 2 of
  // the pair), X at groups 4w + 0, 1 and Y at 4w + 2, 3.
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int j = lane / 8;
  const uint32_t a_lane = smem_base + ((j % 2) * 8 + lane % 8) * row_bytes + (j / 2) * 16;

  float acc[kSubtiles][kR][4] = {};
  auto multiply = [&](int win, const WindowLoads<C, kSubtiles>& l) {
    float part[kSubtiles][kR][4] = {};
    const uint32_t a_window = a_lane + win * kWindowHalves * 2;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if constexpr (C == Codes::kInt4) {
        uint32_t ax[kR][4], ay[kR][4];
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          ldmatrix_x4(ax[r], a_window + r * 16 * row_bytes + w * 64);
          ldmatrix_x4(ay[r], a_window + r * 16 * row_bytes + w * 64 + 32);
        }
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          const uint32_t q = w == 0 ? l.w[s].x : w == 1 ? l.w[s].y : w == 2 ? l.w[s].z : l.w[s].w;
          uint32_t pr[4];
          decode_word(q, pr);
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            mma16816(part[s][r], ax[r], pr[0], pr[1]);
            mma16816(part[s][r], ay[r], pr[2], pr[3]);
          }
        }
      } else {
        uint32_t a[kR][4];
#pragma unroll
        for (int r = 0; r < kR; ++r) ldmatrix_x4(a[r], a_window + r * 16 * row_bytes + w * 32);
#pragma unroll
        for (int s = 0; s < kSubtiles; ++s) {
          const uint32_t q = w == 0 ? l.w[s].x : w == 1 ? l.w[s].y : w == 2 ? l.w[s].z : l.w[s].w;
          uint32_t pr[2];
          if constexpr (C == Codes::kInt8) {
            decode_word8(q, pr);
          } else {
            decode_word_e4m3(q, pr);
          }
#pragma unroll
          for (int r = 0; r < kR; ++r) mma16816(part[s][r], a[r], pr[0], pr[1]);
        }
      }
    }
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s) {
      const float s0 = scale_float(l.s[s][0]), s1 = scale_float(l.s[s][1]);
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        acc[s][r][0] = fmaf(part[s][r][0], s0, acc[s][r][0]);
        acc[s][r][1] = fmaf(part[s][r][1], s1, acc[s][r][1]);
        acc[s][r][2] = fmaf(part[s][r][2], s0, acc[s][r][2]);
        acc[s][r][3] = fmaf(part[s][r][3], s1, acc[s][r][3]);
      }
    }
  };
  if constexpr (kStages == 0) {
    // Double buffering: window win + 1's loads in flight while win is multiplied.
#pragma unroll 1
    for (int win = 0; win < windows; win += 2) {
      if (win + 1 < windows) load(win + 1, buf[1]);
      multiply(win, buf[0]);
      if (win + 1 >= windows) break;
      if (win + 2 < windows) load(win + 2, buf[0]);
      multiply(win + 1, buf[1]);
    }
  } else {
    const int c_warp = warp * 8 * kSubtiles;
#pragma unroll 1
    for (int win = 0; win < windows; ++win) {
      wait_copies<kStages - 2>();  // this lane's copies of window win have landed
      WindowLoads<C, kSubtiles> l;
#pragma unroll
      for (int s = 0; s < kSubtiles; ++s) {
        l.w[s] = *reinterpret_cast<const uint4*>(ring + ((win % kStages) * kSubtiles + s) * 512);
#pragma unroll
        for (int e = 0; e < 2; ++e) l.s[s][e] = block_scales[(c_warp + 8 * s + 2 * t + e) * windows + win];
      }
      copy_window(win + kStages - 1);  // into the slot window win - 1 left
      multiply(win, l);
    }
  }

  if constexpr (kCluster) {
    // The block's [rows][block_cols] FP32 sums over the (no longer read) activations; then
    // rank r adds columns r / S .. (r + 1) / S of the block across every rank, in rank
    // order, and stores them; the second barrier keeps each block's sums alive until read.
    float* sums = reinterpret_cast<float*>(smem);
    const int block_cols = kWarps * 8 * kSubtiles, c_warp = warp * 8 * kSubtiles;
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s)
#pragma unroll
      for (int r = 0; r < kR; ++r)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sums[(16 * r + g + 8 * (e / 2)) * block_cols + c_warp + 8 * s + 2 * t + e % 2] = acc[s][r][e];
    cluster_sync();
    const int ranks = gridDim.y, per = block_cols / ranks, rank = static_cast<int>(cluster_rank());
    const uint32_t sums_addr = static_cast<uint32_t>(__cvta_generic_to_shared(sums));
    const int n_block = blockIdx.x * block_cols;
    for (int i = threadIdx.x; i < kRows * per; i += kWarps * 32) {
      const int row = i / per, c = rank * per + i % per;
      float v = 0;
      for (int q = 0; q < ranks; ++q) v += load_cluster_f32(sums_addr + 4 * (row * block_cols + c), q);
      if (row < p.m && n_block + c < p.n) p.yh[static_cast<size_t>(row) * p.n + n_block + c] = __float2half(v);
    }
    cluster_sync();
  } else {
    // C fragment: rows g, g + 8 of each row tile (activation rows), columns 2t, 2t + 1 of
    // each subtile.
#pragma unroll
    for (int s = 0; s < kSubtiles; ++s)
#pragma unroll
      for (int r = 0; r < kR; ++r)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * r + g + 8 * (e / 2), col = n_warp + 8 * s + 2 * t + e % 2;
          if (row < p.m && col < p.n && (p.store || acc[s][r][e] == 1234.5f))
            atomicAdd(p.y + static_cast<size_t>(row) * p.n + col, acc[s][r][e]);
        }
  }
}

constexpr int kStreamThreads = 256;

struct Weights {  // copies of one weight blob: codes, then scales
  uint8_t* pool;
  size_t bytes, scale_offset;
  int copies;
};

template <Codes C, int kWarps, int kR, int kS, int kStages, bool kCluster>
struct Variant {
  static constexpr int kCols = kWarps * 8 * kS;  // weight rows (Y columns) a block
  // Dynamic shared memory: the activations (the cluster's FP32 sums reuse their bytes: at
  // least [16 kR][kCols]); with a ring, the block's scales a window and the warps' rings.
  static int smem_bytes(int k, int splits) {
    using F = Format<C>;
    const int sums = kCluster ? 16 * kR * kCols * 4 : 0;
    const int act = std::max(16 * kR * (k / splits * 2 + kPadBytes), sums);
    if (kStages == 0) return act;
    const int windows = k / splits / F::kWindowCodes;
    const int scales = static_cast<int>((kCols * windows * sizeof(typename F::Scale) + 15) / 16 * 16);
    return act + scales + kWarps * kStages * kS * 512;
  }
  static dim3 grid(const Problem& p) { return dim3((p.n + kCols - 1) / kCols, p.splits); }
  // The cluster form's launch: the K split's blocks one cluster along y. `attr` outlives it.
  static cudaLaunchConfig_t cluster_config(const Problem& p, cudaStream_t stream, cudaLaunchAttribute* attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid(p);
    cfg.blockDim = dim3(kWarps * 32);
    cfg.dynamicSmemBytes = smem_bytes(p.k, p.splits);
    cfg.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = 1;
    attr->val.clusterDim.y = p.splits;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
  }
  static void launch(const Problem& p, cudaStream_t stream) {
    if constexpr (!kCluster) {
      rows16_kernel<C, kWarps, kR, kS, kStages, false><<<grid(p), kWarps * 32, smem_bytes(p.k, p.splits), stream>>>(p);
    } else {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg = cluster_config(p, stream, &attr);
      CK(cudaLaunchKernelEx(&cfg, rows16_kernel<C, kWarps, kR, kS, kStages, true>, p));
    }
  }
  // Blocks the device holds at once (whole clusters for the cluster form): below the grid,
  // the launch runs in more than one wave.
  static int resident_blocks(const Problem& p, int num_sms) {
    if constexpr (!kCluster) {
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rows16_kernel<C, kWarps, kR, kS, kStages, false>,
                                                       kWarps * 32, smem_bytes(p.k, p.splits)));
      return per_sm * num_sms;
    } else {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg = cluster_config(p, nullptr, &attr);
      int clusters = 0;
      CK(cudaOccupancyMaxActiveClusters(&clusters, rows16_kernel<C, kWarps, kR, kS, kStages, true>, &cfg));
      return clusters * p.splits;
    }
  }
};

Problem problem_of(const Weights& w, int copy, int m, int n, int k, int splits, const __half* a,
                   float* y, __half* yh, bool store = true) {
  const uint8_t* base = w.pool + static_cast<size_t>(copy % w.copies) * w.bytes;
  return Problem{m, n, k, splits, base, base + w.scale_offset, a, y, store, yh};
}

// Microseconds per run, 100 runs back to back in one graph after 10 warm-up runs.
template <typename Launch>
double b2b_us(cudaStream_t stream, Launch launch) {
  return graph_b2b_us(stream, launch, /*warmup=*/10, /*repeat=*/100, /*reps=*/1);
}

// e4m3 (bias 7, no infinities, 0x7F / 0xFF NaN) as a float.
float e4m3_to_float(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 7;
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + man / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

// Host data of one shape: codes (random; e4m3 without the NaN codes), scales in (0.001,
// 0.01) as float16 (integer codes) or float32 (e4m3), float16 activations in (-1, 1).
struct HostCase {
  Codes codes_kind;
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // as stored
  std::vector<__half> a;
  int bits() const { return codes_kind == Codes::kInt4 ? 4 : 8; }
  size_t scale_bytes() const { return scales.size() * (codes_kind == Codes::kE4m3 ? 4 : 2); }
  // The weight of (row n, column kk) before its block scale.
  double weight(int n, int k, int kk) const {
    if (codes_kind == Codes::kInt4) {
      const uint8_t byte = codes[static_cast<size_t>(n) * (k / 2) + kk / 2];
      return (kk % 2 == 0 ? byte & 0xF : byte >> 4) - 8;
    }
    const uint8_t byte = codes[static_cast<size_t>(n) * k + kk];
    return codes_kind == Codes::kInt8 ? byte - 128.0 : e4m3_to_float(byte);
  }
};
HostCase make_case(Codes kind, int m, int n, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  HostCase h;
  h.codes_kind = kind;
  h.codes.resize(static_cast<size_t>(n) * k / 8 * h.bits());
  for (auto& c : h.codes) {
    c = static_cast<uint8_t>(rng());
    if (kind == Codes::kE4m3 && (c & 0x7F) == 0x7F) c ^= 1;
  }
  h.scales.resize(static_cast<size_t>(n) * (k / kBlock));
  std::uniform_real_distribution<float> sd(0.001f, 0.01f), ad(-1.0f, 1.0f);
  for (auto& s : h.scales) s = kind == Codes::kE4m3 ? sd(rng) : __half2float(__float2half(sd(rng)));
  h.a.resize(static_cast<size_t>(m) * k);
  for (auto& v : h.a) v = __float2half(ad(rng));
  return h;
}

// Max |y - reference| / max |reference| over every `stride`-th column (float64 reference).
double check(const HostCase& h, const std::vector<float>& y, int m, int n, int k, int stride) {
  double max_err = 0, max_ref = 0;
  for (int col = 0; col < n; col += stride)
    for (int row = 0; row < m; ++row) {
      double ref = 0;
      for (int kb = 0; kb < k / kBlock; ++kb) {
        double part = 0;
        for (int kk = kb * kBlock; kk < (kb + 1) * kBlock; ++kk)
          part += h.weight(col, k, kk) * static_cast<double>(__half2float(h.a[static_cast<size_t>(row) * k + kk]));
        ref += part * h.scales[static_cast<size_t>(col) * (k / kBlock) + kb];
      }
      max_err = std::max(max_err, std::fabs(y[static_cast<size_t>(row) * n + col] - ref));
      max_ref = std::max(max_ref, std::fabs(ref));
    }
  return max_err / std::max(max_ref, 1e-30);
}

template <Codes C, int kWarps, int kR, int kS, int kStages, bool kCluster = false>
void run_variant(const Weights& w, const HostCase& h, int m, int n, int k, int splits,
                 const __half* a, float* y, __half* yh, cudaStream_t stream, double floor) {
  using V = Variant<C, kWarps, kR, kS, kStages, kCluster>;
  if (k % (splits * 2 * Format<C>::kWindowCodes) != 0 || (k / splits) % kBlock != 0)
    return;                                   // windows per slice even, whole blocks
  if (kCluster && splits > 8) return;         // the portable cluster size
  const int smem = V::smem_bytes(k, splits);
  if (smem > 227 * 1024) return;
  CK(cudaFuncSetAttribute(rows16_kernel<C, kWarps, kR, kS, kStages, kCluster>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  // Correctness: one run into zeroed sums, against the float64 reference.
  CK(cudaMemsetAsync(y, 0, sizeof(float) * m * n, stream));
  V::launch(problem_of(w, 0, m, n, k, splits, a, y, yh), stream);
  CK(cudaStreamSynchronize(stream));
  CK(cudaGetLastError());
  std::vector<float> hy(static_cast<size_t>(m) * n);
  if (kCluster) {
    std::vector<__half> hh(hy.size());
    CK(cudaMemcpy(hh.data(), yh, sizeof(__half) * hh.size(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < hh.size(); ++i) hy[i] = __half2float(hh[i]);
  } else {
    CK(cudaMemcpy(hy.data(), y, sizeof(float) * hy.size(), cudaMemcpyDeviceToHost));
  }
  const double err = check(h, hy, m, n, k, n >= 4096 ? 61 : 1);
  const double bound = kCluster ? 2e-3 : 1e-4;  // float16 output: its rounding
  double us[2];
  for (int store = kCluster ? 1 : 0; store < 2; ++store)
    us[store] = b2b_us(stream, [&](int i) {
      V::launch(problem_of(w, i, m, n, k, splits, a, y, yh, store == 1), stream);
    });
  char rest[64] = "";
  if (!kCluster) snprintf(rest, sizeof(rest), " (without the atomics %7.2f us)", us[0]);
  int num_sms = 0;
  CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  const Problem shape = problem_of(w, 0, m, n, k, splits, a, y, yh);
  printf("  M = %2d  warps %d rows %2d cols %3d %-6s %-7s split %2d (K slice %5d, %4d blocks, %4d resident, smem %3d KB): "
         "%7.2f us %5.1f %% of floor %4.0f TFLOP/s%s  rel err %.1e%s\n",
         m, kWarps, 16 * kR, V::kCols, kStages == 0 ? "regs" : kStages == 3 ? "ring 3" : "ring 4",
         kCluster ? "cluster" : "atomics", splits, k / splits, static_cast<int>(V::grid(shape).x) * splits,
         V::resident_blocks(shape, num_sms), smem / 1024, us[1], 100 * floor / us[1],
         2.0 * m * n * k / (us[1] * 1e6), rest, err, err < bound ? "" : "  WRONG");
}

// One shape and code format: its weight copies, the floor, then every variant.
template <Codes C>
void run_shape(int n, int k, bool full, const cudaDeviceProp& prop, cudaStream_t stream,
               uint32_t* out) {
  const HostCase h = make_case(C, kMaxRows, n, k, 1234u + n + k);
  const size_t code_bytes = h.codes.size();
  const size_t scale_offset = (code_bytes + 255) / 256 * 256;
  const size_t blob = (scale_offset + h.scale_bytes() + 255) / 256 * 256;
  const int copies = static_cast<int>(4 * static_cast<size_t>(prop.l2CacheSize) / blob + 2);
  Weights w{nullptr, blob, scale_offset, copies};
  CK(cudaMalloc(&w.pool, blob * copies));
  std::vector<uint8_t> stored(h.scale_bytes());
  for (size_t i = 0; i < h.scales.size(); ++i) {
    if (C == Codes::kE4m3) {
      std::memcpy(stored.data() + 4 * i, &h.scales[i], 4);
    } else {
      const __half v = __float2half(h.scales[i]);
      std::memcpy(stored.data() + 2 * i, &v, 2);
    }
  }
  for (int c = 0; c < copies; ++c) {
    CK(cudaMemcpy(w.pool + c * blob, h.codes.data(), code_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w.pool + c * blob + scale_offset, stored.data(), stored.size(), cudaMemcpyHostToDevice));
  }
  __half* a;
  float* y;
  __half* yh;
  CK(cudaMalloc(&a, h.a.size() * 2));
  CK(cudaMemcpy(a, h.a.data(), h.a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&y, sizeof(float) * kMaxRows * n));
  CK(cudaMalloc(&yh, sizeof(__half) * kMaxRows * n));
  // The floor: the weight blob's bytes (codes and scales) read by the fastest load shape.
  const size_t words = (scale_offset + h.scale_bytes()) / 16;
  double floor = 1e30;
  for (int per_sm : {4, 8})
    floor = std::min(floor, b2b_us(stream, [&](int i) {
      stream_read::read_kernel<kStreamThreads><<<per_sm * prop.multiProcessorCount, kStreamThreads, 0, stream>>>(
          reinterpret_cast<const uint4*>(w.pool + static_cast<size_t>(i % copies) * blob), words, out);
    }));
  printf("\n%d x %d (N x K), %s, blocks of 128, float16, %d copies of %.1f MB: floor %.2f us\n", n,
         k, format_name<C>(), copies, blob / 1e6, floor);
  for (const int splits : {4, 8, 16}) {
    run_variant<C, 8, 1, 4, 0>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
    if constexpr (C == Codes::kInt4) run_variant<C, 8, 1, 4, 3>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
    run_variant<C, 8, 1, 4, 4>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
    run_variant<C, 8, 1, 4, 4>(w, h, 9, n, k, splits, a, y, yh, stream, floor);
    run_variant<C, 8, 1, 4, 0, true>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
    run_variant<C, 8, 1, 4, 4, true>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
  }
  if constexpr (C == Codes::kInt4) {
    if (full) {
      for (const int splits : {4, 8, 16}) {
        run_variant<C, 4, 1, 4, 0>(w, h, 16, n, k, splits, a, y, yh, stream, floor);
        run_variant<C, 8, 1, 4, 0>(w, h, 9, n, k, splits, a, y, yh, stream, floor);
        run_variant<C, 8, 2, 4, 0>(w, h, 32, n, k, splits, a, y, yh, stream, floor);
        run_variant<C, 4, 2, 4, 0>(w, h, 32, n, k, splits, a, y, yh, stream, floor);
        run_variant<C, 8, 2, 4, 4>(w, h, 32, n, k, splits, a, y, yh, stream, floor);
      }
      for (const int splits : {8, 16, 32}) {
        run_variant<C, 8, 4, 2, 0>(w, h, 64, n, k, splits, a, y, yh, stream, floor);
        run_variant<C, 4, 4, 4, 0>(w, h, 64, n, k, splits, a, y, yh, stream, floor);
      }
    }
  }
  CK(cudaFree(w.pool));
  CK(cudaFree(a));
  CK(cudaFree(y));
  CK(cudaFree(yh));
}

}  // namespace

int main(int argc, char** argv) {
  // --full: also, for 4-bit, blocks of 4 warps, M = 9 on register loads, 32 and 64 rows.
  const bool full = argc > 1 && std::string(argv[1]) == "--full";
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  uint32_t* out;
  CK(cudaMalloc(&out, 4));
  struct Shape { int n, k; };
  for (const Shape sh : {Shape{8192, 8192}, Shape{14336, 4096}, Shape{4096, 14336}, Shape{28672, 8192}}) {
    run_shape<Codes::kInt4>(sh.n, sh.k, full, prop, stream, out);
    run_shape<Codes::kInt8>(sh.n, sh.k, full, prop, stream, out);
    run_shape<Codes::kE4m3>(sh.n, sh.k, full, prop, stream, out);
  }
  return 0;
}
