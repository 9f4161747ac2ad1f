// NBitsMatMul on the GPU: the decode GEMV (each K-loop algorithm forced in turn) and the
// dequant + cuBLAS path over bits {4, 8}, block sizes 16..256, float32 / float16 /
// bfloat16, no / packed / typed zero points, g_idx, bias, partial last blocks and odd N,
// against the float64 reference; the hand examples exactly; the dequantize kernel bit for
// bit; the run-time contract (workspace, plan/args mismatch, graph capture). Axes are
// cycled deterministically (each value meets many shapes) so the CPU reference stays a
// few seconds. Every test skips itself, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "bqmm/nbits_matmul.h"
#include "core/gemm_plan.h"
#include "core/gemv_split.h"
#include "common/gpu.h"
#include "common/nbits_runner.h"
#include "cuda/launchers.h"
#include "harness/device_buffer.h"
#include "reference/codecs.h"
#include "reference/nbits_reference.h"

namespace bqmm {
namespace {

using harness::DeviceTensor;
using harness::HostTensor;
using reference::make_random_nbits_case;
using reference::NBitsCase;
using reference::NBitsCaseSpec;
using reference::WeightInit;
using testing::matches_reference;
using testing::NBitsRun;
using testing::run_nbits_on_device;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
// Both paths multiply weights rounded to T1 (as ONNX Runtime's do), an error of 2^-12
// (float16) or 2^-9 (bfloat16) per weight, well inside the contract's Frobenius tolerance over
// many outputs. A single output, though, can cancel down to a small value and carry a
// relative error of several times that: cases with N = 1 take kSingleColumnRows rows so
// the norm is over that many independent sums.
constexpr int64_t kSingleColumnRows = 8;
constexpr int kBits[] = {4, 8};
constexpr int64_t kBlockSizes[] = {16, 32, 64, 128, 256};

testing::NBitsKnobs gemv_algo(int algo) {
  testing::NBitsKnobs o;
  o.force.algo = algo;
  return o;
}

// The dequant + cuBLAS path at every M: neither the decode GEMV nor the fused GEMM.
testing::NBitsKnobs dequant_gemm_only() {
  testing::NBitsKnobs o;
  o.force.gemv = 0;
  o.force.gemm = 0;
  return o;
}

using testing::nbits_spec;

// As nbits_spec, with the optional inputs cycled by case number i and slot j as the
// kernel sweeps below take them: zero points none / packed alternating, bias on two cases
// of three, every code value on even slots (normal weights on odd ones).
NBitsCaseSpec cycled_spec(DType dtype, int bits, int64_t m, int64_t n, int64_t k,
                          int64_t block_size, int i, int j) {
  NBitsCaseSpec s = nbits_spec(dtype, bits, m, n, k, block_size);
  s.zero_points = (i + j) % 2 == 0 ? NBitsZeroPoints::kNone : NBitsZeroPoints::kPacked;
  s.bias = (i + j) % 3 != 0;
  s.init = j % 2 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
  return s;
}

::testing::Message describe(const NBitsCaseSpec& s) {
  return ::testing::Message() << s.bits << "-bit " << dtype_name(s.dtype) << " M=" << s.m
                              << " N=" << s.n << " K=" << s.k << " block=" << s.block_size
                              << " zp=" << nbits_zero_points_name(s.zero_points)
                              << (s.g_idx ? " g_idx" : "") << (s.bias ? " bias" : "")
                              << (s.init == WeightInit::kAllCodes ? " all-codes" : "");
}

// Runs `spec` (fresh data from `seed`) with `options`, expects `path`, checks the result.
void run_and_check(const NBitsCaseSpec& spec, uint64_t seed, const testing::NBitsKnobs& options,
                   NBitsPath path, NBitsRun* run_out = nullptr) {
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const NBitsCase c = make_random_nbits_case(spec, seed);
  NBitsRun run;
  BQMM_ASSERT_OK(run_nbits_on_device(*handle, c, options, &run));
  EXPECT_EQ(run.plan.path, path) << run.plan;
  if (options.force.algo >= 0 && path == NBitsPath::kGemv) {
    EXPECT_EQ(run.plan.gemv.algo, options.force.algo);
  }
  EXPECT_TRUE(matches_reference(c, run.y)) << run.plan;
  if (run_out != nullptr) *run_out = std::move(run);
}

// ------------------------------------------------------------------ GEMV
// Every (bits, block size, dtype) with every algorithm forced in turn. M, N, K, zero
// points, bias and weight init cycle with the case index: M over 1..8, N over odd and
// partial-tile values, K over one block pair, a few blocks and 4096 (the K split).
TEST(NBitsGemv, EveryAlgorithmBitsBlockSizeAndDtype) {
  BQMM_REQUIRE_GPU();
  const int64_t ns[] = {1, 17, 40, 300};
  int index = 0;
  for (int bits : kBits)
    for (int64_t bs : kBlockSizes)
      for (DType t : kDTypes)
        for (int algo : {0, 1, 2}) {
          const int64_t n = ns[index % 4];
          const int64_t ks[] = {2 * bs, 6 * bs, 4096};
          NBitsCaseSpec s = nbits_spec(t, bits, n == 1 ? kSingleColumnRows : 1 + index % 8, n,
                                       ks[(index / 4) % 3], bs);
          s.zero_points = index % 2 == 0 ? NBitsZeroPoints::kNone : NBitsZeroPoints::kPacked;
          s.bias = (index / 2) % 2 == 1;
          s.init = index % 3 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
          SCOPED_TRACE(describe(s) << " algo=" << algo);
          run_and_check(s, 1000 + index, gemv_algo(algo), NBitsPath::kGemv);
          ++index;
        }
}

// Typed (fractional) zero points on the register tile, the plan's one GEMV for them (each
// weight q * scale - zp * scale): every width, block size and half dtype, M over 1..8, N
// over odd and partial-tile values, K over one block pair, a few blocks and 4096 (the K
// split), bias and weight init cycling; the default plan.
TEST(NBitsGemv, TypedZeroPointsEveryBitsBlockSizeAndDtype) {
  BQMM_REQUIRE_GPU();
  const int64_t ns[] = {1, 17, 40, 300};
  int index = 0;
  for (int bits : kBits)
    for (int64_t bs : kBlockSizes)
      for (DType t : {DType::kFloat16, DType::kBFloat16})
        for (int j = 0; j < 2; ++j) {
          const int64_t n = ns[index % 4];
          const int64_t ks[] = {2 * bs, 6 * bs, 4096};
          NBitsCaseSpec s = nbits_spec(t, bits, n == 1 ? kSingleColumnRows : 1 + index % 8, n,
                                       ks[(index / 4) % 3], bs);
          s.zero_points = NBitsZeroPoints::kTyped;
          s.bias = index % 3 != 0;
          s.init = index % 2 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
          SCOPED_TRACE(describe(s));
          NBitsRun run;
          run_and_check(s, 11000 + index, testing::NBitsKnobs{}, NBitsPath::kGemv, &run);
          EXPECT_FALSE(run.plan.gemv.fma || run.plan.gemv.window || run.plan.gemv.tma)
              << run.plan;
          ++index;
        }
}

// The TMA weight stream (testing::NBitsKnobs::gemv_tma = 1; SM90+, float16 / bfloat16,
// blocks of at least half a 128-byte tile's codes): every width, applicable block size and
// dtype, M cycling over 1..8, N over odd and partial-tile values, K over short rows, rows
// ending in a partial tile (8-bit: 3 x 64 bytes; 4-bit: 3 x 64 bytes of 128 codes) and
// 4096, zero points none / packed, bias on and off. Where the device has no TMA the plan
// must keep the register loads (and the case is still checked).
TEST(NBitsGemvTma, EveryBitsBlockSizeAndDtype) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  const bool has_tma = handle->device_info().sm >= 90;
  const int64_t ns[] = {1, 17, 40, 300};
  testing::NBitsKnobs o;
  o.force.tma = 1;
  int index = 0;
  for (int bits : kBits)
    for (int64_t bs : {64, 128, 256})
      for (DType t : {DType::kFloat16, DType::kBFloat16}) {
        if (bs * bits / 8 < 64) continue;  // below half a tile: not a TMA case
        const int64_t ks[] = {2 * bs, 3 * 64 * 8 / bits, 4096, 6 * bs};
        for (int j = 0; j < 4; ++j) {
          const int64_t n = ns[(index + j) % 4];
          const int64_t k = ks[j] % bs == 0 ? ks[j] : 2 * bs;
          const int64_t m = n == 1 ? kSingleColumnRows : 1 + (index + j) % 8;
          const NBitsCaseSpec s = cycled_spec(t, bits, m, n, k, bs, index, j);
          SCOPED_TRACE(describe(s) << " tma");
          NBitsRun run;
          run_and_check(s, 7000 + index * 4 + j, o, NBitsPath::kGemv, &run);
          EXPECT_EQ(run.plan.gemv.tma, has_tma) << run.plan;
        }
        ++index;
      }
}

// The window kernel (testing::NBitsKnobs::gemv_window; float16 / bfloat16, algorithm 0,
// blocks of a window or more: 128 codes 4-bit, 64 8-bit; with line loads blocks down to a
// 16-byte chunk: 32 codes 4-bit, 16 8-bit) forced on with line loads (the plan's lines, rows of
// whole 128-byte lines) of one and of two tiles per warp (its tiles; two at 128
// and at 168 registers, its registers, the latter at k_split 1, 2, 4 and the planner's) and
// without, and off (the register-load tile of algorithm 0 then): block sizes from below a chunk
// (4-bit 16: no line loads) to 256, both dtypes, zero points none / packed, M up to 8, partial
// column tiles (N = 1, 19: a second tile without columns or with 3), and K from one
// window (no whole line: no line loads) to a K split that leaves warps without windows
// (10 windows, 5 line pairs, over 8 warps).
TEST(NBitsGemvWindow, OnAndOffEveryBlockSizeDtypeAndZeroPoints) {
  BQMM_REQUIRE_GPU();
  const int64_t ns[] = {1, 19, 40, 300};
  int index = 0;
  for (int bits : {4, 8}) {
    const int64_t window = 512 / bits;  // codes per 64-byte window
    // 4-bit: 2, 4, 10 and 32 windows; 8-bit: 4, 8, 20, 64.
    const int64_t ks[] = {256, 512, 1280, 4096};
    // Blocks below a chunk (4-bit 16), below a window (line loads only), of a window and more.
    const std::vector<int64_t> block_sizes =
        bits == 4 ? std::vector<int64_t>{16, 32, 64, 128, 256} : std::vector<int64_t>{16, 32, 64, 256};
    for (int64_t bs : block_sizes)
      for (DType t : {DType::kFloat16, DType::kBFloat16})
        // window with line loads of 2 tiles at 168 / 128 registers, of 1 tile, window, off
        for (int kernel : {4, 3, 2, 1, 0})
          for (int j = 0; j < 4; ++j, ++index) {
            const int64_t n = ns[index % 4];
            const int64_t k = j == 0 && bs == window ? window : ks[j];  // one window
            NBitsCaseSpec s = cycled_spec(t, bits, n == 1 ? kSingleColumnRows : 1 + index % 8,
                                          n, k, bs, index, j);
            testing::NBitsKnobs o;
            o.force.fma = 0;  // 8-bit: the tensor-core tiles at M = 1, 2 too
            o.force.window = kernel > 0 ? 1 : 0;
            o.force.lines = kernel >= 2 ? 1 : 0;
            o.force.tiles = kernel >= 3 ? 2 : 1;
            o.force.registers = kernel == 4 ? kGemvWideRegisters : kGemvTwoTileRegisters;
            if (kernel == 4) o.force.k_split = j == 0 ? 0 : 1 << (j - 1);
            SCOPED_TRACE(describe(s) << " window=" << o.force.window << " lines=" << o.force.lines
                                     << " tiles=" << o.force.tiles
                                     << " registers=" << o.force.registers);
            NBitsRun run;
            run_and_check(s, 4000 + index, o, NBitsPath::kGemv, &run);
            const bool lines = kernel >= 2 && k * bits / 8 % 128 == 0 && bs * bits >= 128;
            EXPECT_EQ(run.plan.gemv.window, bs >= window ? kernel > 0 : lines) << run.plan;
            EXPECT_EQ(run.plan.gemv.lines, lines) << run.plan;
            const int tiles = lines && kernel >= 3 ? 2 : 1;
            EXPECT_EQ(run.plan.gemv.tiles, tiles) << run.plan;
            EXPECT_EQ(run.plan.gemv.registers,
                      tiles == 1 ? 0 : kernel == 4 ? kGemvWideRegisters : kGemvTwoTileRegisters)
                << run.plan;
            if (tiles == 2 && kernel == 4) {
              EXPECT_LE(run.plan.gemv.k_split, 4) << run.plan;
            }
          }
  }
}

// The window kernel's split of 16 warps (4-bit, no zero points, no line loads; blocks of
// 512 threads, 15 partial sums through shared memory): the planner's choice on rows of 96
// or more windows where the grid is small, and forced. Rows of exactly 6 windows a warp
// (K = 12288), of 97 windows (warps of 6 and 7, the last one short) and of 112 (K = 14336),
// blocks of one and two windows, both dtypes, M 1..8, partial column tiles, bias or not.
TEST(NBitsGemvWindow, SplitOf16OnLongRows) {
  BQMM_REQUIRE_GPU();
  const int64_t ks[] = {12288, 12288 + 128, 14336};
  int index = 0;
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t bs : {128, 256})
      for (int64_t k : ks) {
        if (k % bs != 0) continue;
        const int64_t n = index % 3 == 0 ? 1 : index % 3 == 1 ? 19 : 300;
        NBitsCaseSpec s = nbits_spec(t, 4, n == 1 ? kSingleColumnRows : 1 + index % 8, n, k, bs);
        s.bias = index % 2 == 0;
        s.init = index % 2 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
        testing::NBitsKnobs o;
        if (index % 2 == 1) o.force.k_split = kNBitsWindowMaxKSplit;  // else the planner's
        SCOPED_TRACE(describe(s) << " k_split=" << o.force.k_split);
        NBitsRun run;
        run_and_check(s, 4600 + index++, o, NBitsPath::kGemv, &run);
        EXPECT_TRUE(run.plan.gemv.window) << run.plan;
        EXPECT_FALSE(run.plan.gemv.lines) << run.plan;
        EXPECT_EQ(run.plan.gemv.k_split, kNBitsWindowMaxKSplit) << run.plan;
      }
  EXPECT_EQ(index, 10);
  // Blocks of 12 warps (the one-tile window kernels at 80 registers, forced): 8-bit
  // bfloat16 codes by line loads, 4-bit with packed zero points with and without them;
  // rows of 14336 and of 1280 codes (5 line pairs or 10 windows over 12 warps: warps
  // without any), partial column tiles.
  for (int kernel = 0; kernel < 3; ++kernel)
    for (int64_t k : {14336, 1280}) {
      const int bits = kernel == 0 ? 8 : 4;
      const int64_t n = k == 1280 ? 19 : 300;
      NBitsCaseSpec s = nbits_spec(DType::kBFloat16, bits, 2 + 3 * kernel, n, k, 128);
      s.zero_points = kernel == 0 ? NBitsZeroPoints::kNone : NBitsZeroPoints::kPacked;
      s.bias = k == 1280;
      testing::NBitsKnobs o;
      o.force.fma = 0;
      o.force.window = 1;
      o.force.lines = kernel == 2 ? 0 : 1;
      o.force.tiles = 1;
      o.force.k_split = kNBitsWindow80MaxKSplit;
      SCOPED_TRACE(describe(s) << " lines=" << o.force.lines << " k_split=12");
      NBitsRun run;
      run_and_check(s, 4700 + index++, o, NBitsPath::kGemv, &run);
      EXPECT_TRUE(run.plan.gemv.window) << run.plan;
      EXPECT_EQ(run.plan.gemv.lines, kernel != 2) << run.plan;
      EXPECT_EQ(run.plan.gemv.k_split, kNBitsWindow80MaxKSplit) << run.plan;
    }
}

