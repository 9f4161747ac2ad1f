// The CUDA-core decode GEMVs (0 < M <= 8; gemv/fma.cuh says why and how): GemvFmaKernel
// on FP8 e4m3 codes (Fp8WeightMatMul's gemv_fma path) and on 8-bit integer codes
// (NBitsMatMul's gemv_fma), each format a codec, then the launchers and their
// instantiated configurations.
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/gemv/common.cuh"
#include "cuda/gemv/fma.cuh"
#include "cuda/gemv/nbits_tiles.cuh"
#include "cuda/launchers.h"

namespace bqmm::cuda {
namespace {

// ================================================================= FP8 codec
// GemvFmaKernel on e4m3 codes: a chunk of 16 codes takes one float32
// block scale (block_size % 16 == 0, so a chunk never straddles two blocks); W8A8's QDQ is
// the activation transform.
template <typename T_, bool kW8A8>
struct Fp8FmaCodec {
  using T = T_;
  using Params = GemvParams<T, float>;
  using Consts = float;  // the chunk's block scale

  __device__ static uint32_t block_of(const Params& p, uint32_t chunk) {
    return p.slices_per_block.div(chunk);
  }
  __device__ static float load_consts(const Params& p, int64_t col, uint32_t blk, bool ok) {
    return load_f32_if(p.scales + col * p.k_blocks + blk, ok);
  }
  __device__ static void decode(const uint4& w, float, float (&wf)[kFmaChunk]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 lo = e4m3x2_to_float2(static_cast<uint16_t>(word(w, q)));
      const float2 hi = e4m3x2_to_float2(static_cast<uint16_t>(word(w, q) >> 16));
      wf[4 * q + 0] = lo.x;
      wf[4 * q + 1] = lo.y;
      wf[4 * q + 2] = hi.x;
      wf[4 * q + 3] = hi.y;
    }
  }
  __device__ static float scale(float s) { return s; }
  using Act = W8A8Qdq<T, kW8A8>;
};

// ================================================================= N-bit 8-bit codec
// GemvFmaKernel on 8-bit integer codes, float16 / bfloat16 activations:
// the planner's kernel at M = 1 (and M = 2 in bfloat16), where its 512-byte warp loads
// stream faster than the tensor-core tiles' fragment-shaped ones. A chunk of 16 codes lies in one block
// (block_size >= 16, a power of two); q - zp is exact in float32 (2^23 + c minus
// 2^23 + zp, one prmt and one add per code), the block scale multiplies the chunk's float32
// partial sum. kZeroPoints: packed zero points given (else 2^(bits - 1)), a template
// parameter so that no select waits on a zero-point load.
template <typename T_, bool kZeroPoints>
struct NBits8FmaCodec {
  using T = T_;
  using Params = GemvParams<T>;
  struct Consts {
    uint32_t scale;  // the block scale's T bits
    uint32_t zp;     // the zero-point byte (packed zero points only)
  };

  __device__ static uint32_t block_of(const Params& p, uint32_t chunk) {
    return chunk >> (p.block_shift - 4);  // 16 codes per chunk
  }
  __device__ static Consts load_consts(const Params& p, int64_t col, uint32_t blk, bool ok) {
    Consts c;
    c.scale = load_u16_if(p.scales + col * p.k_blocks + blk, ok);
    c.zp = kZeroPoints ? load_u8_if(p.zp + col * p.zp_row_bytes + blk, ok) : 0;
    return c;
  }
  __device__ static void decode(const uint4& w, const Consts& c, float (&wf)[kFmaChunk]) {
    const uint32_t zp = kZeroPoints ? c.zp : Codes<8>::kDefaultZeroPoint;
    const float zero = __uint_as_float(0x4B000000u | zp);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) wf[4 * q + i] = magic_byte_float(word(w, q), i) - zero;
  }
  __device__ static float scale(const Consts& c) {
    const uint16_t bits = static_cast<uint16_t>(c.scale);
    T v;
    memcpy(&v, &bits, sizeof(v));
    return to_float(v);
  }
  struct Act {  // no activation transform
    __device__ explicit Act(const Params&) {}
    __device__ void operator()(uint32_t (&)[8]) const {}
  };
};

