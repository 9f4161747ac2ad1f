// W8A8 on FP8 tensor cores (SM90, built for sm_90a): Fp8WeightMatMul with its activation
// quantized to e4m3, both operands multiplied as e4m3 by wgmma, FP32 accumulation, the
// scales applied per K block in FP32 (DeepGEMM-style promotion):
//
//   dynamic: Y[m, n] = sum_b sa[m, b] * sw[n, b] * sum_{k in b} q[m, k] * w[n, k] + bias[n]
//   static:  Y[m, n] = a_scale * sum_b sw[n, b] * sum_{k in b} q[m, k] * w[n, k] + bias[n]
//
// q = e4m3_satfinite_rne(A * inv) as the contract's QDQ, written with its scales by the
// quantize pass before this kernel (w8a8_wgmma.cu: codes [M, K] bytes, K a multiple of
// 16; dynamic scales [k_blocks, m_pad] floats, column b of the scale matrix contiguous).
// Unlike the QDQ + dequant path, q * s is never rounded to T (the contract allows it: more
// precise).
//
// Block: as fused_wgmma.cuh (read it first): warpgroup 0 the producer, 1 and 2 the
// consumers; consumer c owns weight rows 64 c .. 64 c + 63 of the block's 128 (the wgmma's
// M), all kTileM = 32, 64 or 128 activation rows (its N; the planner's w8a8_tile_m: the
// smallest holding M). A slab is 128 K: 128 bytes of every row
// of both operands, each stored [rows][128 bytes] with 16-byte chunk c of row r at
// 16 (c ^ (r % 8)), the wgmma's K-major 128-byte-swizzled layout, so both operands are read
// by descriptor (no register operand, no decode, no K permutation) and copied by TMA (one
// box per operand, the tensor maps' SWIZZLE_128B being this layout). A stage also holds
// the slab's block scales of the tile's weight rows and (dynamic) activation rows.
//
// Consumer. Blocks of one slab (block_size 128, the checkpoints' size): two partial-sum
// buffers p0, p1, slab i in p[i % 2]. Per slab: wait on `full`; issue its 4 wgmma
// m64 x kTileM x k32 (the first overwriting the buffer) as one commit group; then retire the slab
// before it: read its weight rows' scales, wait until only the new group is in flight,
// fold acc += part * sw[n, b] (* sa[m, b]), release its stage on `empty`. A warpgroup's
// fold thus runs while its next slab's wgmmas do. The loop is unrolled by two with
// exactly one group in flight at its top: ptxas then sees which buffer each wait frees
// (with the tail's branch inside the loop, or the buffer picked by the slab's parity, it
// serializes every wgmma: C7514). Blocks of
// several slabs: one buffer summing a block's slabs, waited for at every slab, folded at
// the block's (or the split's) last.
//
// K halves (kHalves, the planner's tile_n = kKHalvesTileN; core/gemm_plan.h says when):
// the block owns 64 weight rows, and consumer c the c-th half of the block's K blocks (the
// first half the larger where their count is odd). Stage i holds slab i of each half: two
// 64-row weight boxes where the 128-row box would be (consumer c's rows at the same place
// as above) and two activation boxes, each half's scales beside them; the second half's
// copies are left out past its end, and consumer 1 then only releases the stage. At the
// end consumer 1 hands its sums to consumer 0 through shared memory, which stores the
// tile: no K split between blocks, so no cluster and no planes.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/gemm_plan.h"
#include "cuda/gemm/fused_gemm.cuh"  // cp_async16, cp_async_*, gemm_block_tile
#include "cuda/gemm/wgmma.cuh"
#include "cuda/gemv/tma.cuh"  // tensor maps, TMA copies, mbarriers

