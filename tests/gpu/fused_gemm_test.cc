// The fused GEMM kernels (cuda/gemm/) launched through launch_fused_gemm with every tile
// height (16, 32, 64 rows), K splits of 1 (Y written by the kernel) and more (float32
// partials added by the reduction), against the float64 reference: FP8 and 8-bit / 4-bit
// weights, both activation types, default, packed and typed (fractional) zero points,
// bias, odd N (masked
// columns in the last block column), M not a multiple of the tile (zero-filled rows), K
// not a multiple of block_size (a partial last block, and for N-bit its padding codes in
// the stored row), and every scale-block decode (blocks of a slab or more, half a slab,
// smaller: one lookup per word). Y is NaN-poisoned first, so an output no block writes
// fails. Every test skips itself, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "bqmm/nbits_matmul.h"
#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemm_plan.h"
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;
using reference::NBitsCase;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};
constexpr int64_t kRows[] = {9, 16, 17, 33, 64, 100, 128, 257, 1024};

bool tensor_cores_available() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm >= 80;
}

GemmConfig config_for(int tile_m, int k_split) {
  GemmConfig g;
  g.tile_m = tile_m;
  g.tile_n = kGemmTileN;
  g.stages = 0;  // the kernel's own
  g.k_split = k_split;
  return g;
}

// The Hopper mainloop's configuration of a tile (cuda/gemm/fused_wgmma.cuh).
GemmConfig wgmma_config(int tile_m, int k_split) {
  GemmConfig g = config_for(tile_m, k_split);
  g.wgmma = true;
  return g;
}

// The Hopper mainloop's K split of kClusterSumSplit summed in the tile's thread-block
// cluster (cluster_pair_store): no planes, no reduce kernel.
GemmConfig wgmma_cluster_config(int tile_m) {
  GemmConfig g = wgmma_config(tile_m, kClusterSumSplit);
  g.cluster_reduce = true;
  return g;
}

// K halves on the Hopper mainloop's tiles of up to 64 rows: blocks of 64 weight rows,
// each consumer warpgroup half the block's slabs; k_split > 1 (forced only) in planes.
GemmConfig wgmma_halves_config(int k_split, int tile_m = 64) {
  GemmConfig g = wgmma_config(tile_m, k_split);
  g.tile_n = kKHalvesTileN;
  return g;
}

// Launches on a fresh stream, with a partials buffer when the K split needs one and, for the Hopper
// mainloop, room for A in its K order, filled with NaN first (every element the GEMM
// copies must be written by its order pass).
Status launch(cuda::FusedGemmArgs args, const GemmConfig& config) {
  harness::DeviceBuffer partials, ordered;
  if (config.k_split > 1 && !config.cluster_reduce)
    BQMM_RETURN_IF_ERROR(harness::DeviceBuffer::allocate(
        static_cast<size_t>(config.k_split * args.m * args.n) * sizeof(float), &partials));
  if (config.wgmma) {
    const auto bytes = static_cast<size_t>(gemm_act_order_bytes(args.m, args.k, config.tile_m, dtype_size(args.dtype)));
    BQMM_RETURN_IF_ERROR(harness::DeviceBuffer::allocate(bytes, &ordered));
    if (cudaMemset(ordered.data(), 0xFF, bytes) != cudaSuccess)
      return Status(StatusCode::kCudaError, "cudaMemset of the ordered activations");
    args.a_ordered = ordered.data();
  }
  return testing::run_on_fresh_stream([&](cudaStream_t stream) {
    return cuda::launch_fused_gemm(args, config, static_cast<float*>(partials.data()), stream);
  });
}