// Line loads on blocks of one window (4-bit 128 codes, 8-bit 64) read a row's two scales
// of a pair as one 4-byte load: scales placed 4 bytes into their buffer still take them,
// 2 bytes in take the window kernel without line loads (4-bit) or the register tile
// (8-bit), and a plan made for aligned scales refuses 2-byte aligned ones.
TEST(NBitsGemvWindow, ScalePairsNeedFourByteAlignedScales) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  int index = 0;
  for (int bits : {4, 8})
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (size_t offset : {size_t{4}, size_t{2}}) {
        NBitsCaseSpec s = nbits_spec(t, bits, 1 + index % 3, 40, 1024, 512 / bits);
        s.bias = index % 2 == 0;
        const NBitsCase c = make_random_nbits_case(s, 7500 + index++);
        testing::NBitsKnobs o;
        o.force.fma = 0;
        o.force.lines = 1;
        testing::NBitsDeviceCase d;
        BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
        BQMM_ASSERT_OK(DeviceTensor::upload(c.scales, &d.scales, offset));
        d.args.scales = d.scales.view();
        BQMM_ASSERT_OK(testing::plan_nbits_case(*handle, c, o, &d));
        SCOPED_TRACE(describe(s) << " scales offset " << offset << " " << d.plan);
        EXPECT_EQ(d.plan.path, NBitsPath::kGemv);
        EXPECT_EQ(d.plan.gemv.lines, offset % 4 == 0);
        BQMM_ASSERT_OK(testing::run_on_fresh_stream([&](cudaStream_t st) { return d.run(*handle, st); }));
        HostTensor y;
        BQMM_ASSERT_OK(d.y.download(&y));
        EXPECT_TRUE(matches_reference(c, y));
        if (offset % 4 != 0) {
          NBitsMatMulPlan aligned = d.plan;
          aligned.problem.scale_alignment = 16;
          const Status st = run_nbits_matmul(*handle, aligned, d.args, d.workspace.data(),
                                             d.workspace.size(), nullptr);
          EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
          EXPECT_NE(st.message().find("aligned scales"), std::string::npos) << st.message();
        }
      }
}

