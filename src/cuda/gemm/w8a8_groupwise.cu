// W8A8 on CUTLASS 4.2's SM90 FP8 GEMM with groupwise scales (sm_90a; the headers of
// scripts/fetch_cutlass.sh, built beside the mixed-input GEMM):
//
//   Y[m, n] = sum_b sa[b, m] * sw[n, b] * sum_{k in block b} e4m3(A')[m, k] * e4m3(W)[n, k] + bias[n]
//
// A' is the activation quantized by the quantize pass (act_quant_e4m3.cuh) into the
// workspace: codes [M, K] and one float32 scale per (K block, row), [k_blocks, m_pad]
// (static quantization writes a_scale into every entry, so both modes run one kernel).
// The weight's codes and scales are read as the operator stores them: W [N, K] e4m3 as
// CUTLASS's K-major B, its scales [N, k_blocks] K-major, every row's (kScaleRows 1) or,
// where the caller promises that 128-row groups share them, rows 0, 128, 256, ... only
// (kScaleRows 128: one scale per tile and block, a cheaper fold). The tensor cores sum
// each block's products (in their own accumulator, narrower than float32 within an
// instruction); the collective scales each block's sums by sa * sw per (row, column) in
// float32 and adds them to float32 accumulators; the epilogue adds the bias in float32
// and rounds Y to T once. Scale groups are 128 K (block_size == 128); tiles 128 activation rows x 128
// weight rows x 128 K, two consumer warpgroups, a TMA producer, a 1 x 2 cluster that
// multicasts the activation tile to the two blocks of neighbouring weight tiles, a
// persistent grid. Needs K % 16 == 0, N % 8 == 0 and 16-byte aligned pointers
// (core/fp8_matmul_plan.cc, w8a8_groupwise_refusal).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "core/gemm_plan.h"
#include "cuda/cuda_check.h"
#include "cuda/gemm/act_quant_e4m3.cuh"
#include "cuda/gemm/cutlass_types.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

template <typename T, int kScaleRows>
struct W8A8Groupwise {
  using Element = CutlassFloat<T>;
  using Codes = cutlass::float_e4m3_t;
  static constexpr int kGroupK = 128;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::Int<kGroupK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;