// ----------------------------------------------------------------- FP8
void check_fp8(const Fp8Case& c, const GemmConfig& config) {
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  cuda::FusedGemmArgs g;
  g.dtype = c.dtype();
  g.weights = cuda::GemmWeights::kFp8;
  g.a = d.a.data();
  g.b = static_cast<const uint8_t*>(d.b.data());
  g.scales = d.b_scale.data();
  g.bias = c.bias ? d.bias.data() : nullptr;
  g.y = d.y.data();
  g.m = c.m();
  g.n = c.n();
  g.k = c.k();
  g.block_size = c.block_size;
  g.row_bytes = c.k();
  g.k_blocks = (c.k() + c.block_size - 1) / c.block_size;
  BQMM_ASSERT_OK(launch(g, config));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

TEST(FusedGemmFp8, EveryTileAndBlockDecodeAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the fused GEMM needs SM80+";
  struct Shape3 { int64_t n, k, block; };
  // Blocks of a slab or more (128, 256), half a slab (64, 192), smaller (16, 48); K % block
  // != 0 in the second and fourth.
  const Shape3 shapes[] = {{1000, 1024, 128}, {1037, 1040, 256}, {517, 768, 64},
                           {129, 1104, 192},  {300, 512, 16},    {260, 480, 48}};
  uint64_t seed = 1;
  for (const Shape3 sh : shapes)
    for (const int tile_m : {16, 32, 64})
      for (const int k_split : {1, 3}) {
        const DType t = kDTypes[seed % 2];
        const int64_t m = kRows[seed % 9];
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << sh.n << " K=" << sh.k
                                          << " block=" << sh.block << " " << dtype_name(t)
                                          << " tile_m=" << tile_m << " k_split=" << k_split);
        const Fp8Case c = reference::make_random_fp8_case(t, m, sh.n, sh.k, sh.block,
                                                          /*bias=*/seed % 3 != 0,
                                                          /*w8a8=*/false, seed);
        ++seed;
        check_fp8(c, config_for(tile_m, k_split));
      }
}

// Every M of the contract's list on one tile each.
TEST(FusedGemmFp8, EveryRowCount) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the fused GEMM needs SM80+";
  uint64_t seed = 50;
  for (const int64_t m : kRows) {
    const DType t = kDTypes[seed % 2];
    const int tile_m = static_cast<int>(gemm_tile_m(m));
    SCOPED_TRACE(::testing::Message() << "M=" << m << " " << dtype_name(t));
    const Fp8Case c = reference::make_random_fp8_case(t, m, 777, 2048, 128, /*bias=*/true,
                                                      /*w8a8=*/false, seed);
    ++seed;
    check_fp8(c, config_for(tile_m, 2));
  }
}

// ----------------------------------------------------------------- N-bit
void check_nbits(const NBitsCase& c, const GemmConfig& config) {
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  cuda::FusedGemmArgs g;
  g.dtype = c.dtype();
  g.weights = c.bits() == 8 ? cuda::GemmWeights::kInt8 : cuda::GemmWeights::kInt4;
  g.a = d.a.data();
  g.b = static_cast<const uint8_t*>(d.b.data());
  g.scales = d.scales.data();
  const NBitsZeroPoints zp = c.zero_point_kind();
  if (zp == NBitsZeroPoints::kPacked) g.zp_packed = static_cast<const uint8_t*>(d.zero_points.data());
  if (zp == NBitsZeroPoints::kTyped) g.zp_typed = d.zero_points.data();
  g.bias = c.bias ? d.bias.data() : nullptr;
  g.y = d.y.data();
  g.m = c.m();
  g.n = c.n();
  g.k = c.k();
  g.block_size = c.block_size();
  g.k_blocks = (c.k() + g.block_size - 1) / g.block_size;
  g.row_bytes = g.k_blocks * g.block_size * c.bits() / 8;
  g.zp_row_bytes = (g.k_blocks * c.bits() + 7) / 8;
  BQMM_ASSERT_OK(launch(g, config));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

using testing::nbits_spec;

// Blocks 16 .. 256 at both widths: a slab is 128 codes (8-bit) or 256 (4-bit), so this
// covers one block per slab, two, and one per lane word. K = 1000 leaves a partial last
// block everywhere (its padding codes are random in the stored row); 4-bit block 16 needs
// an even block count for 16-byte rows, K = 992. Each tile of `tiles` the mainloop has
// (wgmma: wgmma_tile_supported), with each zero-point form (none, packed, typed); M, N,
// the type, the K split and the bias cycle with the case's seed.
void check_every_nbits_block(uint64_t seed, bool wgmma, std::initializer_list<int> tiles) {
  for (const int bits : {4, 8})
    for (const int64_t block : {int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}})
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
        for (const int tile_m : tiles) {
          if (wgmma && !wgmma_tile_supported(tile_m, bits, false, block)) continue;
          const DType t = kDTypes[seed % 2];
          const int64_t m = kRows[seed % 9];
          const int64_t n = seed % 2 == 0 ? 1000 : 333;
          const int64_t k = bits == 4 && block == 16 ? 992 : 1000;
          const int k_split = 1 + static_cast<int>(seed % 3);
          SCOPED_TRACE(::testing::Message()
                       << bits << "-bit M=" << m << " N=" << n << " K=" << k << " block="
                       << block << " " << dtype_name(t) << " zero points " << nbits_zero_points_name(zp)
                       << " tile_m=" << tile_m << " k_split=" << k_split);
          const NBitsCase c = reference::make_random_nbits_case(
              nbits_spec(t, bits, m, n, k, block, zp, /*bias=*/seed % 3 != 0), seed);
          ++seed;
          check_nbits(c, wgmma ? wgmma_config(tile_m, k_split) : config_for(tile_m, k_split));
        }
}

