// The fused decode GEMV of Fp8WeightMatMul (0 < M <= 8): the CUDA-core kernel (gemv_fma)
// and the tensor-core kernel (gemv_mma) through the public API against the float64
// reference over every value of every axis, the mma's lane ownership with a one-hot probe
// (exact), W8A8 bit identity with a host-QDQ'd activation, NaN propagation, graph capture,
// a misaligned weight that must fall back, and small tail-heavy cases for the sanitizer.
// Every test skips itself, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bqmm/fp8_matmul.h"
#include "core/gemm_plan.h"
#include "core/gemv_split.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "harness/device_buffer.h"
#include "reference/codecs.h"
#include "reference/fp8_reference.h"

namespace bqmm {
namespace {

using harness::HostTensor;
using reference::Fp8Case;
using reference::make_random_fp8_case;
using testing::Fp8Run;
using testing::matches_reference;
using testing::run_fp8_on_device;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};

// The tensor-core kernel's weight stream, forced so that each is tested on every shape:
// fragment-shaped register loads, TMA tiles (SM90+) or line loads (K % 128 == 0) of one
// tile per warp or of two, at 128 or at 168 registers (the plan's registers; k_split <= 4).
enum class Stream { kRegs = 0, kTma = 1, kLines = 2, kLinesTwoTiles = 3, kLinesTwoTilesWide = 4 };
constexpr Stream kStreams[] = {Stream::kRegs, Stream::kTma, Stream::kLines,
                               Stream::kLinesTwoTiles, Stream::kLinesTwoTilesWide};
const char* stream_name(Stream s) {
  return s == Stream::kTma                  ? "tma"
         : s == Stream::kLines              ? "lines"
         : s == Stream::kLinesTwoTiles     ? "lines x2"
         : s == Stream::kLinesTwoTilesWide ? "lines x2 at 168 registers"
                                            : "regs";
}
bool two_tiles(Stream s) { return s == Stream::kLinesTwoTiles || s == Stream::kLinesTwoTilesWide; }

// allow_mma: the tensor cores at every M where the kernel applies (the original design's
// rule), so that both kernels are tested at every M; else the CUDA cores only.
testing::Fp8Knobs gemv_options(bool allow_mma, Stream stream = Stream::kRegs) {
  testing::Fp8Knobs o;
  o.force.fma = allow_mma ? 0 : 1;
  o.force.tma = stream == Stream::kTma ? 1 : 0;
  const bool lines = stream == Stream::kLines || two_tiles(stream);
  o.force.lines = lines ? 1 : 0;
  o.force.tiles = two_tiles(stream) ? 2 : 1;
  o.force.registers =
      stream == Stream::kLinesTwoTilesWide ? kGemvWideRegisters : kGemvTwoTileRegisters;
  return o;
}

// A gemv_mma plan took the forced stream where it applies: TMA tiles on SM90+, line loads
// (one or two tiles per warp) on rows of whole 128-byte lines; register loads elsewhere.
void expect_stream(const Handle& handle, const Fp8MatMulPlan& plan, Stream stream) {
  const bool lines = (stream == Stream::kLines || two_tiles(stream)) && plan.problem.k % 128 == 0;
  EXPECT_EQ(plan.gemv.tma, stream == Stream::kTma && handle.device_info().sm >= 90) << plan;
  EXPECT_EQ(plan.gemv.lines, lines) << plan;
  const int tiles = lines && two_tiles(stream) ? 2 : 1;
  EXPECT_EQ(plan.gemv.tiles, tiles) << plan;
  EXPECT_EQ(plan.gemv.registers, tiles == 1                                 ? 0
                                 : stream == Stream::kLinesTwoTilesWide ? kGemvWideRegisters
                                                                         : kGemvTwoTileRegisters)
      << plan;
}

// The path the planner must take for a GEMV-eligible problem on this device with
// gemv_options (the contract's dispatch rule, restated so that the tests pin it).
Fp8Path expected_gemv_path(const Handle& handle, bool allow_mma, int64_t k, int64_t block_size) {
  const bool mma = allow_mma && handle.device_info().sm >= 80 && k % 64 == 0 && k >= 256 &&
                   block_size % 64 == 0;
  return mma ? Fp8Path::kGemvMma : Fp8Path::kGemvFma;
}

// Every M (1..8) with both option sets (the mma allowed or not), 3 cases per M: N, K and
// the block size cycle with the case index (periods 5, 6 and the list length), so every
// value of every axis is seen, with each option set, and every M gets a K the tensor-core
// kernel takes. dtype, bias, a_scale and the weight distribution cycle too. Where the
// planner does not take the tensor cores (K = 16, 48; block size 16) the test asserts the
// CUDA-core path instead. Fresh data per case; about 4.3e8 reference MACs in all.
void check_axes(bool allow_mma, Stream stream = Stream::kRegs) {
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const int64_t ns[] = {1, 17, 1026, 4098, 8194};
  const int64_t ks[] = {16, 48, 256, 320, 1024, 4096};
  const std::vector<int64_t> blocks = allow_mma ? std::vector<int64_t>{64, 128, 256, 512}
                                                : std::vector<int64_t>{16, 64, 128, 256, 512};
  int mma_cases = 0;
  for (int64_t m = 1; m <= 8; ++m)
    for (int j = 0; j < 3; ++j) {
      const int i = static_cast<int>(m - 1) * 3 + j;
      const int64_t n = ns[i % 5];
      const int64_t k = ks[i % 6];
      const int64_t bs = blocks[i % blocks.size()];
      const DType t = kDTypes[(i / 3) % 2];
      const bool bias = (i + i / 6) % 2 == 0;
      const bool w8a8 = (i / 2) % 2 == 1;
      const auto init = i % 3 == 0 ? reference::WeightInit::kAllCodes
                                   : reference::WeightInit::kQuantizedNormal;
      SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k << " block="
                                        << bs << " " << dtype_name(t) << " bias=" << bias
                                        << " w8a8=" << w8a8 << " allow_mma=" << allow_mma
                                        << " stream=" << stream_name(stream));
      const Fp8Case c = make_random_fp8_case(
          t, m, n, k, bs, bias, w8a8,
          0x6e30000 + (allow_mma ? 1000 : 0) + 2000 * static_cast<int>(stream) + i, init);
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma, stream), &run));
      const Fp8Path want = expected_gemv_path(*handle, allow_mma, k, bs);
      EXPECT_EQ(run.plan.path, want) << run.plan;
      if (want == Fp8Path::kGemvMma) expect_stream(*handle, run.plan, stream);
      if (want == Fp8Path::kGemvFma) {
        EXPECT_EQ(run.plan.gemv.rows, m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8);
      }
      mma_cases += want == Fp8Path::kGemvMma;
      EXPECT_TRUE(matches_reference(c, run.y));
    }
  // Every M took the tensor cores at least once (on SM80+).
  if (allow_mma && handle->device_info().sm >= 80) {
    EXPECT_GE(mma_cases, 8);
  }
}

