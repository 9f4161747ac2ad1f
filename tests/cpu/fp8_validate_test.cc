// validate_fp8_matmul against docs/CONTRACT.md sections 1 and 3. Validation never dereferences, so
// the tensors point into a static buffer; offsets into it make misaligned pointers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bqmm/fp8_matmul.h"
#include "common/fake_pointers.h"

namespace bqmm {
namespace {

using testing::fake_pointer;

// A valid W8A16 problem with bias: A [2, 4096] float16, N = 4096, block 128.
struct Fp8ValidateTest : ::testing::Test {
  Fp8MatMulArgs args;
  Fp8MatMulAttrs attrs;
  Fp8MatMulProblem problem;

  void SetUp() override {
    args.a = TensorView{fake_pointer(), DType::kFloat16, Shape{2, 4096}};
    args.b = TensorView{fake_pointer(), DType::kFloat8E4M3, Shape{4096, 4096}};
    args.b_scale = TensorView{fake_pointer(), DType::kFloat32, Shape{4096, 32}};
    args.bias = TensorView{fake_pointer(), DType::kFloat16, Shape{4096}};
    args.y = MutableTensorView{fake_pointer(), DType::kFloat16, Shape{2, 4096}};
  }
  TensorView scalar_a_scale(Shape shape = Shape{}) {
    return TensorView{fake_pointer(), DType::kFloat32, shape};
  }
  Status validate() { return validate_fp8_matmul(args, attrs, &problem); }
  // The error message; fails the test when validation passes or the code is not
  // InvalidArgument.
  std::string error() {
    const Status s = validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    return s.message();
  }
};

TEST_F(Fp8ValidateTest, ValidProblemIsDescribed) {
  args.a_scale = scalar_a_scale();
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.dtype, DType::kFloat16);
  EXPECT_EQ(problem.m, 2);
  EXPECT_EQ(problem.n, 4096);
  EXPECT_EQ(problem.k, 4096);
  EXPECT_EQ(problem.block_size, 128);
  EXPECT_EQ(problem.k_blocks(), 32);
  EXPECT_TRUE(problem.has_bias);
  EXPECT_TRUE(problem.has_a_scale);
  EXPECT_EQ(problem.alignment, 16);
}

// Dynamic activation quantization is an attribute; it excludes a_scale (static W8A8).
TEST_F(Fp8ValidateTest, DynamicActivationQuantization) {
  attrs.dynamic_act_quant = true;
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_TRUE(problem.dynamic_act_quant);
  EXPECT_FALSE(problem.has_a_scale);
  EXPECT_TRUE(problem.quantizes_activation());
  args.a_scale = scalar_a_scale();
  const std::string m = error();
  EXPECT_NE(m.find("a_scale"), std::string::npos) << m;
  EXPECT_NE(m.find("dynamic_act_quant"), std::string::npos) << m;
  attrs.dynamic_act_quant = false;
  ASSERT_TRUE(validate().ok());
  EXPECT_FALSE(problem.dynamic_act_quant);
  EXPECT_TRUE(problem.quantizes_activation());
}

TEST_F(Fp8ValidateTest, OptionalInputsAbsent) {
  args.bias.reset();
  ASSERT_TRUE(validate().ok());
  EXPECT_FALSE(problem.has_bias);
  EXPECT_FALSE(problem.has_a_scale);
}

TEST_F(Fp8ValidateTest, BFloat16) {
  args.a.dtype = args.bias->dtype = args.y.dtype = DType::kBFloat16;
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.dtype, DType::kBFloat16);
}

// ------------------------------------------------------------------ dtypes
TEST_F(Fp8ValidateTest, WrongDtypeOfA) {
  args.a.dtype = DType::kFloat32;
  EXPECT_EQ(error(), "a: expected dtype float16 or bfloat16 but got float32");
}

TEST_F(Fp8ValidateTest, WrongDtypeOfB) {
  args.b.dtype = DType::kUInt8;
  EXPECT_EQ(error(), "b: expected dtype float8e4m3fn but got uint8");
}

