// Fp8WeightMatMul on the GPU: the dispatch chain's empty, K == 0 and dequant + cuBLAS paths
// (with and without W8A8 and bias, N-tiled scratch; the fused GEMM forced off where it
// would take the case), the W8A8 GEMM on FP8 tensor cores (SM90) through the planner,
// dynamic activation quantization on every path, its kernels bit
// for bit against the host codecs, the run-time contract (workspace, plan/args mismatch,
// graph capture).
// Every test skips itself, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bqmm/fp8_matmul.h"
#include "core/gemm_plan.h"
#include "core/gemv_split.h"
#include "common/fp8_runner.h"
#include "common/gpu.h"
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "reference/codecs.h"
#include "reference/fp8_reference.h"

namespace bqmm {
namespace {

using harness::DeviceTensor;
using harness::HostTensor;
using reference::Fp8Case;
using reference::make_random_fp8_case;
using testing::Fp8Run;
using testing::matches_reference;
using testing::run_fp8_on_device;

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};
// Rows above the GEMV's row groups (the fused GEMM's by default: dequant_gemm_only).
constexpr int64_t kAboveFused = kGemvMaxGroupRows + 1;

// The dequant + cuBLAS path at every M: neither the decode GEMV, the W8A8 GEMM nor the
// fused GEMM.
testing::Fp8Knobs dequant_gemm_only() {
  testing::Fp8Knobs o;
  o.force.gemv = 0;
  o.force.gemm = 0;
  o.force.w8a8 = 0;
  return o;
}

// Every (M, N, K) of the grid through the dequant + cuBLAS path; block size,
// dtype, bias and a_scale cycle with the case index so each value of each axis is seen
// with many shapes. Fresh data per case.
TEST(Fp8DequantGemm, ShapeGridAgainstReference) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const int64_t ms[] = {1, 2, 7, 8, 9, 33, 256};
  const int64_t ns[] = {1, 17, 1026};
  const int64_t ks[] = {16, 24, 256, 4104};
  const int64_t blocks[] = {16, 32, 128, 256};
  int index = 0;
  for (int64_t m : ms)
    for (int64_t n : ns)
      for (int64_t k : ks) {
        const int64_t bs = blocks[index % 4];
        const DType t = kDTypes[(index / 4) % 2];
        const bool bias = (index / 2) % 2 == 1;
        const bool w8a8 = index % 2 == 1;
        const auto init = index % 3 == 0 ? reference::WeightInit::kAllCodes
                                         : reference::WeightInit::kQuantizedNormal;
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k << " block="
                                          << bs << " " << dtype_name(t) << " bias=" << bias
                                          << " w8a8=" << w8a8);
        const Fp8Case c = make_random_fp8_case(t, m, n, k, bs, bias, w8a8, 1000 + index, init);
        Fp8Run run;
        BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, dequant_gemm_only(), &run));
        EXPECT_EQ(run.plan.path, Fp8Path::kDequantGemm);
        EXPECT_EQ(run.plan.dequant.vector, k % 16 == 0);
        EXPECT_TRUE(matches_reference(c, run.y));
        ++index;
      }
}

// The full product of block size x dtype x bias x a_scale on one vector and one scalar
// dequant shape, so every combination of the options runs at least once.
TEST(Fp8DequantGemm, EveryOptionCombination) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  int seed = 0;
  for (int64_t k : {256, 24})
    for (int64_t bs : {16, 32, 128, 256})
      for (DType t : kDTypes)
        for (bool bias : {false, true})
          for (bool w8a8 : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "K=" << k << " block=" << bs << " "
                                              << dtype_name(t) << " bias=" << bias
                                              << " w8a8=" << w8a8);
            const Fp8Case c = make_random_fp8_case(t, kAboveFused, 17, k, bs, bias, w8a8, 5000 + seed++);
            Fp8Run run;
            BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, dequant_gemm_only(), &run));
            EXPECT_EQ(run.plan.path, Fp8Path::kDequantGemm);
            EXPECT_TRUE(matches_reference(c, run.y));
          }
}

// A rank-3 activation flattens its leading dims into M.
TEST(Fp8DequantGemm, Rank3Activation) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  Fp8Case c = make_random_fp8_case(DType::kBFloat16, 12, 40, 128, 32, true, false, 77);
  c.a.shape = Shape{3, 4, 128};
  Fp8Run run;
  BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, testing::Fp8Knobs{}, &run));
  EXPECT_EQ(run.y.shape, (Shape{3, 4, 40}));
  EXPECT_TRUE(matches_reference(c, run.y));
}

