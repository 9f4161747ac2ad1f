// Fp8WeightMatMul: executes a plan. Enqueues kernels and cuBLAS calls on the caller's
// stream; never allocates, never synchronizes, never reads device memory on the host.
#include <cstdint>
#include <algorithm>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "core/check.h"
#include "core/prepack.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/run_prologue.h"
#include "cuda/cublas_gemm.h"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"
#include "cuda/run_paths.h"

namespace bqmm {
namespace {

// The args must describe the problem the plan was made for.
Status check_args_match_plan(const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args) {
  Fp8MatMulProblem p;
  const Fp8MatMulProblem& q = plan.problem;
  BQMM_RETURN_IF_ERROR(
      validate_fp8_matmul(args, Fp8MatMulAttrs{q.block_size, q.dynamic_act_quant, q.b_scale_block_rows}, &p));
  return check_plan_matches(q, p,
                            p.dtype == q.dtype && p.m == q.m && p.n == q.n && p.k == q.k &&
                                p.has_bias == q.has_bias && p.has_a_scale == q.has_a_scale &&
                                p.has_prepacked == q.has_prepacked);
}

// A' = QDQ(A) into the workspace's act region (static W8A8 off the GEMV; dynamic on every
// path); *a then points at A'.
Status qdq_activation(const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args, uint8_t* ws,
                      cudaStream_t stream, const void** a) {
  const Fp8MatMulProblem& p = plan.problem;
  void* a_qdq = ws + plan.regions.act_offset;
  if (p.dynamic_act_quant) {
    BQMM_RETURN_IF_ERROR(cuda::launch_act_qdq_dynamic(p.dtype, args.a.data, p.m, p.k,
                                                      p.block_size, a_qdq, stream));
  } else {
    BQMM_RETURN_IF_ERROR(cuda::launch_act_qdq(p.dtype, args.a.data,
                                              static_cast<const float*>(args.a_scale->data),
                                              p.m * p.k, a_qdq, stream));
  }
  *a = a_qdq;
  return Status::Ok();
}

// [QDQ A] -> the fused GEMM or the mixed-input GEMM (plan.path) on rows of K e4m3 bytes, a
// float32 b_scale per block. The plan has an act region exactly when A is QDQ'd (W8A8,
// core/fp8_matmul_plan.cc).
Status run_gemm(const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args, uint8_t* ws,
                cudaStream_t stream) {
  const void* a = args.a.data;
  if (plan.regions.act_bytes > 0)
    BQMM_RETURN_IF_ERROR(qdq_activation(plan, args, ws, stream, &a));
  cuda::FusedGemmArgs g;
  g.weights = cuda::GemmWeights::kFp8;
  g.b = static_cast<const uint8_t*>(args.b.data);
  g.scales = args.b_scale.data;
  g.row_bytes = plan.problem.k;
  if (plan.path == Fp8Path::kMixedGemm) return cuda::run_planned_mixed_gemm(plan, args, a, g, ws, stream);
  return cuda::run_planned_fused_gemm(plan, args, a, g, ws, stream);
}

Status run_dequant_gemm(const Handle& handle, const Fp8MatMulPlan& plan,
                        const Fp8MatMulArgs& args, uint8_t* ws, cudaStream_t stream) {
  const Fp8MatMulProblem& p = plan.problem;
  const void* a = args.a.data;
  if (plan.dequant.qdq_activation)
    BQMM_RETURN_IF_ERROR(qdq_activation(plan, args, ws, stream, &a));
  const auto* b = static_cast<const uint8_t*>(args.b.data);
  const auto* b_scale = static_cast<const float*>(args.b_scale.data);
  const int64_t k_blocks = p.k_blocks();
  return cuda::run_planned_dequant_gemm(
      handle, plan, a, args.y.data, args.bias ? args.bias->data : nullptr, ws,
      [&](int64_t n0, int64_t rows, void* out, cudaStream_t s) {
        return cuda::launch_fp8_dequant(p.dtype, b + n0 * p.k, b_scale + n0 * k_blocks, rows,
                                        p.k, p.block_size, plan.dequant.vector, out, s);
      },
      stream);
}

// The operator's tensors as the FP8 kernels (decode GEMV, W8A8 GEMM) take them.
cuda::Fp8KernelArgs kernel_args(const Fp8MatMulProblem& p, const Fp8MatMulArgs& args) {
  cuda::Fp8KernelArgs g;
  g.dtype = p.dtype;
  g.a = args.a.data;
  g.b = static_cast<const uint8_t*>(args.b.data);
  g.b_scale = static_cast<const float*>(args.b_scale.data);
  g.a_scale = args.a_scale ? static_cast<const float*>(args.a_scale->data) : nullptr;
  g.bias = args.bias ? args.bias->data : nullptr;
  g.y = args.y.data;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.block_size = p.block_size;
  return g;
}

// The decode GEMV's arguments; with dynamic quantization A' is made first (the GEMV then
// multiplies it as a weight-only problem), static W8A8 the kernels fuse themselves.
Status gemv_args(const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args, uint8_t* ws,
                 cudaStream_t stream, cuda::Fp8KernelArgs* out) {
  *out = kernel_args(plan.problem, args);
  if (plan.problem.dynamic_act_quant) BQMM_RETURN_IF_ERROR(qdq_activation(plan, args, ws, stream, &out->a));
  return Status::Ok();
}

// A -> e4m3 codes (and, dynamic, their scales) in the workspace -> the W8A8 GEMM on FP8
// tensor cores, the bias in its epilogue (or in the K split's sum).
Status run_w8a8_gemm(const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args, uint8_t* ws,
                     cudaStream_t stream) {
  cuda::W8A8Workspace w;
  w.codes = ws + plan.regions.codes_offset;
  w.scales = reinterpret_cast<float*>(ws + plan.regions.act_scales_offset);
  w.partials = reinterpret_cast<float*>(ws + plan.regions.partial_offset);
  return cuda::launch_w8a8_gemm(kernel_args(plan.problem, args), plan.problem.dynamic_act_quant, plan.gemm, w,
                                stream);
}

// b_scale [N, k_blocks] transposed to float32 [k_blocks, N] (the mixed-input GEMM's and
// cuBLASLt's per-row layout): prepack_fp8_matmul and the per-row w8a8_cublaslt runs.
Status launch_scales_transpose(const void* b_scale, int64_t n, int64_t k_blocks, void* out, cudaStream_t stream) {
  cuda::FusedGemmArgs g;
  g.weights = cuda::GemmWeights::kFp8;
  g.dtype = DType::kFloat32;  // FP8's scales are float32 whatever the activations' type
  g.scales = b_scale;
  g.n = n;
  g.k_blocks = k_blocks;
  return cuda::launch_mixed_scales(g, out, stream);
}

// A -> e4m3 codes and scales for M rounded up to 4 rows -> the weight's scales in
// cuBLASLt's layout (128 x 128 blocks gathered; per row transposed, or prepacked) ->
// cuBLASLt's block-scaled FP8 GEMM, the bias in its epilogue, into Y or (M % 4 != 0) into
// the scratch, whose first M rows are then copied to Y.
Status run_w8a8_cublaslt(const Handle& handle, const Fp8MatMulPlan& plan, const Fp8MatMulArgs& args, uint8_t* ws,
                         cudaStream_t stream) {
  const Fp8MatMulProblem& p = plan.problem;
  const int64_t rows = w8a8_cublaslt_rows(p.m);
  const bool blocks = plan.gemm.scale_rows == 128;
  cuda::W8A8Workspace w;
  w.codes = ws + plan.regions.codes_offset;
  w.scales = reinterpret_cast<float*>(ws + plan.regions.act_scales_offset);
  auto* w_scales = reinterpret_cast<float*>(ws + plan.regions.scales_offset);
  BQMM_RETURN_IF_ERROR(cuda::launch_w8a8_cublaslt_prologue(kernel_args(p, args), p.dynamic_act_quant, rows, w,
                                                           blocks ? w_scales : nullptr, stream));
  const float* scales = w_scales;
  if (!blocks && p.has_prepacked) scales = static_cast<const float*>(args.prepacked->data);
  if (!blocks && !p.has_prepacked)
    BQMM_RETURN_IF_ERROR(launch_scales_transpose(args.b_scale.data, p.n, p.k_blocks(), w_scales, stream));
  cuda::Fp8BlockScaledArgs g;
  g.dtype = p.dtype;
  g.m = rows;
  g.n = p.n;
  g.k = p.k;
  g.a = w.codes;
  g.a_scales = w.scales;
  g.w = args.b.data;
  g.w_scales = scales;
  g.weight_blocks = blocks;
  g.algo = plan.gemm.lt_algo;
  g.bias = args.bias ? args.bias->data : nullptr;
  g.y = rows == p.m ? args.y.data : ws + plan.regions.scratch_offset;
  BQMM_RETURN_IF_ERROR(cuda::gemm_fp8_block_scaled(handle, g, ws + plan.regions.cublas_offset,
                                                   plan.regions.cublas_bytes, stream));
  if (rows == p.m) return Status::Ok();
  return cuda::cuda_status(cudaMemcpyAsync(args.y.data, g.y, static_cast<size_t>(p.m * p.n) * dtype_size(p.dtype),
                                          cudaMemcpyDeviceToDevice, stream),
                          "run_w8a8_cublaslt: copying Y's rows");
}

}  // namespace

Status run_fp8_matmul(const Handle& handle, const Fp8MatMulPlan& plan,
                      const Fp8MatMulArgs& args, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  return cuda::run_plan(
      plan, args, check_args_match_plan(plan, args), workspace, workspace_bytes, stream,
      [&]() -> Status {
        auto* ws = static_cast<uint8_t*>(workspace);
        cuda::Fp8KernelArgs g;
        switch (plan.path) {
          case Fp8Path::kEmpty:
          case Fp8Path::kBiasOnly:
            break;  // run by run_plan
          case Fp8Path::kGemvFma:
            BQMM_RETURN_IF_ERROR(gemv_args(plan, args, ws, stream, &g));
            g.dependent = plan.gemv.dependent_launch;
            return cuda::launch_fp8_gemv_fma(g, plan.gemv.rows, stream);
          case Fp8Path::kGemvMma:
            BQMM_RETURN_IF_ERROR(gemv_args(plan, args, ws, stream, &g));
            g.dependent = plan.gemv.dependent_launch;
            return cuda::launch_fp8_gemv_mma(g, plan.gemv.k_split, plan.gemv.tma,
                                             plan.gemv.lines, plan.gemv.tiles,
                                             plan.gemv.registers, stream);
          case Fp8Path::kW8a8Gemm:
            return run_w8a8_gemm(plan, args, ws, stream);
          case Fp8Path::kW8a8Cublaslt:
            return run_w8a8_cublaslt(handle, plan, args, ws, stream);
          case Fp8Path::kMixedGemm:
          case Fp8Path::kFusedGemm:
            return run_gemm(plan, args, ws, stream);
          case Fp8Path::kDequantGemm:
            return run_dequant_gemm(handle, plan, args, ws, stream);
        }
        return Status(StatusCode::kInternal, "run_fp8_matmul: unknown path");
      });
}

Status prepack_fp8_matmul(const TensorView& b_scale, const MutableTensorView& prepacked,
                          cudaStream_t stream) {
  int64_t n = 0, k_blocks = 0;
  BQMM_RETURN_IF_ERROR(validate_fp8_prepack(b_scale, prepacked, &n, &k_blocks));
  return launch_scales_transpose(b_scale.data, n, k_blocks, prepacked.data, stream);
}

}  // namespace bqmm