TEST_F(Fp8ValidateTest, WrongDtypeOfBScale) {
  args.b_scale.dtype = DType::kFloat16;
  EXPECT_EQ(error(), "b_scale: expected dtype float32 but got float16");
}

TEST_F(Fp8ValidateTest, WrongDtypeOfAScale) {
  args.a_scale = TensorView{fake_pointer(), DType::kFloat16, Shape{}};
  EXPECT_EQ(error(), "a_scale: expected dtype float32 but got float16");
}

TEST_F(Fp8ValidateTest, WrongDtypeOfBias) {
  args.bias->dtype = DType::kBFloat16;
  EXPECT_EQ(error(), "bias: expected dtype float16 but got bfloat16");
}

TEST_F(Fp8ValidateTest, WrongDtypeOfY) {
  args.y.dtype = DType::kFloat32;
  EXPECT_EQ(error(), "y: expected dtype float16 but got float32");
}

// ------------------------------------------------------------------ shapes
TEST_F(Fp8ValidateTest, BScaleShapeMessageIsExact) {
  args.b_scale.shape = Shape{4096, 31};
  EXPECT_EQ(error(), "b_scale: expected shape [4096, 32] (N, ceil(K/block_size)) but got [4096, 31]");
}

TEST_F(Fp8ValidateTest, BScaleWrongRows) {
  args.b_scale.shape = Shape{4095, 32};
  EXPECT_EQ(error(), "b_scale: expected shape [4096, 32] (N, ceil(K/block_size)) but got [4095, 32]");
}

TEST_F(Fp8ValidateTest, BWrongK) {
  args.b.shape = Shape{4096, 4095};
  EXPECT_EQ(error(), "b: expected shape [4096, 4096] (N, K with K from a) but got [4096, 4095]");
}

TEST_F(Fp8ValidateTest, BWrongRank) {
  args.b.shape = Shape{1, 4096, 4096};
  EXPECT_EQ(error(), "b: expected rank 2 [N, K] but got [1, 4096, 4096]");
}

TEST_F(Fp8ValidateTest, BiasWrongShape) {
  args.bias->shape = Shape{4095};
  EXPECT_EQ(error(), "bias: expected shape [4096] (N) but got [4095]");
}

TEST_F(Fp8ValidateTest, YWrongShape) {
  args.y.shape = Shape{2, 4095};
  EXPECT_EQ(error(), "y: expected shape [2, 4096] (A's shape with K replaced by N) but got [2, 4095]");
  args.y.shape = Shape{8192};
  EXPECT_EQ(error(), "y: expected shape [2, 4096] (A's shape with K replaced by N) but got [8192]");
}

TEST_F(Fp8ValidateTest, RankZeroA) {
  args.a.shape = Shape{};
  EXPECT_EQ(error(), "a: expected rank >= 1 ([..., K]) but got rank 0");
}

TEST_F(Fp8ValidateTest, AScaleWithTwoElements) {
  args.a_scale = scalar_a_scale(Shape{2});
  EXPECT_EQ(error(), "a_scale: expected a scalar (exactly 1 element) but got shape [2]");
  args.a_scale = scalar_a_scale(Shape{0});
  EXPECT_EQ(error(), "a_scale: expected a scalar (exactly 1 element) but got shape [0]");
}

TEST_F(Fp8ValidateTest, AScaleOfOneElementInAnyRank) {
  for (const Shape& s : {Shape{}, Shape{1}, Shape{1, 1}}) {
    args.a_scale = scalar_a_scale(s);
    EXPECT_TRUE(validate().ok()) << s.to_string();
  }
}

TEST_F(Fp8ValidateTest, NegativeDims) {
  args.a.shape = Shape{-1, 4096};
  EXPECT_EQ(error(), "a: expected non-negative dimensions but got [-1, 4096]");
  args.a.shape = Shape{2, -4};
  EXPECT_EQ(error(), "a: expected non-negative dimensions but got [2, -4]");
  args.a.shape = Shape{-4};
  EXPECT_EQ(error(), "a: expected non-negative dimensions but got [-4]");
  SetUp();
  args.b.shape = Shape{-1, 4096};
  EXPECT_EQ(error(), "b: expected non-negative dimensions but got [-1, 4096]");
}

