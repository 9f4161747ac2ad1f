// The fused GEMM's Hopper mainloop (SM90, built for sm_90a): the same problem, numerics
// and stored weights as fused_gemm.cuh (read that first), with the tensor-core work on
// wgmma instead of mma.sync (on SM90 at every M the fused GEMM takes).
//
//   FP8:    Y[m, n] = sum_b (sum_{k in block b} A[m, k] * e4m3(W[n, k])) * scale[n, b] + bias[n]
//   N-bit:  Y[m, n] = sum_k A[m, k] * round_T((q[n, k] - zp[n, b]) * scale[n, b]) + bias[n]
//   N-bit on tiles of 16 and 32 rows, blocks of 128 K or more, integer zero points (kFold):
//           Y[m, n] = sum_b (sum_{k in block b} A[m, k] * (q[n, k] - zp[n, b])) * scale[n, b] + bias[n]
//           (q - zp exact in T, as FP8's e4m3: no weight rounding)
//
// Block. Three warpgroups, roles parted once: warpgroup 0 the producer (it only copies
// slabs into a ring of shared-memory stages), warpgroups 1 and 2 the consumers. Consumer
// warpgroup c owns weight rows 64 c .. 64 c + 63 of the block's kGemmTileN = 128 (its
// warp i rows 16 i .. 16 i + 15, the wgmma's register A fragment), all kTileM activation
// rows (16, 32, 64, 128 or, N-bit only, 256: the wgmma's N), and the block's range of K
// slabs (128 bytes of each weight row, as in fused_gemm.cuh). Where a whole slab's activation rows
// would leave room for few stages, a stage holds part of a slab: 4-bit at tile 128 and
// with K halves (below) half slabs (64 bytes a row, 128 K), tile 256 64 K (4-bit 32 bytes
// a row, 8-bit 64);
// "slab" below means a stage's K. One wgmma m64n{kTileM}k16 does the work of kTileM / 8
// mma.sync per warp, so the consumers' issue slots go to decoding; the 256-row tile
// decodes each weight strip once for up to 256 rows (FP8's partial sums beside its 128
// accumulators do not fit). setmaxnreg moves registers from the producer (40) to the
// consumers (232).
//
// Operands. A: each lane decodes its 4-byte words of the staged weight (ldmatrix, as in
// fused_gemm.cuh) straight into the A fragment (decode_word_fragments, as the mma.sync
// mainloop), registers a[0..3] = rows (g, g + 8) x logical k (2t, 2t + 1) and (2t + 8,
// 2t + 9). B: the activation tile in shared memory in the wgmma's K-major,
// 128-byte-swizzled layout: panels of 64 K, each [kTileM rows][128 bytes], 16-byte piece
// c of row r at 16 (c ^ (r % 8)), 8-row groups 1024 bytes apart.
// K permutation: a lane's word holds physically consecutive codes, and the logical k
// the A fragment gives them is fixed by the fragment layout, so the activations are
// multiplied permuted to match, at the granularity of pairs (two activations, 4 bytes):
//   8-bit (FP8, int8): word t of a 16-K chunk = codes 4t .. 4t + 3, decoded as pairs
//     (4t, 4t + 1) -> logical (2t, 2t + 1) and (4t + 2, 4t + 3) -> (2t + 8, 2t + 9).
//   4-bit: word t of a 32-K chunk = codes 8t .. 8t + 7, decoded as pairs (8t + j,
//     8t + j + 4), j = 0..3 (decode_word_pairs): pair j goes to mma step j / 2 of the
//     chunk, logical (2t, 2t + 1) + 8 (j % 2). Each 8 activations are first interleaved
//     the same way, (x0, x4), (x1, x5), (x2, x6), (x3, x7) (pair_act4), so that their
//     pair j is weight pair j's; "physical pair" below means these interleaved pairs.
// Physical pair p of a chunk (2 kSteps pairs per word) thus lands at logical k
// 16 s + 2 t + 8 h, t = p / (2 kSteps), s = (p / 2) % kSteps, h = p % 2. In 16-byte
// pieces of a chunk (P = 2 or 4 of them, 4 pairs each): logical piece i holds physical
// pairs i, i + P, i + 2P, i + 3P. A pass before the GEMM (ActOrderKernel) writes A in this
// order into the workspace, once for all blocks, so that the GEMM copies whole panels by
// TMA. (Measured alternatives: a four-byte cp.async of each pair makes the producer the
// limit; the blocks permuting the same tile in shared memory, each for itself, are slower
// still.)
//
// Pipeline: a ring of kStages stages, each with two mbarriers (WgmmaRing). One producer
// thread copies slab i into stage i % kStages by TMA once the consumers released the
// stage's previous slab (`empty`): a box of the 128 weight rows and one of the kTileM
// ordered activation rows per 64-K panel, in the swizzled layouts above (rows past N or
// M and bytes past a row arrive as zeros), its bytes counted on `full`. The GEMM is a
// programmatic dependent launch of the order pass: its first stages' weight copies start
// while the pass runs, the activation copies after wait_for_prior_grid. Each consumer
// warp, per slab i: wait on `full`; per group of 8 k16 steps (the slab; 4-bit's 256 K at
// tile 64: two groups; tile 256: the slab's 4) decode into register buffer b, issue the
// group's wgmma, commit, wait until one group is pending (the previous group done: its buffer is
// free, and slab i - 1's stage is released on `empty`). No block-wide barrier: the two consumer warpgroups run
// apart, so one's decode overlaps the other's wgmma.
// Register buffers alternate between groups (one group a slab: between slabs, so the slab
// loop is unrolled by two). FP8: each slab's wgmma sums into a fresh `part`; before the
// next slab's group is issued, the previous one is waited for and its part folded into acc
// with that slab's block scales (a slab is one scale block: the planner takes this kernel
// only for FP8 block_size % 128 == 0). N-bit codes on tiles of 16 and 32 rows (kFold) the
// same a commit group at a time, each group in one block: their decode drops the multiply
// by the scale (32 a group per thread) for kTileM / 2 multiply-adds a group in the fold.
// ptxas issues about half of a group's decode among the previous group's wgmma, the rest
// after the wait. Two alternating parts would let that group run on, but ptxas then
// serializes every wgmma (C7514: the fold reads one part's registers while a group on
// the other is in flight, which it treats as reading a pending accumulator).
//
// K halves (kHalves, plan tile_n = kKHalvesTileN; core/gemm_plan.h says when: tiles of 64
// rows or fewer, 8-bit codes in blocks of whole slabs, 4-bit codes in blocks of 64): the
// block owns 64 weight rows, and consumer warpgroup c the c-th half of the block's slabs (the first
// the larger). Fill i of a stage holds slab i of each half:
// two 64-row weight boxes where the 128-row box would be, so that warp w's rows sit where
// they did (16 w of the stage's 128; rows 16 (w % 4) of the block), and each half's
// activation panels; past the second half's end only the first's copies, and warpgroup 1
// then only releases the stage. At the end warpgroup 1 hands its sums to warpgroup 0 in
// shared memory (k_halves_add), which stores the tile: no K split, cluster or planes
// (measured against the split of 2 summed in the tile's cluster: fused_gemm_takes_halves).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/gemm_plan.h"
#include "cuda/gemm/fused_gemm.cuh"
#include "cuda/gemm/wgmma.cuh"

