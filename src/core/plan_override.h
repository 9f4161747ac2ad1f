// The internal plan override: forces the planner's kernel choices, for experiments and
// tests. Not part of the public API: bqmm-profile reads it from BQMM_PLAN_OVERRIDE and the
// tests build it directly; the public plan_* functions never see it.
//
//   BQMM_PLAN_OVERRIDE="key=value[,key=value...]"     e.g. "k_split=4,lines=0"
//
// Keys (each applies to the operators named; for the others it is an error):
//   gemv=0            both   never the decode GEMV (M <= 8, and its row groups above):
//                            dequant + cuBLAS where the fused GEMM does not take the problem
//   fma=0|1           both   the CUDA-core decode GEMV: 0 never where the tensor-core one
//                            applies, 1 wherever it applies
//   algo=0|1|2        nbits  the K-loop algorithm of the register-load kernel
//   k_split=1|2|4|8|12|16
//                     both   warps per block splitting K (tensor-core GEMV tiles; 12 and
//                            16 NBitsMatMul's window kernel)
//   tma=0|1           both   weight tiles by the tensor memory accelerator (SM90)
//   window=0|1        nbits  the whole-window kernel
//   lines=0|1         both   whole-line weight loads staged through shared memory
//   tiles=1|2         both   16-column tiles per warp (2 with line loads)
//   registers=128|168 both   the two-tile kernel's register bound
//   gemm=0|1          both   the fused GEMM: 0 never (the GEMV's row groups up to 32 rows,
//                            then dequant + cuBLAS), 1 wherever it applies, M <= 8 included
//                            and M = 9..16 where the GEMV's row group is preferred (as
//                            do wgmma, tile_m and gemm_k_split)
//   wgmma=0|1         both   the fused GEMM's Hopper mainloop: 0 never (mma.sync), 1 at
//                            every M where it has the tile (SM90 builds and devices)
//   tile_m=16|32|64|128|256
//                     both   the fused GEMM's activation rows per block (16, 32, 64: the
//                            rule's mainloop, wgmma=0|1 picks it; 128, 256: wgmma; 256
//                            N-bit codes, blocks of 64 or more)
//   gemm_k_split=1|2|4|8|16
//                     both   the fused GEMM's K split (> 1: float32 partial sums in the
//                            workspace)
//   w8a8=0|1          fp8    the W8A8 GEMM on FP8 tensor cores (A quantized): 0 never (the
//                            fused GEMM or dequant + cuBLAS on QDQ'd A), 1 wherever it
//                            applies, at every M; its K split is gemm_k_split's
//   mixed=0|1         both   the mixed-input GEMM (CUTLASS, SM90): 0 never (the fused GEMM
//                            or dequant + cuBLAS), 1 at every M > 8 where it applies
//   mixed_tile=128|256
//                     both   the mixed-input GEMM's activation rows per tile
//   mixed_sk=0|1      both   the mixed-input GEMM's schedule: 0 the persistent grid, 1
//                            stream-K (with mixed_tile, both forced)
//   mixed_swizzle=0|2|4|8
//                     both   the mixed-input GEMM's tile order on its persistent grid: 0
//                            CUTLASS's, S weight tiles first in bands of S activation tiles
//                            (stream-K keeps CUTLASS's)
//   w8a8_cublaslt=0|1 fp8    W8A8 on cuBLASLt's block-scaled FP8 GEMM: 0 never (the
//                            hand-written W8A8 GEMM), 1 at every M above 8 where it applies
//   lt_algo=0|1|2|3   fp8    W8A8 on cuBLASLt: the index of the algorithm it runs in
//                            cuBLASLt's heuristic list (fewer found: its last)
//   w8a8_pdl=0|1      fp8    the W8A8 GEMM as a programmatic dependent launch of its
//                            quantize pass: 1 on, 0 off (the planner's: on for tiles
//                            of 32 rows, M <= 32)
//   k_halves=0|1      both   the wgmma GEMMs' K halves (blocks of 64 weight rows whose two
//                            consumer warpgroups take half the K each): 1 wherever the
//                            tile and K allow (the W8A8 GEMM: tiles of 32 or 64 rows, two
//                            K blocks or more; the fused GEMM: wgmma tiles of 64 rows or
//                            fewer, 8-bit codes in blocks of whole slabs, 4-bit codes in
//                            blocks of 64, two slabs or more), 0 never (the planner's:
//                            core/gemm_plan.h, fused_gemm_takes_halves)
//   cluster_sum=0|1   both   a wgmma GEMM's K split of 2 summed within the tile's
//                            thread-block cluster through distributed shared memory (1),
//                            or in planes of partial sums added by a second kernel (0);
//                            the planner's: the W8A8 GEMM 1, the fused GEMM 1 but for
//                            4-bit codes on tiles of 64 rows or fewer
//   gemv_pdl=0|1      both   the decode GEMV's programmatic dependent launch (SM90),
//                            whatever the options' gemv_dependent_launch says: on (1) for
//                            NBitsMatMul's 4-bit register tile, FP8's one tile of line
//                            loads and its CUDA-core kernel at M = 1, without static W8A8;
//                            off (0) for all
// Unset keys leave the planner's choice. A forced choice that does not apply to a problem
// is ignored where the planner's rules say so (as for its own choices), except the
// conflicts the planner reports (registers=168 with k_split=8).
#pragma once

