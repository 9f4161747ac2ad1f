// Row groups of the line-load tensor-core GEMVs (M = 9 .. kGemvMaxGroupRows): FP8's
// Fp8GemvMmaKernel and NBitsMatMul's NBitsGemvWindowKernel launched through their
// launchers (cuda/launchers.h) with M > 8, so that ceil(M / 16) groups of up to 16 rows
// (two 8-row halves per warp tile) share each column block's weight reads. Every
// configuration the launchers instantiate with line loads (one and two tiles, 128 and 168
// registers, W8A8, zero points, every block decode) against the float64 reference at
// M = 9, 16, 17, 33 and 64: a partial second half (9), a second group of one row (17, 33),
// whole groups only (16, 64) and the most groups. Odd N leaves masked
// columns in the last column block of every group. The launchers' refusals (M > 8
// without line loads, past kGemvMaxGroupRows, the CUDA-core kernels) are checked too.
// The planners take row groups only under the override gemm=0 (the fused GEMM replaced
// them); these tests launch the kernels directly, so they test them whatever the plans.
// Every test skips itself, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "bqmm/status.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "core/gemv_split.h"
#include "cuda/launchers.h"
#include "harness/host_tensor.h"
#include "reference/fp8_reference.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;
using reference::NBitsCase;
using testing::nbits_gemv_args;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};
constexpr int64_t kGroupRows[] = {9, 16, 17, 33, 64};

// The line-load weight streams of both kernels: one tile, two tiles at 128 registers, two
// at 168 (k_split <= kGemvWideMaxKSplit).
struct LineStream {
  int tiles;
  int registers;
};
constexpr LineStream kLineStreams[] = {
    {1, 0}, {2, static_cast<int>(kGemvTwoTileRegisters)}, {2, static_cast<int>(kGemvWideRegisters)}};

bool tensor_cores_available() {
  const Handle* handle = testing::shared_handle();
  return handle != nullptr && handle->device_info().sm >= 80;
}

// ----------------------------------------------------------------- FP8
// Launches the line-load FP8 kernel on `c` (NaN-poisoned Y: an output no group writes
// fails the check) and compares every row with the float64 reference.
void check_fp8(const Fp8Case& c, int k_split, const LineStream& s) {
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  const cuda::Fp8KernelArgs g = testing::fp8_kernel_args(c, d);
  BQMM_ASSERT_OK(testing::run_on_fresh_stream([&](cudaStream_t stream) {
    return cuda::launch_fp8_gemv_mma(g, k_split, /*tma=*/false, /*lines=*/true, s.tiles,
                                     s.registers, stream);
  }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

TEST(Fp8GemvRowGroups, EveryLineConfigurationAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  struct Shape3 { int64_t n, k, block; };
  uint64_t seed = 100;
  for (const Shape3 sh : {Shape3{1000, 512, 64}, Shape3{4104, 1024, 128}, Shape3{1000, 768, 256}})
    for (const int64_t m : kGroupRows)
      for (const LineStream s : kLineStreams)
        for (const bool w8a8 : {false, true}) {
          const DType t = kDTypes[seed % 2];
          // Every k_split over the loop: the wide form takes at most 4 warps a block.
          int k_split = 1 << ((seed / 2) % 4);  // not tied to the dtype
          if (s.registers == kGemvWideRegisters && k_split > kGemvWideMaxKSplit) k_split = 2;
          SCOPED_TRACE(::testing::Message()
                       << "M=" << m << " N=" << sh.n << " K=" << sh.k << " block=" << sh.block
                       << " " << dtype_name(t) << " tiles=" << s.tiles << " registers="
                       << s.registers << " k_split=" << k_split << (w8a8 ? " W8A8" : ""));
          const Fp8Case c = reference::make_random_fp8_case(t, m, sh.n, sh.k, sh.block,
                                                            /*bias=*/seed % 3 != 0, w8a8, seed);
          ++seed;
          check_fp8(c, k_split, s);
        }
}

// Small shapes for compute-sanitizer: every group count's tail rows, masked columns of a
// single column block, both tile counts.
TEST(Fp8GemvRowGroups, SanitizeSmall) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 200;
  for (const int64_t m : {int64_t{9}, int64_t{17}, int64_t{64}})
    for (const LineStream s : kLineStreams) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << "M=" << m << " " << dtype_name(t)
                                        << " tiles=" << s.tiles << " registers=" << s.registers);
      const Fp8Case c = reference::make_random_fp8_case(t, m, 37, 256, 128, /*bias=*/true,
                                                        /*w8a8=*/seed % 2 == 0, seed);
      ++seed;
      check_fp8(c, 2, s);
    }
}