// A scratch far smaller than the weight: many N tiles, the last one partial.
TEST(Fp8DequantGemm, NTiledScratch) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  for (DType t : kDTypes) {
    SCOPED_TRACE(dtype_name(t));
    const Fp8Case c = make_random_fp8_case(t, kAboveFused, 1026, 256, 128, true, true, 91);
    testing::Fp8Knobs o = dequant_gemm_only();
    o.options.dequant_scratch_bytes = 100 * 256 * 2;  // tiles of 100 rows
    Fp8Run run;
    BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, o, &run));
    EXPECT_EQ(run.plan.dequant.n_tile, 100);
    EXPECT_EQ(run.plan.dequant.num_n_tiles, 11);
    EXPECT_TRUE(matches_reference(c, run.y));
  }
  // One row larger than the limit still runs, one row per tile.
  const Fp8Case c = make_random_fp8_case(DType::kFloat16, 9, 17, 4104, 256, false, false, 92);
  testing::Fp8Knobs o = dequant_gemm_only();
  o.options.dequant_scratch_bytes = 1024;
  Fp8Run run;
  BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, o, &run));
  EXPECT_EQ(run.plan.dequant.n_tile, 1);
  EXPECT_EQ(run.plan.dequant.num_n_tiles, 17);
  EXPECT_TRUE(matches_reference(c, run.y));
}

// K == 0: Y = bias, or zeros, exactly.
TEST(Fp8DequantGemm, EmptyKGivesBias) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  for (DType t : kDTypes)
    for (bool bias : {false, true}) {
      const Fp8Case c = make_random_fp8_case(t, 5, 33, 0, 128, bias, false, 93);
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, testing::Fp8Knobs{}, &run));
      EXPECT_EQ(run.plan.path, Fp8Path::kBiasOnly);
      for (int64_t m = 0; m < 5; ++m)
        for (int64_t n = 0; n < 33; ++n)
          ASSERT_EQ(run.y.get(m * 33 + n), bias ? c.bias->get(n) : 0.0) << m << "," << n;
    }
}

// M == 0 and N == 0 succeed and write nothing.
TEST(Fp8DequantGemm, EmptyOutputs) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 64}, {4, 0}}) {
    const Fp8Case c = make_random_fp8_case(DType::kFloat16, m, n, 64, 32, true, true, 94);
    Fp8Run run;
    BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, testing::Fp8Knobs{}, &run));
    EXPECT_EQ(run.plan.path, Fp8Path::kEmpty);
    EXPECT_EQ(run.y.numel(), 0);
  }
}

// NaN codes (0x7F, 0xFF) propagate to exactly the outputs whose dot product touches them.
TEST(Fp8DequantGemm, NanCodesPropagate) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  Fp8Case c = make_random_fp8_case(DType::kFloat16, 3, 8, 64, 32, false, false, 95);
  c.b.bytes[2 * 64 + 5] = 0x7F;
  c.b.bytes[6 * 64 + 63] = 0xFF;
  Fp8Run run;
  BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, dequant_gemm_only(), &run));
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 8; ++n)
      EXPECT_EQ(std::isnan(run.y.get(m * 8 + n)), n == 2 || n == 6) << m << "," << n;
}

