// Validation helpers shared by every operator: each returns a Status whose message names
// the input, the expected and the received value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"

namespace bqmm::check {

// "<name>: expected dtype float16 or bfloat16 but got float32"
Status dtype_in(const char* name, DType got, std::initializer_list<DType> allowed);

// "<name>: expected shape [4096, 32] (N, ceil(K/block_size)) but got [4096, 31]"
Status shape_eq(const char* name, const Shape& got, const Shape& expected,
                const char* meaning);

// As shape_eq for inputs with alternative layouts (e.g. [N, k_blocks] or flat):
// "<name>: expected shape [4096, 32] or [131072] (N, k_blocks; or flat) but got [4096]"
Status shape_in(const char* name, const Shape& got, std::initializer_list<Shape> expected,
                const char* meaning);

// One input of fixed dtype and shape with usable data: dtype_in, shape_eq, numel, data.
Status tensor(const char* name, const TensorView& t, DType dtype, const Shape& expected,
              const char* meaning);

// A prepacked weight part (the operators' `prepacked` input): of the expected dtype and
// shape with data, 16-byte aligned (the mixed-input GEMM reads it by TMA).
Status prepacked(const TensorView& t, DType dtype, const Shape& expected, const char* meaning);

// Negative dims, int64 overflow of the element count or of the byte size; writes numel.
Status numel(const char* name, const Shape& shape, DType dtype, int64_t* out);

// A tensor with elements must have data; its pointer must be aligned to its element size.
Status data(const char* name, const void* data, int64_t numel, DType dtype);

// Largest power of two <= 16 that divides the address (16 for nullptr).
int pointer_alignment(const void* p);
// The smallest pointer_alignment of `ps` (an absent optional input passes nullptr).
int min_pointer_alignment(std::initializer_list<const void*> ps);

// Splits an activation [..., K] into M (product of leading dims) and K; rank >= 1.
Status leading_dims(const char* name, const Shape& shape, int64_t* m, int64_t* k);

// Y's shape of a matmul: A's shape [..., K] with the last dimension replaced by n.
Status matmul_output_shape(const Shape& a_shape, int64_t n, Shape* y_shape);

// The caller's workspace for a plan needing `required` bytes: large enough
// (WorkspaceTooSmall otherwise), non-null and 256-byte aligned when required > 0.
Status workspace(const void* data, size_t bytes, size_t required);

// An integer option within [lo, hi]: "<name>: expected <expected> but got <got>".
Status int_in_range(const char* name, int64_t got, int64_t lo, int64_t hi, const char* expected);

// The dequant scratch bound both operators' options hold: > 0.
Status scratch_bytes(int64_t bytes);

// The device bytes [begin, end) of one tensor, named for messages; empty (begin == end)
// for an absent tensor or one without elements.
struct Span {
  const char* name = "";
  uintptr_t begin = 0, end = 0;
};
// The bytes of a tensor of `shape` elements of `dtype` at `data` (validated before: no
// overflow; the end saturates at the top of the address space).
Span span(const char* name, const void* data, DType dtype, const Shape& shape);
Span span(const char* name, const TensorView& t);
Span span(const char* name, const std::optional<TensorView>& t);
Span span(const char* name, const MutableTensorView& t);

// Memory an operator writes (`written`: an output or the workspace) shares no byte with
// any of `others` (what it reads or also writes): kernels read inputs while other blocks
// already write, so an overlap would be a silent wrong answer. Empty spans overlap nothing.
// "y: overlaps a; an operator's output must not share memory with its inputs, other
// outputs or workspace"
Status disjoint(const Span& written, const Span* others, size_t count);
Status disjoint(const Span& written, std::initializer_list<Span> others);

// a * b without overflow (both >= 0); "<what> overflows int64" otherwise.
Status mul_no_overflow(const char* what, int64_t a, int64_t b, int64_t* out);

}  // namespace bqmm::check
