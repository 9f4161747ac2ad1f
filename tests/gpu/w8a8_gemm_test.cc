// The W8A8 FP8 x FP8 wgmma GEMM (cuda/gemm/w8a8_wgmma.cuh, SM90a) launched directly through
// launch_w8a8_gemm, static (a_scale) and dynamic (per row and K block) activation scales,
// against the float64 reference of each mode's quantization: both activation types, bias,
// odd N, M not a multiple of 128, K % block_size != 0, blocks 128, 256 and 512 (two chunks
// per lane of the quantize pass), tiles of 32, 64 and 128 rows, K splits 1 and 3, the GEMM
// launched plainly and as a programmatic dependent of the quantize pass.
// cuBLASLt's block-scaled FP8 GEMM (the w8a8_cublaslt path, blocks of 128, N % 8 == 0)
// through the operator, in a CUDA graph. Y is NaN-poisoned first; small cases for
// compute-sanitizer. Skips itself without an SM90 device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "bqmm/fp8_matmul.h"
#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "core/gemm_plan.h"
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;

// An SM90 device and a build with SM90 code (a build for SM80 alone, run on an SM90 GPU
// from its PTX, has no W8A8 GEMM: the planner refuses it there).
bool sm90() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm == 90 && wgmma_built();
}

// Scales row m's K block kb of A by 2^((m + 3 kb) % 7 - 3) (exact in float16 and bfloat16):
// every block's dynamic scale then differs from its neighbours' by 2x or more, so a fold
// with another block's or row's scales (a stage reused too early, a wrong index) is far
// outside the tolerance rather than within it, as with uniform random activations.
void vary_block_magnitudes(Fp8Case& c) {
  const int64_t m = c.m(), k = c.k();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t e = (r + 3 * (i / c.block_size)) % 7 - 3;
      c.a.set(r * k + i, std::ldexp(c.a.get(r * k + i), static_cast<int>(e)));
    }
}

// Scales each 128-row group's weight scales by 1/2, 1 or 2 in turn: groups stay uniform
// (b_scale_block_rows 128 holds) and a scale read from a neighbouring group is off by 2x.
void spread_scale_groups(Fp8Case& c) {
  const int64_t kb = c.k_blocks();
  for (int64_t r = 0; r < c.n(); ++r)
    for (int64_t b = 0; b < kb; ++b)
      c.b_scale.set(r * kb + b, std::ldexp(c.b_scale.get(r * kb + b), static_cast<int>((r / 128) % 3) - 1));
}

// The launch's choices: `dependent`, the GEMM launched as a programmatic dependent of the
// quantize pass, its first stages' weights copied while the pass runs (codes and scales
// start uninitialized, so a read of them before the pass completes is far from the
// reference); `cluster`, a K split summed in a thread-block cluster (the partials buffer
// then starts and stays uninitialized: a read of it is far from the reference too);
// `halves`, K halves in 64-row tiles (tile_n kKHalvesTileN).
GemmConfig w8a8_config(int tile_m, int k_split, bool dependent, bool cluster, bool halves = false) {
  GemmConfig g;
  g.wgmma = true;
  g.tile_m = tile_m;
  g.tile_n = halves ? kKHalvesTileN : kGemmTileN;
  g.k_split = k_split;
  g.dependent_launch = dependent;
  g.cluster_reduce = cluster;
  return g;
}