TEST(Fp8GemvFma, AxesAgainstReference) {
  BQMM_REQUIRE_GPU();
  check_axes(/*allow_mma=*/false);
}

TEST(Fp8GemvMma, AxesAgainstReference) {
  BQMM_REQUIRE_GPU();
  check_axes(/*allow_mma=*/true);
}

// The same axes through the TMA weight stream (SM90+; elsewhere the planner keeps the
// register loads and the test checks that).
TEST(Fp8GemvTma, AxesAgainstReference) {
  BQMM_REQUIRE_GPU();
  check_axes(/*allow_mma=*/true, Stream::kTma);
}

// And through line loads (K = 256, 1024, 4096 take them, K = 320 keeps register loads),
// with one and with two 16-column tiles per warp (N = 1 and 17: the second tile has no
// column or one).
TEST(Fp8GemvLines, AxesAgainstReference) {
  BQMM_REQUIRE_GPU();
  check_axes(/*allow_mma=*/true, Stream::kLines);
}

TEST(Fp8GemvLines, AxesAgainstReferenceTwoTiles) {
  BQMM_REQUIRE_GPU();
  check_axes(/*allow_mma=*/true, Stream::kLinesTwoTiles);
  check_axes(/*allow_mma=*/true, Stream::kLinesTwoTilesWide);
}

// N far past one grid row of blocks (and not a multiple of any tile), 64-bit n * K.
TEST(Fp8GemvMma, LargeNAgainstReference) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  for (bool allow_mma : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "allow_mma=" << allow_mma);
    const Fp8Case c = make_random_fp8_case(DType::kBFloat16, 2, 262147, 256, 128, true, false,
                                           0x6e31000 + allow_mma,
                                           reference::WeightInit::kAllCodes);
    Fp8Run run;
    BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma), &run));
    EXPECT_EQ(run.plan.path, expected_gemv_path(*handle, allow_mma, 256, 128));
    EXPECT_TRUE(matches_reference(c, run.y));
  }
}

