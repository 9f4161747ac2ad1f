// validate_nbits_matmul against docs/CONTRACT.md sections 2 and 3. Validation never dereferences, so
// the tensors point into a static buffer; offsets into it make misaligned pointers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "bqmm/nbits_matmul.h"
#include "core/run_prologue.h"
#include "common/fake_pointers.h"
#include "common/plan_testing.h"

namespace bqmm {
namespace {

using testing::fake_pointer;

// A valid 4-bit problem with packed zero points, g_idx and bias: A [2, 3, 4096] float16,
// N = 1024, block 32 (k_blocks 128, 16-byte blobs, 64 zero-point bytes per row).
struct NBitsValidateTest : ::testing::Test {
  NBitsMatMulArgs args;
  NBitsMatMulAttrs attrs;
  NBitsMatMulProblem problem;

  void SetUp() override {
    attrs.k = 4096;
    attrs.n = 1024;
    attrs.bits = 4;
    attrs.block_size = 32;
    args.a = TensorView{fake_pointer(), DType::kFloat16, Shape{2, 3, 4096}};
    args.b = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 128, 16}};
    args.scales = TensorView{fake_pointer(), DType::kFloat16, Shape{1024, 128}};
    args.zero_points = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 64}};
    args.g_idx = TensorView{fake_pointer(), DType::kInt32, Shape{4096}};
    args.bias = TensorView{fake_pointer(), DType::kFloat16, Shape{1024}};
    args.y = MutableTensorView{fake_pointer(), DType::kFloat16, Shape{2, 3, 1024}};
  }
  Status validate() { return validate_nbits_matmul(args, attrs, &problem); }
  // The message of an InvalidArgument error; fails the test on any other outcome.
  std::string error() {
    const Status s = validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    return s.message();
  }
  // Every T1 input switched to `t`.
  void set_t1(DType t) {
    args.a.dtype = args.scales.dtype = args.bias->dtype = args.y.dtype = t;
  }
};

TEST_F(NBitsValidateTest, ValidProblemIsDescribed) {
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.dtype, DType::kFloat16);
  EXPECT_EQ(problem.m, 6);
  EXPECT_EQ(problem.n, 1024);
  EXPECT_EQ(problem.k, 4096);
  EXPECT_EQ(problem.bits, 4);
  EXPECT_EQ(problem.block_size, 32);
  EXPECT_EQ(problem.k_blocks(), 128);
  EXPECT_EQ(problem.blob_bytes(), 16);
  EXPECT_EQ(problem.row_bytes(), 2048);
  EXPECT_EQ(problem.zp_row_bytes(), 64);
  EXPECT_EQ(problem.zero_points, NBitsZeroPoints::kPacked);
  EXPECT_TRUE(problem.has_g_idx);
  EXPECT_TRUE(problem.has_bias);
  EXPECT_EQ(problem.alignment, 16);
}

TEST_F(NBitsValidateTest, OptionalInputsAbsent) {
  args.zero_points.reset();
  args.g_idx.reset();
  args.bias.reset();
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.zero_points, NBitsZeroPoints::kNone);
  EXPECT_FALSE(problem.has_g_idx);
  EXPECT_FALSE(problem.has_bias);
}

TEST_F(NBitsValidateTest, EveryActivationType) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    set_t1(t);
    ASSERT_TRUE(validate().ok()) << dtype_name(t) << ": " << validate().to_string();
    EXPECT_EQ(problem.dtype, t);
  }
}

TEST_F(NBitsValidateTest, EightBitLayout) {
  attrs.bits = 8;
  args.b.shape = Shape{1024, 128, 32};
  args.zero_points->shape = Shape{1024, 128};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.bits, 8);
  EXPECT_EQ(problem.row_bytes(), 4096);
  EXPECT_EQ(problem.zp_row_bytes(), 128);
}

TEST_F(NBitsValidateTest, TypedZeroPoints) {
  args.zero_points = TensorView{fake_pointer(), DType::kFloat16, Shape{1024, 128}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.zero_points, NBitsZeroPoints::kTyped);
  args.zero_points->shape = Shape{1024 * 128};  // flat
  EXPECT_TRUE(validate().ok());
  args.zero_points->shape = Shape{1024, 64};  // the packed shape is not the typed one
  EXPECT_EQ(error(),
            "zero_points: expected shape [1024, 128] or [131072] (N, ceil(K/block_size); or "
            "flat) but got [1024, 64]");
}