namespace bqmm::cuda {

// m64nNk16 with A from registers, in activation type TY ("f16", "bf16"): ACC = N / 2
// accumulators per thread (their operands BQMM_WGMMA_REGS<ACC> / _D<ACC>, wgmma.cuh);
// A0..A3, DESC, P the operand numbers of a[0..3], the descriptor and `accumulate` (ACC on).
#define BQMM_WGMMA_RS(N, TY, ACC, A0, A1, A2, A3, DESC, P)                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" P ", 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n" N "k16.f32." TY "." TY " {" BQMM_WGMMA_REGS##ACC \
               "}, {%" A0 ", %" A1 ", %" A2 ", %" A3 "}, %" DESC ", p, 1, 1, 0;\n}\n"            \
               : BQMM_WGMMA_D##ACC                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
// The shape's instruction in T's type (kF16: float16, else bfloat16).
#define BQMM_WGMMA_RS_T(N, ACC, A0, A1, A2, A3, DESC, P)        \
  if constexpr (kF16) {                                         \
    BQMM_WGMMA_RS(N, "f16", ACC, A0, A1, A2, A3, DESC, P);      \
  } else {                                                      \
    BQMM_WGMMA_RS(N, "bf16", ACC, A0, A1, A2, A3, DESC, P);     \
  }

// D (64 weight rows x kN activation rows, float32) += A (registers) * B (descriptor);
// accumulate = 0 overwrites D. D fragment per warp: d[4 j + e] = row g, activation rows
// 8 j + 2t + e (e < 2); d[4 j + 2 + e] = row g + 8, the same activation rows.
template <typename T, int kN>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                         uint32_t accumulate) {
#if BQMM_WGMMA_ENABLED
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128 || kN == 256, "the wrapped wgmma shapes");
  constexpr bool kF16 = std::is_same_v<T, __half>;
  if constexpr (kN == 16) {
    BQMM_WGMMA_RS_T("16", 8, "8", "9", "10", "11", "12", "13")
  } else if constexpr (kN == 32) {
    BQMM_WGMMA_RS_T("32", 16, "16", "17", "18", "19", "20", "21")
  } else if constexpr (kN == 64) {
    BQMM_WGMMA_RS_T("64", 32, "32", "33", "34", "35", "36", "37")
  } else if constexpr (kN == 128) {
    BQMM_WGMMA_RS_T("128", 64, "64", "65", "66", "67", "68", "69")
  } else {
    BQMM_WGMMA_RS_T("256", 128, "128", "129", "130", "131", "132", "133")
  }
#else
  __trap();
#endif
}
#undef BQMM_WGMMA_RS_T
#undef BQMM_WGMMA_RS

// ================================================================= the order pass
// A [M, K] -> out [rows, gemm_act_order_k(K)] (rows = M rounded up to the tile,
// gemm_act_order_rows) in the K order above, chunks of kChunkK (16 or 32): piece i of a
// chunk = its physical pairs i, i + P, i + 2P, i + 3P (P = kChunkK / 8 pieces; 4-bit's
// pairs interleaved first); rows past M and K past its end as zeros (K % 8 == 0: a piece
// is whole or past it). One chunk per thread and step. Its blocks let the GEMM launch at
// once (allow_dependent_launch): the GEMM waits for the pass to complete before copying
// what it wrote.
template <typename T, int kChunkK>
__global__ void __launch_bounds__(256) ActOrderKernel(const T* __restrict__ a, T* __restrict__ out, int64_t m,
                                                      int64_t rows, int64_t k) {
  allow_dependent_launch();
  constexpr int kPieces = kChunkK / 8;
  const int64_t k_pad = gemm_act_order_k(k);
  const int64_t row_chunks = k_pad / kChunkK;
  const int64_t chunks = rows * row_chunks;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < chunks;
       c += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = c / row_chunks, k0 = (c % row_chunks) * kChunkK;
    uint4 in[kPieces];
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      in[i] = row < m && k0 + 8 * (i + 1) <= k ? *reinterpret_cast<const uint4*>(a + row * k + k0 + 8 * i)
                                    : make_uint4(0, 0, 0, 0);
    uint32_t w[4 * kPieces];  // physical pair q = w[q]
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      uint32_t pairs[4] = {in[i].x, in[i].y, in[i].z, in[i].w};
      if constexpr (kChunkK == 32) pair_act4(in[i], pairs);  // 4-bit: (x0, x4), (x1, x5), ...
#pragma unroll
      for (int j = 0; j < 4; ++j) w[4 * i + j] = pairs[j];
    }
    uint4* dst = reinterpret_cast<uint4*>(out + row * k_pad + k0);
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      dst[i] = make_uint4(w[i], w[i + kPieces], w[i + 2 * kPieces], w[i + 3 * kPieces]);
  }
}