// Every block size and mma.sync tile (check_every_nbits_block).
TEST(FusedGemmNBits, EveryBlockAndTileAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the fused GEMM needs SM80+";
  check_every_nbits_block(100, /*wgmma=*/false, {16, 32, 64});
}

// Every weight value the codes can take (uniform codes over the whole range, fractional
// scales, uniform zero points, packed and typed): the decode of each code against the
// reference.
TEST(FusedGemmNBits, AllCodes) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the fused GEMM needs SM80+";
  uint64_t seed = 200;
  for (const int bits : {4, 8})
    for (const DType t : kDTypes)
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
        reference::NBitsCaseSpec spec = nbits_spec(t, bits, 40, 250, 2048, 128, zp, true);
        spec.init = reference::WeightInit::kAllCodes;
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t) << " " << nbits_zero_points_name(zp));
        check_nbits(reference::make_random_nbits_case(spec, seed++), config_for(64, 1));
      }
}

// Small shapes for compute-sanitizer: every tile height, a K split, masked rows and
// columns, both formats.
TEST(FusedGemm, SanitizeSmall) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the fused GEMM needs SM80+";
  uint64_t seed = 300;
  for (const int tile_m : {16, 32, 64}) {
    const DType t = kDTypes[seed % 2];
    SCOPED_TRACE(::testing::Message() << "tile_m=" << tile_m << " " << dtype_name(t));
    check_fp8(reference::make_random_fp8_case(t, 21, 37, 272, 16, true, false, seed),
              config_for(tile_m, 2));
    check_nbits(reference::make_random_nbits_case(nbits_spec(t, 4, 21, 37, 264, 32, true, true),
                                                  seed),
                config_for(tile_m, 2));
    check_nbits(reference::make_random_nbits_case(
                    nbits_spec(t, 8, 21, 37, 264, 32, NBitsZeroPoints::kTyped, true), seed),
                config_for(tile_m, 2));
    ++seed;
  }
}

// ----------------------------------------------------------------- Hopper mainloop
// The wgmma kernels (cuda/gemm/fused_wgmma.cuh) through the same launcher, every tile
// they instantiate (core/gemm_plan.h, wgmma_tile_supported).
bool wgmma_available() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm == 90 && wgmma_built();
}
#define BQMM_REQUIRE_WGMMA()                                                              \
  BQMM_REQUIRE_GPU();                                                                     \
  if (!wgmma_available())                                                                 \
  GTEST_SKIP() << "the wgmma mainloop needs an SM90 device and a build with SM90 (" \
               << (wgmma_built() ? "built" : "not built") << ")"