TEST_F(NBitsValidateTest, FlatScalesAndPackedZeroPoints) {
  args.scales.shape = Shape{1024 * 128};
  args.zero_points->shape = Shape{1024 * 64};
  EXPECT_TRUE(validate().ok()) << validate().to_string();
}

TEST_F(NBitsValidateTest, PartialLastBlockAndOddBlockCount) {
  // K = 3990: k_blocks = 125, the last block partial; 4-bit zero points: ceil(125 / 2) = 63.
  attrs.k = 3990;
  args.a.shape = Shape{2, 3, 3990};
  args.b.shape = Shape{1024, 125, 16};
  args.scales.shape = Shape{1024, 125};
  args.zero_points->shape = Shape{1024, 63};
  args.g_idx->shape = Shape{3990};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k_blocks(), 125);
  EXPECT_EQ(problem.zp_row_bytes(), 63);
}

TEST_F(NBitsValidateTest, AccuracyLevelIsIgnored) {
  for (int64_t level : {0, 1, 4, 7, -1}) {
    attrs.accuracy_level = level;
    EXPECT_TRUE(validate().ok()) << level;
  }
}

// ------------------------------------------------------------------ attributes
TEST_F(NBitsValidateTest, TwoBitsIsNotSupported) {
  attrs.bits = 2;
  const Status s = validate();
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("bits: 2-bit"), std::string::npos) << s.message();
}

TEST_F(NBitsValidateTest, OtherBitsAreInvalid) {
  for (int64_t bits : {0, 1, 3, 5, 16, -4}) {
    attrs.bits = bits;
    EXPECT_EQ(error(), "bits: expected 2, 4 or 8 but got " + std::to_string(bits));
  }
}

TEST_F(NBitsValidateTest, BlockSizeMustBeAPowerOfTwoOfAtLeast16) {
  for (int64_t bs : {0, 8, 15, 24, 48, 100, -32}) {
    attrs.block_size = bs;
    EXPECT_EQ(error(), "block_size: expected a power of two >= 16 but got " + std::to_string(bs));
  }
  for (int64_t bs : {16, 64, 128, 256, 1024}) {
    attrs.block_size = bs;
    const int64_t k_blocks = (4096 + bs - 1) / bs;
    args.b.shape = Shape{1024, k_blocks, bs / 2};
    args.scales.shape = Shape{1024, k_blocks};
    args.zero_points->shape = Shape{1024, (k_blocks + 1) / 2};
    EXPECT_TRUE(validate().ok()) << bs << ": " << validate().to_string();
  }
}

TEST_F(NBitsValidateTest, NegativeAttributes) {
  attrs.n = -1;
  EXPECT_EQ(error(), "N: expected an integer >= 0 but got -1");
  attrs.n = 1024;
  attrs.k = -5;
  EXPECT_EQ(error(), "K: expected an integer >= 0 but got -5");
}

// ------------------------------------------------------------------ dtypes
TEST_F(NBitsValidateTest, WrongDtypeOfA) {
  set_t1(DType::kUInt8);
  EXPECT_EQ(error(), "a: expected dtype float32, float16 or bfloat16 but got uint8");
}

TEST_F(NBitsValidateTest, WrongDtypeOfB) {
  args.b.dtype = DType::kInt32;
  EXPECT_EQ(error(), "b: expected dtype uint8 but got int32");
}

TEST_F(NBitsValidateTest, ScalesMustMatchA) {
  args.scales.dtype = DType::kFloat32;
  EXPECT_EQ(error(), "scales: expected dtype float16 but got float32");
}

TEST_F(NBitsValidateTest, ZeroPointsMustBeUint8OrT1) {
  args.zero_points->dtype = DType::kInt32;
  EXPECT_EQ(error(), "zero_points: expected dtype uint8 or float16 but got int32");
  args.zero_points->dtype = DType::kBFloat16;
  EXPECT_EQ(error(), "zero_points: expected dtype uint8 or float16 but got bfloat16");
}