// The kernel's parameters: the fused GEMM's, and the tensor maps of its TMA copies (built
// per launch, launch_wgmma_instance).
template <typename T, typename S>
struct FusedWgmmaParams : GemmParams<T, S> {
  CUtensorMap w_map;  // B: [N, row_bytes] bytes, boxes of the block's rows (128; K halves 64) x the slab
  CUtensorMap a_map;  // ordered A: [gemm_act_order_rows(M, kTileM), gemm_act_order_k(K) x sizeof(T)] bytes,
                      // boxes of kTileM rows x 128
  bool cluster_sum;   // the K split of kClusterSumSplit summed in the tile's cluster of that
                      // many blocks along z (cluster_pair_store; no planes)
};

// ================================================================= the kernel
// Template parameters as FusedGemmTile's, but kForm: how the block constants reach the
// decode (wgmma_consts in core/gemm_plan.h): kConsts = 1, 2 or 4 scale blocks per weight
// row per stage, loaded as stored a stage ahead; 4 or 8 | kWgmmaVectorConsts (kVector, the
// whole slabs of tiles up to 64 rows), each row's scales (and zero points) of the stage
// loaded a stage ahead as vectors; 0, loaded per chunk where used; kTileM is 16, 32, 64, 128 or 256
// (N-bit); FP8 only with kConsts 1.
template <typename T, GemmWeights kW, int kTileM, int kForm, bool kTypedZp, bool kHalves = false>
struct FusedWgmmaTile {
  using F = GemmFormat<kW>;
  using S = std::conditional_t<kW == GemmWeights::kFp8, float, T>;
  using Params = FusedWgmmaParams<T, S>;
  static constexpr bool kFp8 = kW == GemmWeights::kFp8;
  static constexpr int kStages = wgmma_stages(kTileM, F::kBits, kHalves);
  // A slab here is one stage's K (wgmma_slab_bytes: 128 bytes of each weight row, 64 for
  // 4-bit at tile 128 and with K halves); the block's range of whole slabs
  // (gemm_block_tile) is converted to these in FusedWgmmaKernel.
  static constexpr int kSlabBytes = static_cast<int>(wgmma_slab_bytes(kTileM, F::kBits, kHalves));
  static constexpr int kSlabK = kSlabBytes * 8 / F::kBits;
  static constexpr int kChunks = kSlabBytes / 16;  // 16-byte chunks of a row per slab
  static constexpr int kWeightBytes = kGemmTileN * kSlabBytes;
  static constexpr int kStageBytes = static_cast<int>(wgmma_stage_bytes(kTileM, F::kBits, kHalves));
  static constexpr int kPanels = kSlabK / 64;          // 64-K panels of the activation tile
  static constexpr int kPanelBytes = kTileM * 128;
  static constexpr int kTileN = kHalves ? kKHalvesTileN : kGemmTileN;  // weight rows per block
  static constexpr int kWeightBoxBytes = kTileN * kSlabBytes;
  static constexpr int kActPartBytes = kPanels * kPanelBytes;  // a half's activation panels
  static constexpr int kSlabSteps = kSlabK / 16;       // k16 steps per slab
  // Commit groups per slab (wgmma_stage_groups): 2 for 4-bit's whole slabs at tiles 16 to
  // 64, else 1; wgmma per group: 8, or the slab's 4 at tile 256 (each wgmma twice the work).
  static constexpr int kGroups = wgmma_stage_groups(kTileM, F::kBits, kHalves);
  static constexpr int kGroupSteps = kSlabSteps / kGroups;
  static constexpr int kGroupChunks = kChunks / kGroups;
  static constexpr int kAcc = kTileM / 2;
  static constexpr int kConsts = kForm & ~kWgmmaVectorConsts;
  static constexpr bool kVector = (kForm & kWgmmaVectorConsts) != 0;
  static constexpr bool kPrefetch = kConsts != 0;
  // kVector: a row's scales and zero points of a stage, in bytes and 32-bit words.
  static constexpr int kScaleBytes = 2 * kConsts;
  static constexpr int kZpBytes = wgmma_zp_bytes(kConsts, F::kBits, kTypedZp);
  static constexpr int kZpWords = kZpBytes < 4 ? 1 : kZpBytes / 4;
  // Slabs whose block constants are in flight ahead of the one decoded. FP8 reads them
  // only in the fold, a slab after its decode; with float16 activations two ahead hides
  // their latency (H200, M = 32 and 64, same run: 2.7-3.1 % less time at 8192 x 8192 and
  // 28672 x 8192 than one ahead). bfloat16's longer decode (e4m3 through float16) came out
  // 0.5-2.4 % slower with it on all eight prefill cases, and N-bit, which decodes with
  // the constants, 4-10 % slower (both same-run A/Bs): one ahead.
  static constexpr int kConstsAhead = kFp8 && std::is_same_v<T, __half> ? 2 : 1;
  // Whether each commit group's sums go to a fresh `part`, folded into acc with the
  // group's block scales in float32: FP8 (a slab a block), and N-bit codes where
  // wgmma_folds_nbits_scales says (decoded as exact q - zp: 32 multiplies a group per
  // thread fewer, for kAcc = kTileM / 2 multiply-adds).
  static constexpr bool kFold = kFp8 || wgmma_folds_nbits_scales(kTileM, F::kBits, kForm, kTypedZp, kHalves);
  static_assert(kStages >= kWgmmaMinStages, "a slab in use, one decoded, one in flight");
  static_assert(kWeightBytes % kWgmmaAlignBytes == 0 && kStageBytes % kWgmmaAlignBytes == 0,
                "activation panels on swizzle-atom boundaries");
  static_assert(!kFp8 || kConsts == 1, "FP8: one scale block per slab");
  static_assert(kChunks % (kConsts == 0 ? 1 : kConsts) == 0, "a constant slot per whole chunks");
  static_assert(!kVector || ((kConsts == 4 || kConsts == 8) && kChunks == 8 && !kHalves && kTileM <= 64),
                "vector constants: 4 or 8 blocks of whole slabs (tiles of 64 rows or fewer)");
  static_assert(!kFp8 || kTileM <= 128, "FP8's partial sums beside 128 accumulators do not fit");
  static_assert(!kFp8 || !kTypedZp, "typed zero points are N-bit's");
  static_assert(kGroupChunks % 2 == 0, "ldmatrix takes chunk pairs");
  static_assert(kConstsAhead == 1 || kConstsAhead == 2, "constant slots by the slab's parity");
  static_assert(!kHalves || (kTileM <= 64 && kConsts == k_halves_consts(F::kBits)),
                "K halves: tiles of 64 rows or fewer, 8-bit codes in blocks of whole slabs, 4-bit two blocks a stage");