// Lane ownership of the tensor-core kernel: a one-hot activation (A[r, k0] = 1) against
// weights that are distinct small integers must give exactly Y[r, n] = B[n, k0] and zero
// in every other row. r runs over all 8 rows, k0 over every position of the first 128 K
// (two register windows, one TMA tile or line pair) and a spread of positions in the others
// (each warp of the K split owns some), N = 32 covers two 16-column tiles; every weight
// stream. A swapped fragment register, a wrong K permutation or a wrong (row, column) store
// shows up as a wrong or misplaced value.
TEST(Fp8GemvMma, LaneOwnershipProbe) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm < 80) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  constexpr int64_t kM = 8, kN = 32, kK = 512;
  std::vector<int64_t> k0s;
  for (int64_t k0 = 0; k0 < 128; ++k0) k0s.push_back(k0);  // two windows, a tile, a pair
  for (int64_t k0 = 128; k0 < kK; k0 += 29) k0s.push_back(k0);
  k0s.push_back(kK - 1);

  for (Stream stream : kStreams)
  for (DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << dtype_name(t) << " stream=" << stream_name(stream));
    Fp8Case c;
    c.block_size = 128;
    c.a = HostTensor::zeros(t, Shape{kM, kK});
    c.b = HostTensor::zeros(DType::kFloat8E4M3, Shape{kN, kK});
    c.b_scale = HostTensor::zeros(DType::kFloat32, Shape{kN, kK / 128});
    // Column k holds a permutation of +-1..16 over n: index (a * n + s) % 32 with a =
    // 2 (k % 16) + 1 (odd, so a bijection) and s = k / 16, distinct for all 512 k.
    for (int64_t n = 0; n < kN; ++n)
      for (int64_t k = 0; k < kK; ++k) {
        const int64_t idx = ((2 * (k % 16) + 1) * n + k / 16) % 32;
        c.b.set(n * kK + k, idx < 16 ? static_cast<double>(idx + 1) : -static_cast<double>(idx - 15));
      }
    for (int64_t i = 0; i < c.b_scale.numel(); ++i) c.b_scale.set(i, 1.0);

    testing::Fp8DeviceCase d;
    BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
    BQMM_ASSERT_OK(testing::plan_fp8_case(*handle, c, gemv_options(true, stream), &d));
    ASSERT_EQ(d.plan.path, Fp8Path::kGemvMma) << d.plan;
    expect_stream(*handle, d.plan, stream);

    int64_t mismatches = 0;
    for (int64_t r = 0; r < kM; ++r)
      for (int64_t k0 : k0s) {
        HostTensor one_hot = HostTensor::zeros(t, Shape{kM, kK});
        one_hot.set(r * kK + k0, 1.0);
        ASSERT_EQ(cudaMemcpy(d.a.data(), one_hot.data(), one_hot.bytes.size(),
                             cudaMemcpyHostToDevice),
                  cudaSuccess);
        BQMM_ASSERT_OK(d.y.poison());
        BQMM_ASSERT_OK(d.run(*handle, nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        HostTensor y_host;
        BQMM_ASSERT_OK(d.y.download(&y_host));
        for (int64_t m = 0; m < kM; ++m)
          for (int64_t n = 0; n < kN; ++n) {
            const double want = m == r ? c.b.get(n * kK + k0) : 0.0;
            const double got = y_host.get(m * kN + n);
            if (got != want && mismatches++ < 10)
              ADD_FAILURE() << "one-hot at row " << r << ", k " << k0 << ": Y[" << m << ", " << n
                            << "] = " << got << ", want " << want;
          }
      }
    EXPECT_EQ(mismatches, 0);
  }
}