TEST_F(NBitsValidateTest, GIdxMustBeInt32) {
  args.g_idx->dtype = DType::kUInt8;
  EXPECT_EQ(error(), "g_idx: expected dtype int32 but got uint8");
}

TEST_F(NBitsValidateTest, BiasAndYMustMatchA) {
  args.bias->dtype = DType::kBFloat16;
  EXPECT_EQ(error(), "bias: expected dtype float16 but got bfloat16");
  args.bias->dtype = DType::kFloat16;
  args.y.dtype = DType::kFloat32;
  EXPECT_EQ(error(), "y: expected dtype float16 but got float32");
}

// ------------------------------------------------------------------ shapes
TEST_F(NBitsValidateTest, ActivationMustEndInK) {
  args.a.shape = Shape{2, 3, 4095};
  EXPECT_EQ(error(),
            "a: expected shape [2, 3, 4096] (..., K with K from the attribute) but got "
            "[2, 3, 4095]");
  args.a.shape = Shape{};
  EXPECT_EQ(error(), "a: expected rank >= 1 ([..., K]) but got rank 0");
}

TEST_F(NBitsValidateTest, RankOneActivation) {
  args.a.shape = Shape{4096};
  args.y.shape = Shape{1024};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.m, 1);
}

TEST_F(NBitsValidateTest, WrongShapeOfB) {
  args.b.shape = Shape{1024, 128, 32};  // an 8-bit blob for 4-bit weights
  EXPECT_EQ(error(),
            "b: expected shape [1024, 128, 16] (N, ceil(K/block_size), block_size*bits/8) but "
            "got [1024, 128, 32]");
  args.b.shape = Shape{1024, 128 * 16};
  EXPECT_NE(error().find("but got [1024, 2048]"), std::string::npos);
  args.b.shape = Shape{1023, 128, 16};
  EXPECT_NE(error().find("expected shape [1024, 128, 16]"), std::string::npos);
}

TEST_F(NBitsValidateTest, WrongShapeOfScales) {
  args.scales.shape = Shape{1024, 127};
  EXPECT_EQ(error(),
            "scales: expected shape [1024, 128] or [131072] (N, ceil(K/block_size); or flat) "
            "but got [1024, 127]");
}

TEST_F(NBitsValidateTest, WrongShapeOfPackedZeroPoints) {
  args.zero_points->shape = Shape{1024, 128};  // one byte per block is the 8-bit layout
  EXPECT_EQ(error(),
            "zero_points: expected shape [1024, 64] or [65536] (N, ceil(k_blocks*bits/8) "
            "packed uint8; or flat) but got [1024, 128]");
}

TEST_F(NBitsValidateTest, WrongShapeOfGIdx) {
  args.g_idx->shape = Shape{128};
  EXPECT_EQ(error(), "g_idx: expected shape [4096] (K) but got [128]");
}

TEST_F(NBitsValidateTest, WrongShapeOfBiasAndY) {
  args.bias->shape = Shape{1, 1024};
  EXPECT_EQ(error(), "bias: expected shape [1024] (N) but got [1, 1024]");
  args.bias->shape = Shape{1024};
  args.y.shape = Shape{6, 1024};
  EXPECT_EQ(error(),
            "y: expected shape [2, 3, 1024] (A's shape with K replaced by N) but got [6, 1024]");
}

// ------------------------------------------------------------------ pointers, sizes
TEST_F(NBitsValidateTest, NullPointersWithElements) {
  args.b.data = nullptr;
  EXPECT_EQ(error(), "b: null data pointer for 2097152 elements");
  args.b.data = fake_pointer();
  args.scales.data = nullptr;
  EXPECT_EQ(error(), "scales: null data pointer for 131072 elements");
  args.scales.data = fake_pointer();
  args.zero_points->data = nullptr;
  EXPECT_EQ(error(), "zero_points: null data pointer for 65536 elements");
  args.zero_points->data = fake_pointer();
  args.g_idx->data = nullptr;
  EXPECT_EQ(error(), "g_idx: null data pointer for 4096 elements");
  args.g_idx->data = fake_pointer();
  args.y.data = nullptr;
  EXPECT_EQ(error(), "y: null data pointer for 6144 elements");
}