  using Ring = WgmmaRing<kStages, 1>;  // `full`: the copying thread's arrival and the bytes
  using RingPos = typename Ring::Pos;

  const Params& p;
  uint8_t* smem;  // kWgmmaAlignBytes-aligned
  Ring& ring;
  int warp, lane, g, t;  // consumer warp w: weight rows 16 w .. 16 w + 15 (warpgroup w / 4)
  int64_t n0, m0;
  ConstRow<S> crow[2];  // the lane's weight rows lo, hi (clamped to N - 1): their constants

  // `thread`: the thread's index within its role (producer 0..127, consumer 0..255).
  __device__ FusedWgmmaTile(const Params& params, uint8_t* shared, Ring& r, int thread,
                            int64_t n_begin, int64_t m_begin)
      : p(params), smem(shared), ring(r), n0(n_begin), m0(m_begin) {
    warp = thread / 32;
    lane = thread % 32;
    g = lane / 4;
    t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = n0 + 16 * (kHalves ? warp % 4 : warp) + 8 * h + g;
      crow[h] = const_row(p, row < p.n ? row : p.n - 1);
      // Opaque from here: otherwise the compiler folds the row's offset back into every
      // slab's load address (a 64-bit multiply-add per row and slab).
      asm("" : "+l"(crow[h].scales), "+l"(crow[h].zp));
    }
  }

  // ---------------------------------------------------------------- producer
  // Producer thread 0 does all the copying; the warpgroup's other threads give their
  // registers to the consumers and exit.
  __device__ __forceinline__ uint32_t stage_base(int stage) const { return smem_addr(smem + stage * kStageBytes); }
  // Fill i: slab `first` + i of the first half and, kHalves, `second` + i of the second
  // while below `end` (second = end without halves).
  struct Fill {
    int64_t slab[2];
    bool second;
  };
  __device__ __forceinline__ Fill fill_of(int64_t i, int64_t first, int64_t second, int64_t end) const {
    return {{first + i, second + i}, kHalves && second + i < end};
  }
  __device__ __forceinline__ void copy_weights(int stage, const Fill& f) const {
    uint64_t* full = &ring.full[stage];
    // Both operands' bytes: the whole stage, or (the second half past its end) the first half's.
    mbarrier_arrive_expect_tx(full, !kHalves || f.second ? kStageBytes : kWeightBoxBytes + kActPartBytes);
#pragma unroll
    for (int h = 0; h < (kHalves ? 2 : 1); ++h)
      if (h == 0 || f.second)
        tma_copy_box(&p.w_map, stage_base(stage) + h * kWeightBoxBytes, full,
                     static_cast<int32_t>(f.slab[h] * kSlabBytes), static_cast<int32_t>(n0));
  }
  __device__ __forceinline__ void copy_activations(int stage, const Fill& f) const {
#pragma unroll
    for (int h = 0; h < (kHalves ? 2 : 1); ++h) {
      if (h != 0 && !f.second) continue;
      const auto x0 = static_cast<int32_t>(f.slab[h] * kSlabK * static_cast<int64_t>(sizeof(T)));
#pragma unroll
      for (int panel = 0; panel < kPanels; ++panel)
        tma_copy_box(&p.a_map, stage_base(stage) + kWeightBytes + h * kActPartBytes + panel * kPanelBytes,
                     &ring.full[stage], x0 + 128 * panel, static_cast<int32_t>(m0));
    }
  }
  // The first slab of the second half (kHalves), else the block's end.
  __device__ __forceinline__ static int64_t second_half_begin(int64_t slab_begin, int64_t slab_end) {
    return kHalves ? k_halves_mid(slab_begin, slab_end, 1) : slab_end;
  }

  // 4-bit: first the block's constants into L2, a row a lane of warp 0 (the consumers'
  // first loads of them would otherwise queue behind the first stages' weight copies, and
  // the loop's loads, issued about half a slab ahead, come from HBM once a sector).
  // Against the tree before it (H100): 4-bit 0.95-1.00x the time at M = 32 and 64 (block
  // 32 0.95x), 8-bit 1.01x, FP8 1.02x: not taken there. Then the first stages' weights
  // before waiting for the order pass (the weights are the kernel's inputs, complete
  // before the pass began), their activations after it; from then on a slab at a time,
  // as the consumers free stages.
  __device__ __forceinline__ void produce(int64_t slab_begin, int64_t slab_end) const {
    if (warp != 0) return;
    if constexpr (F::kBits == 4) {
      const int64_t k_begin = slab_begin * kSlabK, k_end = slab_end * kSlabK;
      for (int r = lane; r < kTileN; r += 32)
        if (n0 + r < p.n) prefetch_row_consts<kW, kTypedZp>(p, n0 + r, k_begin, k_end < p.k ? k_end : p.k);
    }
    if (lane != 0) return;
    tma_prefetch_map(&p.w_map);
    tma_prefetch_map(&p.a_map);
    const int64_t mid = second_half_begin(slab_begin, slab_end);
    const int64_t count = mid - slab_begin;  // fills
    const int first = static_cast<int>(count < kStages ? count : kStages);
    for (int i = 0; i < first; ++i) copy_weights(i, fill_of(i, slab_begin, mid, slab_end));
    wait_for_prior_grid();
    for (int i = 0; i < first; ++i) copy_activations(i, fill_of(i, slab_begin, mid, slab_end));
    RingPos at;
    for (int i = 0; i < first; ++i) at.advance();
#pragma unroll 1
    for (int64_t i = first; i < count; ++i, at.advance()) {
      ring.wait_empty(at);
      const Fill f = fill_of(i, slab_begin, mid, slab_end);
      copy_weights(at.stage, f);
      copy_activations(at.stage, f);
    }
  }

  // ---------------------------------------------------------------- block constants
  // A stage's constants of the lane's rows (lo, hi) in registers: kConsts blocks each, or
  // (kVector) the words of their scales and zero points.
  struct RawSlot {
    RawConsts<kW, T> c[2][kConsts >= 1 && kConsts <= 4 ? kConsts : 1];
  };
  struct VectorSlot {
    uint32_t scales[2][kScaleBytes < 4 ? 1 : kScaleBytes / 4];
    uint32_t zp[2][kZpWords];
  };
  using Slot = std::conditional_t<kVector, VectorSlot, RawSlot>;

  __device__ __forceinline__ uint32_t chunk_block(int64_t slab, int c) const {
    if constexpr (kFp8) {  // the chunk index in 32 bits
      return fp8_chunk_block(p, static_cast<uint32_t>(slab) * kChunks + c);
    } else {
      return block_of<kW>(p, slab * kSlabK + c * F::kChunkK + t * F::kWordK);
    }
  }
  // N-bit: the block chunk c decodes with. A constant slot is one block (the lane's: with
  // blocks under a chunk, a slot a chunk, each lane's word in one block), which all the
  // slot's chunks share: the slot's first chunk's, the same expression for all of them,
  // so the decoder's constants are made once a slot rather than once a chunk (4-bit: the
  // zero point's nibble).
  __device__ __forceinline__ uint32_t decode_block(int64_t slab, int c) const {
    constexpr int kSlotChunks = kConsts == 0 ? 1 : kChunks / kConsts;
    return chunk_block(slab, c / kSlotChunks * kSlotChunks);
  }
  // A slab's constants, loaded kConstsAhead slabs ahead (but kConsts 0). Prefetched one
  // block at a time, 4 blocks a stage took 0.84-0.93x the time of loads where used (H100,
  // M = 64: 8-bit blocks of 32, 4-bit blocks of 64 unsplit), as vectors 0.81-0.96x that
  // again; 8 one at a time 1.02-1.10x the loads where used (4-bit blocks of 16 and 32, 8-bit
  // of 16), as vectors 0.74-0.88x (4-bit blocks of 32, 8-bit of 16).
  // kVector: the launcher checked that every stage's scales and zero points of a row are
  // aligned vectors in bounds (k_blocks % kConsts == 0: the rows' slabs are their blocks /
  // kConsts).
  __device__ __forceinline__ void prefetch_consts(int64_t slab, Slot& c) const {
    if constexpr (kVector) {
      constexpr uint32_t kDefault = Codes<F::kBits>::kDefaultZeroPoint * (F::kBits == 4 ? 0x11111111u : 0x01010101u);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        load_vector<kScaleBytes>(reinterpret_cast<const uint8_t*>(crow[h].scales) + slab * kScaleBytes, c.scales[h]);
        const uint8_t* zp = crow[h].zp + slab * kZpBytes;
        if (!kTypedZp && crow[h].zp == nullptr) {
#pragma unroll
          for (int w = 0; w < kZpWords; ++w) c.zp[h][w] = kDefault;
        } else {
          load_vector<kZpBytes>(zp, c.zp[h]);
        }
      }
    } else if constexpr (kPrefetch) {
#pragma unroll
      for (int ci = 0; ci < kConsts; ++ci) {
        const uint32_t blk = chunk_block(slab, ci * (kChunks / kConsts));
#pragma unroll
        for (int h = 0; h < 2; ++h) c.c[h][ci] = load_consts<kW, T, kTypedZp>(crow[h], blk);
      }
    }
  }
  // Row h's constants of chunk c from its slot (as load_consts makes them).
  __device__ __forceinline__ RawConsts<kW, T> slot_consts(const Slot& s, int h, int c) const {
    if constexpr (kVector) {
      const int b = c * kConsts / kChunks;  // the stage's block of chunk c
      const uint32_t scales = s.scales[h][b / 2];
      RawConsts<kW, T> r{};
      // Block b's scale bits (half b % 2 of word b / 2) | its zero point's bits << 16: the
      // typed value's; a byte holding it (its nibble picked by the block's parity, the
      // byte above masked off by make_consts).
      const int lo = b % 2 ? 0x0032 : 0x0010;
      if constexpr (kTypedZp)
        r.bits = __byte_perm(scales, s.zp[h][b / 2], b % 2 ? 0x7632 : 0x5410);
      else if constexpr (F::kBits == 8)
        r.bits = __byte_perm(scales, s.zp[h][b / 4], lo | ((4 + b % 4) << 8));
      else
        r.bits = __byte_perm(scales, s.zp[h][b / 8], lo | ((4 + b / 2 % 4) << 8));
      return r;
    } else {
      return s.c[h][c * kConsts / kChunks];
    }
  }

  // ---------------------------------------------------------------- consumer
  // Where TMA's swizzle put 16-byte chunk c of weight row r within the row's kSlabBytes
  // (the swizzle XORs the chunk with address bits 7 and up): 128-byte rows, piece
  // c ^ (r % 8); 64-byte rows (two a 128-byte bank row), c ^ ((r / 2) % 4); 32-byte rows
  // (four), c ^ ((r / 4) % 2). Each way the 8 rows of an ldmatrix matrix hit 8 different
  // 16-byte bank groups.
  __device__ __forceinline__ static int weight_piece(int row, int chunk) {
    if constexpr (kSlabBytes == 128) return chunk ^ (row % 8);
    if constexpr (kSlabBytes == 64) return chunk ^ ((row / 2) % 4);
    return chunk ^ ((row / 4) % 2);
  }
  // Group `grp` of the slab in `stage` -> the A fragments of its 8 k16 steps.
  __device__ __forceinline__ void decode_group(uint32_t wbase, int64_t slab, int grp,
                                               const Slot& pre, uint32_t (&a)[kGroupSteps][4]) const {
#pragma unroll
    for (int q = 0; q < kGroupChunks / 2; ++q) {
      const int c0 = grp * kGroupChunks + 2 * q;
      const int row = 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);
      const int chunk = c0 + lane / 16;
      uint32_t r[4];
      ldmatrix_x4(wbase + row * kSlabBytes + 16 * weight_piece(row, chunk), r);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int c = c0 + i;
        const int step = (c - grp * kGroupChunks) * F::kSteps;
        RawConsts<kW, T> cl{}, ch{};
        uint32_t blk = 0;
        if constexpr (!kFp8) {
          blk = decode_block(slab, c);
          if constexpr (kPrefetch) {
            cl = slot_consts(pre, 0, c);
            ch = slot_consts(pre, 1, c);
          } else {
            cl = load_consts<kW, T, kTypedZp>(crow[0], blk);
            ch = load_consts<kW, T, kTypedZp>(crow[1], blk);
          }
        }
        uint32_t frag[F::kSteps][4];
        decode_word_fragments<T, kW, kTypedZp, kFold && !kFp8>(r[2 * i], r[2 * i + 1], cl, ch, blk, frag);
#pragma unroll
        for (int s = 0; s < F::kSteps; ++s)
#pragma unroll
          for (int e = 0; e < 4; ++e) a[step + s][e] = frag[s][e];
      }
    }
  }

  // The group's 8 wgmma on the activation panel(s) of the stage, one commit group.
  __device__ __forceinline__ void issue_group(uint32_t abase, int grp, uint32_t (&a)[kGroupSteps][4],
                                              float (&d)[kAcc], bool fresh) const {
    // Every input of the group's wgmma is defined before its fence: a register written
    // between the fence and the commit makes ptxas serialize the wgmma.
    uint64_t desc[kGroupSteps];
    const uint64_t desc0 = sw128_desc(abase);
#pragma unroll
    for (int s = 0; s < kGroupSteps; ++s) {
      const int kk = grp * kGroupSteps + s;  // k16 step within the slab
      desc[s] = sw128_desc_step(desc0, (kk / 4) * kPanelBytes + (kk % 4) * 32);
    }
    const uint32_t first = fresh ? 0u : 1u;
    fence_operands(a);
    fence_operands(d);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kGroupSteps; ++s) wgmma_rs<T, kTileM>(d, a[s], desc[s], s == 0 ? first : 1u);
    wgmma_commit();
    fence_operands(d);
  }

  // kFold: acc += part * the block scales of the lane's rows lo, hi (part's d[4 j + e]
  // is row e / 2's).
  __device__ __forceinline__ static void fold(const float (&scale)[2], float (&acc)[kAcc], float (&part)[kAcc]) {
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[4 * j + e] = fmaf(part[4 * j + e], scale[e / 2], acc[4 * j + e]);
  }
  // FP8: the rows' scales of the slab whose constants are in slot c.
  __device__ __forceinline__ static void fold(const Slot& c, float (&acc)[kAcc], float (&part)[kAcc]) {
    const float scale[2] = {c.c[0][0].scale, c.c[1][0].scale};
    fold(scale, acc, part);
  }
  // N-bit kFold: the rows' scales of group `grp` (its block) from this slab's slot, in float32.
  __device__ __forceinline__ void group_scales(const Slot& c, int grp, float (&scale)[2]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) scale[h] = to_float(half_bits_as<T>(slot_consts(c, h, grp * kGroupChunks).bits));
  }

  // ---------------------------------------------------------------- main loop
  struct State {
    float acc[kAcc];
    float part[kAcc];                        // kFold: one group's sums
    float part_scale[2];                     // N-bit kFold: the block scales of part's group
    uint32_t a[2][kGroupSteps][4];           // decoded A, alternating per group
    Slot pre[kConstsAhead];                  // slots of constants ahead (slab_step)
    Slot cur;                                // N-bit: this slab's
  };

  // The slab in `stage` is done with (its wgmma finished): this thread's share of releasing it.
  __device__ __forceinline__ void release(int stage) const { ring.arrive_empty(stage); }

  // Slab i, at ring position `at` (its register buffers B: the slab's parity for 8-bit;
  // 4-bit uses 0 and 1).
  template <int kB>
  __device__ __forceinline__ void slab_step(State& st, int64_t begin, int64_t count, int64_t i,
                                            const RingPos& at) const {
    ring.wait_full(at);  // TMA's writes, visible to ldmatrix and wgmma once it completes
    // Constants in slots: slab j's in slot j % kConstsAhead (kB is i's parity: the loop is
    // unrolled by two), loaded kConstsAhead slabs before they are read. No slot is copied
    // while its load may be in flight (the copy would wait for it): N-bit, which decodes
    // with slab i's constants, copies them (`cur`) and refills the slot with slab
    // i + kConstsAhead's; FP8, which reads them only in the fold a slab later, folds
    // slab i - 1 straight from its slot and then refills that slot. The loads are
    // unconditional (past the block's end they reload its last slab's constants, unused;
    // at i = 0 FP8 reloads the slot it has): a predicated load keeps the slot's old value
    // live across the loop, which the compiler then copies every iteration.
    if constexpr (!kFp8) {
      constexpr int kSlot = kB % kConstsAhead;
      st.cur = st.pre[kSlot];
      prefetch_consts(begin + (i + kConstsAhead < count ? i + kConstsAhead : count - 1), st.pre[kSlot]);
    }
    const uint32_t wbase = smem_addr(smem) + at.stage * kStageBytes;
    const uint32_t abase = wbase + kWeightBytes + (kHalves ? warp / 4 : 0) * kActPartBytes;
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const int buf = kGroups == 1 ? kB : grp;
      decode_group(wbase, begin + i, grp, st.cur, st.a[buf]);  // FP8: no constants used
      if constexpr (kFp8) {
        // The previous slab's group done, its stage released and its sums folded, then
        // this slab's into `part`.
        wgmma_wait<0>();
        fence_operands(st.part);
        constexpr int kPrevSlot = (kB + kConstsAhead - 1) % kConstsAhead;  // slab i - 1's
        if (i > 0) {
          release(at.previous_stage());
          fold(st.pre[kPrevSlot], st.acc, st.part);
        }
        const int64_t next = i - 1 + kConstsAhead;
        prefetch_consts(begin + (next < count ? next : count - 1), st.pre[kPrevSlot]);
        issue_group(abase, grp, st.a[buf], st.part, true);
      } else if constexpr (kFold) {
        // The previous group done (its stage released with slab i's first group) and its
        // sums folded, then this group's into `part`.
        wgmma_wait<0>();
        fence_operands(st.part);
        if (grp == 0 && i > 0) release(at.previous_stage());
        if (grp > 0 || i > 0) fold(st.part_scale, st.acc, st.part);
        group_scales(st.cur, grp, st.part_scale);
        issue_group(abase, grp, st.a[buf], st.part, true);
      } else {
        issue_group(abase, grp, st.a[buf], st.acc, false);
        wgmma_wait<1>();  // the previous group done: its registers (and stage) are free
        if (grp == 0 && i > 0) release(at.previous_stage());
      }
    }
  }

  __device__ __forceinline__ void consume(int64_t block_begin, int64_t block_end) const {
    State st;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) st.acc[i] = 0.0f;
    // This warpgroup's slabs: kHalves, its half of the block's; else all of them.
    const int64_t mid = second_half_begin(block_begin, block_end);
    const int part = kHalves ? warp / 4 : 0;
    const int64_t slab_begin = part == 0 ? block_begin : mid;
    const int64_t slab_end = part == 0 ? mid : block_end;
    const int64_t count = slab_end - slab_begin;
