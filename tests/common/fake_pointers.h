// Device addresses for the validation tests (tests/cpu/*_validate_test.cc): validation reads
// no data, so a tensor's pointer need only be a non-null, suitably aligned number. Each call
// of fake_pointer() returns a new 256-byte aligned address 2^40 bytes past the previous one,
// so that no two tensors of a test overlap (the validators refuse an output that overlaps
// an input); `offset` misaligns it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bqmm::testing {

inline void* fake_pointer(size_t offset = 0) {
  static uintptr_t next = 0;
  next += uintptr_t{1} << 40;
  return reinterpret_cast<void*>(next + offset);
}

}  // namespace bqmm::testing