// ================================================================= launchers
// The instantiated configurations: FP8 (T, W8A8) and N-bit 8-bit (T, zero points), each
// at rows 1, 2, 4, 8 (FP8: the row group of M) and 1, 2 (N-bit: the planner's M <= 2).
// GemvFmaConfig (gemv/fma.cuh) sets the columns, unrolling and register bound per rows.
#define BQMM_FP8_FMA_ROWS(X) X(1) X(2) X(4) X(8)
#define BQMM_NBITS_FMA_ROWS(X) X(1) X(2)

template <typename T, int kRows>
Status launch_fp8_rows(const Fp8KernelArgs& args, cudaStream_t stream) {
  const GemvParams<T, float> p = make_fp8_params<T>(args, kFmaChunk);
  if constexpr (kRows == 1) {  // the one dependent-launch instance: one row, no W8A8
    if (args.dependent)
      return launch_gemv_fma<Fp8FmaCodec<T, false>, 1, true>(p, args.m, args.n, stream,
                                                             "GemvFmaKernel<fp8> (dependent)");
  }
  return args.a_scale != nullptr
             ? launch_gemv_fma<Fp8FmaCodec<T, true>, kRows>(p, args.m, args.n, stream,
                                                            "GemvFmaKernel<fp8>")
             : launch_gemv_fma<Fp8FmaCodec<T, false>, kRows>(p, args.m, args.n, stream,
                                                             "GemvFmaKernel<fp8>");
}

template <typename T, int kRows>
Status launch_nbits_rows(const NBitsGemvArgs& args, cudaStream_t stream) {
  const GemvParams<T> p = make_nbits_params<T>(args);
  constexpr const char* kName = "GemvFmaKernel<nbits8>";
  return args.zp_packed != nullptr
             ? launch_gemv_fma<NBits8FmaCodec<T, true>, kRows>(p, args.m, args.n, stream, kName)
             : launch_gemv_fma<NBits8FmaCodec<T, false>, kRows>(p, args.m, args.n, stream, kName);
}

}  // namespace

Status launch_fp8_gemv_fma(const Fp8KernelArgs& args, int rows_per_warp, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  // The CUDA-core GEMV has no row groups: M > 8 is the tensor cores' (line loads) or GEMM's.
  if (args.m > kMmaRows)
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_fma: M = " + std::to_string(args.m) + " exceeds 8 rows");
  if (args.dependent && (rows_per_warp != 1 || args.a_scale != nullptr))
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_fma: a dependent launch only at one row per warp without W8A8");
  BQMM_RETURN_IF_ERROR(check_fp8_k_range(args, "launch_fp8_gemv_fma"));
  return dispatch_half_types(args.dtype, "launch_fp8_gemv_fma", [&](auto tag) -> Status {
    using T = decltype(tag);
#define BQMM_LAUNCH_IF(R) \
  if (rows_per_warp == R) return launch_fp8_rows<T, R>(args, stream);
    BQMM_FP8_FMA_ROWS(BQMM_LAUNCH_IF)
#undef BQMM_LAUNCH_IF
    return Status(StatusCode::kInternal,
                  "launch_fp8_gemv_fma: rows_per_warp " + std::to_string(rows_per_warp) +
                      " is not instantiated (1, 2, 4, 8)");
  });
}

Status launch_nbits_gemv_fma(const NBitsGemvArgs& args, int rows, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return Status::Ok();
  BQMM_RETURN_IF_ERROR(check_nbits_gemv_args(args, rows, 1));
  if (args.bits != 8)
    return Status(StatusCode::kInternal, "launch_nbits_gemv_fma: 8-bit codes only, not " +
                                             std::to_string(args.bits));
  if (args.zp_typed != nullptr)
    return Status(StatusCode::kInternal, "launch_nbits_gemv_fma: no typed zero points (the register tile's)");
  return dispatch_half_types(args.dtype, "launch_nbits_gemv_fma", [&](auto tag) -> Status {
    using T = decltype(tag);
#define BQMM_LAUNCH_IF(R) \
  if (rows == R) return launch_nbits_rows<T, R>(args, stream);
    BQMM_NBITS_FMA_ROWS(BQMM_LAUNCH_IF)
#undef BQMM_LAUNCH_IF
    return Status(StatusCode::kInternal, "launch_nbits_gemv_fma: rows " + std::to_string(rows) +
                                             " is not instantiated (1, 2)");
  });
}

}  // namespace bqmm::cuda
