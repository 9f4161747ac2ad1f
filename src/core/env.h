// Environment overrides (BQMM_*). Read only by the *_options_from_env helpers and the
// CLI, never by the planner, which stays pure.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "bqmm/status.h"

namespace bqmm::env {

// Reads integer variable `name`. Unset or empty: returns OK and leaves *value alone.
// Set but not an integer in [min, max]: InvalidArgument naming the variable.
Status read_int(const char* name, int64_t min, int64_t max, int64_t* value);

// read_int into an int option: sets *option only where `name` is set.
Status read_int_option(const char* name, int64_t min, int64_t max, int* option);

// One of `choices` into *option where `name` is set; any other value is InvalidArgument
// naming the variable and the choices.
Status read_int_choice(const char* name, std::initializer_list<int> choices, int* option);

// A two-tile GEMV register bound (kGemvTwoTileRegisters or kGemvWideRegisters, bqmm/device.h)
// into *option where `name` is set; any other value is InvalidArgument naming the variable.
Status read_gemv_registers(const char* name, int* option);

// A GEMV K split (0 for the planner's choice, 1, 2, 4 or 8) into *option where `name` is
// set; any other value is InvalidArgument naming the variable.
Status read_k_split(const char* name, int* option);

// The options both operators' dequant + GEMM paths share: BQMM_DEQUANT_SCRATCH_MIB (a
// positive integer, MiB) into *scratch_bytes and BQMM_DEQUANT_OVERLAP (0 or 1) into
// *overlap; unset variables leave their value alone.
Status read_dequant_options(int64_t* scratch_bytes, bool* overlap);

// true when `name` is set to a non-empty value other than "0".
bool flag(const char* name);

}  // namespace bqmm::env