// FP8 takes blocks of a whole slab (128) or more; K % block != 0 in the second and third;
// tile 128 above 64 rows (and tile 64 there too).
TEST(FusedWgmmaFp8, EveryRowCountAndSplitAgainstReference) {
  BQMM_REQUIRE_WGMMA();
  struct Shape3 { int64_t n, k, block; };
  const Shape3 shapes[] = {{1000, 1024, 128}, {1037, 1040, 256}, {129, 1104, 128}};
  uint64_t seed = 400;
  for (const Shape3 sh : shapes)
    for (const int64_t m : kRows)
      for (const int k_split : {1, 3}) {
        const DType t = kDTypes[seed % 2];
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << sh.n << " K=" << sh.k
                                          << " block=" << sh.block << " " << dtype_name(t)
                                          << " k_split=" << k_split);
        const int tile_m = m > 64 ? 128 : static_cast<int>(gemm_tile_m(m));  // as planned
        ASSERT_TRUE(wgmma_tile_supported(tile_m, 8, true, sh.block));
        const Fp8Case c = reference::make_random_fp8_case(t, m, sh.n, sh.k, sh.block,
                                                          /*bias=*/seed % 3 != 0,
                                                          /*w8a8=*/false, seed);
        ++seed;
        check_fp8(c, wgmma_config(tile_m, k_split));
        // Rows beyond one tile: each tile 64 as well (M = 100, 128 take two of them).
        if (m > 64 && m <= 128) check_fp8(c, wgmma_config(64, k_split));
      }
}

// Every block size and wgmma tile (check_every_nbits_block).
TEST(FusedWgmmaNBits, EveryBlockAndTileAgainstReference) {
  BQMM_REQUIRE_WGMMA();
  check_every_nbits_block(500, /*wgmma=*/true, {16, 32, 64, 128, 256});
}

// Blocks of one and two 16-byte chunks on tiles 16, 32, 64 (4-bit 32 and 64 codes, 8-bit
// 16 and 32): where k_blocks is a multiple of a stage's blocks (8 or 4) each row's scales
// and zero points of a slab load as vectors, else one block at a time a slab ahead (4 a
// slab) or per chunk where used (8); K of one slab, several (partial last blocks) and the
// ring lapped, every zero-point form, M in one tile and two, K splits 1 and 3.
TEST(FusedWgmmaNBits, VectorConstants) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 530;
  for (const int bits : {4, 8})
    for (const int chunks : {1, 2})
      for (const int64_t k : {int64_t{256}, int64_t{880}, int64_t{1000}, int64_t{1072}, int64_t{4096}})
        for (const NBitsZeroPoints zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
          const int64_t block = chunks * 128 / bits;
          const DType t = kDTypes[seed % 2];
          const int64_t m = seed % 4 == 0 ? 9 : seed % 4 == 1 ? 33 : seed % 4 == 2 ? 64 : 100;  // one tile, two
          const int k_split = seed % 2 == 0 ? 1 : 3;
          SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " K=" << k << " block=" << block << " "
                                            << dtype_name(t) << " zero points " << nbits_zero_points_name(zp)
                                            << " k_split=" << k_split);
          const int tile_m = seed % 3 == 0 ? 16 : seed % 3 == 1 ? 32 : 64;  // whole slabs, every small tile
          SCOPED_TRACE(::testing::Message() << "tile_m=" << tile_m);
          check_nbits(
              reference::make_random_nbits_case(nbits_spec(t, bits, m, 517, k, block, zp, seed % 3 != 0), seed),
              wgmma_config(tile_m, k_split));
          ++seed;
        }
}

// The 256-row tile (N-bit codes, blocks of 64 or more) at every M of the contract's list,
// within one tile (M <= 256, its rows past M zero-filled) and beyond it: odd N, K % block
// != 0, both widths, every zero-point form, K splits 1 and 3.
TEST(FusedWgmmaNBits, Tile256EveryRowCount) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 550;
  for (const int64_t m : kRows)
    for (const int bits : {4, 8}) {
      const DType t = kDTypes[seed % 2];
      const int64_t block = seed % 3 == 0 ? 64 : 128;
      const NBitsZeroPoints zp = seed % 3 == 0   ? NBitsZeroPoints::kNone
                                 : seed % 3 == 1 ? NBitsZeroPoints::kPacked
                                                 : NBitsZeroPoints::kTyped;
      const int k_split = seed % 2 == 0 ? 1 : 3;
      SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " block=" << block << " "
                                        << dtype_name(t) << " zero points " << nbits_zero_points_name(zp)
                                        << " k_split=" << k_split);
      ASSERT_TRUE(wgmma_tile_supported(256, bits, false, block));
      check_nbits(reference::make_random_nbits_case(nbits_spec(t, bits, m, 517, 1000, block, zp, seed % 4 != 0),
                                                    seed),
                  wgmma_config(256, k_split));
      ++seed;
    }
}