// The CUDA-core kernel (testing::NBitsKnobs::gemv_fma = 1: 8-bit, float16 / bfloat16,
// M <= 2): every block size and dtype, M 1 and 2, N over odd and partial-block values
// (two columns per warp, eight warps per block), K over short rows, a few blocks, 4096 (a
// whole number of 64-chunk iterations) and 4096 + one block (a partial last iteration),
// zero points none / packed, bias on and off, all codes or normal weights.
TEST(NBitsGemvFma, EveryBlockSizeDtypeAndZeroPoints) {
  BQMM_REQUIRE_GPU();
  const int64_t ns[] = {1, 17, 40, 300};
  testing::NBitsKnobs o;
  o.force.fma = 1;
  int index = 0;
  for (int64_t bs : kBlockSizes)
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      const int64_t ks[] = {2 * bs, 6 * bs, 4096, 4096 + bs};
      for (int j = 0; j < 4; ++j) {
        const int64_t n = ns[(index + j) % 4];
        const int64_t m = n == 1 ? 1 : 1 + (index + j) % 2;
        const NBitsCaseSpec s = cycled_spec(t, 8, m, n, ks[j], bs, index, j);
        SCOPED_TRACE(describe(s) << " fma");
        NBitsRun run;
        run_and_check(s, 8000 + index * 4 + j, o, NBitsPath::kGemv, &run);
        EXPECT_TRUE(run.plan.gemv.fma) << run.plan;
        EXPECT_EQ(run.plan.gemv.rows, m) << run.plan;
      }
      ++index;
    }
}

// Each M from 1 to 8 with each algorithm on one shape per width: the row masks of the
// tensor-core tile and the FMA tile sizes (1, 2, 4, 8).
TEST(NBitsGemv, EveryRowCount) {
  BQMM_REQUIRE_GPU();
  int index = 0;
  for (int bits : kBits)
    for (DType t : kDTypes)
      for (int64_t m = 1; m <= 8; ++m) {
        NBitsCaseSpec s = nbits_spec(t, bits, m, 33, 512, 32);
        s.zero_points = NBitsZeroPoints::kPacked;
        s.bias = true;
        const int algo = index++ % 3;
        SCOPED_TRACE(describe(s) << " algo=" << algo);
        run_and_check(s, 2000 + index, gemv_algo(algo), NBitsPath::kGemv);
      }
}

