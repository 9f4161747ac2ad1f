// The arithmetic e4m3 decode (cuda/common.cuh, e4m3x2_to_half2_bits_arith: what every
// FP8 kernel decodes with on GPUs before SM89) against CUDA's own fp8x2 -> half2
// conversion (the hardware instruction on SM89+, CUDA's software fallback below), bit for
// bit, on all 65536 pairs of codes: every sign, subnormal, normal, zero and NaN in both
// halves. Skips itself, saying so, without a CUDA device.
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "cuda/common.cuh"
#include "harness/device_buffer.h"

namespace bqmm {
namespace {

constexpr uint32_t kPairs = 1u << 16;

__global__ void DecodeEveryPair(uint32_t* arith, uint32_t* cuda_conversion) {
  const uint32_t codes = blockIdx.x * blockDim.x + threadIdx.x;
  if (codes >= kPairs) return;
  arith[codes] = cuda::e4m3x2_to_half2_bits_arith(codes);
  const __half2_raw h2 =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
  cuda_conversion[codes] = static_cast<uint32_t>(h2.x) | (static_cast<uint32_t>(h2.y) << 16);
}

TEST(E4m3Decode, ArithmeticMatchesCudaConversionOnEveryPair) {
  BQMM_REQUIRE_GPU();
  harness::DeviceBuffer arith, conversion;
  BQMM_ASSERT_OK(harness::DeviceBuffer::allocate(kPairs * sizeof(uint32_t), &arith));
  BQMM_ASSERT_OK(harness::DeviceBuffer::allocate(kPairs * sizeof(uint32_t), &conversion));
  DecodeEveryPair<<<kPairs / 256, 256>>>(static_cast<uint32_t*>(arith.data()),
                                         static_cast<uint32_t*>(conversion.data()));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint32_t> got(kPairs), want(kPairs);
  ASSERT_EQ(cudaMemcpy(got.data(), arith.data(), kPairs * sizeof(uint32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(want.data(), conversion.data(), kPairs * sizeof(uint32_t),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  int mismatches = 0;
  for (uint32_t codes = 0; codes < kPairs; ++codes) {
    if (got[codes] == want[codes]) continue;
    if (++mismatches <= 8)
      ADD_FAILURE() << std::hex << "codes 0x" << codes << ": arithmetic 0x" << got[codes]
                    << ", CUDA's conversion 0x" << want[codes];
  }
  EXPECT_EQ(mismatches, 0) << "of " << kPairs << " pairs";
}

}  // namespace
}  // namespace bqmm
