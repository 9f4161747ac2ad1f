// The mixed-input GEMM (SM90, sm_90a; CUTLASS 4.2's mixed-input collective): both
// operators' weights multiplied with float16 / bfloat16 activations from 128 rows (where
// the multiply, not the weight stream, sets the time), near a dense GEMM's tensor-core
// rate; the planner's rule is core/mixed_plan.h's mixed_gemm_refusal.
//
//   FP8:    Y[m, n] = sum_k A[m, k] * round_T(e4m3(W[n, k]) * scale[n, k / bs]) + bias[n]
//   N-bit:  Y[m, n] = sum_k A[m, k] * round_T(q[n, k] * scale[n, b] + zero[n, b]) + bias[n],
//           zero[n, b] = S(-zp[n, b] * scale[n, b])     (b = k / bs)
//
// The weight is dequantized once per tile, in registers, to T, and fed to wgmma as its
// register operand; float32 accumulation; the bias added in float32 in the epilogue, Y
// rounded to T once. FP8 as the dequant + cuBLAS path dequantizes it, bit for bit: e4m3
// times the float32 scale, rounded to T once. N-bit: the code converted to S, then one
// multiply-add in S (S = T, or float32 for bfloat16 with 8-bit codes: core/mixed_plan.h,
// mixed_nbits_scales_dtype); with the default zero point 2^(bits - 1) the zero is exact
// in S and the weight is round_T((q - zp) * scale), the dequant path's bit for bit; a
// packed or typed zero point in T is rounded to T first (within the contract's bounds).
//
// The problem is swapped so that the narrow operand is CUTLASS's A: D = W x A^T, D of
// shape [N, M] column-major, which is Y [M, N] row-major. Tiles: 128 weight rows x tile_m
// (128 or 256) activation rows x 64 K, two consumer warpgroups of 64 weight rows each
// (the cooperative schedule), a producer warp loading every operand by TMA, a persistent
// grid of one block per SM walking the tiles in CUTLASS's order or, where the plan says
// (core/mixed_plan.h, mixed_swizzle), weight tiles first in bands of activation tiles.
// Where the last wave of output tiles would leave SMs idle the plan takes stream-K instead
// (CUTLASS's stream-K tile scheduler; core/mixed_plan.h's schedule model): every block
// takes an even share of all K tiles; blocks sharing an output tile add their float32
// partial sums in K order into one tile of the workspace (each waits on a flag for its
// predecessor; the flags zeroed by a memset before each GEMM), and the block with the
// last K tiles adds it to its own and runs the epilogue.
// The collective takes the scales (and zeros) one value per (K block, weight row), weight
// rows contiguous: the operator's prepacked input, or a small pass (gemm/mixed_scales.cu)
// writes them into the workspace from the operator's [N, k_blocks] layout before each
// GEMM. Its group (the block size) must be whole 64-K tiles; rows of W, A and Y must be
// whole 16-byte TMA lines (core/mixed_plan.h, mixed_gemm_refusal).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"
#include "cuda/gemm/cutlass_types.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {

template <typename T, GemmWeights kW, int kTileM, bool kStreamK>
struct MixedGemm {
  static_assert(kTileM == 128 || kTileM == 256, "the planned tiles");
  using Element = CutlassFloat<T>;
  using Codes = CutlassCodes<kW>;
  static constexpr bool kZero = kW != GemmWeights::kFp8;
  static constexpr int kCodeBits = cutlass::sizeof_bits<Codes>::value;

  // Layouts of the swapped problem: W [N, K] row-major (K-major, the collective's
  // requirement for the narrow operand); A [M, K] as B, column-major (K-major); D [N, M]
  // column-major = Y [M, N] row-major.
  using LayoutW = cutlass::layout::RowMajor;
  using LayoutA = cutlass::layout::ColumnMajor;
  using LayoutY = cutlass::layout::ColumnMajor;
  static constexpr int kAlignW = 128 / kCodeBits;  // elements per 16-byte TMA unit
  static constexpr int kAlignT = 8;
  using TileShape = cute::Shape<cute::_128, cute::Int<kTileM>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

  // D = acc + bias[row of D] (bias null: 0), in float32, rounded to T once.
  using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<Element, float, Element, Element, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutY, kAlignT, Element,
      LayoutY, kAlignT, cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;