  // One scale per (row, 128-K group) of A (the activation), its rows contiguous, [k_blocks,
  // m_pad]; one per (kScaleRows rows, 128-K group) of B (the weight), its groups
  // contiguous, [N, k_blocks].
  static_assert(kScaleRows == 1 || kScaleRows == 128, "per row, or per 128 rows (a tile)");
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, kScaleRows, kGroupK, cute::GMMA::Major::MN,
                                                                cute::GMMA::Major::K>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  // Y [M, N] row-major = acc + bias[column] in float32, rounded to T once.
  using LayoutY = cutlass::layout::RowMajor;
  using Fusion = cutlass::epilogue::fusion::LinCombPerColBias<Element, float, Element, Element, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutY, 8, Element, LayoutY, 8,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Codes, cute::tuple<cutlass::layout::RowMajor, LayoutSFA>,
      16, Codes, cute::tuple<cutlass::layout::ColumnMajor, LayoutSFB>, 16, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // The activation's scales: column m of row b at b * m_pad + m. With one weight scale per
  // tile (kScaleRows 128) CUTLASS loads them by TMA, which needs whole 16-byte rows: the
  // layout then spans the m_pad columns allocated (those >= M scale rows of Y never stored).
  static LayoutSFA act_scales_layout(int m, int k_blocks, int m_pad) {
    using namespace cute;
    if (kScaleRows == 128) m = m_pad;
    return make_layout(make_shape(make_shape(_1{}, m), make_shape(Int<kGroupK>{}, k_blocks), 1),
                       make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, m_pad), m_pad * k_blocks));
  }
  // The weight's scales: group b of row n at n * k_blocks + b; with kScaleRows 128, that of
  // row n - n % 128 for all 128 rows (ceil(N / 128) groups, the last one partial).
  static LayoutSFB weight_scales_layout(int n, int k_blocks) {
    using namespace cute;
    const int groups = (n + kScaleRows - 1) / kScaleRows;
    return make_layout(make_shape(make_shape(Int<kScaleRows>{}, groups), make_shape(Int<kGroupK>{}, k_blocks), 1),
                       make_stride(make_stride(_0{}, kScaleRows * k_blocks), make_stride(_0{}, _1{}), n * k_blocks));
  }

  // Y = the GEMM of the quantized A (codes and scales in `ws`) and the weight of `args`.
  static Status run(const Fp8KernelArgs& args, int num_sms, const W8A8Workspace& ws, cudaStream_t stream) {
    const int m = static_cast<int>(args.m), n = static_cast<int>(args.n), k = static_cast<int>(args.k);
    const int k_blocks = static_cast<int>((args.k + kGroupK - 1) / kGroupK);
    typename Kernel::StrideA stride_a{};
    cute::get<0>(stride_a) = args.k;
    typename Kernel::StrideB stride_w{};
    cute::get<0>(stride_w) = args.k;
    typename Kernel::StrideD stride_y{};
    cute::get<0>(stride_y) = args.n;

    typename Gemm::Arguments a{};
    a.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    a.problem_shape = cute::make_shape(m, n, k, 1);
    a.mainloop.ptr_A = reinterpret_cast<const Codes*>(ws.codes);
    a.mainloop.dA = stride_a;
    a.mainloop.ptr_B = reinterpret_cast<const Codes*>(args.b);
    a.mainloop.dB = stride_w;
    a.mainloop.ptr_SFA = ws.scales;
    a.mainloop.layout_SFA = act_scales_layout(m, k_blocks, static_cast<int>(w8a8_m_pad(args.m)));
    a.mainloop.ptr_SFB = args.b_scale;
    a.mainloop.layout_SFB = weight_scales_layout(n, k_blocks);
    a.epilogue.thread.alpha = 1.0f;
    a.epilogue.thread.beta = 0.0f;
    a.epilogue.thread.bias_ptr = static_cast<const Element*>(args.bias);
    a.epilogue.ptr_C = nullptr;
    a.epilogue.dC = stride_y;
    a.epilogue.ptr_D = static_cast<Element*>(args.y);
    a.epilogue.dD = stride_y;
    a.hw_info.sm_count = num_sms;

    Gemm gemm;
    if (gemm.can_implement(a) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_w8a8_groupwise: CUTLASS refused the problem (can_implement)");
    if (Gemm::get_workspace_size(a) != 0)
      return Status(StatusCode::kInternal, "launch_w8a8_groupwise: the CUTLASS kernel asks for a workspace");
    if (gemm.initialize(a, nullptr, stream) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_w8a8_groupwise: CUTLASS initialize failed");
    if (gemm.run(stream) != cutlass::Status::kSuccess)
      return Status(StatusCode::kInternal, "launch_w8a8_groupwise: CUTLASS launch failed");
    return check_launch("W8A8Groupwise");
  }
};

template <typename T, bool kDynamic>
Status launch_typed(const Fp8KernelArgs& args, int scale_rows, int num_sms, const W8A8Workspace& ws,
                    cudaStream_t stream) {
  constexpr int kGroupK = W8A8Groupwise<T, 1>::kGroupK;
  const int64_t k_blocks = (args.k + kGroupK - 1) / kGroupK;
  BQMM_RETURN_IF_ERROR((launch_act_quant_e4m3<T, kDynamic>(args, args.m, kGroupK, k_blocks, w8a8_m_pad(args.m),
                                                           ws.codes, ws.scales, stream)));
  return scale_rows == 128 ? W8A8Groupwise<T, 128>::run(args, num_sms, ws, stream)
                           : W8A8Groupwise<T, 1>::run(args, num_sms, ws, stream);
}

}  // namespace

Status launch_w8a8_groupwise(const Fp8KernelArgs& args, bool dynamic, int scale_rows, int num_sms,
                             const W8A8Workspace& ws, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  if (args.block_size != 128 || args.k % 16 != 0 || args.n % 8 != 0)
    return Status(StatusCode::kInternal, "launch_w8a8_groupwise: block_size 128, K % 16 and N % 8");
  if (scale_rows != 1 && scale_rows != 128)
    return Status(StatusCode::kInternal, "launch_w8a8_groupwise: scale_rows 1 or 128");
  return dispatch_half_types(args.dtype, "w8a8 groupwise gemm", [&](auto tag) {
    using T = decltype(tag);
    return dynamic ? launch_typed<T, true>(args, scale_rows, num_sms, ws, stream)
                   : launch_typed<T, false>(args, scale_rows, num_sms, ws, stream);
  });
}

}  // namespace bqmm::cuda