// ------------------------------------------------------------------ attributes
TEST_F(Fp8ValidateTest, BlockSizeMustBePositive) {
  attrs.block_size = 0;
  EXPECT_EQ(error(), "block_size: expected an integer > 0 but got 0");
  attrs.block_size = -128;
  EXPECT_EQ(error(), "block_size: expected an integer > 0 but got -128");
}

// b_scale_block_rows is a promise about b_scale's values, checked only for its range, and
// carried into the problem (and its printed form).
TEST_F(Fp8ValidateTest, BScaleBlockRows) {
  for (const int64_t rows : {0, -128}) {
    attrs.b_scale_block_rows = rows;
    EXPECT_EQ(error(), "b_scale_block_rows: expected >= 1 (rows of B sharing each scale), got " + std::to_string(rows));
  }
  for (const int64_t rows : {1, 7, 128, 4096 * 2}) {
    attrs.b_scale_block_rows = rows;
    ASSERT_TRUE(validate().ok()) << validate().to_string();
    EXPECT_EQ(problem.b_scale_block_rows, rows);
  }
  attrs.b_scale_block_rows = 128;
  ASSERT_TRUE(validate().ok());
  std::ostringstream os;
  os << problem;
  EXPECT_NE(os.str().find(" b_scale_block_rows=128 "), std::string::npos) << os.str();
}

// The loaders' helper: 128 where every aligned 128-row group repeats its first row's scales
// bit for bit (a partial last group included), else 1.
TEST(Fp8BScaleBlockRows, FoundFromTheData) {
  const int64_t n = 300, kb = 3;
  std::vector<float> s(static_cast<size_t>(n * kb));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < kb; ++b) s[r * kb + b] = 0.01f * static_cast<float>((r / 128) * kb + b + 1);
  EXPECT_EQ(find_b_scale_block_rows(s.data(), n, kb), 128);
  EXPECT_EQ(find_b_scale_block_rows(s.data(), n, kb, 64), 64);  // 128-row groups hold 64-row ones
  EXPECT_EQ(find_b_scale_block_rows(s.data(), n, kb, 1), 1);
  EXPECT_EQ(find_b_scale_block_rows(s.data(), 40, kb), 128);     // fewer rows than a group
  std::vector<float> broken = s;
  broken[299 * kb + 2] = std::nextafter(broken[299 * kb + 2], 1.0f);  // the partial group's last scale
  EXPECT_EQ(find_b_scale_block_rows(broken.data(), n, kb), 1);
  std::vector<float> nan = s;
  for (int64_t r = 128; r < 256; ++r) nan[r * kb] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(find_b_scale_block_rows(nan.data(), n, kb), 128);    // NaN repeats bit for bit
  std::vector<float> signed_zero = s;
  signed_zero[0] = 0.0f;
  for (int64_t r = 1; r < 128; ++r) signed_zero[r * kb] = -0.0f;
  EXPECT_EQ(find_b_scale_block_rows(signed_zero.data(), n, kb), 1);
}

TEST_F(Fp8ValidateTest, HugeBlockSizeGivesOneBlock) {
  attrs.block_size = std::numeric_limits<int64_t>::max();
  args.b_scale.shape = Shape{4096, 1};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k_blocks(), 1);
}

// ------------------------------------------------------------------ pointers
TEST_F(Fp8ValidateTest, NullPointersWithElements) {
  args.a.data = nullptr;
  EXPECT_EQ(error(), "a: null data pointer for 8192 elements");
  SetUp();
  args.b.data = nullptr;
  EXPECT_EQ(error(), "b: null data pointer for 16777216 elements");
  SetUp();
  args.b_scale.data = nullptr;
  EXPECT_EQ(error(), "b_scale: null data pointer for 131072 elements");
  SetUp();
  args.bias->data = nullptr;
  EXPECT_EQ(error(), "bias: null data pointer for 4096 elements");
  SetUp();
  args.y.data = nullptr;
  EXPECT_EQ(error(), "y: null data pointer for 8192 elements");
  SetUp();
  args.a_scale = TensorView{nullptr, DType::kFloat32, Shape{}};
  EXPECT_EQ(error(), "a_scale: null data pointer for 1 element");
}