TEST_F(NBitsValidateTest, EmptyTensorsMayBeNull) {
  // N == 0: B, scales, zero points, bias and Y hold no elements.
  attrs.n = 0;
  args.b = TensorView{nullptr, DType::kUInt8, Shape{0, 128, 16}};
  args.scales = TensorView{nullptr, DType::kFloat16, Shape{0, 128}};
  args.zero_points = TensorView{nullptr, DType::kUInt8, Shape{0, 64}};
  args.bias = TensorView{nullptr, DType::kFloat16, Shape{0}};
  args.y = MutableTensorView{nullptr, DType::kFloat16, Shape{2, 3, 0}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.n, 0);
  // K == 0: no blocks, A holds no elements.
  SetUp();
  attrs.k = 0;
  args.a = TensorView{nullptr, DType::kFloat16, Shape{2, 3, 0}};
  args.b = TensorView{nullptr, DType::kUInt8, Shape{1024, 0, 16}};
  args.scales = TensorView{nullptr, DType::kFloat16, Shape{1024, 0}};
  args.zero_points = TensorView{nullptr, DType::kUInt8, Shape{1024, 0}};
  args.g_idx = TensorView{nullptr, DType::kInt32, Shape{0}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_EQ(problem.k_blocks(), 0);
}

TEST_F(NBitsValidateTest, MisalignedElementPointers) {
  args.scales.data = fake_pointer(1);
  EXPECT_EQ(error(), "scales: expected a pointer aligned to 2 bytes (float16) but got alignment 1");
  args.scales.data = fake_pointer();
  args.g_idx->data = fake_pointer(2);
  EXPECT_EQ(error(), "g_idx: expected a pointer aligned to 4 bytes (int32) but got alignment 2");
}

TEST_F(NBitsValidateTest, AlignmentOfVectorizedInputs) {
  args.b.data = fake_pointer(8);  // uint8: any address is valid, but 16-byte loads need 16
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 8);
  args.b.data = fake_pointer();
  args.a.data = fake_pointer(4);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 4);
  args.a.data = fake_pointer();
  args.scales.data = fake_pointer(2);  // not among the vectorized inputs: its own field
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.alignment, 16);
  EXPECT_EQ(problem.scale_alignment, 2);
  args.scales.data = fake_pointer(4);
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.scale_alignment, 4);
  args.scales.data = fake_pointer();
  ASSERT_TRUE(validate().ok());
  EXPECT_EQ(problem.scale_alignment, 16);
}

TEST_F(NBitsValidateTest, SizesThatOverflowInt64) {
  const int64_t big = int64_t{1} << 40;
  attrs.n = big;
  attrs.k = big;
  args.b.shape = Shape{big, big / 32, 16};
  EXPECT_EQ(error(), "N * K padded to whole blocks: 1099511627776 * 1099511627776 overflows int64");
  attrs.n = 1024;
  attrs.k = std::numeric_limits<int64_t>::max();
  EXPECT_NE(error().find("overflows int64"), std::string::npos);
  attrs.k = 4096;
  args.a.shape = Shape{int64_t{1} << 62, 8, 4096};
  EXPECT_NE(error().find("overflows int64"), std::string::npos);
}

TEST(NBitsOutputShape, ReplacesTheLastDimension) {
  Shape y;
  ASSERT_TRUE(nbits_matmul_output_shape(Shape{2, 3, 64}, 10, &y).ok());
  EXPECT_EQ(y, (Shape{2, 3, 10}));
  ASSERT_TRUE(nbits_matmul_output_shape(Shape{64}, 10, &y).ok());
  EXPECT_EQ(y, (Shape{10}));
  EXPECT_EQ(nbits_matmul_output_shape(Shape{}, 10, &y).code(), StatusCode::kInvalidArgument);
}

TEST(NBitsNames, ZeroPointKinds) {
  EXPECT_STREQ(nbits_zero_points_name(NBitsZeroPoints::kNone), "none");
  EXPECT_STREQ(nbits_zero_points_name(NBitsZeroPoints::kPacked), "packed");
  EXPECT_STREQ(nbits_zero_points_name(NBitsZeroPoints::kTyped), "typed");
}