// The K split summed in a cluster of the tile's two blocks, every tile of every format:
// M within one tile and beyond it, odd N, K % block != 0, both widths, every zero-point
// form, bias or none.
TEST(FusedWgmma, ClusterSumEveryTile) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 650;
  for (const int tile_m : {16, 32, 64, 128})
    for (const int64_t m : {int64_t{9}, int64_t{tile_m}, int64_t{tile_m + 37}}) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << "FP8 tile_m=" << tile_m << " M=" << m << " " << dtype_name(t));
      check_fp8(reference::make_random_fp8_case(t, m, 517, 1040, 128, seed % 3 != 0, false, seed),
                wgmma_cluster_config(tile_m));
      ++seed;
    }
  for (const int bits : {4, 8})
    for (const int tile_m : {16, 32, 64, 128, 256})
      for (const int64_t m : {int64_t{9}, int64_t{tile_m}, int64_t{tile_m + 37}}) {
        const DType t = kDTypes[seed % 2];
        const NBitsZeroPoints zp = seed % 3 == 0   ? NBitsZeroPoints::kNone
                                   : seed % 3 == 1 ? NBitsZeroPoints::kPacked
                                                   : NBitsZeroPoints::kTyped;
        SCOPED_TRACE(::testing::Message() << bits << "-bit tile_m=" << tile_m << " M=" << m << " "
                                          << dtype_name(t) << " zero points " << nbits_zero_points_name(zp));
        ASSERT_TRUE(wgmma_tile_supported(tile_m, bits, false, 128));
        check_nbits(reference::make_random_nbits_case(nbits_spec(t, bits, m, 517, 1000, 128, zp, seed % 4 != 0),
                                                      seed),
                    wgmma_cluster_config(tile_m));
        ++seed;
      }
}

// K halves (FP8, int8 and 4-bit, every zero-point form): M within one tile and in two, odd
// N, K of one stage (the second half empty), two, an odd count with a partial last block
// (the second half one stage short) and 32 (the ring lapped; 4-bit 32 half-slab stages),
// 8-bit blocks of one and two slabs, 4-bit blocks of 64 (two a stage), unsplit and split in
// three into planes, bias or none; tiles 16, 32 and 64.
TEST(FusedWgmma, KHalvesEveryRowCount) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 680;
  struct Shape { int64_t m, k, block; int tile_m; };
  const Shape shapes[] = {{9, 1040, 128, 64}, {64, 128, 128, 64}, {33, 256, 128, 64}, {101, 4096, 256, 64},
                          {40, 1008, 128, 64}, {9, 1040, 128, 16}, {33, 1008, 128, 16}, {17, 4096, 256, 32},
                          {32, 256, 128, 32}, {70, 1040, 128, 32}};
  for (const Shape sh : shapes)
    for (const int k_split : {1, 3}) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " K=" << sh.k << " " << dtype_name(t)
                                        << " halves tile_m=" << sh.tile_m << " k_split=" << k_split);
      SCOPED_TRACE(::testing::Message() << "FP8 block=" << sh.block);
      check_fp8(reference::make_random_fp8_case(t, sh.m, 517, sh.k, sh.block, seed % 3 != 0, false, seed),
                wgmma_halves_config(k_split, sh.tile_m));
      ++seed;
      const NBitsZeroPoints zp = seed % 3 == 0   ? NBitsZeroPoints::kNone
                                 : seed % 3 == 1 ? NBitsZeroPoints::kPacked
                                                 : NBitsZeroPoints::kTyped;
      SCOPED_TRACE(::testing::Message() << "8-bit " << dtype_name(kDTypes[seed % 2]) << " block=" << sh.block
                                        << " zero points " << nbits_zero_points_name(zp));
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(kDTypes[seed % 2], 8, sh.m, 517, sh.k, sh.block, zp, seed % 4 != 0), seed),
                  wgmma_halves_config(k_split, sh.tile_m));
      ++seed;
      SCOPED_TRACE(::testing::Message() << "4-bit " << dtype_name(kDTypes[seed % 2]) << " block=64");
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(kDTypes[seed % 2], 4, sh.m, 517, sh.k, 64, zp, seed % 4 != 1), seed),
                  wgmma_halves_config(k_split, sh.tile_m));
    }
}