TEST_F(Fp8ValidateTest, MisalignedPointers) {
  args.a.data = fake_pointer(1);
  EXPECT_EQ(error(), "a: expected a pointer aligned to 2 bytes (float16) but got alignment 1");
  SetUp();
  args.b_scale.data = fake_pointer(2);
  EXPECT_EQ(error(), "b_scale: expected a pointer aligned to 4 bytes (float32) but got alignment 2");
  SetUp();
  args.bias->data = fake_pointer(3);
  EXPECT_EQ(error(), "bias: expected a pointer aligned to 2 bytes (float16) but got alignment 1");
  SetUp();
  args.y.data = fake_pointer(1);
  EXPECT_EQ(error(), "y: expected a pointer aligned to 2 bytes (float16) but got alignment 1");
  SetUp();
  args.a_scale = TensorView{fake_pointer(1), DType::kFloat32, Shape{}};
  EXPECT_EQ(error(), "a_scale: expected a pointer aligned to 4 bytes (float32) but got alignment 1");
}

TEST_F(Fp8ValidateTest, ElementAlignedPointersReportTheirAlignment) {
  // Valid, but below the 16 bytes the vector kernels need: the planner must fall back.
  args.a.data = fake_pointer(8);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 8);
  args.b.data = fake_pointer(1);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 1);
  SetUp();
  args.y.data = fake_pointer(2);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 2);
  SetUp();
  args.bias->data = fake_pointer(4);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 4);
}

// ------------------------------------------------------------------ overflow
TEST_F(Fp8ValidateTest, OverflowOfMTimesK) {
  args.a.shape = Shape{int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_EQ(error(), "a: element count of shape [4294967296, 4294967296] overflows int64");
}

TEST_F(Fp8ValidateTest, OverflowOfLeadingDims) {
  args.a.shape = Shape{int64_t{1} << 40, int64_t{1} << 40, 16};
  EXPECT_EQ(error(), "a: 1099511627776 * 1099511627776 overflows int64");
}

TEST_F(Fp8ValidateTest, OverflowOfByteSize) {
  // 2^62 elements fit in int64, their 2^63 bytes do not.
  args.a.shape = Shape{int64_t{1} << 31, int64_t{1} << 31};
  EXPECT_EQ(error(), "a: element count of shape [2147483648, 2147483648] overflows int64");
}

TEST_F(Fp8ValidateTest, OverflowOfNTimesK) {
  args.a.shape = Shape{1, int64_t{1} << 32};
  args.b.shape = Shape{int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_EQ(error(), "b: element count of shape [4294967296, 4294967296] overflows int64");
}

TEST_F(Fp8ValidateTest, LargeButValidShapesUse64BitCounts) {
  // M * K = 2^33 and N * K = 2^33: beyond int32, fine in int64.
  args.a.shape = Shape{2, int64_t{1} << 32};
  args.b.shape = Shape{2, int64_t{1} << 32};
  args.b_scale.shape = Shape{2, int64_t{1} << 25};
  args.bias->shape = Shape{2};
  args.y.shape = Shape{2, 2};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k, int64_t{1} << 32);
}

// ------------------------------------------------------------------ shapes that succeed
TEST_F(Fp8ValidateTest, RankOneA) {
  args.a.shape = Shape{4096};
  args.y.shape = Shape{4096};
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.m, 1);
  Shape y;
  ASSERT_TRUE(fp8_matmul_output_shape(Shape{4096}, 11, &y).ok());
  EXPECT_EQ(y, Shape{11});
}