void check_w8a8(const Fp8Case& c, const GemmConfig& config) {
  const int k_split = config.k_split;
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  const cuda::Fp8KernelArgs g = testing::fp8_kernel_args(c, d);
  const int64_t k_blocks = c.k_blocks();
  harness::DeviceBuffer codes, scales, partials;
  BQMM_ASSERT_OK(harness::DeviceBuffer::allocate(static_cast<size_t>(g.m * g.k), &codes));
  BQMM_ASSERT_OK(harness::DeviceBuffer::allocate(
      static_cast<size_t>(k_blocks * w8a8_m_pad(g.m)) * sizeof(float), &scales));
  BQMM_ASSERT_OK(harness::DeviceBuffer::allocate(
      static_cast<size_t>(k_split * g.m * g.n) * sizeof(float) + 16, &partials));
  cuda::W8A8Workspace ws;
  ws.codes = static_cast<uint8_t*>(codes.data());
  ws.scales = static_cast<float*>(scales.data());
  ws.partials = static_cast<float*>(partials.data());
  BQMM_ASSERT_OK(testing::run_on_fresh_stream(
      [&](cudaStream_t stream) {
        return cuda::launch_w8a8_gemm(g, c.dynamic_act_quant, config, ws, stream);
      }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

TEST(W8A8Wgmma, BothModesAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!sm90()) GTEST_SKIP() << "the W8A8 wgmma GEMM needs SM90 (device and build)";
  struct Shape3 { int64_t m, n, k, block; };
  // {256, 512, 8192} and {130, 384, 8320}: K of 64 and 65 slabs, ten trips round each
  // block's ring of 6 stages; blocks of 512: each quantize lane two chunks, the last block 128.
  const Shape3 shapes[] = {{9, 1000, 1024, 128},   {64, 1037, 1040, 128}, {129, 517, 1280, 256},
                           {1024, 777, 2048, 128}, {257, 256, 1168, 256}, {256, 512, 8192, 128},
                           {130, 384, 8320, 256},  {101, 264, 1664, 512}};
  // Every tile in turn (32, 64, 128 activation rows), on every M: tiles past M, M in
  // several tiles with a partial last one.
  const int tiles[] = {32, 64, 128};
  // Unsplit, split in three into planes, split in two summed in a cluster.
  struct Split { int k_split; bool cluster; };
  const Split splits[] = {{1, false}, {3, false}, {2, true}};
  uint64_t seed = 300;
  for (const Shape3 sh : shapes)
    for (const bool dynamic : {false, true})
      for (const Split split : splits) {
        const DType t = seed % 2 == 0 ? DType::kFloat16 : DType::kBFloat16;
        // (Shifted by one each shape: every split meets every tile over the shapes.)
        const int tile_m = tiles[(seed + seed / 6) % 3];
        const bool dependent = (seed / 6) % 2 == 1;  // every other shape, all six of its cases
        SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " N=" << sh.n << " K=" << sh.k << " block="
                                          << sh.block << " " << dtype_name(t) << (dynamic ? " dynamic" : " static")
                                          << " tile_m=" << tile_m << " k_split=" << split.k_split
                                          << (split.cluster ? " cluster" : "") << (dependent ? " dependent" : ""));
        Fp8Case c = reference::make_random_fp8_case(t, sh.m, sh.n, sh.k, sh.block, /*bias=*/seed % 3 != 0,
                                                    /*w8a8=*/!dynamic, seed);
        c.dynamic_act_quant = dynamic;
        vary_block_magnitudes(c);
        ++seed;
        check_w8a8(c, w8a8_config(tile_m, split.k_split, dependent, split.cluster));
      }
}

// K halves (64-row tiles, each consumer warpgroup half the K blocks of its block): tiles
// of 32 and 64 rows, K blocks even and odd in number (the first half the larger; the
// second's last fills absent), blocks of one, two and four slabs with partial last ones,
// one K block (the second half empty), rings lapped many times, unsplit and split in three
// into planes, both modes, with and without the dependent launch.
TEST(W8A8Wgmma, KHalvesAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!sm90()) GTEST_SKIP() << "the W8A8 wgmma GEMM needs SM90 (device and build)";
  struct Shape3 { int64_t m, n, k, block; };
  const Shape3 shapes[] = {{9, 1000, 1024, 128},  {64, 1037, 1040, 128}, {33, 517, 1280, 256},
                           {64, 256, 8192, 128},  {40, 384, 8320, 256},  {17, 264, 1664, 512},
                           {20, 100, 112, 128}};
  uint64_t seed = 500;
  for (const Shape3 sh : shapes)
    for (const bool dynamic : {false, true})
      for (const int k_split : {1, 3}) {
        const DType t = seed % 2 == 0 ? DType::kFloat16 : DType::kBFloat16;
        const int tile_m = sh.m <= 32 || seed % 3 == 0 ? 32 : 64;  // past M, or M in two tiles
        const bool dependent = (seed / 4) % 2 == 1;
        SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " N=" << sh.n << " K=" << sh.k << " block="
                                          << sh.block << " " << dtype_name(t) << (dynamic ? " dynamic" : " static")
                                          << " tile_m=" << tile_m << " k_split=" << k_split << " halves"
                                          << (dependent ? " dependent" : ""));
        Fp8Case c = reference::make_random_fp8_case(t, sh.m, sh.n, sh.k, sh.block, /*bias=*/seed % 3 != 1,
                                                    /*w8a8=*/!dynamic, seed);
        c.dynamic_act_quant = dynamic;
        vary_block_magnitudes(c);
        ++seed;
        check_w8a8(c, w8a8_config(tile_m, k_split, dependent, /*cluster=*/false, /*halves=*/true));
      }
}