TEST(FusedWgmmaNBits, AllCodesAndEveryRowCount) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 600;
  for (const int bits : {4, 8})
    for (const DType t : kDTypes)
      for (const NBitsZeroPoints zp : {NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
        reference::NBitsCaseSpec spec = nbits_spec(t, bits, 40, 250, 2048, 128, zp, true);
        spec.init = reference::WeightInit::kAllCodes;
        SCOPED_TRACE(::testing::Message() << bits << "-bit all codes " << dtype_name(t) << " "
                                          << nbits_zero_points_name(zp));
        check_nbits(reference::make_random_nbits_case(spec, seed++), wgmma_config(64, 1));
      }
  for (const int64_t m : kRows) {
    const DType t = kDTypes[seed % 2];
    const int bits = seed % 2 == 0 ? 8 : 4;
    const int tile_m = bits == 8 && m > 64 ? 128 : static_cast<int>(gemm_tile_m(m));
    SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t) << " tile_m=" << tile_m);
    check_nbits(reference::make_random_nbits_case(
                    nbits_spec(t, bits, m, 517, 4096, 128, seed % 3 == 0, true), seed),
                wgmma_config(tile_m, 2));
    ++seed;
  }
}

// Small shapes for compute-sanitizer: each format and tile, a K split, masked rows and
// columns.
TEST(FusedWgmma, SanitizeSmall) {
  BQMM_REQUIRE_WGMMA();
  uint64_t seed = 700;
  const DType t = kDTypes[seed % 2];
  for (const int tile_m : {16, 32, 64})
    check_fp8(reference::make_random_fp8_case(t, 21, 37, 400, 128, true, false, seed), wgmma_config(tile_m, 2));
  check_fp8(reference::make_random_fp8_case(t, 21, 37, 400, 128, true, false, seed), wgmma_cluster_config(32));
  check_fp8(reference::make_random_fp8_case(t, 70, 37, 400, 128, true, false, seed), wgmma_config(128, 2));
  check_fp8(reference::make_random_fp8_case(t, 70, 37, 400, 128, true, false, seed), wgmma_cluster_config(128));
  check_fp8(reference::make_random_fp8_case(t, 21, 37, 400, 128, true, false, seed), wgmma_halves_config(1));
  check_fp8(reference::make_random_fp8_case(t, 21, 37, 400, 128, true, false, seed), wgmma_halves_config(1, 16));
  check_nbits(reference::make_random_nbits_case(nbits_spec(t, 4, 21, 37, 400, 64, NBitsZeroPoints::kPacked, true),
                                                seed),
              wgmma_halves_config(1));
  check_nbits(reference::make_random_nbits_case(nbits_spec(t, 8, 70, 37, 400, 128, NBitsZeroPoints::kTyped, true),
                                                seed),
              wgmma_halves_config(2));
  // Blocks of one and two chunks, their constants as vectors (k_blocks % 8 == 0).
  for (const int chunks : {1, 2}) {
    check_nbits(reference::make_random_nbits_case(
                    nbits_spec(t, 4, 21, 37, 504, 32 * chunks, NBitsZeroPoints::kPacked, true), seed),
                wgmma_config(64, 2));
    check_nbits(reference::make_random_nbits_case(
                    nbits_spec(t, 8, 70, 37, 248, 16 * chunks, NBitsZeroPoints::kTyped, true), seed),
                wgmma_config(64, 1));
  }
  for (const int bits : {4, 8})
    for (const int tile_m : {16, 32, 64, 128, 256}) {
      if (!wgmma_tile_supported(tile_m, bits, false, 64)) continue;
      SCOPED_TRACE(::testing::Message() << bits << "-bit tile_m=" << tile_m);
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(kDTypes[seed % 2], bits, 70, 37, 264, 64, true, true), seed),
                  wgmma_config(tile_m, 2));
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(kDTypes[(seed + 1) % 2], bits, 70, 37, 264, 64, NBitsZeroPoints::kTyped, true),
                      seed),
                  wgmma_config(tile_m, 2));
      check_nbits(reference::make_random_nbits_case(
                      nbits_spec(kDTypes[seed % 2], bits, 70, 37, 264, 64, true, true), seed),
                  wgmma_cluster_config(tile_m));
      ++seed;
    }
}

}  // namespace
}  // namespace bqmm
