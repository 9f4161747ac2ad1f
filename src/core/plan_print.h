// Printing of the plan parts both operators share (bqmm/plan_parts.h), so that both
// plans read the same in BQMM_PRINT_PLAN / --explain lines: "key=value" items after "; ".
#pragma once

#include <ostream>

#include "bqmm/plan_parts.h"

namespace bqmm {

// "; dequant=<vector_name>|scalar; n_tile=<rows> x <tiles>"
inline std::ostream& print_dequant(std::ostream& os, const DequantConfig& d,
                                   const char* vector_name) {
  return os << "; dequant=" << (d.vector ? vector_name : "scalar") << "; n_tile=" << d.n_tile
            << " x " << d.num_n_tiles;
}

// The tensor-core GEMV's tiling: "; k_split=..; tma=..[; window=..]; lines=..; tiles=..
// [; regs=..][; row_groups=..]" (window for the operator that has that kernel, regs with two
// tiles).
// row_groups: M > 8 (the line-load kernels' groups of 16 rows).
inline std::ostream& print_tensor_core_gemv(std::ostream& os, const GemvConfig& g,
                                            bool has_window, bool row_groups) {
  os << "; k_split=" << g.k_split << "; tma=" << (g.tma ? 1 : 0);
  if (has_window) os << "; window=" << (g.window ? 1 : 0);
  os << "; lines=" << (g.lines ? 1 : 0) << "; tiles=" << g.tiles;
  if (g.registers > 0) os << "; regs=" << g.registers;
  if (row_groups) os << "; row_groups=" << g.row_groups;
  if (g.dependent_launch) os << "; dependent_launch=yes";
  return os;
}

// The fused GEMM's tiling: "; mainloop=wgmma|mma; tile_m=..; tile_n=..; stages=..; k_split=..".
// The mixed-input GEMM's tile and schedule: "; tile_m=<rows>; tile_n=128;
// schedule=persistent|stream_k", then "; swizzle=<S>" where the tile order is not CUTLASS's.
inline std::ostream& print_mixed_gemm(std::ostream& os, const GemmConfig& g) {
  os << "; tile_m=" << g.tile_m << "; tile_n=" << g.tile_n
     << "; schedule=" << (g.stream_k ? "stream_k" : "persistent");
  if (g.swizzle > 0) os << "; swizzle=" << g.swizzle;
  return os;
}

// The mixed-input GEMM's weight scales: "; scales=prepacked" (read from the operator's
// prepacked input) or "; scales=per_run" (a pass writes them into the workspace first).
inline std::ostream& print_mixed_scales(std::ostream& os, bool prepacked) {
  return os << "; scales=" << (prepacked ? "prepacked" : "per_run");
}

inline std::ostream& print_gemm(std::ostream& os, const GemmConfig& g) {
  return os << "; mainloop=" << (g.wgmma ? "wgmma" : "mma") << "; tile_m=" << g.tile_m << "; tile_n=" << g.tile_n << "; stages=" << g.stages
            << "; k_split=" << g.k_split << (g.cluster_reduce ? "; k_reduce=cluster" : "");
}

// "; workspace=<total>B (act <bytes>@<offset>, cublas .., scratch .., codes .., act_scales ..,
// scales .., act_order .., partial ..)": the regions the plan has, in the order the layout takes them (an empty
// region is left out).
inline std::ostream& print_workspace(std::ostream& os, const WorkspaceRegions& r,
                                     size_t total) {
  os << "; workspace=" << total << "B";
  if (total == 0) return os;
  const struct {
    const char* name;
    size_t bytes, offset;
  } regions[] = {{"act", r.act_bytes, r.act_offset},
                 {"cublas", r.cublas_bytes, r.cublas_offset},
                 {"scratch", r.scratch_bytes, r.scratch_offset},
                 {"codes", r.codes_bytes, r.codes_offset},
                 {"act_scales", r.act_scales_bytes, r.act_scales_offset},
                 {"scales", r.scales_bytes, r.scales_offset},
                 {"act_order", r.act_order_bytes, r.act_order_offset},
                 {"partial", r.partial_bytes, r.partial_offset}};
  const char* sep = " (";
  for (const auto& region : regions) {
    if (region.bytes == 0) continue;
    os << sep << region.name << " " << region.bytes << "@" << region.offset;
    sep = ", ";
  }
  return os << ")";
}

}  // namespace bqmm