// ----------------------------------------------------------------- N-bit
void check_nbits(const NBitsCase& c, int k_split, const LineStream& s) {
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  const cuda::NBitsGemvArgs g = nbits_gemv_args(c, d);
  BQMM_ASSERT_OK(testing::run_on_fresh_stream([&](cudaStream_t stream) {
    return cuda::launch_nbits_gemv(g, /*algo=*/0, /*rows=*/8, k_split, /*tma=*/false,
                                   /*window=*/true, /*lines=*/true, s.tiles, s.registers, stream);
  }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(testing::matches_reference(c, y));
}

using testing::nbits_spec;

// Blocks 32 .. 256 cover each decode of the window kernel's line loads: blocks below a
// window (each weight scaled), of one window (scale pairs), and of two or more (a pair in
// one block): 4-bit windows are 128 codes, 8-bit 64.
TEST(NBitsGemvRowGroups, EveryLineConfigurationAgainstReference) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 300;
  for (const int bits : {4, 8})
    for (const int64_t block : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}})
      for (const bool zero_points : {false, true})
        for (const LineStream s : kLineStreams) {
          const DType t = kDTypes[seed % 2];
          const int64_t m = kGroupRows[seed % 5];
          // N odd (masked columns), K of whole 128-byte lines at both widths.
          const int64_t n = (seed / 3) % 2 == 0 ? 1000 : 4104;
          const int64_t k = 1024;
          int k_split = 1 << ((seed / 2) % 4);  // not tied to the dtype
          if (s.registers == kGemvWideRegisters && k_split > kGemvWideMaxKSplit) k_split = 4;
          SCOPED_TRACE(::testing::Message()
                       << bits << "-bit M=" << m << " N=" << n << " K=" << k << " block="
                       << block << " " << dtype_name(t) << (zero_points ? " zero points" : "")
                       << " tiles=" << s.tiles << " registers=" << s.registers
                       << " k_split=" << k_split);
          const NBitsCase c = reference::make_random_nbits_case(
              nbits_spec(t, bits, m, n, k, block, zero_points, /*bias=*/seed % 3 != 0), seed);
          ++seed;
          check_nbits(c, k_split, s);
        }
}

// Every group count of the contract's range on one configuration per bits.
TEST(NBitsGemvRowGroups, EveryGroupCount) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 400;
  for (const int bits : {4, 8})
    for (const int64_t m : kGroupRows) {
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t));
      const NBitsCase c = reference::make_random_nbits_case(
          nbits_spec(t, bits, m, 4104, 2048, 128, /*zero_points=*/true, /*bias=*/true), seed);
      ++seed;
      check_nbits(c, 4, kLineStreams[1]);
    }
}

TEST(NBitsGemvRowGroups, SanitizeSmall) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 500;
  for (const int bits : {4, 8})
    for (const int64_t m : {int64_t{9}, int64_t{17}, int64_t{64}})
      for (const LineStream s : kLineStreams) {
        const DType t = kDTypes[seed % 2];
        const int64_t block = bits == 4 ? 32 : 128;
        SCOPED_TRACE(::testing::Message() << bits << "-bit M=" << m << " " << dtype_name(t)
                                          << " tiles=" << s.tiles << " registers=" << s.registers);
        const NBitsCase c = reference::make_random_nbits_case(
            nbits_spec(t, bits, m, 37, 512, block, /*zero_points=*/seed % 2 == 0, /*bias=*/true),
            seed);
        ++seed;
        check_nbits(c, 2, s);
      }
}

// ----------------------------------------------------------------- refusals
// M > 8 only with line loads, at most kGemvMaxGroupRows, and never on the CUDA cores:
// kInternal (a planner bug), before anything is launched.
TEST(GemvRowGroups, LaunchersRefuseWhatHasNoRowGroups) {
  BQMM_REQUIRE_GPU();
  const Fp8Case c = reference::make_random_fp8_case(DType::kFloat16, 9, 32, 256, 128, false,
                                                    false, 1);
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  cuda::Fp8KernelArgs g = testing::fp8_kernel_args(c, d);
  auto code = [](const Status& s) { return s.code(); };
  EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 1, false, false, 1, 0, nullptr)), StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 1, true, false, 1, 0, nullptr)), StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_fp8_gemv_fma(g, 8, nullptr)), StatusCode::kInternal);
  g.m = kGemvMaxGroupRows + 1;
  EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 1, false, true, 1, 0, nullptr)), StatusCode::kInternal);

  const NBitsCase nc = reference::make_random_nbits_case(
      nbits_spec(DType::kFloat16, 8, 9, 32, 256, 64, false, false), 2);
  testing::NBitsDeviceCase nd;
  BQMM_ASSERT_OK(testing::upload_nbits_case(nc, &nd));
  cuda::NBitsGemvArgs ng = nbits_gemv_args(nc, nd);
  EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, false, true, false, 1, 0, nullptr)),
            StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, false, false, false, 1, 0, nullptr)),
            StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, true, false, false, 1, 0, nullptr)),
            StatusCode::kInternal);
  EXPECT_EQ(code(cuda::launch_nbits_gemv_fma(ng, 2, nullptr)), StatusCode::kInternal);
  ng.m = kGemvMaxGroupRows + 1;
  EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, false, true, true, 1, 0, nullptr)),
            StatusCode::kInternal);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A dependent launch (NBitsGemvArgs::dependent) of any GEMV but the 4-bit tensor-core