// Layer-sized shapes with the planner's own choices: many column tiles, K split over 8
// warps, a 4096-multiple N plus a partial tile.
TEST(NBitsGemv, LayerShapesWithDefaultPlan) {
  BQMM_REQUIRE_GPU();
  int index = 0;
  for (int bits : kBits)
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (int64_t m : {1, 8}) {
        NBitsCaseSpec s = nbits_spec(t, bits, m, 2048 + 8, 4096, index % 2 == 0 ? 32 : 128);
        s.zero_points = index % 2 == 0 ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kNone;
        s.bias = true;
        SCOPED_TRACE(describe(s));
        NBitsRun run;
        run_and_check(s, 3000 + index++, testing::NBitsKnobs{}, NBitsPath::kGemv, &run);
        EXPECT_EQ(run.plan.gemv.fma, bits == 8 && m == 1) << run.plan;
        if (!run.plan.gemv.fma) {
          EXPECT_EQ(run.plan.gemv.k_split, 8) << run.plan;
        }
      }
}

// The hand examples of the CPU suite, exactly (the weights are small integers times powers
// of two, so every product and sum is exact in every type), through each path.
TEST(NBitsGemv, HandExampleExactOnEveryPath) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  // 8-bit, default zero point 128, scale 0.5: rows q = 128 + k % 16 and q = 120, K = 64.
  for (DType t : kDTypes)
    for (int bits : kBits) {
      NBitsCase c;
      c.attrs.n = 2;
      c.attrs.k = 64;
      c.attrs.bits = bits;
      c.attrs.block_size = 16;
      const int zp = 1 << (bits - 1);
      std::vector<uint8_t> q(128);
      for (int k = 0; k < 64; ++k) {
        q[k] = static_cast<uint8_t>(zp + (k % 16) % (bits == 4 ? 8 : 16));
        q[64 + k] = static_cast<uint8_t>(zp - 8);
      }
      c.b = reference::pack_nbits_codes(q, 2, 64, bits, 16);
      c.scales = HostTensor::zeros(t, Shape{2, 4});
      for (int i = 0; i < 8; ++i) c.scales.set(i, 0.5);
      c.a = HostTensor::zeros(t, Shape{2, 64});
      for (int k = 0; k < 64; ++k) {
        c.a.set(k, 1.0);
        c.a.set(64 + k, k == 0 ? 1.0 : k == 63 ? 2.0 : 0.0);
      }
      c.bias = HostTensor::zeros(t, Shape{2});
      c.bias->set(0, 1.0);
      c.bias->set(1, 2.0);
      const std::vector<double> want = reference::nbits_matmul_reference(c, 0, 2);
      // Variants: the three K-loop algorithms, the CUDA-core kernel where it applies
      // (8-bit float16 / bfloat16; the others keep their tile), dequant + cuBLAS.
      for (int variant = 0; variant < 5; ++variant) {
        testing::NBitsKnobs o = variant < 3 ? gemv_algo(variant) : dequant_gemm_only();
        if (variant == 3) {
          o = testing::NBitsKnobs{};
          o.force.fma = 1;
        }
        SCOPED_TRACE(::testing::Message() << bits << "-bit " << dtype_name(t) << " variant " << variant);
        NBitsRun run;
        BQMM_ASSERT_OK(run_nbits_on_device(*handle, c, o, &run));
        EXPECT_EQ(run.plan.path, variant < 4 ? NBitsPath::kGemv : NBitsPath::kDequantGemm);
        if (variant == 3) {
          EXPECT_EQ(run.plan.gemv.fma, bits == 8 && t != DType::kFloat32);
        }
        for (int i = 0; i < 4; ++i) EXPECT_EQ(run.y.get(i), want[i]) << i;
      }
    }
}

// Two 4-bit layers in a row on one stream, the second's A the first's Y (NaN-poisoned
// until the first writes it), both on the planner's register tile, which on SM90 with
// the option gemv_dependent_launch is a programmatic dependent launch: it may start while
// the first still runs, so the result is right only if it reads A after waiting for that
// kernel. Checked against the reference on the first's downloaded output; also with the
// option off (the default) and with it on but the launch forced plain (gemv_pdl=0).
TEST(NBitsGemv, DependentLaunchReadsWhatTheKernelBeforeWrote) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm < 80) GTEST_SKIP() << "the tensor-core GEMV needs SM80+";
  uint64_t seed = 900;
  const std::pair<bool, const char*> settings[] = {{true, ""}, {false, ""}, {true, "gemv_pdl=0"}};
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m : {1, 8})
      for (const auto& [option, force] : settings) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << m << " option " << option << " "
                                          << force);
        testing::NBitsKnobs knobs;
        knobs.options.gemv_dependent_launch = option;
        BQMM_ASSERT_OK(parse_plan_override(force, &knobs.force));
        const NBitsCase first = make_random_nbits_case(nbits_spec(t, 4, m, 4096, 4096, 128), seed++);
        NBitsCase second = make_random_nbits_case(nbits_spec(t, 4, m, 1000, 4096, 128, false, true), seed++);
        testing::NBitsDeviceCase d1, d2;
        BQMM_ASSERT_OK(testing::upload_nbits_case(first, &d1));
        BQMM_ASSERT_OK(testing::upload_nbits_case(second, &d2));
        d2.args.a.data = d1.y.data();  // the first layer's output, [m, 4096]
        BQMM_ASSERT_OK(testing::plan_nbits_case(*handle, first, knobs, &d1));
        BQMM_ASSERT_OK(testing::plan_nbits_case(*handle, second, knobs, &d2));
        ASSERT_FALSE(d2.plan.gemv.window || d2.plan.gemv.tma || d2.plan.gemv.fma) << d2.plan;
        EXPECT_EQ(d2.plan.gemv.dependent_launch,
                  gemv_dependent_launch_possible(handle->device_info()) && option && *force == '\0')
            << d2.plan;
        HostTensor y1, y2;
        BQMM_ASSERT_OK(testing::run_two_layers(*handle, d1, d2, &y1, &y2));
        EXPECT_TRUE(matches_reference(first, y1));
        second.a = y1;
        EXPECT_TRUE(matches_reference(second, y2)) << d2.plan;
      }
}