namespace bqmm::cuda {

// The geometry of a tile of kTileM activation rows (the wgmma's N; kW8a8SlabK, the stages
// and the tile choice are the planner's, in core/gemm_plan.h). A stage: the weight slab
// (kHalves: a 64-row slab of each half), the activation slab (kHalves: one of each half),
// the scales (kHalves: each half's).
template <int kTileM, bool kHalves>
struct W8A8Stage {
  static constexpr int kParts = kHalves ? 2 : 1;
  static constexpr int kTileN = kHalves ? kKHalvesTileN : kGemmTileN;  // weight rows per block
  static constexpr int kWeightBoxBytes = kTileN * static_cast<int>(kW8a8SlabK);
  static constexpr int kActBoxBytes = kTileM * static_cast<int>(kW8a8SlabK);
  static constexpr int kWeightBytes = kGemmTileN * static_cast<int>(kW8a8SlabK);  // kParts boxes
  static constexpr int kActBytes = kParts * kActBoxBytes;
  static constexpr int kAScalesOffset = kWeightBytes + kActBytes;                // dynamic: kTileM floats a part
  static constexpr int kWScalesOffset = kAScalesOffset + kParts * kTileM * 4;  // kGemmTileN floats
  static constexpr int kBytes = static_cast<int>(w8a8_stage_bytes(kTileM, kTileN));
  static constexpr int kStages = w8a8_stages(kTileM, kTileN);
  static_assert(kParts * kWeightBoxBytes == kWeightBytes, "the parts' weight boxes fill the weight slab");
  static_assert(kWScalesOffset + kGemmTileN * 4 <= kBytes && kBytes % kWgmmaAlignBytes == 0,
                "a stage holds both slabs and the scales, on a swizzle-atom boundary");
  static_assert(kTileM % 32 == 0 && kTileM <= kW8a8TileM, "wgmma N of 32, 64 or 128; scales padded to 128");
  static_assert(!kHalves || kTileM <= kW8a8HalvesMaxTileM, "K halves on tiles of up to 64 rows");
};
static_assert(kW8a8SlabK == 128 && kGemmTileN == 128 && kKHalvesTileN == kGemmTileN / 2,
              "one 128-row x 128-byte box of weight per slab, or two 64-row ones");
constexpr int kW8a8GroupM = 8;

template <typename T>
struct W8A8Params {
  CUtensorMap w_map;       // the weight codes [N, K] bytes, boxes of 128 rows (K halves 64) x 128 bytes
  CUtensorMap a_map;       // the activation codes [M, K], boxes of tile_m rows x 128 bytes
  const uint8_t* a;        // activation codes [M, K]
  const float* a_scales;   // dynamic: [k_blocks, m_pad]; static: nullptr
  const float* a_scale;    // static: the scalar; dynamic: nullptr
  const uint8_t* b;        // weight codes [N, K] (row_bytes = K, a multiple of 16)
  const float* b_scales;   // [N, k_blocks]
  const T* bias;
  T* y;
  float* partials;         // k_split > 1 in planes: [k_split, M, N]; else nullptr
  int m;
  int64_t n, k, m_pad;
  int64_t row_bytes, k_blocks;
  int block_slabs;         // block_size / 128
  int slabs_per_split;     // a multiple of block_slabs
  bool dependent;          // launched as the quantize pass's programmatic dependent
  bool cluster_sum;        // the K split of kClusterSumSplit summed in the tile's cluster of
                           // that many blocks along z (cluster_pair_store; no planes)
};

// m64 x N x k32 e4m3 x e4m3 -> f32 (N = 32, 64 or 128: N / 2 accumulators per thread),
// both operands by descriptor; accumulate = 0 overwrites D. REGS / DLIST: the accumulator
// operands (wgmma.cuh); A, B, P: the operand numbers of the descriptors and `accumulate`.
#define BQMM_WGMMA_E4M3(N, REGS, DLIST, A, B, P)                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" P ", 0;\n"                          \
               "wgmma.mma_async.sync.aligned.m64n" N "k32.f32.e4m3.e4m3 {" REGS        \
               "}, %" A ", %" B ", p, 1, 1;\n}\n"                                      \
               : DLIST                                                                  \
               : "l"(a_desc), "l"(b_desc), "r"(accumulate))