// Small shapes for compute-sanitizer (memcheck and racecheck: the producer's ring and the
// consumers' turns): edge tiles in M and N, a partial last K block, blocks of one, two and
// four slabs, each tile, a K split, K halves, both modes.
TEST(W8A8Wgmma, SanitizeSmall) {
  BQMM_REQUIRE_GPU();
  if (!sm90()) GTEST_SKIP() << "the W8A8 wgmma GEMM needs SM90 (device and build)";
  struct Shape3 { int64_t m, n, k, block; int tile_m, k_split; bool cluster, halves; };
  const Shape3 shapes[] = {{33, 130, 272, 128, 64, 1, false, false},
                           {129, 64, 528, 256, 32, 2, false, false},
                           {40, 70, 400, 128, 128, 2, true, false},
                           {35, 72, 1168, 512, 64, 2, true, false},
                           {33, 130, 1040, 128, 64, 1, false, true},
                           {20, 70, 1168, 256, 32, 2, false, true}};
  uint64_t seed = 400;
  for (const Shape3 sh : shapes)
    for (const bool dynamic : {false, true}) {
      const DType t = seed % 2 == 0 ? DType::kFloat16 : DType::kBFloat16;
      const bool dependent = seed % 4 >= 2;  // the second and fourth shapes
      SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " N=" << sh.n << " K=" << sh.k << " block=" << sh.block
                                        << (dynamic ? " dynamic" : " static") << " tile_m=" << sh.tile_m
                                        << " k_split=" << sh.k_split << (sh.cluster ? " cluster" : "")
                                        << (sh.halves ? " halves" : "") << (dependent ? " dependent" : ""));
      Fp8Case c = reference::make_random_fp8_case(t, sh.m, sh.n, sh.k, sh.block, /*bias=*/true,
                                                  /*w8a8=*/!dynamic, seed++);
      c.dynamic_act_quant = dynamic;
      check_w8a8(c, w8a8_config(sh.tile_m, sh.k_split, dependent, sh.cluster, sh.halves));
    }
}

struct Shape3 {
  int64_t m, n, k;
};

// A case for cuBLASLt's GEMM: block 128, the type and the bias from the seed, every
// activation block's magnitude different from its neighbours'.
Fp8Case block128_case(const Shape3& sh, bool dynamic, uint64_t seed) {
  const DType t = seed % 2 == 0 ? DType::kFloat16 : DType::kBFloat16;
  Fp8Case c = reference::make_random_fp8_case(t, sh.m, sh.n, sh.k, 128, /*bias=*/seed % 3 != 0,
                                              /*w8a8=*/!dynamic, seed);
  c.dynamic_act_quant = dynamic;
  vary_block_magnitudes(c);
  return c;
}

// Bit for bit: same dtype, shape and bytes.
bool same_bits(const HostTensor& got, const HostTensor& expected) {
  return got.dtype == expected.dtype && got.shape == expected.shape && got.bytes == expected.bytes;
}

