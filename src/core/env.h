// Environment variables (BQMM_*). Read only by the *_options_from_env helpers, the plan
// override (core/plan_override.h) and the CLI, never by the planners, which stay pure.
#pragma once

#include <cstdint>

#include "bqmm/status.h"

namespace bqmm::env {

// Reads integer variable `name`. Unset or empty: returns OK and leaves *value alone.
// Set but not an integer in [min, max]: InvalidArgument naming the variable.
Status read_int(const char* name, int64_t min, int64_t max, int64_t* value);

// BQMM_DEQUANT_SCRATCH_MIB (a positive integer, MiB) into *scratch_bytes; unset leaves it.
Status read_scratch_bytes(int64_t* scratch_bytes);

// BQMM_GEMV_DEPENDENT_LAUNCH (0 or 1) into *on; unset leaves it.
Status read_gemv_dependent_launch(bool* on);

// true when `name` is set to a non-empty value other than "0".
bool flag(const char* name);

}  // namespace bqmm::env