// W8A8 is fused into the GEMV's activation load: Y with a_scale equals, bit for bit, Y of
// the same kernel fed the host-QDQ'd activation A' = QDQ(A) without a_scale.
TEST(Fp8GemvMma, W8A8BitIdenticalToHostQdq) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  struct Case { int64_t m, n, k, block; };
  int seed = 0;
  // CUDA cores, tensor cores by register loads, by line loads of one and two tiles per warp
  // (two at 128 and at 168 registers)
  for (int mode : {0, 1, 2, 3, 4})
    for (DType t : kDTypes)
      for (const Case s : {Case{3, 1026, 1024, 128}, Case{8, 300, 4096, 256}, Case{1, 77, 320, 64}}) {
        const bool allow_mma = mode > 0;
        const Stream stream = mode == 2   ? Stream::kLines
                              : mode == 3 ? Stream::kLinesTwoTiles
                              : mode == 4 ? Stream::kLinesTwoTilesWide
                                          : Stream::kRegs;
        SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " "
                                          << dtype_name(t) << " mode=" << mode);
        const Fp8Case c = make_random_fp8_case(t, s.m, s.n, s.k, s.block, true, true,
                                               0x6e32000 + seed++);
        ASSERT_TRUE(c.a_scale.has_value());
        Fp8Case qdq = c;
        qdq.a_scale.reset();
        const float a_scale = static_cast<float>(c.a_scale->get(0));
        for (int64_t i = 0; i < c.a.numel(); ++i)
          qdq.a.set(i, codec::qdq_e4m3(t, static_cast<float>(c.a.get(i)), a_scale));

        Fp8Run fused, host;
        BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma, stream), &fused));
        BQMM_ASSERT_OK(run_fp8_on_device(*handle, qdq, gemv_options(allow_mma, stream), &host));
        const Fp8Path want = expected_gemv_path(*handle, allow_mma, s.k, s.block);
        EXPECT_EQ(fused.plan.path, want);
        EXPECT_EQ(host.plan.path, want);
        if (want == Fp8Path::kGemvMma) expect_stream(*handle, fused.plan, stream);
        ASSERT_EQ(fused.y.bytes.size(), host.y.bytes.size());
        EXPECT_EQ(std::memcmp(fused.y.bytes.data(), host.y.bytes.data(), host.y.bytes.size()), 0);
        EXPECT_TRUE(matches_reference(c, fused.y));
      }
}

// NaN codes (0x7F, 0xFF) reach exactly the outputs whose dot product touches them, in both
// kernels and the register weight streams (fragments, lines of one and two tiles per warp;
// masked tail columns of the same tile stay clean).
TEST(Fp8GemvMma, NanCodesPropagate) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  // CUDA cores, tensor cores by register loads, by line loads of one and two tiles per warp
  for (int mode : {0, 1, 2, 3}) {
    const bool allow_mma = mode > 0;
    const Stream stream = mode == 2   ? Stream::kLines
                          : mode == 3 ? Stream::kLinesTwoTiles
                                      : Stream::kRegs;
    SCOPED_TRACE(::testing::Message() << "mode=" << mode);
    Fp8Case c = make_random_fp8_case(DType::kFloat16, 3, 21, 256, 64, true, false, 0x6e33000);
    c.b.bytes[2 * 256 + 5] = 0x7F;
    c.b.bytes[17 * 256 + 255] = 0xFF;
    Fp8Run run;
    BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma, stream), &run));
    EXPECT_EQ(run.plan.path, expected_gemv_path(*handle, allow_mma, 256, 64));
    if (allow_mma) expect_stream(*handle, run.plan, stream);
    for (int64_t m = 0; m < 3; ++m)
      for (int64_t n = 0; n < 21; ++n)
        EXPECT_EQ(std::isnan(run.y.get(m * 21 + n)), n == 2 || n == 17) << m << "," << n;
  }
}

// A weight pointer only 8-byte aligned cannot take the GEMV's 16-byte loads: the plan
// falls back to dequant + GEMM and the result is still right (no fault).
TEST(Fp8GemvFma, MisalignedWeightFallsBack) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  for (DType t : kDTypes)
    for (bool allow_mma : {false, true}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " allow_mma=" << allow_mma);
      const Fp8Case c = make_random_fp8_case(t, 4, 1026, 1024, 128, true, allow_mma, 0x6e34000);
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma), &run, 8));
      EXPECT_LT(run.plan.problem.alignment, 16);
      EXPECT_EQ(run.plan.path, Fp8Path::kDequantGemm) << run.plan;
      EXPECT_TRUE(matches_reference(c, run.y));
    }
}