// Case c through the operator on cuBLASLt's block-scaled GEMM (forced below its row bound),
// run twice in a CUDA graph; Y downloaded into *y. With per-row weight scales, again with
// the prepacked input (prepack_fp8_matmul): no scales region, the same Y bit for bit.
void check_cublaslt(const Fp8Case& c, HostTensor* y) {
  const Handle& handle = *testing::shared_handle();
  testing::Fp8Knobs knobs;
  knobs.force.w8a8_cublaslt = 1;
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, knobs, &d));
  ASSERT_EQ(d.plan.path, Fp8Path::kW8a8Cublaslt) << d.plan;
  ASSERT_EQ(d.plan.gemm.scale_rows, c.b_scale_block_rows == 128 ? 128 : 1) << d.plan;
  EXPECT_EQ(d.plan.regions.scratch_bytes > 0, c.m() % 4 != 0) << d.plan;
  BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(handle, s); }, /*replays=*/2));
  BQMM_ASSERT_OK(d.y.download(y));
  EXPECT_TRUE(testing::matches_reference(c, *y));
  if (d.plan.gemm.scale_rows != 1) return;
  harness::DeviceTensor prepacked;
  BQMM_ASSERT_OK(
      testing::upload_poisoned(DType::kFloat32, fp8_matmul_prepacked_shape(c.n(), c.k_blocks()), &prepacked));
  BQMM_ASSERT_OK(testing::run_on_fresh_stream(
      [&](cudaStream_t s) { return prepack_fp8_matmul(d.b_scale.view(), prepacked.mutable_view(), s); }));
  d.args.prepacked = prepacked.view();
  BQMM_ASSERT_OK(testing::plan_fp8_case(handle, c, knobs, &d));
  ASSERT_EQ(d.plan.path, Fp8Path::kW8a8Cublaslt) << d.plan;
  EXPECT_EQ(d.plan.regions.scales_bytes, 0u) << d.plan;
  BQMM_ASSERT_OK(d.y.poison());
  BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(handle, s); }, /*replays=*/2));
  HostTensor y_prepacked;
  BQMM_ASSERT_OK(d.y.download(&y_prepacked));
  EXPECT_TRUE(same_bits(y_prepacked, *y));
}

#define BQMM_REQUIRE_CUBLASLT() \
  BQMM_REQUIRE_GPU();           \
  if (!sm90()) GTEST_SKIP() << "cuBLASLt's block-scaled FP8 GEMM is SM90 only (device and build)"

// Both modes, both types, bias, per-row and 128-row weight scales (groups differing by up
// to 4x), M not a multiple of 4 (Y through the scratch) and of 128, K % 128 != 0, N not a
// multiple of 128; every activation block's magnitude different from its neighbours'.
TEST(W8A8Cublaslt, BothModesBothScaleFormsAgainstReference) {
  BQMM_REQUIRE_CUBLASLT();
  const Shape3 shapes[] = {{9, 1000, 1024}, {64, 1040, 1040}, {129, 264, 8336}, {257, 512, 2000}, {1024, 776, 2048}};
  uint64_t seed = 800;
  for (const Shape3 sh : shapes)
    for (const bool dynamic : {false, true})
      for (const int64_t rows : {1, 128}) {
        Fp8Case c = block128_case(sh, dynamic, seed++);
        if (rows == 128) {
          reference::share_scale_rows(128, &c);
          spread_scale_groups(c);
        }
        SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " N=" << sh.n << " K=" << sh.k << " "
                                          << dtype_name(c.dtype()) << (dynamic ? " dynamic" : " static")
                                          << " scale rows " << rows);
        HostTensor y;
        check_cublaslt(c, &y);
      }
}

// Small shapes for compute-sanitizer: M % 4 != 0 and == 0, a partial 128-row group and K
// block, both modes and scale forms.
TEST(W8A8Cublaslt, SanitizeSmall) {
  BQMM_REQUIRE_CUBLASLT();
  uint64_t seed = 900;
  for (const Shape3 sh : {Shape3{33, 136, 272}, Shape3{40, 264, 400}})
    for (const bool dynamic : {false, true}) {
      Fp8Case c = block128_case(sh, dynamic, seed++);
      SCOPED_TRACE(::testing::Message() << "M=" << sh.m << (dynamic ? " dynamic" : " static"));
      HostTensor y;
      check_cublaslt(c, &y);
      reference::share_scale_rows(128, &c);
      spread_scale_groups(c);
      check_cublaslt(c, &y);
    }
}

}  // namespace
}  // namespace bqmm