// register tile's algorithm 0 in float16 / bfloat16: kInternal before anything is
// launched; that tile itself launches.
TEST(GemvRowGroups, NBitsLauncherRefusesADependentLaunchOfAnyOtherKernel) {
  BQMM_REQUIRE_GPU();
  auto code = [](const Status& s) { return s.code(); };
  for (const auto& [t, bits] : {std::pair{DType::kFloat16, 4}, std::pair{DType::kFloat16, 8},
                                std::pair{DType::kFloat32, 4}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << bits << "-bit");
    const NBitsCase nc = reference::make_random_nbits_case(
        nbits_spec(t, bits, 8, 32, 256, 64, false, false), 3);
    testing::NBitsDeviceCase nd;
    BQMM_ASSERT_OK(testing::upload_nbits_case(nc, &nd));
    cuda::NBitsGemvArgs ng = nbits_gemv_args(nc, nd);
    ng.dependent = true;
    const bool the_tile = bits == 4 && t != DType::kFloat32;
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, false, false, false, 1, 0, nullptr)),
              the_tile ? StatusCode::kOk : StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 1, 8, 1, false, false, false, 1, 0, nullptr)),
              StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, false, true, true, 1, 0, nullptr)),
              StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 1, true, false, false, 1, 0, nullptr)),
              StatusCode::kInternal);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Typed zero points: only the register tile's algorithm 0 on float16 / bfloat16, launched
// plainly, takes them; the launcher refuses them on every other kernel (kInternal).
TEST(GemvRowGroups, NBitsLauncherTakesTypedZeroPointsOnlyOnTheRegisterTile) {
  BQMM_REQUIRE_GPU();
  auto code = [](const Status& s) { return s.code(); };
  for (const auto& [t, bits] : {std::pair{DType::kFloat16, 4}, std::pair{DType::kBFloat16, 8},
                                std::pair{DType::kFloat32, 4}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << bits << "-bit");
    reference::NBitsCaseSpec spec = nbits_spec(t, bits, 8, 32, 256, 64, false, false);
    spec.zero_points = NBitsZeroPoints::kTyped;
    const NBitsCase nc = reference::make_random_nbits_case(spec, 4);
    testing::NBitsDeviceCase nd;
    BQMM_ASSERT_OK(testing::upload_nbits_case(nc, &nd));
    cuda::NBitsGemvArgs ng = nbits_gemv_args(nc, nd);
    ng.zp_packed = nullptr;
    ng.zp_typed = nd.zero_points.data();
    const bool half = t != DType::kFloat32;
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 2, false, false, false, 1, 0, nullptr)),
              half ? StatusCode::kOk : StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 1, 8, 2, false, false, false, 1, 0, nullptr)),
              StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 2, false, true, false, 1, 0, nullptr)),
              StatusCode::kInternal);
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 2, true, false, false, 1, 0, nullptr)),
              StatusCode::kInternal);
    if (bits == 8 && half) {
      EXPECT_EQ(code(cuda::launch_nbits_gemv_fma(ng, 8, nullptr)), StatusCode::kInternal);
    }
    ng.dependent = true;
    EXPECT_EQ(code(cuda::launch_nbits_gemv(ng, 0, 8, 2, false, false, false, 1, 0, nullptr)),
              StatusCode::kInternal);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// FP8's configurations with a dependent-launch instance are one tile of line loads without
// W8A8 at M <= 8 and the CUDA-core kernel at one row without W8A8: the launchers refuse the
// flag anywhere else (kInternal) rather than launch a kernel that does not wait for the
// one before it.
TEST(GemvRowGroups, Fp8LauncherRefusesADependentLaunchOfAnyOtherConfiguration) {
  BQMM_REQUIRE_GPU();
  if (!tensor_cores_available()) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  auto code = [](const Status& s) { return s.code(); };
  for (const bool w8a8 : {false, true})
    for (const int64_t m : {int64_t{8}, int64_t{16}}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << (w8a8 ? " W8A8" : ""));
      const Fp8Case c = reference::make_random_fp8_case(DType::kFloat16, m, 32, 256, 128, false, w8a8, 5);
      testing::Fp8DeviceCase d;
      BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
      cuda::Fp8KernelArgs g = testing::fp8_kernel_args(c, d);
      g.dependent = true;
      const bool the_tile = !w8a8 && m <= 8;
      EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 2, false, true, 1, 0, nullptr)),
                the_tile ? StatusCode::kOk : StatusCode::kInternal);
      EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 2, false, true, 2, 0, nullptr)), StatusCode::kInternal);
      EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 2, false, false, 1, 0, nullptr)), StatusCode::kInternal);
      if (m <= 8) {
        EXPECT_EQ(code(cuda::launch_fp8_gemv_mma(g, 2, true, false, 1, 0, nullptr)), StatusCode::kInternal);
        EXPECT_EQ(code(cuda::launch_fp8_gemv_fma(g, 8, nullptr)), StatusCode::kInternal);
      }
      // The CUDA-core kernel's instance: one row per warp, no W8A8.
      cuda::Fp8KernelArgs one_row = g;
      one_row.m = 1;
      EXPECT_EQ(code(cuda::launch_fp8_gemv_fma(one_row, 1, nullptr)),
                w8a8 ? StatusCode::kInternal : StatusCode::kOk);
    }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace bqmm