// The dequantize kernels, bit for bit against the host codecs (vector and scalar kernels,
// uniform and per-element scales, NaN codes included).
TEST(Fp8Kernels, DequantBitExact) {
  BQMM_REQUIRE_GPU();
  std::mt19937 rng(7);
  struct Shape3 { int64_t rows, k, block; bool vec16; };
  for (const Shape3 s : {Shape3{5, 256, 128, true}, Shape3{3, 48, 24, true},
                         Shape3{4, 40, 16, false}, Shape3{70000, 16, 16, true}})
    for (DType t : kDTypes) {
      SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " K=" << s.k << " block="
                                        << s.block << " vec16=" << s.vec16);
      const int64_t kb = (s.k + s.block - 1) / s.block;
      HostTensor b = HostTensor::zeros(DType::kFloat8E4M3, Shape{s.rows, s.k});
      for (auto& v : b.bytes) v = static_cast<uint8_t>(rng());
      HostTensor scale = HostTensor::zeros(DType::kFloat32, Shape{s.rows, kb});
      std::uniform_real_distribution<float> u(0.01f, 2.0f);
      for (int64_t i = 0; i < scale.numel(); ++i) scale.set(i, u(rng));
      DeviceTensor db, ds;
      BQMM_ASSERT_OK(DeviceTensor::upload(b, &db));
      BQMM_ASSERT_OK(DeviceTensor::upload(scale, &ds));
      DeviceTensor dout;
      BQMM_ASSERT_OK(testing::upload_poisoned(t, Shape{s.rows, s.k}, &dout));
      BQMM_ASSERT_OK(cuda::launch_fp8_dequant(t, static_cast<const uint8_t*>(db.data()),
                                              static_cast<const float*>(ds.data()), s.rows, s.k,
                                              s.block, s.vec16, dout.data(), nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      HostTensor out;
      BQMM_ASSERT_OK(dout.download(&out));
      int64_t mismatches = 0;
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t k = 0; k < s.k; ++k) {
          const float want = codec::round_to(
              t, codec::e4m3_to_float(b.bytes[r * s.k + k]) * static_cast<float>(scale.get(r * kb + k / s.block)));
          const double got = out.get(r * s.k + k);
          const bool same = std::isnan(want) ? std::isnan(got) : got == want;
          if (!same && mismatches++ < 5)
            ADD_FAILURE() << "row " << r << " k " << k << ": got " << got << " want " << want;
        }
      EXPECT_EQ(mismatches, 0);
    }
}

// The standalone W8A8 QDQ kernel, bit for bit against the host definition, including
// saturation, NaN, zeros and a zero a_scale, on aligned and unaligned ranges.
TEST(Fp8Kernels, ActivationQdqBitExact) {
  BQMM_REQUIRE_GPU();
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (DType t : kDTypes)
    for (float a_scale : {0.0f, 0.01f, 0.37f, 1.0f}) {
      HostTensor a = HostTensor::zeros(t, Shape{4096});
      for (int64_t i = 0; i < a.numel(); ++i) a.set(i, normal(rng));
      a.set(0, std::nan(""));
      a.set(1, 1e4);
      a.set(2, -1e4);
      a.set(3, 0.0);
      HostTensor s = HostTensor::zeros(DType::kFloat32, Shape{});
      s.set(0, a_scale);
      DeviceTensor da, ds, dout;
      BQMM_ASSERT_OK(DeviceTensor::upload(a, &da));
      BQMM_ASSERT_OK(DeviceTensor::upload(s, &ds));
      HostTensor out = HostTensor::zeros(t, a.shape);
      BQMM_ASSERT_OK(DeviceTensor::upload(out, &dout));
      // Aligned (8-element loads) over the first 4003 elements (a 3-element tail), then
      // the rest from an element offset (single loads).
      const size_t elem = dtype_size(t);
      BQMM_ASSERT_OK(cuda::launch_act_qdq(t, da.data(), static_cast<const float*>(ds.data()),
                                          4003, dout.data(), nullptr));
      BQMM_ASSERT_OK(cuda::launch_act_qdq(t, static_cast<const char*>(da.data()) + 4003 * elem,
                                          static_cast<const float*>(ds.data()), a.numel() - 4003,
                                          static_cast<char*>(dout.data()) + 4003 * elem, nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      BQMM_ASSERT_OK(dout.download(&out));
      for (int64_t i = 0; i < a.numel(); ++i) {
        const float want = codec::qdq_e4m3(t, static_cast<float>(a.get(i)), a_scale);
        const double got = out.get(i);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << i;
        } else {
          ASSERT_EQ(got, want) << "i=" << i << " a=" << a.get(i) << " a_scale=" << a_scale;
        }
      }
    }
}

// The dynamic QDQ kernel, bit for bit against the host definition (a scale per row and
// K block from its amax, then qdq_e4m3 with it): a partial last block, an all-zero block
// (s = 0: zeros), a NaN block (all NaN), an infinity (inv 0: NaN), saturation; blocks on
// 16-byte boundaries (8-element loads) and K = 1004, block 100 (most blocks not: single
// loads).
TEST(Fp8Kernels, DynamicActivationQdqBitExact) {
  BQMM_REQUIRE_GPU();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t m = 6;
  for (const auto& [k, block] : {std::pair<int64_t, int64_t>{1000, 128}, {1004, 100}})
  for (DType t : kDTypes) {
    SCOPED_TRACE(::testing::Message() << "K=" << k << " block=" << block << " " << dtype_name(t));
    const int64_t k_blocks = (k + block - 1) / block;
    HostTensor a = HostTensor::zeros(t, Shape{m, k});
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, normal(rng));
    for (int64_t i = 0; i < block; ++i) a.set(1 * k + block + i, 0.0);  // row 1, block 1: zeros
    a.set(2 * k + 300, std::nan(""));                                 // row 2: a NaN
    a.set(3 * k + 999, INFINITY);                                     // row 3: an infinity
    a.set(4 * k + 5, 3e4);                                            // row 4: a wide block
    DeviceTensor da, dout;
    BQMM_ASSERT_OK(DeviceTensor::upload(a, &da));
    HostTensor out = HostTensor::zeros(t, a.shape);
    BQMM_ASSERT_OK(DeviceTensor::upload(out, &dout));
    BQMM_ASSERT_OK(cuda::launch_act_qdq_dynamic(t, da.data(), m, k, block, dout.data(), nullptr));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    BQMM_ASSERT_OK(dout.download(&out));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t b = 0; b < k_blocks; ++b) {
        const int64_t end = std::min(k, (b + 1) * block);
        float amax = 0.0f;
        bool nan = false;
        for (int64_t i = b * block; i < end; ++i) {
          const auto v = static_cast<float>(a.get(r * k + i));
          nan = nan || std::isnan(v);
          amax = std::max(amax, std::fabs(v));
        }
        const float s = nan ? NAN : amax / 448.0f;
        for (int64_t i = b * block; i < end; ++i) {
          const float want = codec::qdq_e4m3(t, static_cast<float>(a.get(r * k + i)), s);
          const double got = out.get(r * k + i);
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << "row " << r << " k " << i;
          } else {
            ASSERT_EQ(got, want) << "row " << r << " k " << i << " s " << s;
          }
        }
      }
    EXPECT_EQ(out.get(1 * k + block + 2), 0.0);
    EXPECT_TRUE(std::isnan(out.get(2 * k + 300 / block * block + 1)));  // the NaN's block
  }
}

