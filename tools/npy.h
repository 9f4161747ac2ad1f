// A NumPy .npy (format version 1.0) writer for the CLI's --dump-dir, so that a case's
// inputs and output can be loaded with numpy.load and checked by hand.
#pragma once

#include <string>

#include "bqmm/status.h"
#include "harness/host_tensor.h"

namespace bqmm::npy {

// The dtype tag that dump files carry in their names ("a.bf16.npy"): NumPy has no
// bfloat16 or float8, so those are stored as raw unsigned integers of the same width
// and the name says how to read them.
const char* file_tag(DType dtype);  // "f32", "f16", "bf16", "e4m3", "u8", "i32"

// Writes `t` (little-endian host data, C order) to `path`:
// float32 '<f4', float16 '<f2', bfloat16 '<u2' (raw bits), float8 e4m3 and uint8 '|u1',
// int32 '<i4'.
Status write(const std::string& path, const harness::HostTensor& t);

}  // namespace bqmm::npy