template <int kN>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[kN / 2], uint64_t a_desc, uint64_t b_desc,
                                           uint32_t accumulate) {
  static_assert(kN == 32 || kN == 64 || kN == 128, "wgmma N of 32, 64 or 128");
#if BQMM_WGMMA_ENABLED
  if constexpr (kN == 128) {
    BQMM_WGMMA_E4M3("128", BQMM_WGMMA_REGS64, BQMM_WGMMA_D64, "64", "65", "66");
  } else if constexpr (kN == 64) {
    BQMM_WGMMA_E4M3("64", BQMM_WGMMA_REGS32, BQMM_WGMMA_D32, "32", "33", "34");
  } else {
    BQMM_WGMMA_E4M3("32", BQMM_WGMMA_REGS16, BQMM_WGMMA_D16, "16", "17", "18");
  }
#else
  __trap();
#endif
}
#undef BQMM_WGMMA_E4M3

template <typename T, bool kDynamic, int kTileM, bool kHalves>
struct W8A8Tile {
  using Stage = W8A8Stage<kTileM, kHalves>;
  static constexpr int kStages = Stage::kStages;
  static constexpr int kAcc = kTileM / 2;  // m64 x kTileM: kTileM / 2 accumulators per thread
  static constexpr int kSteps = kW8a8SlabK / 32;
  static_assert(kStages >= kWgmmaMinStages, "a slab in use, one in flight");

  using Ring = WgmmaRing<kStages>;
  using RingPos = typename Ring::Pos;

  const W8A8Params<T>& p;
  uint8_t* smem;
  Ring& ring;
  int warp, lane, g, t;
  int64_t n0, m0;

  __device__ W8A8Tile(const W8A8Params<T>& params, uint8_t* shared, Ring& r, int thread,
                      int64_t n_begin, int64_t m_begin)
      : p(params), smem(shared), ring(r), n0(n_begin), m0(m_begin) {
    warp = thread / 32;
    lane = thread % 32;
    g = lane / 4;
    t = lane % 4;
  }

  // The shared-memory address of ring stage `stage` (both roles).
  __device__ __forceinline__ uint32_t stage_base(int stage) const {
    return smem_addr(smem) + static_cast<uint32_t>(stage) * static_cast<uint32_t>(Stage::kBytes);
  }