// The prepacked input ([2, k_blocks, N] of T1, float32 for bfloat16 with 8 bits; 16-byte
// aligned): the problem records it; the wrong dtype, shape or alignment is an error naming
// it.
TEST_F(NBitsValidateTest, PrepackedScalesAndZeros) {
  ASSERT_TRUE(validate().ok());
  EXPECT_FALSE(problem.has_prepacked);
  EXPECT_EQ(nbits_matmul_prepacked_shape(1024, 128), (Shape{2, 128, 1024}));
  for (const DType t : {DType::kFloat16, DType::kFloat32}) {
    EXPECT_EQ(nbits_matmul_prepacked_dtype(t, 4), t);
    EXPECT_EQ(nbits_matmul_prepacked_dtype(t, 8), t);
  }
  EXPECT_EQ(nbits_matmul_prepacked_dtype(DType::kBFloat16, 4), DType::kBFloat16);
  EXPECT_EQ(nbits_matmul_prepacked_dtype(DType::kBFloat16, 8), DType::kFloat32);
  args.prepacked = TensorView{fake_pointer(), DType::kFloat16, Shape{2, 128, 1024}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  EXPECT_TRUE(problem.has_prepacked);
  args.prepacked = TensorView{fake_pointer(), DType::kFloat32, Shape{2, 128, 1024}};
  EXPECT_EQ(error(), "prepacked: expected dtype float16 but got float32");
  args.prepacked = TensorView{fake_pointer(), DType::kFloat16, Shape{128, 1024}};
  EXPECT_EQ(error(),
            "prepacked: expected shape [2, 128, 1024] (2, ceil(K/block_size), N: scales and zeros "
            "transposed (prepack_nbits_matmul)) but got [128, 1024]");
  args.prepacked = TensorView{fake_pointer(8), DType::kFloat16, Shape{2, 128, 1024}};
  EXPECT_EQ(error(), "prepacked: expected a 16-byte aligned pointer but got one aligned to 8 bytes");
  // bfloat16 with 8-bit codes: float32.
  set_t1(DType::kBFloat16);
  attrs.bits = 8;
  args.b = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 128, 32}};
  args.zero_points = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 128}};
  args.prepacked = TensorView{fake_pointer(), DType::kFloat32, Shape{2, 128, 1024}};
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  args.prepacked = TensorView{fake_pointer(), DType::kBFloat16, Shape{2, 128, 1024}};
  EXPECT_EQ(error(), "prepacked: expected dtype float32 but got bfloat16");
}

// Y must not share memory with an input: each optional input is checked too.
TEST_F(NBitsValidateTest, OutputOverlappingAnInput) {
  ASSERT_TRUE(validate().ok()) << validate().to_string();
  const auto inside = [](const std::optional<TensorView>& t) { return static_cast<uint8_t*>(const_cast<void*>(t->data)) + 2; };
  args.y.data = inside(args.zero_points);
  EXPECT_EQ(error(),
            "y: overlaps zero_points; an operator's output must not share memory with its inputs, "
            "other outputs or workspace");
  args.y.data = inside(args.g_idx);
  EXPECT_EQ(error().rfind("y: overlaps g_idx;", 0), 0u);
  args.y.data = static_cast<uint8_t*>(const_cast<void*>(args.scales.data)) + 1024 * 128 * 2 - 2;
  EXPECT_EQ(error().rfind("y: overlaps scales;", 0), 0u);
  args.y.data = static_cast<uint8_t*>(const_cast<void*>(args.scales.data)) + 1024 * 128 * 2;
  EXPECT_TRUE(validate().ok()) << validate().to_string();
}