// Dynamic activation quantization through the public API on every path the planner
// picks (decode GEMV, fused GEMM, dequant + cuBLAS) against the float64 reference of its
// definition: the contract's M values, odd N, K % 128 != 0, both types, bias.
TEST(Fp8Dynamic, EveryPathAgainstReference) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  struct Case { int64_t m, k, block; };
  const Case cases[] = {{1, 1040, 128}, {8, 1000, 128}, {9, 1040, 128}, {33, 1040, 64},
                        {64, 1000, 128}, {129, 1040, 256}, {1024, 1040, 128}};
  uint64_t seed = 9000;
  for (const Case cs : cases) {
    const DType t = kDTypes[seed % 2];
    const bool bias = seed % 3 != 0;
    SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " K=" << cs.k << " block=" << cs.block
                                      << " " << dtype_name(t) << " bias=" << bias);
    Fp8Case c = make_random_fp8_case(t, cs.m, 517, cs.k, cs.block, bias, /*w8a8=*/false, seed++);
    c.dynamic_act_quant = true;
    Fp8Run run;
    BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, testing::Fp8Knobs{}, &run));
    EXPECT_TRUE(run.plan.problem.dynamic_act_quant);
    // A' in T on every path but the W8A8 GEMM's, which quantizes A to codes and scales.
    if (run.plan.path == Fp8Path::kW8a8Gemm) {
      EXPECT_GT(run.plan.regions.act_scales_bytes, 0u) << run.plan;
    } else {
      EXPECT_GT(run.plan.regions.act_bytes, 0u) << run.plan;
    }
    EXPECT_TRUE(matches_reference(c, run.y)) << run.plan;
  }
}