  // ---------------------------------------------------------------- producer
  // Per stage fill: producer thread 0 arms the stage's `full` barrier for the boxes' bytes
  // and starts their TMA copies ([128 or 64 rows][128 bytes] weight boxes, [kTileM rows][128
  // bytes] activation boxes, in the wgmma's 128-byte swizzle; rows past N or M and bytes past
  // K arrive as zeros); every producer thread x copies the block scale of weight row x
  // (kHalves: row x % 64 of half x / 64; rows past N zero-filled: never stored) and,
  // dynamic, threads 0..kParts * kTileM/4 - 1 the activation scales (4 floats each; the
  // scales' rows are padded to 128, so a tile never reads past them), by cp.async, and
  // arrives on `full` once they land (the barrier's 128 arrivals). The scales are the
  // slab's scale block's: every slab of a block carries them, so the consumers' fold reads
  // them from the stage of the block's last slab. No producer thread waits for its copies.
  // Both boxes go first and together: issuing the activation's after the scales' cp.async
  // measured 2-7 % slower at M = 64-128.
  //
  // Fill i's slabs: part 0's is the block's first + i; kHalves, part 1's the second half's
  // first + i, present while below the block's end. blk: each part's scale block.
  struct Fill {
    int64_t slab[2];
    int64_t blk[2];
    bool second;
  };
  __device__ __forceinline__ bool box_thread() const { return warp == 0 && lane == 0; }
  // slab * 128 is a 32-bit TMA coordinate (K < 2^31).
  __device__ __forceinline__ void copy_weight_boxes(int stage, const Fill& f) const {
    mbarrier_expect_tx(&ring.full[stage], (f.second ? 2 : 1) * (Stage::kWeightBoxBytes + Stage::kActBoxBytes));
#pragma unroll
    for (int h = 0; h < Stage::kParts; ++h)
      if (h == 0 || f.second)
        tma_copy_box(&p.w_map, stage_base(stage) + h * Stage::kWeightBoxBytes, &ring.full[stage],
                     static_cast<int32_t>(f.slab[h] * kW8a8SlabK), static_cast<int32_t>(n0));
  }
  __device__ __forceinline__ void copy_act_boxes(int stage, const Fill& f) const {
#pragma unroll
    for (int h = 0; h < Stage::kParts; ++h)
      if (h == 0 || f.second)
        tma_copy_box(&p.a_map, stage_base(stage) + Stage::kWeightBytes + h * Stage::kActBoxBytes,
                     &ring.full[stage], static_cast<int32_t>(f.slab[h] * kW8a8SlabK), static_cast<int32_t>(m0));
  }
  __device__ __forceinline__ void copy_weight_scales(int stage, const Fill& f) const {
    const int x = warp * 32 + lane;
    const int h = kHalves ? x / Stage::kTileN : 0;
    const int row = kHalves ? x % Stage::kTileN : x;
    const bool ok = n0 + row < p.n && (h == 0 || f.second);
    const int64_t blk = h == 0 ? f.blk[0] : f.blk[1];
    cp_async4(stage_base(stage) + Stage::kWScalesOffset + 4 * x,
              ok ? p.b_scales + (n0 + row) * p.k_blocks + blk : p.b_scales, ok);
  }
  // The stage's last copies: every producer thread arrives on `full` after this.
  __device__ __forceinline__ void copy_act_scales_and_arrive(int stage, const Fill& f) const {
    if constexpr (kDynamic) {
      const int x = warp * 32 + lane;
      constexpr int kPerPart = kTileM / 4;
      const int h = x / kPerPart;
      if (h < Stage::kParts) {
        const bool ok = h == 0 || f.second;
        const int64_t blk = h == 0 ? f.blk[0] : f.blk[1];
        cp_async16(stage_base(stage) + Stage::kAScalesOffset + 16 * x,
                   ok ? p.a_scales + blk * p.m_pad + m0 + 4 * (x % kPerPart) : p.a_scales, ok);
      }
    }
    cp_async_mbarrier_arrive(&ring.full[stage]);
  }
  __device__ __forceinline__ void load_stage(int stage, const Fill& f) const {
    if (box_thread()) {
      copy_weight_boxes(stage, f);
      copy_act_boxes(stage, f);
    }
    copy_weight_scales(stage, f);
    copy_act_scales_and_arrive(stage, f);
  }

  // The first slab of the second half (kHalves: the block's first ceil(blocks / 2) scale
  // blocks are the first half's; the end where there is one block), else the block's end.
  __device__ __forceinline__ int64_t second_half_begin(int64_t slab_begin, int64_t slab_end) const {
    return kHalves ? k_halves_mid(slab_begin, slab_end, p.block_slabs) : slab_end;
  }

  // Fill i of the block [slab_begin, slab_end) whose second half begins at `mid`.
  __device__ __forceinline__ Fill fill_of(int64_t i, int64_t slab_begin, int64_t mid, int64_t slab_end) const {
    Fill f;
    f.slab[0] = slab_begin + i;
    f.slab[1] = mid + i;
    f.second = kHalves && f.slab[1] < slab_end;
    // A split is whole scale blocks, so a slab's block is its index over block_slabs.
    f.blk[0] = p.block_slabs == 1 ? f.slab[0] : f.slab[0] / p.block_slabs;
    f.blk[1] = p.block_slabs == 1 ? f.slab[1] : f.slab[1] / p.block_slabs;
    return f;
  }