TEST_F(Fp8ValidateTest, RankThreeA) {
  args.a.shape = Shape{2, 3, 4096};
  args.y.shape = Shape{2, 3, 4096};
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.m, 6);
  Shape y;
  ASSERT_TRUE(fp8_matmul_output_shape(Shape{2, 3, 4096}, 11, &y).ok());
  EXPECT_EQ(y, (Shape{2, 3, 11}));
}

TEST_F(Fp8ValidateTest, OutputShapeOfRankZeroIsAnError) {
  Shape y;
  const Status s = fp8_matmul_output_shape(Shape{}, 11, &y);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "a: expected rank >= 1 ([..., K]) but got rank 0");
}

TEST_F(Fp8ValidateTest, EmptyMAcceptsNullAAndY) {
  args.a = TensorView{nullptr, DType::kFloat16, Shape{0, 4096}};
  args.y = MutableTensorView{nullptr, DType::kFloat16, Shape{0, 4096}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.m, 0);
}

TEST_F(Fp8ValidateTest, EmptyN) {
  args.b = TensorView{nullptr, DType::kFloat8E4M3, Shape{0, 4096}};
  args.b_scale = TensorView{nullptr, DType::kFloat32, Shape{0, 32}};
  args.bias = TensorView{nullptr, DType::kFloat16, Shape{0}};
  args.y = MutableTensorView{nullptr, DType::kFloat16, Shape{2, 0}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.n, 0);
}

TEST_F(Fp8ValidateTest, KZeroAcceptsNullWeights) {
  args.a = TensorView{nullptr, DType::kFloat16, Shape{2, 0}};
  args.b = TensorView{nullptr, DType::kFloat8E4M3, Shape{4096, 0}};
  args.b_scale = TensorView{nullptr, DType::kFloat32, Shape{4096, 0}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k, 0);
  EXPECT_EQ(problem.k_blocks(), 0);
}

TEST_F(Fp8ValidateTest, PartialLastBlock) {
  // K = 300, block 128: blocks of 128, 128 and 44 -> 3 scale columns.
  args.a.shape = Shape{2, 300};
  args.b.shape = Shape{4096, 300};
  args.b_scale.shape = Shape{4096, 3};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k_blocks(), 3);
  args.b_scale.shape = Shape{4096, 2};
  EXPECT_EQ(error(), "b_scale: expected shape [4096, 3] (N, ceil(K/block_size)) but got [4096, 2]");
}