#pragma unroll
    for (int a = 0; a < kConstsAhead; ++a)
      if (a < count) prefetch_consts(slab_begin + a, st.pre[a]);
    int64_t i = 0;
    RingPos at;
#pragma unroll 1
    for (; i + 1 < count; i += 2) {
      slab_step<0>(st, slab_begin, count, i, at);
      at.advance();
      slab_step<1>(st, slab_begin, count, i + 1, at);
      at.advance();
    }
    if (i < count) slab_step<0>(st, slab_begin, count, i, at);
    wgmma_wait<0>();
    if constexpr (kFold && !kFp8) {  // the last group's fold
      fence_operands(st.part);
      if (count > 0) fold(st.part_scale, st.acc, st.part);
    } else if constexpr (kFp8) {  // the last slab's fold, from its slot (count - 1) % kConstsAhead
      fence_operands(st.part);
      if (count > 0) {
        if ((count - 1) % kConstsAhead == 0) {  // a branch: register arrays take constant indices
          fold(st.pre[0], st.acc, st.part);
        } else {
          fold(st.pre[kConstsAhead - 1], st.acc, st.part);
        }
      }
    }
    fence_operands(st.acc);
    if constexpr (kHalves) {
      if (part == 1) {
        if (count > 0) release((count - 1) % kStages);  // its last slab's stage (its wgmma waited for)
        k_halves_release(ring, count, mid - block_begin);
      }
      // From the start of the ring: every fill has landed and been read by both warpgroups.
      static_assert(kAcc * kWgmmaConsumerThreads / 2 * 4 <= kStages * kStageBytes, "one warpgroup's sums fit");
      if (!k_halves_add(st.acc, part, (warp % 4) * 32 + lane, smem_addr(smem))) return;
    }
    const WgmmaEpilogue<T, Params> out(p, n0, m0, (kHalves ? warp % 4 : warp) * 32 + lane);
    if (p.cluster_sum) {
      // The sender regions from the start of the ring: every stage's copies have landed
      // (each slab was waited for) and been read (the wgmma waited for above).
      static_assert(kAcc * kClusterSumRowBytes <= kStages * kStageBytes, "both sender regions fit the ring");
      cluster_pair_store(st.acc, 1.0f, out, smem_addr(smem) + 4 * (warp * 32 + lane),
                         kAcc / 2 * kClusterSumRowBytes);
    } else {
      out.store(st.acc, 1.0f);
    }
  }
};