// The W8A8 GEMM on FP8 tensor cores through the public API (SM90: the planner takes it for
// M > 8 with A quantized, block_size % 128 == 0; forced by w8a8=1 at the other M),
// static and dynamic activation scales, against the float64 reference of each mode's
// quantization: the contract's M values (9 to 4096), odd N, K % 128 != 0, both types, bias;
// the planner's K split and one forced.
TEST(Fp8W8A8Gemm, BothModesThroughThePlanner) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm != 90 || !wgmma_built())
    GTEST_SKIP() << "the W8A8 GEMM runs on SM90 devices only, in builds with SM90 code";
  struct Case { int64_t m, n, k, block; int forced_split; };
  const Case cases[] = {{9, 1001, 1040, 128, 0},  {64, 517, 2064, 128, 0}, {129, 259, 1040, 256, 0},
                        {1024, 777, 1168, 128, 0}, {4096, 131, 1040, 128, 0}, {100, 300, 2048, 128, 4}};
  uint64_t seed = 9500;
  for (const Case cs : cases)
    for (const bool dynamic : {false, true}) {
      const DType t = kDTypes[seed % 2];
      const bool bias = seed % 3 != 0;
      SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k << " block="
                                        << cs.block << " " << dtype_name(t) << " bias=" << bias
                                        << (dynamic ? " dynamic" : " static") << " split=" << cs.forced_split);
      Fp8Case c = make_random_fp8_case(t, cs.m, cs.n, cs.k, cs.block, bias, /*w8a8=*/!dynamic, seed++);
      c.dynamic_act_quant = dynamic;
      testing::Fp8Knobs knobs;
      knobs.force.gemm_k_split = cs.forced_split;
      knobs.force.w8a8 = 1;
      Fp8Run run;
      BQMM_ASSERT_OK(run_fp8_on_device(*handle, c, knobs, &run));
      ASSERT_EQ(run.plan.path, Fp8Path::kW8a8Gemm) << run.plan;
      if (cs.forced_split > 0) {
        EXPECT_EQ(run.plan.gemm.k_split, cs.forced_split);
      }
      EXPECT_TRUE(matches_reference(c, run.y)) << run.plan;
    }
}

// run() checks the workspace and that the arguments are the plan's problem.
TEST(Fp8RunContract, RejectsBadWorkspaceAndMismatchedArgs) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const Fp8Case c = make_random_fp8_case(DType::kFloat16, 16, 64, 128, 128, false, false, 96);
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  // The dequant + cuBLAS plan: a workspace to be short of (the fused GEMM needs none here).
  BQMM_ASSERT_OK(testing::plan_fp8_case(*handle, c, dequant_gemm_only(), &d));
  ASSERT_EQ(d.plan.path, Fp8Path::kDequantGemm);

  Status s = run_fp8_matmul(*handle, d.plan, d.args, d.workspace.data(),
                            d.plan.workspace_bytes - 1, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  s = run_fp8_matmul(*handle, d.plan, d.args, nullptr, d.plan.workspace_bytes, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  // A workspace over Y (which the run would overwrite while it reads the workspace).
  s = run_fp8_matmul(*handle, d.plan, d.args, d.y.data(), d.plan.workspace_bytes, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.message().rfind("workspace: overlaps ", 0), 0u) << s.message();

  Fp8MatMulArgs with_bias = d.args;
  with_bias.bias = TensorView{d.a.data(), DType::kFloat16, Shape{64}};
  s = run_fp8_matmul(*handle, d.plan, with_bias, d.workspace.data(), d.workspace.size(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();

  // A plan made for 16-byte aligned pointers refuses 8-byte aligned ones.
  DeviceTensor b_off;
  BQMM_ASSERT_OK(DeviceTensor::upload(c.b, &b_off, 8));
  Fp8MatMulArgs misaligned = d.args;
  misaligned.b = b_off.view();
  s = run_fp8_matmul(*handle, d.plan, misaligned, d.workspace.data(), d.workspace.size(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.message();
}

// run() enqueues only: the whole dequant + cuBLAS chain with W8A8 and bias (three N tiles)
// can be captured in a CUDA graph (an allocation or a synchronization would break the
// capture) and the replay computes the right answer.
TEST(Fp8RunContract, GraphCapturable) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const Fp8Case c = make_random_fp8_case(DType::kBFloat16, kAboveFused, 300, 512, 128, true, true, 97);
  testing::Fp8Knobs o = dequant_gemm_only();
  o.options.dequant_scratch_bytes = 128 * 512 * 2;  // three tiles in the graph
  testing::Fp8DeviceCase d;
  BQMM_ASSERT_OK(testing::upload_fp8_case(c, &d));
  BQMM_ASSERT_OK(testing::plan_fp8_case(*handle, c, o, &d));
  ASSERT_EQ(d.plan.path, Fp8Path::kDequantGemm);
  ASSERT_EQ(d.plan.dequant.num_n_tiles, 3);
  BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t s) { return d.run(*handle, s); }));
  HostTensor y;
  BQMM_ASSERT_OK(d.y.download(&y));
  EXPECT_TRUE(matches_reference(c, y));
}

}  // namespace
}  // namespace bqmm