  // Launched as the quantize pass's programmatic dependent (p.dependent), the first
  // stages' weights and weight scales go before the wait for the pass to complete (they
  // are the kernel's inputs, complete before it began), so that they stream while it
  // runs, and their activations after it. Returns how many fills it made.
  __device__ __forceinline__ int load_first_stages_dependent(int64_t slab_begin, int64_t mid, int64_t slab_end) const {
    const int64_t count = mid - slab_begin;
    const int first = static_cast<int>(count < kStages ? count : kStages);
    // Loops, not unrolled: the prologue runs once per block, and unrolled it made every
    // W8A8 kernel about 0.3-0.5k SASS instructions longer, dependent launch or not.
#pragma unroll 1
    for (int i = 0; i < first; ++i) {
      const Fill f = fill_of(i, slab_begin, mid, slab_end);
      if (box_thread()) copy_weight_boxes(i, f);
      copy_weight_scales(i, f);
    }
    wait_for_prior_grid();
#pragma unroll 1
    for (int i = 0; i < first; ++i) {
      const Fill f = fill_of(i, slab_begin, mid, slab_end);
      if (box_thread()) copy_act_boxes(i, f);
      copy_act_scales_and_arrive(i, f);
    }
    return first;
  }

  // A fill at a time, as the consumers free stages.
  __device__ __forceinline__ void produce(int64_t slab_begin, int64_t slab_end) const {
    if (box_thread()) {
      tma_prefetch_map(&p.w_map);
      tma_prefetch_map(&p.a_map);
    }
    const int64_t mid = second_half_begin(slab_begin, slab_end);
    const int64_t count = mid - slab_begin;
    const int first = p.dependent ? load_first_stages_dependent(slab_begin, mid, slab_end) : 0;
    RingPos at;
    for (int i = 0; i < first; ++i) at.advance();
#pragma unroll 1
    for (int64_t i = first; i < count; ++i, at.advance()) {
      if (i >= kStages) ring.wait_empty(at);
      load_stage(at.stage, fill_of(i, slab_begin, mid, slab_end));
    }
    cp_async_wait<0>();  // no copy outlives its thread
  }

  // ---------------------------------------------------------------- consumer
  // The scales a thread's fold multiplies by: D fragment d[4 j + 2 h + e] = weight row
  // 16 warp + 8 h + g, activation row 8 j + 2 t + e. The weight rows' two are read from
  // the stage at `base` while the block's last wgmmas run (their latency off the fold's
  // critical path); the activation rows' (dynamic: 32 more registers, which the two
  // partial-sum buffers do not leave) are read by the fold itself.
  struct FoldScales {
    float w[2];
    uint32_t base;
  };

  __device__ __forceinline__ FoldScales load_fold_scales(uint32_t base) const {
    FoldScales s;
    s.base = base;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      asm volatile("ld.shared.f32 %0, [%1];"
                   : "=f"(s.w[h])
                   : "r"(base + Stage::kWScalesOffset + 4 * (16 * warp + 8 * h + g)));
    return s;
  }