#include <initializer_list>
#include <string>

#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "bqmm/status.h"
#include "core/gemm_plan.h"
#include "core/mixed_plan.h"

namespace bqmm {

struct PlanOverride {
  int gemv = -1;       // -1: planner; 0: no decode GEMV
  int fma = -1;        // -1: planner; 0 / 1
  int algo = -1;       // -1: planner; kNBitsGemvAlgo*
  int k_split = 0;     // 0: planner; 1, 2, 4, 8
  int tma = -1;        // -1: planner; 0 / 1
  int window = -1;     // -1: planner; 0 / 1
  int lines = -1;      // -1: planner; 0 / 1
  int tiles = -1;      // -1: planner; 1 / 2
  int registers = -1;  // -1: planner; kGemvTwoTileRegisters / kGemvWideRegisters
  int gemm = -1;       // -1: planner; 0: never the fused GEMM; 1: wherever it applies
  int wgmma = -1;      // -1: planner; 0 / 1
  int tile_m = 0;      // 0: planner; 16, 32, 64, 128, 256
  int gemm_k_split = 0;  // 0: planner; 1, 2, 4, 8, 16 (up to kGemmMaxKSplit)
  int w8a8 = -1;       // -1: planner; 0: never the W8A8 GEMM; 1: wherever it applies
  int mixed = -1;      // -1: planner; 0: never the mixed-input GEMM; 1: wherever it applies
  int mixed_tile = 0;  // 0: planner; 128, 256
  int mixed_sk = -1;   // -1: planner; 0: the persistent grid; 1: stream-K
  int mixed_swizzle = -1;  // -1: planner; 0: CUTLASS's tile order; 2, 4, 8
  int w8a8_cublaslt = -1;   // -1: planner; 0: never cuBLASLt's W8A8 GEMM; 1: wherever it applies
  int lt_algo = -1;         // -1: planner; 0..3: cuBLASLt's heuristic list's index
  int w8a8_pdl = -1;        // -1: planner; 0 / 1: the W8A8 GEMM's dependent launch
  int k_halves = -1;        // -1: planner; 0 / 1: the wgmma GEMMs' K halves
  int cluster_sum = -1;     // -1: planner; 0 / 1: a wgmma GEMM's K split summed in a cluster
  int gemv_pdl = -1;        // -1: planner; 0 / 1: the decode GEMV's dependent launch

  bool empty() const;
};

// The fused GEMM's forced choices of an override (core/gemm_plan.h).
inline GemmForced gemm_forced(const PlanOverride& o) {
  return {o.wgmma, o.tile_m, o.gemm_k_split, o.cluster_sum, o.k_halves};
}

// gemm=1 or any of the fused GEMM's own keys: the fused GEMM wherever it applies, also at
// M = 9..16 where the planners prefer the GEMV's row group.
inline bool fused_gemm_forced(const PlanOverride& o) {
  return o.gemm == 1 || o.wgmma >= 0 || o.tile_m > 0 || o.gemm_k_split > 0;
}
// The mixed-input GEMM's (core/gemm_plan.h).
inline MixedForced mixed_forced(const PlanOverride& o) { return {o.mixed_sk, o.mixed_tile, o.mixed_swizzle}; }
// Whether the decode GEMV may launch as a programmatic dependent: gemv_pdl where set, else
// the caller's option (the operators' gemv_dependent_launch).
inline bool gemv_dependent_allowed(const PlanOverride& o, bool option) {
  return o.gemv_pdl == 1 || (o.gemv_pdl < 0 && option);
}

// Parses the grammar above. An unknown key, a malformed or out-of-range value, or a key
// given twice is InvalidArgument naming it (`source` prefixes the message, e.g. the
// variable's name).
Status parse_plan_override(const std::string& text, PlanOverride* out,
                           const char* source = "plan override");
// BQMM_PLAN_OVERRIDE (unset or empty: no override).
Status plan_override_from_env(PlanOverride* out);
// The override as the grammar writes it ("" when empty): parse_plan_override reads it back.
std::string to_string(const PlanOverride& o);

// Every set field of `o` holds one of its key's values, and none of the keys in
// `not_for_op` (those that do not apply to operator `op`) is set.
Status check_plan_override(const PlanOverride& o, const char* op,
                           std::initializer_list<const char*> not_for_op);

// The planners with an override (the public plan_* are these with an empty one). A key
// that does not apply to the operator is InvalidArgument.
Status plan_fp8_matmul(const Fp8MatMulProblem& problem, const DeviceInfo& device,
                       const Fp8MatMulOptions& options, const PlanOverride& override_,
                       Fp8MatMulPlan* plan);
Status plan_nbits_matmul(const NBitsMatMulProblem& problem, const DeviceInfo& device,
                         const NBitsMatMulOptions& options, const PlanOverride& override_,
                         NBitsMatMulPlan* plan);

}  // namespace bqmm