// Grid as FusedGemmKernel's (M tiles fastest, then N tiles; z the K split, in clusters of
// the tile's two blocks along z where p.cluster_sum, else in planes); one block of
// three warpgroups per SM: warpgroup 0 loads (the producer), 1 and 2 multiply.
template <typename T, GemmWeights kW, int kTileM, int kForm, bool kTypedZp, bool kHalves>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    FusedWgmmaKernel(const __grid_constant__ FusedWgmmaParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>> p) {
#if BQMM_WGMMA_ENABLED
  allow_dependent_launch();  // the K split's reduction may be scheduled (it waits for this grid)
  using Tile = FusedWgmmaTile<T, kW, kTileM, kForm, kTypedZp, kHalves>;
  extern __shared__ __align__(1024) uint8_t wgmma_smem_raw[];
  __shared__ typename Tile::Ring ring;
  const GemmBlockTile b = gemm_block_tile<kTileM, 0, Tile::kTileN>(p);
  // Whole slabs -> the tile's (half slabs at 64 bytes a row; the last ends with the row).
  constexpr int64_t kPer = kGemmSlabBytes / Tile::kSlabBytes;
  const int64_t slabs = (p.row_bytes + Tile::kSlabBytes - 1) / Tile::kSlabBytes;
  const int64_t end = b.slab_end * kPer < slabs ? b.slab_end * kPer : slabs;
  run_wgmma_roles<Tile>(p, wgmma_smem_raw, ring, b.n0, b.m0, b.slab_begin * kPer, end, p.cluster_sum);
#else
  __trap();
#endif
}