  // acc += part * w[row] (* a[column]).
  __device__ __forceinline__ void fold(const FoldScales& s, float (&acc)[kAcc], const float (&part)[kAcc]) const {
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
      float sa[2] = {1.0f, 1.0f};
      if constexpr (kDynamic) {
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                     : "=f"(sa[0]), "=f"(sa[1])
                     : "r"(s.base + Stage::kAScalesOffset + 4 * (part_index() * kTileM + 8 * j + 2 * t)));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float scale = kDynamic ? s.w[h] * sa[e] : s.w[h];
          acc[4 * j + 2 * h + e] = fmaf(part[4 * j + 2 * h + e], scale, acc[4 * j + 2 * h + e]);
        }
    }
  }

  __device__ __forceinline__ float a_scale_factor() const { return kDynamic ? 1.0f : *p.a_scale; }

  // Issues the slab at ring position `at`: its 4 wgmmas into `part` (the first overwriting
  // it) as one commit group.
  __device__ __forceinline__ void issue_slab(float (&part)[kAcc], const RingPos& at, uint32_t w_rows) const {
    ring.wait_full(at);
    issue_wgmmas(part, stage_base(at.stage), w_rows, true);
    wgmma_commit();
  }

  // The slab's kSteps wgmmas on the stage at `base`, the first overwriting `part` if fresh.
  __device__ __forceinline__ void issue_wgmmas(float (&part)[kAcc], uint32_t base, uint32_t w_rows,
                                               bool fresh) const {
    const uint64_t wd = sw128_desc(base + w_rows),
                   ad = sw128_desc(base + Stage::kWeightBytes + part_index() * Stage::kActBoxBytes);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
      wgmma_e4m3<kTileM>(part, sw128_desc_step(wd, 32 * s), sw128_desc_step(ad, 32 * s),
                         s == 0 && fresh ? 0u : 1u);
  }

  // Waits until at most kPending commit groups are in flight (slab i's done), folds `part`
  // into acc and releases slab i's stage: static, before the fold (the weight scales
  // already in registers); dynamic, after it (the fold reads the activation scales there).
  template <int kPending>
  __device__ __forceinline__ void retire_slab(float (&acc)[kAcc], float (&part)[kAcc], const RingPos& at) const {
    const FoldScales scales = load_fold_scales(stage_base(at.stage));
    wgmma_wait<kPending>();
    fence_operands(part);
    if (!kDynamic) ring.arrive_empty(at.stage);
    fold(scales, acc, part);
    if (kDynamic) ring.arrive_empty(at.stage);
  }

  // Blocks of one slab (block_size 128): two partial-sum buffers, slab i in part[i % 2],
  // so that slab i + 1's wgmmas run while slab i is folded. Loop invariant: at the top,
  // exactly slab i's group (in p0) is in flight.
  __device__ __forceinline__ void consume_one_slab_blocks(float (&acc)[kAcc], int64_t count, uint32_t w_rows) const {
    if (count <= 0) return;
    float p0[kAcc], p1[kAcc];
    RingPos at;  // slab i's
    issue_slab(p0, at, w_rows);
    int64_t i = 0;
#pragma unroll 1
    for (; i + 2 < count; i += 2) {
      RingPos at1 = at;
      at1.advance();
      issue_slab(p1, at1, w_rows);
      retire_slab<1>(acc, p0, at);
      at = at1;
      at.advance();
      issue_slab(p0, at, w_rows);
      retire_slab<1>(acc, p1, at1);
    }
    if (i + 1 < count) {
      RingPos at1 = at;
      at1.advance();
      issue_slab(p1, at1, w_rows);
      retire_slab<1>(acc, p0, at);
      retire_slab<0>(acc, p1, at1);
    } else {
      retire_slab<0>(acc, p0, at);
    }
  }

  // This consumer warpgroup's part of a stage: kHalves, its half of K; else 0 (both take
  // the one slab, the warpgroups its first and second 64 weight rows).
  __device__ __forceinline__ int part_index() const { return kHalves ? warp / 4 : 0; }

  __device__ __forceinline__ void consume(int64_t slab_begin, int64_t slab_end) const {
    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
    const int64_t mid = second_half_begin(slab_begin, slab_end);
    const int64_t fills = mid - slab_begin;
    const int64_t count = part_index() == 0 ? fills : slab_end - mid;  // this warpgroup's slabs
    // This consumer warpgroup's 64 weight rows start 64 * (warp / 4) rows into the stage.
    const uint32_t w_rows = (warp / 4) * 64 * 128;
    if (p.block_slabs == 1) {
      consume_one_slab_blocks(acc, count, w_rows);
    } else {
      consume_multi_slab_blocks(acc, count, w_rows);
    }
    fence_operands(acc);
    if constexpr (kHalves) {
      k_halves_release(ring, count, fills);
      // Through stage 0's weight bytes: both warpgroups are past their loops, so every copy
      // has landed and been read.
      static_assert(kAcc * kWgmmaConsumerThreads / 2 * 4 <= Stage::kWeightBytes, "one warpgroup's sums fit");
      if (!k_halves_add(acc, part_index(), (warp % 4) * 32 + lane, stage_base(0))) return;
    }
    const WgmmaEpilogue<T, W8A8Params<T>> out(p, n0, m0, warp * 32 + lane);
    if (p.cluster_sum) {
      cluster_store(acc, a_scale_factor(), out);
    } else {
      out.store(acc, a_scale_factor());
    }
  }

  // The K split summed in the tile's cluster (p.cluster_sum, cluster_pair_store): sender
  // region r is stage r's slab bytes, never its scales, which cp.async filled: the
  // consumers have waited for those copies (`full`), but compute-sanitizer's racecheck
  // does not follow that through the cluster barrier.
  __device__ __forceinline__ void cluster_store(const float (&acc)[kAcc], float factor,
                                                const WgmmaEpilogue<T, W8A8Params<T>>& out) const {
    static_assert(kStages >= kClusterSumSplit, "a sender stage for each of the two blocks");
    static_assert(kAcc / 2 * kClusterSumRowBytes <= Stage::kWeightBytes + Stage::kActBytes,
                  "a sender's rows fit its stage's slab bytes");
    cluster_pair_store(acc, factor, out, stage_base(0) + 4 * (warp * 32 + lane), Stage::kBytes);
  }

  // Blocks of several slabs: a block's slabs summed into `part`, folded at its last.
  __device__ __forceinline__ void consume_multi_slab_blocks(float (&acc)[kAcc], int64_t count, uint32_t w_rows) const {
    float part[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) part[i] = 0.0f;
    // The range starts on a scale block's first slab (slabs_per_split is whole blocks).
    int in_block = 0;  // slab i's place in its scale block
    RingPos at;
#pragma unroll 1
    for (int64_t i = 0; i < count;
         ++i, at.advance(), in_block = in_block + 1 == p.block_slabs ? 0 : in_block + 1) {
      ring.wait_full(at);
      const uint32_t base = stage_base(at.stage);
      const bool fresh = in_block == 0;
      const bool last = i + 1 == count || in_block + 1 == p.block_slabs;
      fence_operands(part);
      issue_wgmmas(part, base, w_rows, fresh);
      wgmma_commit();
      FoldScales scales;
      if (last) scales = load_fold_scales(base);
      wgmma_wait<0>();
      fence_operands(part);
      if (!kDynamic) ring.arrive_empty(at.stage);  // operands done, weight scales loaded
      if (last) fold(scales, acc, part);
      if (kDynamic) ring.arrive_empty(at.stage);  // the fold read the activation scales
    }
  }
};

// Grid as the fused GEMM's, its activation tiles in groups of kW8a8GroupM (8 x 128 rows:
// a wave of 132 blocks reads 8 activation tiles and about 17 weight strips, all L2-resident
// at K = 8192); z the K split (in clusters along z where p.cluster_sum).
template <typename T, bool kDynamic, int kTileM, bool kHalves>
__global__ void __launch_bounds__(kWgmmaThreads, 1) W8A8WgmmaKernel(const __grid_constant__ W8A8Params<T> p) {
#if BQMM_WGMMA_ENABLED
  allow_dependent_launch();  // the K split's reduction may be scheduled (it waits for this grid)
  using Tile = W8A8Tile<T, kDynamic, kTileM, kHalves>;
  extern __shared__ __align__(1024) uint8_t w8a8_smem_raw[];
  __shared__ typename Tile::Ring ring;
  const GemmBlockTile b = gemm_block_tile<kTileM, kW8a8GroupM, Tile::Stage::kTileN>(p);
  run_wgmma_roles<Tile>(p, w8a8_smem_raw, ring, b.n0, b.m0, b.slab_begin, b.slab_end, p.cluster_sum);
#else
  __trap();
#endif
}

}  // namespace bqmm::cuda
