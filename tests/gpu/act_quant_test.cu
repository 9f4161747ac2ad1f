// The W8A8 quantize pass (cuda/gemm/act_quant_e4m3.cuh) in both forms the library
// launches (one row and one chunk a thread; two rows by two chunks a lane) and through its
// rule (launch_act_quant_e4m3), bit for bit against the contract's definition computed on
// the host: per row and K block the scale (dynamic amax / 448 in float32, NaN where the
// block holds a NaN; static a_scale), codes e4m3_satfinite_rne(a * inv) with inv = 1 /
// scale (0 for a zero scale), the padding rows past M codes and scales 0. Blocks of 128 to
// 512 (384: the two-chunk form holds 256 of a block and reloads the rest), short last
// blocks, a zero block, a NaN, an infinity, a value past e4m3's range, both activation
// types and modes. Skips itself, saying so, without a CUDA device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gpu.h"
#include "cuda/gemm/act_quant_e4m3.cuh"
#include "harness/device_buffer.h"
#include "reference/codecs.h"

namespace bqmm {
namespace {

using harness::DeviceBuffer;
using harness::DeviceTensor;
using harness::HostTensor;

struct PassCase {
  int64_t m, rows, k, block;
};

// Codes [rows, K] and scales [k_blocks, rows] as the contract defines them.
void expected_pass(const HostTensor& a, const PassCase& c, bool dynamic, float a_scale,
                   std::vector<uint8_t>* codes, std::vector<float>* scales) {
  const int64_t k_blocks = (c.k + c.block - 1) / c.block;
  codes->assign(c.rows * c.k, 0);
  scales->assign(k_blocks * c.rows, 0.0f);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t b = 0; b < k_blocks; ++b) {
      const int64_t begin = b * c.block, end = std::min(c.k, begin + c.block);
      float scale = a_scale;
      if (dynamic) {
        float amax = 0.0f;
        bool nan = false;
        for (int64_t i = begin; i < end; ++i) {
          const auto x = static_cast<float>(a.get(r * c.k + i));
          nan = nan || std::isnan(x);
          amax = std::max(amax, std::fabs(x));
        }
        scale = nan ? NAN : amax / 448.0f;
      }
      (*scales)[b * c.rows + r] = scale;
      const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      for (int64_t i = begin; i < end; ++i)
        (*codes)[r * c.k + i] = codec::float_to_e4m3_satfinite(static_cast<float>(a.get(r * c.k + i)) * inv);
    }
}

// form 0: one row by one chunk; 1: two rows by two chunks; 2: the library's rule.
template <typename T, bool kDynamic>
Status launch_form(int form, const cuda::Fp8KernelArgs& args, const PassCase& c, uint8_t* codes, float* scales) {
  const int64_t k_blocks = (c.k + c.block - 1) / c.block;
  if (form == 0)
    return cuda::act_quant::launch_act_quant<T, kDynamic, 1, 1>(args, c.rows, c.block, k_blocks, c.rows, codes,
                                                                scales, nullptr);
  if (form == 1)
    return cuda::act_quant::launch_act_quant<T, kDynamic, 2, 2>(args, c.rows, c.block, k_blocks, c.rows, codes,
                                                                scales, nullptr);
  return cuda::launch_act_quant_e4m3<T, kDynamic>(args, c.rows, c.block, k_blocks, c.rows, codes, scales, nullptr);
}

template <typename T>
void check_case(const PassCase& c, uint32_t seed) {
  const DType t = std::is_same_v<T, __half> ? DType::kFloat16 : DType::kBFloat16;
  const int64_t k_blocks = (c.k + c.block - 1) / c.block;
  HostTensor a = HostTensor::zeros(t, Shape{c.m, c.k});
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, normal(rng));
  for (int64_t i = 0; i < std::min(c.block, c.k); ++i) a.set(1 * c.k + i, 0.0);  // row 1, block 0: zeros
  if (k_blocks > 1) a.set(2 * c.k + c.block + 5, std::nan(""));                 // row 2, block 1: a NaN
  ASSERT_GE(c.m, 5) << "rows 0-4 carry the special values";
  a.set(3 * c.k + c.k - 3, INFINITY);                                            // row 3, last block
  a.set(4 * c.k + 7, 60000.0);                                                   // row 4: past 448 once scaled
  DeviceTensor da;
  BQMM_ASSERT_OK(DeviceTensor::upload(a, &da));
  const float a_scale = 0.0123f;
  DeviceBuffer d_scale, d_codes, d_scales;
  BQMM_ASSERT_OK(DeviceBuffer::allocate(sizeof(float), &d_scale));
  BQMM_ASSERT_OK(DeviceBuffer::allocate(c.rows * c.k, &d_codes));
  BQMM_ASSERT_OK(DeviceBuffer::allocate(k_blocks * c.rows * sizeof(float), &d_scales));
  ASSERT_EQ(cudaMemcpy(d_scale.data(), &a_scale, sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  for (bool dynamic : {false, true}) {
    std::vector<uint8_t> want_codes;
    std::vector<float> want_scales;
    expected_pass(a, c, dynamic, a_scale, &want_codes, &want_scales);
    cuda::Fp8KernelArgs args;
    args.dtype = t;
    args.a = da.data();
    args.a_scale = dynamic ? nullptr : static_cast<const float*>(d_scale.data());
    args.m = c.m;
    args.k = c.k;
    args.block_size = c.block;
    for (int form = 0; form < 3; ++form) {
      SCOPED_TRACE(::testing::Message() << "M=" << c.m << " rows=" << c.rows << " K=" << c.k << " block="
                                        << c.block << " " << dtype_name(t) << (dynamic ? " dynamic" : " static")
                                        << " form " << form);
      ASSERT_EQ(cudaMemset(d_codes.data(), 0xab, c.rows * c.k), cudaSuccess);
      ASSERT_EQ(cudaMemset(d_scales.data(), 0xcd, k_blocks * c.rows * sizeof(float)), cudaSuccess);
      auto* codes = static_cast<uint8_t*>(d_codes.data());
      auto* scales = static_cast<float*>(d_scales.data());
      const Status launched = dynamic ? launch_form<T, true>(form, args, c, codes, scales)
                                      : launch_form<T, false>(form, args, c, codes, scales);
      BQMM_ASSERT_OK(launched);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> got_codes(c.rows * c.k);
      std::vector<float> got_scales(k_blocks * c.rows);
      ASSERT_EQ(cudaMemcpy(got_codes.data(), codes, got_codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got_scales.data(), scales, got_scales.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (size_t i = 0; i < want_codes.size(); ++i)
        ASSERT_EQ(got_codes[i], want_codes[i]) << "row " << i / c.k << " k " << i % c.k;
      for (size_t i = 0; i < want_scales.size(); ++i) {
        if (std::isnan(want_scales[i]))
          ASSERT_TRUE(std::isnan(got_scales[i])) << "block " << i / c.rows << " row " << i % c.rows;
        else
          ASSERT_EQ(got_scales[i], want_scales[i]) << "block " << i / c.rows << " row " << i % c.rows;
      }
    }
  }
}

// Rows past M (a GEMM's padding), K % block != 0 (a short last block of 16), odd M; the
// largest case (odd rows, as the W8A8 GEMM passes M itself) takes the two-by-two form
// under the library's rule (3 of its blocks a row pair x 259 pairs), the others the
// one-by-one form.
constexpr PassCase kCases[] = {
    {5, 8, 8 * 128 + 16, 128},  {517, 517, 64 * 128 + 16, 128}, {33, 36, 8 * 256 + 16, 256},
    {7, 8, 4 * 384 + 16, 384},  {5, 8, 2 * 512 + 16, 512},
};

TEST(ActQuantE4m3, BothFormsAndTheRuleMatchTheContractBitForBit) {
  BQMM_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const PassCase& c : kCases) {
    check_case<__half>(c, seed++);
    check_case<__nv_bfloat16>(c, seed++);
  }
}

}  // namespace
}  // namespace bqmm