// A NaN activation makes its row NaN and leaves the others finite (mma, FMA tile and
// CUDA-core kernel alike), on both paths.
TEST(NBitsGemv, NanActivationPropagatesToItsRowOnly) {
  BQMM_REQUIRE_GPU();
  int index = 0;
  testing::NBitsKnobs fma;
  fma.force.fma = 1;
  for (DType t : kDTypes)
    for (int variant = 0; variant < 3; ++variant) {  // the default plan, dequant, gemv_fma
      const bool cuda_cores = variant == 2 && t != DType::kFloat32;
      if (variant == 2 && !cuda_cores) continue;
      const int64_t rows = cuda_cores ? 2 : 3;
      const NBitsCaseSpec s = nbits_spec(t, index % 2 == 0 && !cuda_cores ? 4 : 8, rows, 20, 256, 32);
      NBitsCase c = make_random_nbits_case(s, 4000 + index++);
      c.a.set(1 * 256 + 77, std::nan(""));
      NBitsRun run;
      const testing::NBitsKnobs o = variant == 0 ? testing::NBitsKnobs{}
                                   : variant == 1 ? dequant_gemm_only() : fma;
      BQMM_ASSERT_OK(run_nbits_on_device(*testing::shared_handle(), c, o, &run));
      EXPECT_EQ(run.plan.gemv.fma, cuda_cores) << run.plan;
      for (int64_t m = 0; m < rows; ++m)
        for (int64_t n = 0; n < 20; ++n)
          EXPECT_EQ(std::isnan(run.y.get(m * 20 + n)), m == 1) << dtype_name(t) << " " << m << "," << n;
    }
}

// ------------------------------------------------------------------ the GEMMs (M > 8)
// Typed (fractional) zero points above the decode rows through the planner: the fused
// GEMM's mainloops (on SM90 wgmma at every M, mma.sync where forced with wgmma=0, the
// Ampere kernel) and, from 65 rows where the planner takes it, the mixed-input
// GEMM; never dequant + cuBLAS. Both widths and half types, odd N, K not a multiple of the
// block (a partial last block), blocks of 32 to 128, bias and weight init cycling.
TEST(NBitsGemm, TypedZeroPointsEveryRowCount) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  if (handle->device_info().sm < 80) GTEST_SKIP() << "the GEMMs need SM80+";
  const int64_t block_sizes[] = {32, 64, 128};
  int index = 0;
  for (const int64_t m : {9, 16, 17, 33, 64, 100, 128})
    for (const int bits : kBits)
      for (const int wgmma : {-1, 0}) {
        if (wgmma == 0 && (m % 2 == 0 || handle->device_info().sm != 90)) continue;  // mma.sync forced: odd M
        const int64_t bs = block_sizes[index % 3];
        NBitsCaseSpec s = nbits_spec(kDTypes[1 + index % 2], bits, m, index % 2 == 0 ? 517 : 300,
                                     7 * bs + bs / 2, bs);
        s.zero_points = NBitsZeroPoints::kTyped;
        s.bias = index % 3 != 0;
        s.init = index % 4 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
        testing::NBitsKnobs o;
        o.force.wgmma = wgmma;
        SCOPED_TRACE(describe(s) << " wgmma=" << wgmma);
        const NBitsCase c = make_random_nbits_case(s, 12000 + index);
        NBitsRun run;
        BQMM_ASSERT_OK(run_nbits_on_device(*handle, c, o, &run));
        EXPECT_TRUE(run.plan.path == NBitsPath::kFusedGemm || run.plan.path == NBitsPath::kMixedGemm)
            << run.plan;
        if (wgmma == 0) {
          EXPECT_EQ(run.plan.path, NBitsPath::kFusedGemm) << run.plan;
          EXPECT_FALSE(run.plan.gemm.wgmma) << run.plan;
        }
        EXPECT_TRUE(matches_reference(c, run.y)) << run.plan;
        ++index;
      }
}

// ------------------------------------------------------------------ dequant + cuBLAS
// Every (bits, block size, dtype) through the default path with what only it takes:
// g_idx, K not a multiple of the block size, K % 8 != 0 (scalar kernel), M > 8; and
// forced for M <= 8. Zero points (typed ones too), bias and init cycle.
TEST(NBitsDequantGemm, EveryBitsBlockSizeAndDtype) {
  BQMM_REQUIRE_GPU();
  const int64_t ms[] = {1, 9, 33, 4};
  const int64_t ns[] = {17, 1, 130};
  const NBitsZeroPoints zps[] = {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked,
                                 NBitsZeroPoints::kTyped};
  int index = 0;
  for (int bits : kBits)
    for (int64_t bs : kBlockSizes)
      for (DType t : kDTypes)
        for (int variant = 0; variant < 2; ++variant) {
          const int64_t n = ns[index % 3];
          const int64_t m = n == 1 ? std::max(ms[index % 4], kSingleColumnRows) : ms[index % 4];
          // Partial last blocks: K % bs != 0, sometimes also K % 8 != 0.
          const int64_t ks[] = {3 * bs + bs / 2, 2 * bs + 5, 4 * bs};
          NBitsCaseSpec s = nbits_spec(t, bits, m, n, ks[index % 3], bs);
          s.zero_points = zps[(index / 2) % 3];
          s.g_idx = variant == 1;
          s.bias = index % 2 == 0;
          s.init = index % 5 == 0 ? WeightInit::kAllCodes : WeightInit::kQuantizedNormal;
          SCOPED_TRACE(describe(s));
          NBitsRun run;
          run_and_check(s, 5000 + index, dequant_gemm_only(), NBitsPath::kDequantGemm, &run);
          EXPECT_EQ(run.plan.dequant.vector, s.k % 8 == 0);
          ++index;
        }
}

// The full product of zero-point kind x g_idx x bias x width on one vector and one
// scalar dequant shape, the fused GEMM forced off (it takes the cases without g_idx by
// default): every option combination runs.
TEST(NBitsDequantGemm, EveryOptionCombination) {
  BQMM_REQUIRE_GPU();
  int seed = 0;
  for (int64_t k : {256, 100})
    for (int bits : kBits)
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped})
        for (bool g_idx : {false, true})
          for (bool bias : {false, true}) {
            NBitsCaseSpec s = nbits_spec(kDTypes[seed % 3], bits, kGemvMaxGroupRows + 8, 17, k, 32);
            s.zero_points = zp;
            s.g_idx = g_idx;
            s.bias = bias;
            SCOPED_TRACE(describe(s));
            run_and_check(s, 6000 + seed++, dequant_gemm_only(), NBitsPath::kDequantGemm);
          }
}

// float32 must be true FP32 (tolerance 1e-5): a TF32 GEMM would miss by ~1e-3.
TEST(NBitsDequantGemm, Float32IsTrueFp32) {
  BQMM_REQUIRE_GPU();
  NBitsCaseSpec s = nbits_spec(DType::kFloat32, 8, 64, 256, 4096, 64);
  s.zero_points = NBitsZeroPoints::kTyped;
  s.bias = true;
  run_and_check(s, 7000, testing::NBitsKnobs{}, NBitsPath::kDequantGemm);
  s.m = 8;
  run_and_check(s, 7001, testing::NBitsKnobs{}, NBitsPath::kDequantGemm);  // typed zp
  s.zero_points = NBitsZeroPoints::kPacked;
  run_and_check(s, 7002, testing::NBitsKnobs{}, NBitsPath::kGemv);
}