// The prepacked input (b_scale transposed, float32 [k_blocks, N], 16-byte aligned): the
// problem records it; the wrong dtype, shape or alignment is an error naming it.
TEST_F(Fp8ValidateTest, PrepackedScales) {
  ASSERT_TRUE(validate().ok());
  EXPECT_FALSE(problem.has_prepacked);
  EXPECT_EQ(fp8_matmul_prepacked_shape(4096, 32), (Shape{32, 4096}));
  args.prepacked = TensorView{fake_pointer(), DType::kFloat32, Shape{32, 4096}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_TRUE(problem.has_prepacked);
  std::ostringstream os;
  os << problem;
  EXPECT_NE(os.str().find(" prepacked"), std::string::npos) << os.str();
  args.prepacked = TensorView{fake_pointer(), DType::kFloat32, Shape{4096, 32}};
  EXPECT_EQ(error(),
            "prepacked: expected shape [32, 4096] (ceil(K/block_size), N: b_scale transposed "
            "(prepack_fp8_matmul)) but got [4096, 32]");
  args.prepacked = TensorView{fake_pointer(), DType::kFloat16, Shape{32, 4096}};
  EXPECT_NE(error().find("prepacked"), std::string::npos);
  args.prepacked = TensorView{fake_pointer(4), DType::kFloat32, Shape{32, 4096}};
  EXPECT_EQ(error(), "prepacked: expected a 16-byte aligned pointer but got one aligned to 4 bytes");
  args.prepacked = TensorView{nullptr, DType::kFloat32, Shape{32, 4096}};
  EXPECT_NE(error().find("prepacked"), std::string::npos);
}

// Y must not share memory with an input (kernels read the inputs while other blocks
// already write Y): any overlap is refused, naming both; touching buffers are not an overlap.
TEST_F(Fp8ValidateTest, OutputOverlappingAnInput) {
  args.a_scale = scalar_a_scale();
  args.prepacked = TensorView{fake_pointer(), DType::kFloat32, Shape{32, 4096}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  const auto at = [](const void* p, int64_t bytes) { return static_cast<uint8_t*>(const_cast<void*>(p)) + bytes; };
  // Y inside a, in place of a, or ending one byte into b.
  args.y.data = at(args.a.data, 0);
  EXPECT_EQ(error(),
            "y: overlaps a; an operator's output must not share memory with its inputs, other "
            "outputs or workspace");
  args.y.data = at(args.b.data, -2 * 4096 * 2 + 2);
  EXPECT_EQ(error().rfind("y: overlaps b;", 0), 0u);
  args.y.data = at(args.b_scale.data, 4096 * 32 * 4 - 2);
  EXPECT_EQ(error().rfind("y: overlaps b_scale;", 0), 0u);
  args.y.data = at(args.a_scale->data, -16);
  EXPECT_EQ(error().rfind("y: overlaps a_scale;", 0), 0u);
  args.y.data = at(args.bias->data, 4096);
  EXPECT_EQ(error().rfind("y: overlaps bias;", 0), 0u);
  args.y.data = at(args.prepacked->data, 64);
  EXPECT_EQ(error().rfind("y: overlaps prepacked;", 0), 0u);
  // Right before b and right after it: apart.
  args.y.data = at(args.b.data, -2 * 4096 * 2);
  EXPECT_TRUE(validate().ok()) << validate().to_string();
  args.y.data = at(args.b.data, int64_t{4096} * 4096);
  EXPECT_TRUE(validate().ok()) << validate().to_string();
  // Inputs may share memory with each other (they are only read).
  args.bias->data = args.a.data;
  EXPECT_TRUE(validate().ok()) << validate().to_string();
  // An empty Y overlaps nothing.
  args.a.shape = Shape{0, 4096};
  args.y = MutableTensorView{const_cast<void*>(args.a.data), DType::kFloat16, Shape{0, 4096}};
  EXPECT_TRUE(validate().ok()) << validate().to_string();
}

// prepack_fp8_matmul checks its tensors before it enqueues anything (no GPU needed).
TEST(Fp8Prepack, ChecksItsTensors) {
  const TensorView b_scale{fake_pointer(), DType::kFloat32, Shape{64, 3}};
  MutableTensorView out{fake_pointer(), DType::kFloat32, Shape{64, 3}};
  Status s = prepack_fp8_matmul(b_scale, out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "prepacked: expected shape [3, 64] (ceil(K/block_size), N: b_scale's shape transposed) but got [64, 3]");
  s = prepack_fp8_matmul(TensorView{fake_pointer(), DType::kFloat32, Shape{64 * 3}}, MutableTensorView{fake_pointer(), DType::kFloat32, Shape{3, 64}}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("b_scale: expected rank 2"), std::string::npos) << s.message();
  s = prepack_fp8_matmul(TensorView{fake_pointer(), DType::kFloat16, Shape{64, 3}}, MutableTensorView{fake_pointer(), DType::kFloat32, Shape{3, 64}}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // The prepacked output over its own input.
  s = prepack_fp8_matmul(b_scale, MutableTensorView{const_cast<void*>(b_scale.data), DType::kFloat32, Shape{3, 64}}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("prepacked: overlaps b_scale;", 0), 0u) << s.message();
  // Nothing to write: OK without a launch.
  EXPECT_TRUE(prepack_fp8_matmul(TensorView{nullptr, DType::kFloat32, Shape{0, 3}},
                                 MutableTensorView{nullptr, DType::kFloat32, Shape{3, 0}}, nullptr)
                  .ok());
}

}  // namespace
}  // namespace bqmm