// The GEMV path enqueues only (a_scale read on the device): it can be captured in a CUDA
// graph and the replay computes the right answer.
TEST(Fp8GemvMma, GraphCapturable) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  // CUDA cores, tensor cores by register loads, TMA, lines of one and two tiles per warp
  // (two at 128 and at 168 registers)
  for (int mode : {0, 1, 2, 3, 4, 5}) {
    const bool allow_mma = mode > 0;
    const Stream stream = mode == 2   ? Stream::kTma
                          : mode == 3 ? Stream::kLines
                          : mode == 4 ? Stream::kLinesTwoTiles
                          : mode == 5 ? Stream::kLinesTwoTilesWide
                                      : Stream::kRegs;
    SCOPED_TRACE(::testing::Message() << "mode=" << mode);
    const Fp8Case c = make_random_fp8_case(DType::kBFloat16, 5, 300, 512, 128, true, true,
                                           0x6e35000 + mode);
    testing::Fp8DeviceCase d;
    BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
    BQMM_ASSERT_OK(testing::plan_fp8_case(*handle, c, gemv_options(allow_mma, stream), &d));
    ASSERT_EQ(d.plan.path, expected_gemv_path(*handle, allow_mma, 512, 128));
    if (allow_mma) expect_stream(*handle, d.plan, stream);
    ASSERT_EQ(d.plan.workspace_bytes, 0u);
    BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(*handle, s); }));
    HostTensor y;
    BQMM_ASSERT_OK(d.y.download(&y));
    EXPECT_TRUE(matches_reference(c, y));
  }
}

// Two layers of M x K -> 256 -> 45 columns in a row on one stream with `knobs`, the
// second's A the first's Y (NaN-poisoned until the first writes it), both checked against
// the reference; the second's plan in `*second_plan`.
void check_two_layers(const Handle& handle, DType t, int64_t m, int64_t k,
                      const testing::Fp8Knobs& knobs, uint64_t seed, Fp8MatMulPlan* second_plan) {
  const Fp8Case first = make_random_fp8_case(t, m, k, 256, 128, true, false, seed);
  Fp8Case second = make_random_fp8_case(t, m, 45, k, 128, true, false, seed + 1);
  testing::Fp8DeviceCase d1, d2;
  BQMM_ASSERT_OK(testing::upload_fp8_case(first, &d1));
  BQMM_ASSERT_OK(testing::upload_fp8_case(second, &d2));
  d2.args.a.data = d1.y.data();  // the first layer's output, [m, k]
  BQMM_ASSERT_OK(testing::plan_fp8_case(handle, first, knobs, &d1));
  BQMM_ASSERT_OK(testing::plan_fp8_case(handle, second, knobs, &d2));
  *second_plan = d2.plan;
  HostTensor y1, y2;
  BQMM_ASSERT_OK(testing::run_two_layers(handle, d1, d2, &y1, &y2));
  EXPECT_TRUE(matches_reference(first, y1));
  second.a = y1;
  EXPECT_TRUE(matches_reference(second, y2)) << d2.plan;
}

// Two layers in a row (check_two_layers), the second forced to the dependent launch of one tile of line loads
// (gemv_pdl=1) at every K split: it may start while the first still runs, so the result
// is right only if it reads A after waiting for that kernel. K of 4 line pairs (warps of
// k_split 8 with none) and of 11 (pairs that do not divide among the warps); small enough
// for compute-sanitizer.
TEST(Fp8GemvLines, DependentLaunchReadsWhatTheKernelBeforeWrote) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm < 80) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 0x6e37000;
  for (const DType t : kDTypes)
    for (const int64_t m : {2, 8})
      for (const int64_t k : {512, 1408})
        for (const int k_split : {1, 2, 4, 8}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m << " K=" << k
                                            << " k_split=" << k_split);
          testing::Fp8Knobs knobs = gemv_options(/*allow_mma=*/true, Stream::kLines);
          knobs.force.k_split = k_split;
          knobs.force.gemv_pdl = 1;
          Fp8MatMulPlan plan;
          check_two_layers(*handle, t, m, k, knobs, seed, &plan);
          seed += 2;
          expect_stream(*handle, plan, Stream::kLines);
          EXPECT_EQ(plan.gemv.dependent_launch, gemv_dependent_launch_possible(handle->device_info()))
              << plan;
        }
}

// The CUDA-core kernel's dependent launch (M = 1, gemv_pdl=1) likewise (check_two_layers):
// N not a multiple of a block's columns, K with a partial last iteration.
TEST(Fp8GemvFma, DependentLaunchReadsWhatTheKernelBeforeWrote) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  uint64_t seed = 0x6e38000;
  for (const DType t : kDTypes)
    for (const int64_t k : {512, 1408}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " K=" << k);
      testing::Fp8Knobs knobs = gemv_options(/*allow_mma=*/false);
      knobs.force.gemv_pdl = 1;
      Fp8MatMulPlan plan;
      check_two_layers(*handle, t, 1, k, knobs, seed, &plan);
      seed += 2;
      EXPECT_EQ(plan.path, Fp8Path::kGemvFma) << plan;
      EXPECT_EQ(plan.gemv.dependent_launch, gemv_dependent_launch_possible(handle->device_info()))
          << plan;
    }
}