// ================================================================= launch
// The order pass, then the GEMM as its programmatic dependent (where the device takes it).
template <typename T, GemmWeights kW, int kTileM, int kForm, bool kTypedZp, bool kHalves = false, typename S>
Status launch_wgmma_instance(const GemmParams<T, S>& p, dim3 grid, bool cluster_sum, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(wgmma_smem_bytes(kTileM, GemmFormat<kW>::kBits, kHalves));
  constexpr int64_t kElem = static_cast<int64_t>(sizeof(T));
  const int64_t a_row_bytes = gemm_act_order_k(p.k) * kElem;
  if (!wgmma_tma_reaches(p.n, p.row_bytes, a_row_bytes))
    return Status(StatusCode::kInternal, "launch_fused_gemm: rows beyond TMA's 32-bit coordinates");
  FusedWgmmaParams<T, S> wp;
  static_cast<GemmParams<T, S>&>(wp) = p;
  wp.cluster_sum = cluster_sum;
  constexpr int kSlabBytes = static_cast<int>(wgmma_slab_bytes(kTileM, GemmFormat<kW>::kBits, kHalves));
  constexpr int kTileN = kHalves ? kKHalvesTileN : kGemmTileN;
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(p.b, p.n, p.row_bytes, &wp.w_map, kTileN, kSlabBytes));
  const int64_t a_rows = gemm_act_order_rows(p.m, kTileM);
  BQMM_RETURN_IF_ERROR(make_tile_tensor_map(p.a_ordered, a_rows, a_row_bytes, &wp.a_map, kTileM));

  constexpr int kChunkK = GemmFormat<kW>::kChunkK;
  const int64_t chunks = a_rows * (gemm_act_order_k(p.k) / kChunkK);
  ActOrderKernel<T, kChunkK><<<grid_for(chunks, 256), 256, 0, stream>>>(p.a, p.a_ordered, p.m, a_rows, p.k);
  BQMM_RETURN_IF_ERROR(check_launch("ActOrderKernel"));

  const auto kernel = FusedWgmmaKernel<T, kW, kTileM, kForm, kTypedZp, kHalves>;
  BQMM_RETURN_IF_ERROR(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem));
  return launch_kernel_ex(kernel, grid, dim3(kWgmmaThreads), kSmem, stream, true,
                          cluster_sum ? unsigned{kClusterSumSplit} : 1u, "FusedWgmmaKernel", wp);
}