// A scratch far smaller than the weight: many N tiles, the last one partial.
TEST(NBitsDequantGemm, NTiledScratch) {
  BQMM_REQUIRE_GPU();
  for (DType t : kDTypes) {
    NBitsCaseSpec s = nbits_spec(t, 4, 20, 1026, 256, 64);
    s.zero_points = NBitsZeroPoints::kPacked;
    s.g_idx = true;
    s.bias = true;
    testing::NBitsKnobs o;
    o.options.dequant_scratch_bytes = 100 * 256 * static_cast<int64_t>(dtype_size(t));  // 100 rows
    NBitsRun run;
    SCOPED_TRACE(describe(s));
    run_and_check(s, 7100, o, NBitsPath::kDequantGemm, &run);
    EXPECT_EQ(run.plan.dequant.n_tile, 100);
    EXPECT_EQ(run.plan.dequant.num_n_tiles, 11);
  }
}

// Unaligned A or B cannot take the GEMV's 16-byte loads: the planner falls back, and the
// dequant kernel takes byte loads when B is not even 8-byte aligned.
TEST(NBitsDequantGemm, MisalignedPointersFallBack) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  NBitsCaseSpec s = nbits_spec(DType::kFloat16, 4, 2, 33, 256, 32);
  s.zero_points = NBitsZeroPoints::kPacked;
  const NBitsCase c = make_random_nbits_case(s, 7200);
  struct Offsets { size_t a, b; bool vec8; };
  for (const Offsets o : {Offsets{8, 0, true}, Offsets{0, 8, true}, Offsets{0, 4, false},
                          Offsets{0, 1, false}, Offsets{2, 3, false}}) {
    NBitsRun run;
    BQMM_ASSERT_OK(run_nbits_on_device(*handle, c, testing::NBitsKnobs{}, &run, o.a, o.b));
    EXPECT_EQ(run.plan.path, NBitsPath::kDequantGemm) << o.a << " " << o.b;
    EXPECT_EQ(run.plan.dequant.vector, o.vec8) << o.a << " " << o.b;
    EXPECT_TRUE(matches_reference(c, run.y)) << o.a << " " << o.b;
  }
}

// A rank-3 activation flattens its leading dims into M (6 rows: the GEMV; 15: its row
// group of 16).
TEST(NBitsDequantGemm, Rank3Activation) {
  BQMM_REQUIRE_GPU();
  for (int64_t m0 : {2, 5}) {
    NBitsCaseSpec s = nbits_spec(DType::kBFloat16, 8, m0 * 3, 40, 128, 32);
    s.bias = true;
    NBitsCase c = make_random_nbits_case(s, 7300);
    c.a.shape = Shape{m0, 3, 128};
    NBitsRun run;
    BQMM_ASSERT_OK(run_nbits_on_device(*testing::shared_handle(), c, testing::NBitsKnobs{}, &run));
    EXPECT_EQ(run.plan.path, NBitsPath::kGemv);
    EXPECT_EQ(run.y.shape, (Shape{m0, 3, 40}));
    EXPECT_TRUE(matches_reference(c, run.y));
  }
}

// g_idx values out of range are the caller's responsibility: bqmm reads nothing out of
// bounds (compute-sanitizer runs this test) and the outputs that depend on them are NaN.
TEST(NBitsDequantGemm, OutOfRangeGIdxGivesNaNNotAFault) {
  BQMM_REQUIRE_GPU();
  for (int32_t bad : {-1, 4, 1 << 30}) {
    NBitsCaseSpec s = nbits_spec(DType::kFloat16, 4, 2, 9, 128, 32);
    s.zero_points = NBitsZeroPoints::kPacked;
    s.g_idx = true;
    NBitsCase c = make_random_nbits_case(s, 7400);
    c.g_idx->set(50, bad);
    NBitsRun run;
    BQMM_ASSERT_OK(run_nbits_on_device(*testing::shared_handle(), c, testing::NBitsKnobs{}, &run));
    for (int64_t i = 0; i < run.y.numel(); ++i) ASSERT_TRUE(std::isnan(run.y.get(i))) << bad << " " << i;
  }
}

// K == 0: Y = bias, or zeros, exactly (float32 included).
TEST(NBitsDequantGemm, EmptyKGivesBias) {
  BQMM_REQUIRE_GPU();
  for (DType t : kDTypes)
    for (bool bias : {false, true}) {
      NBitsCaseSpec s = nbits_spec(t, 4, 5, 33, 0, 32);
      s.bias = bias;
      const NBitsCase c = make_random_nbits_case(s, 7500);
      NBitsRun run;
      BQMM_ASSERT_OK(run_nbits_on_device(*testing::shared_handle(), c, testing::NBitsKnobs{}, &run));
      EXPECT_EQ(run.plan.path, NBitsPath::kBiasOnly);
      for (int64_t m = 0; m < 5; ++m)
        for (int64_t n = 0; n < 33; ++n)
          ASSERT_EQ(run.y.get(m * 33 + n), bias ? c.bias->get(n) : 0.0) << m << "," << n;
    }
}

// M == 0 and N == 0 succeed and write nothing.
TEST(NBitsDequantGemm, EmptyOutputs) {
  BQMM_REQUIRE_GPU();
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 64}, {4, 0}}) {
    NBitsCaseSpec s = nbits_spec(DType::kFloat16, 4, m, n, 64, 32);
    s.zero_points = NBitsZeroPoints::kPacked;
    s.bias = true;
    const NBitsCase c = make_random_nbits_case(s, 7600);
    NBitsRun run;
    BQMM_ASSERT_OK(run_nbits_on_device(*testing::shared_handle(), c, testing::NBitsKnobs{}, &run));
    EXPECT_EQ(run.plan.path, NBitsPath::kEmpty);
    EXPECT_EQ(run.y.numel(), 0);
  }
}

