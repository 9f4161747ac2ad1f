// Device-side building blocks shared by every kernel family (FP8 and N-bit alike):
// the activation type traits, e4m3 decoding, streaming loads, warp reductions and the
// W8A8 activation quantize-dequantize, and the launch with programmatic dependence
// (launch_kernel). Kernel files include this.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include <string>
#include <type_traits>
#include <utility>

#include "bqmm/status.h"
#include "bqmm/tensor.h"
#include "cuda/cuda_check.h"

namespace bqmm::cuda {

constexpr int kWarpSize = 32;

// ----------------------------------------------------------------- activation types
// T is __half or __nv_bfloat16 (float for the N-bit operator's float32 activations).
template <typename T> struct TypeOf;
template <> struct TypeOf<__half> {
  static constexpr DType kDType = DType::kFloat16;
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct TypeOf<__nv_bfloat16> {
  static constexpr DType kDType = DType::kBFloat16;
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
template <> struct TypeOf<float> {
  static constexpr DType kDType = DType::kFloat32;
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};

template <typename T> __device__ __forceinline__ float to_float(T v) { return TypeOf<T>::to_float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v) { return TypeOf<T>::from_float(v); }

// Returns f(T{}) with T the device type of `dtype` (float16 or bfloat16); f returns a
// Status. Any other dtype is an internal error naming `what` (the planner never asks).
template <typename F>
Status dispatch_half_types(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(__half{});
    case DType::kBFloat16: return f(__nv_bfloat16{});
    default:
      return Status(StatusCode::kInternal, std::string(what) + ": unsupported dtype " + dtype_name(dtype));
  }
}

// As dispatch_half_types, plus float32 (the N-bit operator's T1 and the shared epilogues).
template <typename F>
Status dispatch_float_types(DType dtype, const char* what, F&& f) {
  if (dtype == DType::kFloat32) return f(float{});
  return dispatch_half_types(dtype, what, std::forward<F>(f));
}

// ----------------------------------------------------------------- e4m3 decoding
// Every e4m3 value is exact in float16 (and in bfloat16 and float32), so decoding goes
// through an fp8x2 -> half2 conversion and widens from there: the hardware's on SM89+,
// arithmetic below it (e4m3x2_to_half2_bits_arith; CUDA's own fallback normalizes
// subnormals in a loop, which makes the FP8 kernels' SM80 compile about 2.7x longer and
// their code slower).

// Two e4m3 codes (bits 0-7 and 8-15) -> two float16 (bits 0-15 and 16-31), exactly, in
// integer and float16 arithmetic any GPU has. A code's 7 magnitude bits eeee.mmm placed
// at bits 13-7 of a float16 read as 2^(e - 15) (1 + m / 8) (e = 0: the subnormal
// 2^-14 (m / 8)), which is the e4m3 value (bias 7) times 2^-8: one multiply by 256 (exact,
// float16 keeps subnormals) rebiases it. The largest finite magnitude, 448, lands on
// 0x5f00; 0x7f (NaN) alone lands at or above 480 (0x5f80) and becomes the canonical
// 0x7fff, its sign dropped, as the hardware conversion returns.
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits_arith(uint32_t codes) {
  const uint32_t magnitudes = ((codes & 0x7fu) << 7) | ((codes & 0x7f00u) << 15);
  uint32_t scaled;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(scaled) : "r"(magnitudes), "r"(0x5c005c00u));  // x 256
  const uint32_t signs = ((codes & 0x80u) << 8) | ((codes & 0x8000u) << 16);
  const uint32_t nan = __vcmpgeu2(scaled, 0x5f805f80u);  // 0xffff in each NaN half
  return ((scaled | signs) & ~nan) | (nan & 0x7fff7fffu);
}

// The same through the hardware conversion where there is one.
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint32_t codes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const __half2_raw h2 =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h2.x) | (static_cast<uint32_t>(h2.y) << 16);
#else
  return e4m3x2_to_half2_bits_arith(codes & 0xffffu);
