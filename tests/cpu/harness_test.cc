// HostTensor element access per dtype, the accuracy contract of docs/CONTRACT.md section 4, and the
// device helpers' behaviour where there may be no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "harness/accuracy.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"

namespace bqmm::harness {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

HostTensor tensor(DType dtype, const std::vector<double>& values) {
  HostTensor t = HostTensor::zeros(dtype, Shape{static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

// ------------------------------------------------------------------ HostTensor
TEST(HostTensor, ZerosHasBytesForEveryElement) {
  const DType all[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                       DType::kFloat8E4M3, DType::kUInt8, DType::kInt32};
  for (DType d : all) {
    const HostTensor t = HostTensor::zeros(d, Shape{3, 5});
    EXPECT_EQ(t.numel(), 15);
    EXPECT_EQ(t.bytes.size(), 15 * dtype_size(d));
    for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(t.get(i), 0.0) << dtype_name(d);
  }
  EXPECT_EQ(HostTensor::zeros(DType::kFloat32, Shape{}).numel(), 1);  // a scalar
  EXPECT_EQ(HostTensor::zeros(DType::kFloat32, Shape{4, 0}).bytes.size(), 0u);
}

TEST(HostTensor, FloatTypesRoundToNearestEven) {
  const HostTensor f32 = tensor(DType::kFloat32, {0.1, 1.0 + 0x1p-24, -2.5});
  EXPECT_EQ(f32.get(0), static_cast<double>(0.1f));
  EXPECT_EQ(f32.get(1), 1.0);  // tie -> even
  EXPECT_EQ(f32.get(2), -2.5);
  const HostTensor f16 = tensor(DType::kFloat16, {0.1, 1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 1e6});
  EXPECT_EQ(f16.get(0), 0.0999755859375);
  EXPECT_EQ(f16.get(1), 1.0);
  EXPECT_EQ(f16.get(2), 1.0 + 0x1p-9);
  EXPECT_EQ(f16.get(3), kInf);
  // Rounded once from the double: just above the tie goes up.
  EXPECT_EQ(tensor(DType::kFloat16, {1.0 + 0x1p-11 + 0x1p-40}).get(0), 1.0 + 0x1p-10);
  const HostTensor bf16 = tensor(DType::kBFloat16, {0.1, 1.0 + 0x1p-8, -3.0});
  EXPECT_EQ(bf16.get(0), 0.10009765625);
  EXPECT_EQ(bf16.get(1), 1.0);
  EXPECT_EQ(bf16.get(2), -3.0);
  EXPECT_TRUE(std::isnan(tensor(DType::kFloat16, {kNaN}).get(0)));
  EXPECT_TRUE(std::isnan(tensor(DType::kBFloat16, {kNaN}).get(0)));
}

TEST(HostTensor, E4m3SaturatesAndKeepsNaN) {
  const HostTensor t = tensor(DType::kFloat8E4M3, {1.0, 2.3, 500, -1e9, 0x1p-9, kNaN});
  EXPECT_EQ(t.get(0), 1.0);
  EXPECT_EQ(t.get(1), 2.25);
  EXPECT_EQ(t.get(2), 448.0);
  EXPECT_EQ(t.get(3), -448.0);
  EXPECT_EQ(t.get(4), 0x1p-9);
  EXPECT_TRUE(std::isnan(t.get(5)));
  EXPECT_EQ(t.bytes[2], 0x7E);
  EXPECT_EQ(t.bytes[5], 0x7F);
}

TEST(HostTensor, IntegerTypesRoundAndClamp) {
  const HostTensor u8 = tensor(DType::kUInt8, {3, 2.5, 3.5, 255.4, 300, -4, kNaN});
  EXPECT_EQ(u8.get(0), 3);
  EXPECT_EQ(u8.get(1), 2);  // half to even
  EXPECT_EQ(u8.get(2), 4);
  EXPECT_EQ(u8.get(3), 255);
  EXPECT_EQ(u8.get(4), 255);
  EXPECT_EQ(u8.get(5), 0);
  EXPECT_EQ(u8.get(6), 0);
  const HostTensor i32 = tensor(DType::kInt32, {-7, 1e12, -1e12, -2.5, 2147483647});
  EXPECT_EQ(i32.get(0), -7);
  EXPECT_EQ(i32.get(1), 2147483647);
  EXPECT_EQ(i32.get(2), -2147483648.0);
  EXPECT_EQ(i32.get(3), -2);
  EXPECT_EQ(i32.get(4), 2147483647);
}

TEST(HostTensor, ViewsPointAtTheBytes) {
  HostTensor t = HostTensor::zeros(DType::kFloat16, Shape{2, 3});
  const TensorView v = t.view();
  EXPECT_EQ(v.data, t.data());
  EXPECT_EQ(v.dtype, DType::kFloat16);
  EXPECT_EQ(v.shape, (Shape{2, 3}));
  const MutableTensorView mv = t.mutable_view();
  EXPECT_EQ(mv.data, t.data());
}

// ------------------------------------------------------------------ accuracy
TEST(Accuracy, TolerancePerDtype) {
  EXPECT_EQ(tolerance_for(DType::kFloat16), 2e-3);
  EXPECT_EQ(tolerance_for(DType::kBFloat16), 1e-2);
  EXPECT_EQ(tolerance_for(DType::kFloat32), 1e-5);
}

TEST(Accuracy, ExactMatchPasses) {
  const HostTensor y = tensor(DType::kFloat16, {1, -2, 3, 4});
  const AccuracyReport r = compare(y, 2, 0, {1, -2, 3, 4});
  EXPECT_TRUE(r.passed) << r.to_string();
  EXPECT_EQ(r.rel_err, 0.0);
  EXPECT_EQ(r.nan_mismatches, 0);
  EXPECT_EQ(r.first_mismatch, -1);
  EXPECT_EQ(r.tolerance, 2e-3);
}

TEST(Accuracy, RelativeFrobeniusError) {
  // ||(0, 0.5)|| / ||(3, 4)|| = 0.1
  const AccuracyReport r = compare(tensor(DType::kFloat32, {3, 4.5}), 2, 0, {3, 4});
  EXPECT_DOUBLE_EQ(r.rel_err, 0.1);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nan_mismatches, 0);
}

TEST(Accuracy, ToleranceFollowsTheOutputDtype) {
  // y = ref / 1.005 everywhere: rel_err = 0.005 / 1.005, inside bfloat16's 1e-2, outside
  // float16's 2e-3.
  const std::vector<double> ref = {1.005, 2.01, 4.02, -8.04};
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    const AccuracyReport r = compare(tensor(t, {1, 2, 4, -8}), 4, 0, ref);
    EXPECT_NEAR(r.rel_err, 0.005 / 1.005, 1e-12);
    EXPECT_EQ(r.passed, t == DType::kBFloat16) << dtype_name(t) << ": " << r.to_string();
  }
}

TEST(Accuracy, NaNWhereReferenceIsFiniteFails) {
  const AccuracyReport r = compare(tensor(DType::kFloat16, {1, kNaN, 3, kInf}), 2, 0, {1, 2, 3, 4});
  EXPECT_EQ(r.nan_mismatches, 2);
  EXPECT_EQ(r.first_mismatch, 1);
  EXPECT_EQ(r.rel_err, 0.0);  // the finite elements agree
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.to_string().find("FAIL"), std::string::npos);
}

TEST(Accuracy, NaNInTheReferenceMustPropagate) {
  EXPECT_TRUE(compare(tensor(DType::kFloat16, {1, kNaN}), 2, 0, {1, kNaN}).passed);
  const AccuracyReport r = compare(tensor(DType::kFloat16, {1, 2}), 2, 0, {1, kNaN});
  EXPECT_EQ(r.nan_mismatches, 1);
  EXPECT_FALSE(r.passed);
}

TEST(Accuracy, PoisonedOutputIsAllMismatches) {
  HostTensor y = HostTensor::zeros(DType::kBFloat16, Shape{2, 3});
  std::fill(y.bytes.begin(), y.bytes.end(), 0xFF);  // what DeviceTensor::poison writes
  const AccuracyReport r = compare(y, 3, 0, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(r.nan_mismatches, 6);
  EXPECT_EQ(r.first_mismatch, 0);
  EXPECT_FALSE(r.passed);
}

TEST(Accuracy, RowSubsetIndexesIntoY) {
  // Rows 1..2 of a [3, 2] output; the mismatch at row 2, column 1 is element 5 of y.
  const HostTensor y = tensor(DType::kFloat32, {9, 9, 1, 2, 3, kNaN});
  const AccuracyReport r = compare(y, 2, 1, {1, 2, 3, 4});
  EXPECT_EQ(r.nan_mismatches, 1);
  EXPECT_EQ(r.first_mismatch, 5);
  EXPECT_TRUE(compare(y, 2, 1, {1, 2}).passed);
}

TEST(Accuracy, ZeroReference) {
  EXPECT_TRUE(compare(tensor(DType::kFloat16, {0, 0}), 2, 0, {0, 0}).passed);
  const AccuracyReport r = compare(tensor(DType::kFloat16, {0, 1}), 2, 0, {0, 0});
  EXPECT_EQ(r.rel_err, kInf);
  EXPECT_FALSE(r.passed);
}

TEST(Accuracy, EmptyOutputPasses) {
  EXPECT_TRUE(compare(HostTensor::zeros(DType::kFloat16, Shape{0, 4}), 4, 0, {}).passed);
}

TEST(Accuracy, ReferenceOutsideYFails) {
  const HostTensor y = tensor(DType::kFloat16, {1, 2, 3, 4});
  EXPECT_FALSE(compare(y, 2, 1, {3, 4, 5, 6}).passed);  // past the end
  EXPECT_FALSE(compare(y, 3, 0, {1, 2}).passed);        // not whole rows
  EXPECT_EQ(compare(y, 0, 0, {1}).rel_err, kInf);
}

// ------------------------------------------------------------------ device helpers
TEST(DeviceBuffer, ZeroBytesAllocatesNothing) {
  DeviceBuffer b;
  ASSERT_TRUE(DeviceBuffer::allocate(0, &b).ok());
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

TEST(DeviceBuffer, AvailabilityIsReportedWithoutCrashing) {
  std::string why;
  const bool available = cuda_device_available(&why);
  if (available) {
    EXPECT_TRUE(why.empty());
    DeviceBuffer b;
    ASSERT_TRUE(DeviceBuffer::allocate(1024, &b).ok());
    EXPECT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), 1024u);
  } else {
    EXPECT_FALSE(why.empty());
    // Without a device every CUDA call fails, as a Status.
    DeviceBuffer b;
    const Status s = DeviceBuffer::allocate(1024, &b);
    EXPECT_EQ(s.code(), StatusCode::kCudaError) << s.to_string();
    EXPECT_EQ(b.data(), nullptr);
  }
  EXPECT_EQ(cuda_device_available(), available);  // asking again gives the same answer
}

}  // namespace
}  // namespace bqmm::harness