// The kernel of `key` from kList, this format's wgmma kernels (core/gemm_plan.h): each
// entry instantiated here for T and kTypedZp (wgmma_tile_supported says which the planner
// asks for).
template <const auto& kList, typename T, GemmWeights kW, bool kTypedZp, typename S>
Status launch_listed_wgmma(const GemmParams<T, S>& p, const GemmKernelKey& key, dim3 grid, bool cluster_sum,
                           cudaStream_t stream) {
  Status launched = Status::Ok();
  const bool built = visit_gemm_kernel<kList>(key, [&](auto i) {
    constexpr GemmKernelKey k = kList[decltype(i)::value];
    set_status(launched,
               launch_wgmma_instance<T, kW, k.tile_m, k.consts, kTypedZp, k.halves>(p, grid, cluster_sum, stream));
  });
  if (!built) return Status(StatusCode::kInternal, "launch_fused_gemm: no kernel for " + gemm_kernel_name(key));
  return launched;
}

template <typename T, GemmWeights kW, bool kTypedZp>
Status launch_wgmma_tile(const GemmParams<T, std::conditional_t<kW == GemmWeights::kFp8, float, T>>& p,
                         const GemmKernelKey& key, dim3 grid, bool cluster_sum, cudaStream_t stream) {
  if constexpr (kW == GemmWeights::kFp8)
    return launch_listed_wgmma<kFp8WgmmaKernels, T, kW, kTypedZp>(p, key, grid, cluster_sum, stream);
  else if constexpr (kW == GemmWeights::kInt8)
    return launch_listed_wgmma<kInt8WgmmaKernels, T, kW, kTypedZp>(p, key, grid, cluster_sum, stream);
  else
    return launch_listed_wgmma<kInt4WgmmaKernels, T, kW, kTypedZp>(p, key, grid, cluster_sum, stream);
}

// The N-bit launchers of codes W (kInt8, kInt4) for both activation types, packed or
// default zero points and typed ones: one .cu file a code width (int8_wgmma.cu,
// int4_wgmma.cu), so that a build compiles the two side by side.
#define BQMM_INSTANTIATE_NBITS_WGMMA(W)                                                              \
  template Status launch_wgmma_tile<__half, GemmWeights::W, false>(const GemmParams<__half, __half>&,   \
                                                                   const GemmKernelKey&, dim3, bool,   \
                                                                   cudaStream_t);                      \
  template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::W, false>(                              \
      const GemmParams<__nv_bfloat16, __nv_bfloat16>&, const GemmKernelKey&, dim3, bool, cudaStream_t); \
  template Status launch_wgmma_tile<__half, GemmWeights::W, true>(const GemmParams<__half, __half>&,    \
                                                                  const GemmKernelKey&, dim3, bool,    \
                                                                  cudaStream_t);                       \
  template Status launch_wgmma_tile<__nv_bfloat16, GemmWeights::W, true>(                               \
      const GemmParams<__nv_bfloat16, __nv_bfloat16>&, const GemmKernelKey&, dim3, bool, cudaStream_t);

}  // namespace bqmm::cuda