// prepack_nbits_matmul checks the attributes, scales, zero points and its output as
// validate does, before it enqueues anything (no GPU needed).
TEST_F(NBitsValidateTest, PrepackChecksItsTensors) {
  MutableTensorView out{fake_pointer(), DType::kFloat16, Shape{2, 128, 1024}};
  auto prepack = [&] { return prepack_nbits_matmul(attrs, args.scales, args.zero_points, out, nullptr); };
  out.shape = Shape{128, 1024};
  Status s = prepack();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prepacked: expected shape [2, 128, 1024]"), std::string::npos) << s.message();
  out.shape = Shape{2, 128, 1024};
  args.zero_points = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 63}};
  s = prepack();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zero_points"), std::string::npos) << s.message();
  args.zero_points = TensorView{fake_pointer(), DType::kBFloat16, Shape{1024, 128}};  // typed, not the scales' T1
  s = prepack();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zero_points"), std::string::npos) << s.message();
  // The output over the zero points it reads.
  args.zero_points = TensorView{fake_pointer(), DType::kUInt8, Shape{1024, 64}};
  out.data = const_cast<void*>(args.zero_points->data);
  s = prepack();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("prepacked: overlaps zero_points;", 0), 0u) << s.message();
  attrs.bits = 2;
  EXPECT_EQ(prepack().code(), StatusCode::kNotSupported);
}

}  // namespace
// A run's arguments may be more aligned than its plan assumed, never less; the error names
// the pointers (the operators' run prologue: data pointers, and NBits scales).
TEST(RunPrologue, AlignmentAtLeastThePlans) {
  EXPECT_TRUE(check_alignment_at_least("scales", 4, 16).ok());
  EXPECT_TRUE(check_alignment_at_least("scales", 4, 4).ok());
  const Status st = check_alignment_at_least("scales", 16, 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "plan: made for 16-byte aligned scales but the arguments are only 2-byte aligned; "
            "plan again for them");
}

// run() writes the plan's bytes of the workspace: they must not overlap any tensor of the
// call (the prologue checks it before anything is enqueued); bytes past the plan's are free.
TEST(RunPrologue, WorkspaceApartFromTheTensors) {
  NBitsMatMulArgs args;
  args.a = TensorView{testing::fake_pointer(), DType::kFloat16, Shape{300, 256}};
  args.b = TensorView{testing::fake_pointer(), DType::kUInt8, Shape{256, 2, 64}};
  args.scales = TensorView{testing::fake_pointer(), DType::kFloat16, Shape{256, 2}};
  args.y = MutableTensorView{testing::fake_pointer(), DType::kFloat16, Shape{300, 256}};
  NBitsMatMulPlan plan;
  plan.workspace_bytes = 4096;
  const auto from = [](const void* p, int64_t bytes) { return static_cast<const uint8_t*>(p) + bytes; };
  const auto run = [&](const void* ws) { return begin_run(plan, args, Status::Ok(), ws, plan.workspace_bytes); };
  EXPECT_TRUE(run(testing::fake_pointer()).ok());
  Status st = run(from(args.y.data, 256));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("workspace: overlaps y;", 0), 0u) << st.message();
  st = run(from(args.a.data, -2048));
  EXPECT_EQ(st.message().rfind("workspace: overlaps a;", 0), 0u) << st.message();
  EXPECT_TRUE(run(from(args.b.data, -4096)).ok());
  // A plan without a workspace writes none.
  plan.workspace_bytes = 0;
  EXPECT_TRUE(run(args.y.data).ok());
}

// BQMM_PRINT_PLAN=1: a run prints its plan to stderr when the plan differs from the last one
// printed on the thread, not at every call. print_plan_if_asked reads the variable once per
// process, at its first call, which another test of the binary may have made with it
// unset; so this checks the printing with the flag given (print_plan_if).
TEST(RunPrologue, PrintsEachPlanWhenItChanges) {
  const NBitsMatMulPlan decode = testing::plan(testing::nbits_problem(4, 256, 256, 4, 128));
  const NBitsMatMulPlan prefill = testing::plan(testing::nbits_problem(300, 256, 256, 4, 128));
  ::testing::internal::CaptureStderr();
  print_plan_if(false, prefill);
  print_plan_if(true, decode);
  print_plan_if(true, decode);
  print_plan_if(true, prefill);
  print_plan_if(true, decode);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  std::ostringstream d, f;
  d << "bqmm: " << decode << "\n";
  f << "bqmm: " << prefill << "\n";
  EXPECT_EQ(printed, d.str() + f.str() + d.str());
  EXPECT_NE(d.str().find("M=4 N=256 K=256"), std::string::npos);
}

}  // namespace bqmm