#endif
}

// Two codes packed in the low 16 bits (element 0 in the low byte) -> two floats.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t codes) {
  const uint32_t bits = e4m3x2_to_half2_bits(codes);
  __half2_raw h2;
  h2.x = static_cast<unsigned short>(bits & 0xffffu);
  h2.y = static_cast<unsigned short>(bits >> 16);
  return __half22float2(__half2(h2));
}

__device__ __forceinline__ float e4m3_to_float(uint8_t code) { return e4m3x2_to_float2(code).x; }

// ----------------------------------------------------------------- W8A8 activation
// q = e4m3_satfinite_rne(a * inv); a' = round_T(float(q) * a_scale). inv is computed once
// by the caller as a_scale != 0 ? 1 / a_scale : 0 (IEEE division, no fast-math), so the
// kernels that fuse this are bit-identical to the standalone QDQ kernel.
__device__ __forceinline__ float qdq_inv_scale(float a_scale) {
  return a_scale != 0.0f ? 1.0f / a_scale : 0.0f;
}
template <typename T>
__device__ __forceinline__ T qdq_e4m3(float a, float inv, float a_scale) {
  const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(a * inv, __NV_SATFINITE, __NV_E4M3);
  return from_float<T>(e4m3_to_float(static_cast<uint8_t>(q)) * a_scale);
}

// ----------------------------------------------------------------- memory
// Weights are read exactly once per call: stream them past L1 (no_allocate) through the
// read-only path so they do not evict the activations other warps re-read.
#define BQMM_STREAM_LOAD_V4(qualifiers)                                                \
  asm volatile("ld.global.nc.L1::no_allocate" qualifiers ".v4.u32 {%0, %1, %2, %3}, [%4];" \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                \
               : "l"(p))
__device__ __forceinline__ uint4 load_stream_u4(const void* p) {
  uint4 v;
  BQMM_STREAM_LOAD_V4("");
  return v;
}

// load_stream_u4 with L2 fetching the whole 256-byte block around the 16 bytes
// (.L2::256B, as the TMA tiles' tensor maps do). FP8's register-load tensor-core tile
// reads 8 rows x 64 bytes per warp instruction and the rows' next bytes soon after: 2-4 %
// faster with it at M = 2..8 (H200). The N-bit tiles measured up to 17 %
// slower with it, and keep load_stream_u4.
__device__ __forceinline__ uint4 load_stream_u4_l2_256(const void* p) {
  uint4 v;
  BQMM_STREAM_LOAD_V4(".L2::256B");
  return v;
}

// Predicated forms: the registers are zeroed, then the load is issued under the predicate.
// A C++ `pred ? load(p) : 0` compiles to a load and a select that waits for the loaded
// value right away, which serializes a pipeline of loads; here nothing reads the result
// before the code that uses it, so any number of these can be in flight.
#define BQMM_PREDICATED_LOAD_V4(qualifiers)                                                \
  asm volatile(                                                                            \
      "{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n"                                       \
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"             \
      " @q ld.global.nc" qualifiers ".v4.u32 {%0, %1, %2, %3}, [%4];\n}"                    \
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                         \
      : "l"(p), "r"(static_cast<int>(pred)))

// Weight bytes (streamed past L1), zeros where !pred.
__device__ __forceinline__ uint4 load_stream_u4_if(const void* p, bool pred) {
  uint4 v;
  BQMM_PREDICATED_LOAD_V4(".L1::no_allocate");
  return v;
}

// Re-read data (activations: kept in L1), zeros where !pred.
__device__ __forceinline__ uint4 load_cached_u4_if(const void* p, bool pred) {
  uint4 v;
  BQMM_PREDICATED_LOAD_V4("");
  return v;
}
#undef BQMM_PREDICATED_LOAD_V4

