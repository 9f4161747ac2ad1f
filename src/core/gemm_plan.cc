#include "core/gemm_plan.h"
#include "core/mixed_plan.h"

namespace bqmm {

#ifndef BQMM_WGMMA_BUILT
#error "CMakeLists.txt defines BQMM_WGMMA_BUILT (1: the Hopper mainloop is built)"
#endif

bool wgmma_built() { return BQMM_WGMMA_BUILT != 0; }

#ifndef BQMM_MIXED_BUILT
#error "CMakeLists.txt defines BQMM_MIXED_BUILT (1: the mixed-input GEMM is built)"
#endif

bool mixed_gemm_built() { return BQMM_MIXED_BUILT != 0; }

#ifndef BQMM_SM90_CODE
#error "CMakeLists.txt defines BQMM_SM90_CODE (1: the kernels have SM90 device code)"
#endif

bool sm90_code_built() { return BQMM_SM90_CODE != 0; }

}  // namespace bqmm