// Small, tail-heavy cases for compute-sanitizer (memcheck, racecheck on the K-split
// reduction): N not a multiple of any tile, M leaving rows of the row group and the mma
// masked, K ending mid-iteration, W8A8 and bias on.
void check_sanitize_cases(bool allow_mma, Stream stream = Stream::kRegs) {
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  struct Case { int64_t m, n, k, block; };
  int seed = 0;
  for (const Case s : {Case{3, 37, 320, 64}, Case{8, 19, 1344, 192}, Case{1, 1, 256, 128},
                       Case{5, 33, 48, 16}, Case{2, 21, 1408, 64}})
    for (DType t : kDTypes) {
      SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " "
                                        << dtype_name(t));
      const Fp8Case c = make_random_fp8_case(t, s.m, s.n, s.k, s.block, true, true,
                                             0x6e36000 + (allow_mma ? 100 : 0) +
                                                 200 * static_cast<int>(stream) + seed++);
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, gemv_options(allow_mma, stream), &run));
      const Fp8Path want = expected_gemv_path(*handle, allow_mma, s.k, s.block);
      EXPECT_EQ(run.plan.path, want);
      if (want == Fp8Path::kGemvMma) expect_stream(*handle, run.plan, stream);
      EXPECT_TRUE(matches_reference(c, run.y));
    }
}

TEST(Fp8GemvFma, SanitizeTails) {
  BQMM_REQUIRE_GPU();
  check_sanitize_cases(/*allow_mma=*/false);
}

TEST(Fp8GemvMma, SanitizeTails) {
  BQMM_REQUIRE_GPU();
  check_sanitize_cases(/*allow_mma=*/true);
}

TEST(Fp8GemvTma, SanitizeTails) {
  BQMM_REQUIRE_GPU();
  check_sanitize_cases(/*allow_mma=*/true, Stream::kTma);
}

TEST(Fp8GemvLines, SanitizeTails) {
  BQMM_REQUIRE_GPU();
  check_sanitize_cases(/*allow_mma=*/true, Stream::kLines);
}

TEST(Fp8GemvLines, SanitizeTailsTwoTiles) {
  BQMM_REQUIRE_GPU();
  check_sanitize_cases(/*allow_mma=*/true, Stream::kLinesTwoTiles);
  check_sanitize_cases(/*allow_mma=*/true, Stream::kLinesTwoTilesWide);
}

// Every instantiated K split of the tensor-core kernel, forced, with every weight stream:
// windows that do not divide evenly among the warps (21 windows; 10.5 TMA tiles, the last
// a half tile; 22 windows, 11 tiles or line pairs), fewer windows than warps (4 windows, 2
// tiles or pairs, so warps of k_split 8 have none and only add zeros), the ring's tail,
// masked columns and rows.
// Small enough for compute-sanitizer (racecheck sees the shared-memory reduction).
TEST(Fp8GemvMma, SanitizeEveryKSplit) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm < 80) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  struct Case { int64_t m, n, k, block; };
  int seed = 0;
  for (Stream stream : kStreams)
  for (int k_split : {1, 2, 4, 8})
    for (const Case s : {Case{3, 37, 1344, 64}, Case{8, 40, 256, 128}, Case{1, 17, 4096, 256},
                         Case{2, 9, 1408, 64}}) {
      if (stream == Stream::kLinesTwoTilesWide && k_split > 4) continue;  // 4 warps a block
      const DType t = kDTypes[seed % 2];
      SCOPED_TRACE(::testing::Message() << "k_split=" << k_split << " M=" << s.m << " N=" << s.n
                                        << " K=" << s.k << " " << dtype_name(t)
                                        << " stream=" << stream_name(stream));
      const Fp8Case c = make_random_fp8_case(t, s.m, s.n, s.k, s.block, seed % 3 != 0,
                                             seed % 2 == 0, 0x6e37000 + seed);
      ++seed;
      testing::Fp8Knobs o = gemv_options(true, stream);
      o.force.k_split = k_split;
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, o, &run));
      ASSERT_EQ(run.plan.path, Fp8Path::kGemvMma) << run.plan;
      EXPECT_EQ(run.plan.gemv.k_split, k_split);
      expect_stream(*handle, run.plan, stream);
      EXPECT_TRUE(matches_reference(c, run.y));
    }
}

}  // namespace
}  // namespace bqmm