// Scalars through the read-only path, 0 where !pred (predicated as above): float32 scales,
// 16-bit scales as bits and packed zero-point bytes, zero-extended to 32 bits.
#define BQMM_PREDICATED_LOAD_SCALAR(type, constraint)                                   \
  asm volatile(                                                                        \
      "{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n mov.b32 %0, 0;\n"                    \
      " @q ld.global.nc." type " %0, [%1];\n}"                                           \
      : "=" constraint(v)                                                              \
      : "l"(p), "r"(static_cast<int>(pred)))

__device__ __forceinline__ float load_f32_if(const float* p, bool pred) {
  float v;
  BQMM_PREDICATED_LOAD_SCALAR("f32", "f");
  return v;
}
__device__ __forceinline__ uint32_t load_u16_if(const void* p, bool pred) {
  uint32_t v;
  BQMM_PREDICATED_LOAD_SCALAR("u16", "r");
  return v;
}
__device__ __forceinline__ uint32_t load_u8_if(const void* p, bool pred) {
  uint32_t v;
  BQMM_PREDICATED_LOAD_SCALAR("u8", "r");
  return v;
}
#undef BQMM_PREDICATED_LOAD_SCALAR

// The 8-byte form, for kernels whose lanes take 8 weight bytes so that the wider output
// they produce (8 x T = 16 bytes) is stored fully coalesced.
__device__ __forceinline__ uint2 load_stream_u2(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}

// Outputs written once and not re-read by this kernel: evict-first streaming store.
__device__ __forceinline__ void store_stream_u4(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// ----------------------------------------------------------------- reductions
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ----------------------------------------------------------------- packed pairs of T
// Two 16-bit activations in one 32-bit register, element 0 in the low half: the layout of
// __half2 / __nv_bfloat162, of 16-byte vector loads and of the mma operand fragments.
template <typename T>
__device__ __forceinline__ float2 packed2_to_float2(uint32_t v) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h;
    memcpy(&h, &v, sizeof(h));
    return __half22float2(h);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "T is __half or __nv_bfloat16");
    // bfloat16 is the top half of a float32: widening is a shift, no conversion unit.
    return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
  }
}

template <typename T>
__device__ __forceinline__ uint32_t float2_to_packed2(float lo, float hi) {
  uint32_t v;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&v, &h, sizeof(v));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "T is __half or __nv_bfloat16");
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&v, &h, sizeof(v));
  }
  return v;
}

// Two e4m3 codes (element 0 in the low byte) -> two T packed, exactly: every e4m3 value is
// a float16 and a bfloat16. float16 takes one fp8x2 -> f16x2 conversion (hardware on
// SM89+); bfloat16 has none, so it widens to float32 and packs (cvt.rn.bf16x2.f32, exact here).
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_to_packed2(uint32_t codes) {
  if constexpr (std::is_same_v<T, __half>) {
    return e4m3x2_to_half2_bits(codes);
  } else {
    const float2 f = e4m3x2_to_float2(static_cast<uint16_t>(codes & 0xffffu));
    return float2_to_packed2<T>(f.x, f.y);
  }
}

// The same as e4m3x2_to_packed2<T>(codes >> 16): on SM89+ the conversion reads the upper
// half of the register itself (F2FP's .H1 operand) where the shift is an instruction.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_hi_to_packed2(uint32_t codes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h2;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(h2) : "r"(codes));
  if constexpr (std::is_same_v<T, __half>) {
    return h2;
  } else {
    __half2_raw raw;
    raw.x = static_cast<unsigned short>(h2 & 0xffffu);
    raw.y = static_cast<unsigned short>(h2 >> 16);
    const float2 f = __half22float2(__half2(raw));
    return float2_to_packed2<T>(f.x, f.y);
  }
#else
  return e4m3x2_to_packed2<T>(codes >> 16);
#endif
}