  // The weight with its scales (and zeros) of type Scale: the collective's
  // ConvertAndScale(WithZero).
  static constexpr bool kScalesInT =
      kZero && mixed_nbits_scales_dtype(TypeOf<T>::kDType, kCodeBits) == TypeOf<T>::kDType;
  using Scale = std::conditional_t<kScalesInT, Element, float>;
  using WeightOperand = std::conditional_t<kZero, cute::tuple<Codes, Scale, Scale>, cute::tuple<Codes, float>>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, WeightOperand, LayoutW, kAlignW, Element,
      LayoutA, kAlignT, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Scheduler = std::conditional_t<kStreamK, cutlass::gemm::StreamKScheduler, void>;  // void: persistent
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // Y = the GEMM of `g`, the scales (and zeros) already transposed to [k_blocks, N] Scale.
  static Status run(const FusedGemmArgs& g, const MixedGemmLaunch& launch, const void* scales_t,
                    const void* zeros_t, cudaStream_t stream) {
    const int64_t row_elems = g.row_bytes * 8 / kCodeBits;  // W's row pitch, padded blocks included
    typename Kernel::StrideA stride_w{};
    cute::get<0>(stride_w) = row_elems;
    typename Kernel::StrideB stride_a{};
    cute::get<0>(stride_a) = g.k;
    typename Kernel::StrideD stride_y{};
    cute::get<1>(stride_y) = g.n;
    typename Mainloop::StrideScale stride_s{};
    cute::get<1>(stride_s) = g.n;

    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = cute::make_shape(static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), 1);
    args.mainloop.ptr_A = reinterpret_cast<const Codes*>(g.b);
    args.mainloop.dA = stride_w;
    args.mainloop.ptr_B = static_cast<const Element*>(g.a);
    args.mainloop.dB = stride_a;
    args.mainloop.ptr_S = static_cast<const Scale*>(scales_t);
    args.mainloop.dS = stride_s;
    args.mainloop.group_size = static_cast<int>(g.block_size);
    if constexpr (kZero) args.mainloop.ptr_Z = static_cast<const Scale*>(zeros_t);
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.epilogue.thread.bias_ptr = static_cast<const Element*>(g.bias);
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = stride_y;
    args.epilogue.ptr_D = static_cast<Element*>(g.y);
    args.epilogue.dD = stride_y;
    args.hw_info.sm_count = launch.num_sms;
    if (launch.swizzle > 0) {
      // Weight tiles (the swapped problem's M) first, in bands of `swizzle` activation
      // tiles (core/mixed_plan.h, mixed_swizzle).
      args.scheduler.raster_order = decltype(args.scheduler.raster_order)::AlongM;
      args.scheduler.max_swizzle_size = launch.swizzle;
    }
    if constexpr (kStreamK) {
      // Stream-K as the plan chose it, not the scheduler's own data-parallel / split-K
      // heuristic.
      args.scheduler.decomposition_mode =
          cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams::DecompositionMode::StreamK;
    }

    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_mixed_gemm: CUTLASS refused the problem (can_implement)");
    // The plan's bound (mixed_stream_k_bytes; 0 for the persistent grid) covers what CUTLASS asks.
    const size_t needed = Gemm::get_workspace_size(args), planned = kStreamK ? launch.partial_bytes : 0;
    if (needed > planned)
      return Status(StatusCode::kInternal, "launch_mixed_gemm: CUTLASS asks for " + std::to_string(needed) +
                                               " workspace bytes, the plan has " + std::to_string(planned));
    if (gemm.initialize(args, kStreamK ? launch.partials : nullptr, stream) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_mixed_gemm: CUTLASS initialize failed");
    if (gemm.run(stream) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_mixed_gemm: CUTLASS launch failed");
    return check_launch("MixedGemm");
  }
};

// One weight format's tiles and schedules in one activation type (mixed_{fp8,int8,int4}.cu
// instantiate).
template <typename T, GemmWeights kW>
Status launch_mixed_tile(const FusedGemmArgs& g, const MixedGemmLaunch& launch, const void* scales_t,
                         const void* zeros_t, cudaStream_t stream) {
  if (launch.stream_k) {
    if (launch.tile_m == 128) return MixedGemm<T, kW, 128, true>::run(g, launch, scales_t, zeros_t, stream);
    if (launch.tile_m == 256) return MixedGemm<T, kW, 256, true>::run(g, launch, scales_t, zeros_t, stream);
  } else {
    if (launch.tile_m == 128) return MixedGemm<T, kW, 128, false>::run(g, launch, scales_t, zeros_t, stream);
    if (launch.tile_m == 256) return MixedGemm<T, kW, 256, false>::run(g, launch, scales_t, zeros_t, stream);
  }
  return Status(StatusCode::kInternal, "launch_mixed_gemm: no tile of " + std::to_string(launch.tile_m) +
                                           " rows" + (launch.stream_k ? " with stream-K" : ""));
}

}  // namespace bqmm::cuda
