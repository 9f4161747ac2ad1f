// Why a planner did not take the mixed-input GEMM or the fused GEMM for a problem, or the
// fused GEMM's wgmma mainloop, in words
// (bqmm-profile --explain prints them under each plan). Internal, like the plan
// override: the planners decide with the same functions (fused_gemm_applies in
// core/*_plan.cc), so the reason is the rule's, not a restatement of it.
#pragma once

#include "bqmm/device.h"
#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "core/plan_override.h"

namespace bqmm {

// The first condition of the fused GEMM that `problem` fails on `device` under `override_`
// ("typed (fractional) zero points", "M <= 8 (the decode GEMV's rows)", ...), or nullptr
// where the planner takes the fused GEMM.
const char* fp8_fused_gemm_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                                   const PlanOverride& override_);
const char* nbits_fused_gemm_refusal(const NBitsMatMulProblem& problem,
                                     const DeviceInfo& device, const PlanOverride& override_);

// Why Fp8WeightMatMul does not take its W8A8 GEMM on FP8 tensor cores (A not quantized,
// M <= 8, not SM90, block_size % 128 != 0, ...), or nullptr where it does.
const char* fp8_w8a8_gemm_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                                  const PlanOverride& override_);
// Why W8A8 does not run on cuBLASLt's block-scaled FP8 GEMM ("M < 256: ...", "block_size !=
// 128 ...", the W8A8 GEMM's own refusals first), or nullptr where it does.
const char* fp8_w8a8_cublaslt_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                                      const PlanOverride& override_);

// Why the mixed-input GEMM (CUTLASS, SM90; core/mixed_plan.h, mixed_gemm_refusal) is not
// taken ("M <= 64: ...", "block_size % 64 != 0 ...", "g_idx ..."), or nullptr where it is.
const char* fp8_mixed_gemm_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                                   const PlanOverride& override_);
const char* nbits_mixed_gemm_refusal(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                                     const PlanOverride& override_);

// Where the fused GEMM is taken: why not on the Hopper (wgmma) mainloop, or nullptr where
// it is (core/gemm_plan.h, wgmma_refusal).
const char* fp8_wgmma_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                              const PlanOverride& override_);
const char* nbits_wgmma_refusal(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                                const PlanOverride& override_);
// Where the wgmma mainloop is taken: why on tiles of 64 rows or fewer rather than the
// 128-row one, or nullptr where it takes tile 128 (core/gemm_plan.h,
// wgmma_tile_128_refusal).
const char* fp8_wgmma_tile_128_refusal(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                                       const PlanOverride& override_);
const char* nbits_wgmma_tile_128_refusal(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                                         const PlanOverride& override_);

}  // namespace bqmm