// W8A8 on two activations packed in T (element 0 in the low half): qdq_e4m3 of each, with
// the same conversions two lanes at a time (one e4m3x2 pack, one e4m3x2 -> f16x2 unpack),
// so bit-identical to two qdq_e4m3 calls at about half the instructions.
template <typename T>
__device__ __forceinline__ uint32_t qdq_e4m3x2(uint32_t packed, float inv, float a_scale) {
  const float2 a = packed2_to_float2<T>(packed);
  const __nv_fp8x2_storage_t q =
      __nv_cvt_float2_to_fp8x2(make_float2(a.x * inv, a.y * inv), __NV_SATFINITE, __NV_E4M3);
  const float2 d = e4m3x2_to_float2(static_cast<uint16_t>(q));
  return float2_to_packed2<T>(d.x * a_scale, d.y * a_scale);
}

// ----------------------------------------------------------------- shared memory
// The 32-bit shared-memory address of a generic pointer into shared memory (what ldmatrix,
// cp.async and the TMA / mbarrier instructions take).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix.x4 (SM75+): the four 8 x 8 matrices of 16-bit elements whose rows lanes 0-7,
// 8-15, 16-23 and 24-31 address; lane (g, t) gets row g, elements 2t and 2t + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ----------------------------------------------------------------- tensor cores
// D = A * B + C for one warp, mma.sync m16n8k16, T (float16 or bfloat16) operands, float32
// accumulators (SM80+). Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k16
// with floating point type"), g = lane / 4, t = lane % 4, each a[i] / b[i] holding two T
// (element 0 in the low half):
//   a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]
//   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]      A: 16 x 16, row-major
//   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]        B: 16 x 8, column-major
//   d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]   D, C: 16 x 8
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.m16n8k16 with float32 accumulators needs SM80; the planner never asks
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "T is __half or __nv_bfloat16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  }
#endif
}

// ----------------------------------------------------------------- integer division
// n / d for a divisor fixed per launch (a block size, a chunk count), without the ~20
// instructions of a run-time integer division: q = (umulhi(n, mul) + n) >> shift
// (round-up multiplier; exact for 1 <= d < 2^31 and n < 2^31). Built on the host.
struct FastDivU32 {
  uint32_t mul = 1;
  uint32_t shift = 0;

  FastDivU32() = default;
  __host__ explicit FastDivU32(uint32_t d) {
    shift = 0;
    while ((uint64_t{1} << shift) < d) ++shift;
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return (__umulhi(n, mul) + n) >> shift;
  }
};

// ----------------------------------------------------------------- reductions (many values)
namespace detail {
// One recursive-halving round per level: the lane with `offset` set keeps the upper half
// of the kCount remaining values, its partner the lower half; each adds what the other
// sends. Below one value per lane the rounds are a plain butterfly.
template <int kCount, int N>
__device__ __forceinline__ void reduce_scatter_rounds(float (&v)[N], int lane, int offset) {
  if constexpr (kCount > 1) {
    constexpr int kHalf = kCount / 2;
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const float send = upper ? v[i] : v[i + kHalf];
      const float keep = upper ? v[i + kHalf] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
    reduce_scatter_rounds<kHalf>(v, lane, offset / 2);
  } else {
#pragma unroll
    for (; offset > 0; offset /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
  }
}
}  // namespace detail

// Sums N per-lane values (N a power of two, <= 32) over the warp and returns, in lane l,
// the total of value l / (32 / N). N - 1 + 5 - log2(N) shuffles instead of the 5 * N of N
// separate warp_reduce_sum calls, and each total lands in its own lane group (one store
// per lane instead of N stores from lane 0).
template <int N>
__device__ __forceinline__ float warp_reduce_sum_scatter(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= kWarpSize && (N & (N - 1)) == 0, "N: power of two <= 32");
  detail::reduce_scatter_rounds<N>(v, lane, kWarpSize / 2);
  return v[0];
}