// ------------------------------------------------------------------ kernels
// The dequantize kernel, bit for bit against (q - zp) * scale in float32 rounded to T1
// (vector and scalar variants, every zero-point kind, g_idx, partial last block).
TEST(NBitsKernels, DequantBitExact) {
  BQMM_REQUIRE_GPU();
  int index = 0;
  for (int bits : kBits)
    for (DType t : kDTypes)
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
        NBitsCaseSpec s = nbits_spec(t, bits, 1, 70, index % 2 == 0 ? 320 : 100, 16 << (index % 3));
        s.zero_points = zp;
        s.g_idx = index % 4 >= 2;
        s.init = WeightInit::kAllCodes;
        const NBitsCase c = make_random_nbits_case(s, 8000 + index++);
        SCOPED_TRACE(describe(s));
        // The kernel reads only the weights' tensors; A and Y come along unused.
        testing::NBitsDeviceCase dev;
        BQMM_ASSERT_OK(testing::upload_nbits_case(c, &dev));
        DeviceTensor out;
        BQMM_ASSERT_OK(testing::upload_poisoned(t, Shape{s.n, s.k}, &out));
        cuda::NBitsDequantArgs d;
        d.dtype = t;
        d.bits = bits;
        d.b = static_cast<const uint8_t*>(dev.b.data());
        d.scales = dev.scales.data();
        if (zp == NBitsZeroPoints::kPacked)
          d.zp_packed = static_cast<const uint8_t*>(dev.zero_points.data());
        if (zp == NBitsZeroPoints::kTyped) d.zp_typed = dev.zero_points.data();
        if (c.g_idx) d.g_idx = static_cast<const int32_t*>(dev.g_idx.data());
        d.rows = s.n;
        d.k = s.k;
        d.block_size = s.block_size;
        d.out = out.data();
        BQMM_ASSERT_OK(cuda::launch_nbits_dequant(d, s.k % 8 == 0, nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        HostTensor host;
        BQMM_ASSERT_OK(out.download(&host));
        int64_t mismatches = 0;
        for (int64_t r = 0; r < s.n; ++r)
          for (int64_t k = 0; k < s.k; ++k) {
            const int64_t blk = reference::nbits_block_of(c, k);
            const auto q = static_cast<float>(reference::nbits_code(c, r, k));
            const auto z = static_cast<float>(reference::nbits_zero_point(c, r, blk));
            const auto sc = static_cast<float>(c.scales.get(r * c.k_blocks() + blk));
            const float want = codec::round_to(t, (q - z) * sc);
            const double got = host.get(r * s.k + k);
            if (got != want && mismatches++ < 5)
              ADD_FAILURE() << "row " << r << " k " << k << ": got " << got << " want " << want;
          }
        EXPECT_EQ(mismatches, 0);
      }
}

// ------------------------------------------------------------------ run-time contract
// run() checks the workspace and that the arguments are the plan's problem.
TEST(NBitsRunContract, RejectsBadWorkspaceAndMismatchedArgs) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  NBitsCaseSpec s = nbits_spec(DType::kFloat16, 4, 16, 64, 128, 32);
  s.zero_points = NBitsZeroPoints::kPacked;
  const NBitsCase c = make_random_nbits_case(s, 9000);
  testing::NBitsDeviceCase d;
  BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
  // The dequant + cuBLAS plan: a workspace to be short of (the fused GEMM needs none here).
  BQMM_ASSERT_OK(testing::plan_nbits_case(*handle, c, dequant_gemm_only(), &d));
  ASSERT_EQ(d.plan.path, NBitsPath::kDequantGemm);

  Status st = run_nbits_matmul(*handle, d.plan, d.args, d.workspace.data(),
                               d.plan.workspace_bytes - 1, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kWorkspaceTooSmall) << st.to_string();
  st = run_nbits_matmul(*handle, d.plan, d.args, nullptr, d.plan.workspace_bytes, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  st = run_nbits_matmul(*handle, d.plan, d.args, static_cast<uint8_t*>(d.workspace.data()) + 16,
                        d.plan.workspace_bytes, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  // A workspace over Y (which the run would overwrite while it reads the workspace).
  st = run_nbits_matmul(*handle, d.plan, d.args, d.y.data(), d.plan.workspace_bytes, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_EQ(st.message().rfind("workspace: overlaps ", 0), 0u) << st.message();

  NBitsMatMulArgs no_zp = d.args;
  no_zp.zero_points.reset();
  st = run_nbits_matmul(*handle, d.plan, no_zp, d.workspace.data(), d.workspace.size(), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("plan: made for"), std::string::npos) << st.message();

  // A GEMV plan (16-byte aligned pointers) refuses 8-byte aligned B.
  NBitsMatMulArgs decode = d.args;
  decode.a.shape = Shape{1, 128};
  decode.y.shape = Shape{1, 64};
  NBitsMatMulProblem p;
  BQMM_ASSERT_OK(validate_nbits_matmul(decode, c.attrs, &p));
  NBitsMatMulPlan plan;
  BQMM_ASSERT_OK(plan_nbits_matmul(p, handle->device_info(), NBitsMatMulOptions{}, &plan));
  ASSERT_EQ(plan.path, NBitsPath::kGemv);
  DeviceTensor b_off;
  BQMM_ASSERT_OK(DeviceTensor::upload(c.b, &b_off, 8));
  decode.b = b_off.view();
  st = run_nbits_matmul(*handle, plan, decode, nullptr, 0, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("aligned"), std::string::npos) << st.message();
}

// run() enqueues only: every path (dequant + cuBLAS over three N tiles with bias, the
// fused GEMM, and the GEMV, with row groups at 24 rows under gemm=0) can be captured in a
// CUDA graph, and the replay computes the right answer.
TEST(NBitsRunContract, GraphCapturable) {
  BQMM_REQUIRE_GPU();
  const Handle* handle = testing::shared_handle();
  ASSERT_NE(handle, nullptr);
  struct Case {
    int64_t m;
    int gemm;  // the override's gemm key (-1: the planner's)
    NBitsPath path;
  };
  for (const Case g : {Case{kGemvMaxGroupRows + 8, 0, NBitsPath::kDequantGemm},
                       Case{24, -1, NBitsPath::kFusedGemm}, Case{24, 0, NBitsPath::kGemv},
                       Case{3, -1, NBitsPath::kGemv}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << g.m << " gemm=" << g.gemm);
    NBitsCaseSpec s = nbits_spec(DType::kBFloat16, 4, g.m, 300, 512, 128);
    s.zero_points = NBitsZeroPoints::kPacked;
    s.bias = true;
    const NBitsCase c = make_random_nbits_case(s, 9100 + g.m);
    testing::NBitsKnobs o;
    o.force.gemm = g.gemm;
    o.options.dequant_scratch_bytes = 128 * 512 * 2;  // three tiles inside the graph
    testing::NBitsDeviceCase d;
    BQMM_ASSERT_OK(testing::upload_nbits_case(c, &d));
    BQMM_ASSERT_OK(testing::plan_nbits_case(*handle, c, o, &d));
    ASSERT_EQ(d.plan.path, g.path);
    if (g.path == NBitsPath::kDequantGemm) {
      ASSERT_EQ(d.plan.dequant.num_n_tiles, 3);
    }
    if (g.path == NBitsPath::kGemv && g.m > 8) {
      ASSERT_EQ(d.plan.gemv.row_groups, 2);
    }
    BQMM_ASSERT_OK(testing::run_in_graph([&](cudaStream_t st) { return d.run(*handle, st); }));
    HostTensor y;
    BQMM_ASSERT_OK(d.y.download(&y));
    EXPECT_TRUE(matches_reference(c, y)) << d.plan;
  }
}

// ------------------------------------------------------------------ compute-sanitizer
// A few small cases of every kernel path, fast enough to run under memcheck: the GEMV of
// each width, algorithm and tile type with partial column tiles and a partial last window
// (the tensor-core tiles: register loads, the window kernel and TMA; the CUDA-core kernel),
// the dequant kernels (vector, scalar, g_idx, typed zero points) and the bias fill.
TEST(NBitsGemv, SanitizeSmall) {
  BQMM_REQUIRE_GPU();
  int index = 0;
  for (int bits : kBits)
    for (DType t : kDTypes)
      for (int algo : {0, 1, 2}) {
        const int64_t bs = index % 2 == 0 ? 16 : 128;
        // 8-bit: a partial window.
        NBitsCaseSpec s = nbits_spec(t, bits, 1 + index % 8, 19, bits == 8 ? 3 * bs : 2 * bs, bs);
        s.zero_points = index % 2 == 0 ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kNone;
        s.bias = true;
        SCOPED_TRACE(describe(s) << " algo=" << algo);
        run_and_check(s, 9500 + index++, gemv_algo(algo), NBitsPath::kGemv);
      }
  // Typed zero points on the register tile: blocks of half a 4-bit chunk and of two
  // windows, a partial column tile.
  for (int bits : kBits)
    for (int64_t bs : {int64_t{16}, int64_t{128}}) {
      NBitsCaseSpec s = nbits_spec(kDTypes[1 + index % 2], bits, 1 + index % 8, 19, 4 * bs, bs);
      s.zero_points = NBitsZeroPoints::kTyped;
      s.bias = true;
      SCOPED_TRACE(describe(s) << " typed");
      run_and_check(s, 9500 + index++, testing::NBitsKnobs{}, NBitsPath::kGemv);
    }
  for (int64_t k : {96, 101})
    for (auto zp : {NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
      NBitsCaseSpec s = nbits_spec(kDTypes[index % 3], index % 2 == 0 ? 4 : 8, 10, 7, k, 32);
      s.zero_points = zp;
      s.g_idx = true;
      s.bias = true;
      SCOPED_TRACE(describe(s));
      run_and_check(s, 9500 + index++, testing::NBitsKnobs{}, NBitsPath::kDequantGemm);
    }
  NBitsCaseSpec s = nbits_spec(DType::kFloat32, 4, 3, 5, 0, 32);
  s.bias = true;
  run_and_check(s, 9600, testing::NBitsKnobs{}, NBitsPath::kBiasOnly);
  // The CUDA-core kernel: a partial warp (odd N), a partial last iteration, M 1 and 2.
  testing::NBitsKnobs fma;
  fma.force.fma = 1;
  for (int64_t m : {1, 2}) {
    NBitsCaseSpec c = nbits_spec(kDTypes[m], 8, m, 19, 3 * 32, 32);
    c.zero_points = m == 2 ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kNone;
    c.bias = true;
    SCOPED_TRACE(describe(c) << " fma");
    run_and_check(c, 9800 + m, fma, NBitsPath::kGemv);
  }
  // The window kernel (with bias; its plan as asked), its variants below.
  auto window_case = [&](NBitsCaseSpec c, const testing::NBitsKnobs& o, bool lines, int tiles) {
    c.bias = true;
    SCOPED_TRACE(describe(c) << " window lines=" << lines << " tiles=" << tiles);
    NBitsRun run;
    run_and_check(c, 9900 + index++, o, NBitsPath::kGemv, &run);
    EXPECT_TRUE(run.plan.gemv.window) << run.plan;
    EXPECT_EQ(run.plan.gemv.lines, lines) << run.plan;
    EXPECT_EQ(run.plan.gemv.tiles, tiles) << run.plan;
  };
  // With and without line loads, both widths: a partial column tile, warps without
  // windows, zero points or not.
  testing::NBitsKnobs window;
  window.force.window = 1;
  window.force.fma = 0;
  for (int bits : kBits)
    for (int lines : {0, 1})
      for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked}) {
        NBitsCaseSpec c = nbits_spec(zp == NBitsZeroPoints::kNone ? DType::kFloat16 : DType::kBFloat16,
                                     bits, 3, 19, 1280, 128);
        c.zero_points = zp;
        window.force.lines = lines;
        window_case(c, window, lines == 1, 1);
      }
  // Line loads of two tiles per warp at 128 and 168 registers: a second tile with 3
  // columns (N = 19, packed zero points) or 8 (N = 40), warps without windows, both widths
  // and dtypes.
  testing::NBitsKnobs two;
  two.force.tiles = 2;
  two.force.fma = 0;
  for (int registers : {kGemvTwoTileRegisters, kGemvWideRegisters})
    for (int bits : kBits)
      for (int64_t n : {19, 40}) {
        NBitsCaseSpec c = nbits_spec(kDTypes[1 + (n == 40 ? 1 : 0)], bits, n == 40 ? 8 : 2, n, 1280, 128);
        c.zero_points = n == 19 ? NBitsZeroPoints::kPacked : NBitsZeroPoints::kNone;
        two.force.registers = registers;
        SCOPED_TRACE(::testing::Message() << "registers=" << registers);
        window_case(c, two, true, 2);
      }
  two.force.registers = -1;
  // The split of 16 warps (4-bit, no zero points): 15 partial sums through shared memory,
  // rows of 97 windows (the last warp short), a partial column tile.
  {
    testing::NBitsKnobs split16;
    split16.force.k_split = kNBitsWindowMaxKSplit;
    NBitsCaseSpec c = nbits_spec(DType::kBFloat16, 4, 3, 19, 12288 + 128, 128);
    window_case(c, split16, false, 1);
  }
  // Blocks of 12 (8-bit bfloat16 line loads at 80 registers, forced), warps without pairs.
  {
    testing::NBitsKnobs split12;
    split12.force.k_split = kNBitsWindow80MaxKSplit;
    split12.force.fma = 0;
    split12.force.lines = 1;
    split12.force.tiles = 1;
    NBitsCaseSpec c = nbits_spec(DType::kBFloat16, 8, 3, 19, 1280, 128);
    window_case(c, split12, true, 1);
  }
  // Line loads on blocks smaller than a window (a block per lane chunk: 4-bit 32, 8-bit
  // 16 codes), one and two tiles, with packed zero points.
  testing::NBitsKnobs small = two;
  small.force.lines = 1;
  for (int bits : kBits)
    for (int tiles : {1, 2}) {
      NBitsCaseSpec c = nbits_spec(kDTypes[tiles], bits, 3, 19, 1280, 128 / bits);
      c.zero_points = NBitsZeroPoints::kPacked;
      small.force.tiles = tiles;
      window_case(c, small, true, tiles);
    }
  // The TMA tile: a partial column tile, a row ending in a partial tile, both widths.
  testing::NBitsKnobs tma;
  tma.force.tma = 1;
  for (int bits : kBits) {
    NBitsCaseSpec c = nbits_spec(kDTypes[1 + bits / 8], bits, 5, 19, 3 * 64 * 8 / bits, bits == 8 ? 64 : 128);
    if (c.k % c.block_size != 0) c.k = 2 * c.block_size;
    c.zero_points = NBitsZeroPoints::kPacked;
    c.bias = true;
    SCOPED_TRACE(describe(c) << " tma");
    run_and_check(c, 9700 + bits, tma, NBitsPath::kGemv);
  }
}

}  // namespace
}  // namespace bqmm