// ----------------------------------------------------------------- dependent launches
// Programmatic dependent launch (SM90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it
// in the stream still runs, once every block of that kernel has called
// allow_dependent_launch (or exited); it must call wait_for_prior_grid before reading
// anything that kernel wrote, which returns once that kernel has completed and its writes
// are visible. Both are no-ops below SM90 and for kernels launched without the attribute.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Pulls the line holding p into L2. Safe before wait_for_prior_grid whatever the kernel
// before writes: L2 is where every write lands, and the loads after the wait read there.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ----------------------------------------------------------------- thread-block clusters
// SM90 and later (the kernels that launch clusters are planned there only; below SM90
// these compile to nothing). cluster_sync: every thread of the cluster's blocks arrives
// (release: its prior writes, distributed shared memory included, become visible) and
// waits for all of them (acquire). Not .aligned: nothing here promises that a warp
// reaches it converged.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BQMM_CLUSTERS 1
#else
#define BQMM_CLUSTERS 0
#endif
__device__ __forceinline__ void cluster_sync() {
#if BQMM_CLUSTERS
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
#endif
}
__device__ __forceinline__ uint32_t cluster_block_rank() {
  uint32_t rank = 0;
#if BQMM_CLUSTERS
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  return rank;
}
// The address, in the cluster's shared-memory window, of shared-memory address `addr` of the
// cluster's block `rank`. A block's window is contiguous: map a base once, add offsets.
__device__ __forceinline__ uint32_t map_cluster_addr(uint32_t addr, uint32_t rank) {
  uint32_t mapped = addr;
#if BQMM_CLUSTERS
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(addr), "r"(rank));
#endif
  return mapped;
}
__device__ __forceinline__ void store_cluster_f32(uint32_t cluster_addr, float v) {
#if BQMM_CLUSTERS
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(cluster_addr), "f"(v) : "memory");
#endif
}

// ----------------------------------------------------------------- launch shapes
// Grid-stride element loops cap the grid at a few waves of the device.
inline unsigned int grid_for(int64_t work_items, int threads_per_block, int64_t max_blocks = 65535 * 8) {
  int64_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned int>(blocks);
}

// Whether the current device takes programmatic dependent launches (SM90 and later) and
// the kernels wait for them: built with SM90 device code (BQMM_SM90_CODE, CMakeLists.txt;
// the SM90-only objects, which do not see it, have it). A build for older GPUs alone
// runs on an SM90 GPU from PTX without wait_for_prior_grid, so it launches plainly (and
// its plans take no dependent GEMV: core/gemm_plan.h, gemv_dependent_launch_possible).
#ifndef BQMM_SM90_CODE
#define BQMM_SM90_CODE 1
#endif
inline bool dependent_launch_supported() {
  int device = 0, major = 0;
  return BQMM_SM90_CODE != 0 && cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent of the
// kernel before it where `dependent` and the device takes it, in thread-block clusters of
// `cluster_z` blocks along z where it is above 1 (grid.z a multiple of it, at most 8: the
// portable cluster size); errors named `name`.
template <typename... Params, typename... Args>
Status launch_kernel_ex(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream,
                        bool dependent, unsigned cluster_z, const char* name, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned count = 0;
  if (dependent && dependent_launch_supported()) {
    attr[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_z > 1) {
    attr[count].id = cudaLaunchAttributeClusterDimension;
    attr[count].val.clusterDim.x = 1;
    attr[count].val.clusterDim.y = 1;
    attr[count++].val.clusterDim.z = cluster_z;
  }
  config.attrs = attr;
  config.numAttrs = count;
  BQMM_RETURN_IF_ERROR(cuda_status(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name));
  return check_launch(name);
}
template <typename... Params, typename... Args>
Status launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream,
                     bool dependent, const char* name, Args&&... args) {
  return launch_kernel_ex(kernel, grid, block, smem, stream, dependent, 1u, name, std::forward<Args>(args)...);
}

}  // namespace bqmm::cuda
