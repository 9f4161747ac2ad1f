// bqmm-profile --op nbits: NBitsMatMul (MatMulNBits) through the public API exactly as
// users call it (Handle, validate, plan, run with a workspace of plan.workspace_bytes on
// a created stream), checked against the float64 reference.
//
// --nbits-algo all runs every case of M <= 8 once per GEMV K-loop algorithm, so the
// measurement behind the planner's default algorithm per block size is one command:
//   for bs in 16 32 64 128 256; do
//     bqmm-profile --op nbits --bits 4 --block-size $bs --m 1 --n 8192 --k 8192 --nbits-algo all
//   done
#include "bqmm/nbits_matmul.h"
#include "cuda/launchers.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"
#include "profile.h"
#include "reference/nbits_reference.h"

namespace bqmm::profile {
namespace {

using harness::DeviceTensor;

struct NBitsProfileCase : CaseSpec {
  int bits = 4;
  NBitsZeroPoints zero_points = NBitsZeroPoints::kNone;
  bool g_idx = false;
  int gemv_algo = -1;  // forced GEMV K-loop algorithm; -1: the planner's default

  std::string variant() const override {
    std::string v = "int" + std::to_string(bits);
    if (zero_points != NBitsZeroPoints::kNone) v += std::string(" zp=") + nbits_zero_points_name(zero_points);
    if (g_idx) v += " g_idx";
    if (gemv_algo >= 0) v += " algo=" + std::to_string(gemv_algo);
    return v;
  }
  void write_json(JsonLine* line) const override {
    line->add_int("bits", bits);
    line->add_string("zero_points", nbits_zero_points_name(zero_points));
    line->add_bool("g_idx", g_idx);
    line->add_int("gemv_algo", gemv_algo >= 0 ? std::optional<int64_t>(gemv_algo) : std::nullopt);
  }
};

// Small enough for the CPU reference to take milliseconds, and between them reaching
// every path of the planner on an SM80+ GPU with every activation type, both widths,
// every zero-point kind, g_idx and bias.
struct SmokeCase {
  DType dtype;
  int64_t m, n, k, block_size;
  int bits;
  NBitsZeroPoints zero_points;
  bool g_idx, bias;
};
constexpr SmokeCase kSmokeCases[] = {
    {DType::kFloat16, 1, 512, 1024, 32, 4, NBitsZeroPoints::kPacked, false, false},  // gemv
    {DType::kBFloat16, 8, 256, 512, 128, 8, NBitsZeroPoints::kNone, false, true},    // gemv, 8 rows
    {DType::kFloat32, 3, 200, 256, 64, 4, NBitsZeroPoints::kPacked, false, true},    // gemv, FMA tile
    {DType::kBFloat16, 2, 160, 512, 16, 8, NBitsZeroPoints::kPacked, false, false},  // gemv, block 16
    {DType::kFloat16, 4, 160, 200, 32, 8, NBitsZeroPoints::kTyped, false, true},     // typed zp, K % bs
    {DType::kBFloat16, 2, 320, 384, 16, 4, NBitsZeroPoints::kPacked, true, false},   // g_idx
    {DType::kFloat16, 2, 256, 512, 64, 4, NBitsZeroPoints::kNone, false, false},     // 4-bit, no zp
    {DType::kFloat16, 17, 320, 512, 128, 4, NBitsZeroPoints::kPacked, false, true},  // fused_gemm
    {DType::kBFloat16, 64, 256, 512, 32, 8, NBitsZeroPoints::kNone, false, true},    // fused_gemm
    {DType::kBFloat16, 16, 256, 4096, 64, 4, NBitsZeroPoints::kNone, false, false},  // K split 4
    {DType::kFloat16, 80, 320, 384, 128, 4, NBitsZeroPoints::kPacked, false, true},  // prefill
    {DType::kFloat32, 64, 256, 512, 32, 8, NBitsZeroPoints::kNone, false, true},     // prefill float32
};

NBitsMatMulProblem problem_of(const NBitsProfileCase& c) {
  auto p = common_problem<NBitsMatMulProblem>(c);
  p.bits = c.bits;
  p.zero_points = c.zero_points;
  p.has_g_idx = c.g_idx;
  return p;
}

// The operator's options, read in this one place: the environment's BQMM_* overrides.
// The operator's options (BQMM_DEQUANT_SCRATCH_MIB) and the internal plan override
// (BQMM_PLAN_OVERRIDE, core/plan_override.h), as the library's users and its tests set them.
Status read_options(NBitsMatMulOptions* options, PlanOverride* force) {
  BQMM_RETURN_IF_ERROR(nbits_matmul_options_from_env(options));
  return plan_override_from_env(force);
}

// The library call of case `c` with its tensors at Placeholders addresses: the shapes and
// dtypes the real call has (make_random_nbits_case's and NBitsInputs::device_args's).
NBitsMatMulArgs placeholder_args(const NBitsProfileCase& c) {
  Placeholders at;
  const NBitsMatMulProblem shape = problem_of(c);
  const int64_t k_blocks = shape.k_blocks();
  NBitsMatMulArgs args;
  args.a = at.input(c.dtype, Shape{c.m, c.k});
  args.b = at.input(DType::kUInt8, Shape{c.n, k_blocks, shape.blob_bytes()});
  args.scales = at.input(c.dtype, Shape{c.n, k_blocks});
  if (c.zero_points == NBitsZeroPoints::kPacked)
    args.zero_points = at.input(DType::kUInt8, Shape{c.n, shape.zp_row_bytes()});
  if (c.zero_points == NBitsZeroPoints::kTyped)
    args.zero_points = at.input(c.dtype, Shape{c.n, k_blocks});
  if (c.g_idx) args.g_idx = at.input(DType::kInt32, Shape{c.k});
  if (c.bias) args.bias = at.input(c.dtype, Shape{c.n});
  if (c.prepack)
    args.prepacked = at.input(nbits_matmul_prepacked_dtype(c.dtype, shape.bits), nbits_matmul_prepacked_shape(c.n, k_blocks));
  args.y = at.output(c.dtype, Shape{c.m, c.n});
  return args;
}

NBitsMatMulAttrs attrs_of(const NBitsProfileCase& c) {
  NBitsMatMulAttrs attrs;
  attrs.k = c.k;
  attrs.n = c.n;
  attrs.bits = c.bits;
  attrs.block_size = c.block_size;
  return attrs;
}

Status parse_bits(const std::string& text, int* out) {
  if (text != "4" && text != "8")
    return Status(StatusCode::kInvalidArgument, "--bits: expected 4 or 8 but got \"" + text + "\"");
  *out = std::stoi(text);
  return Status::Ok();
}

// --nbits-algo: one GEMV algorithm, or "all" of them.
Status parse_algos(const std::string& text, std::vector<int>* out) {
  if (text == "all") {
    *out = {kNBitsGemvAlgoUnrolled, kNBitsGemvAlgoLoop, kNBitsGemvAlgoPerBlock};
    return Status::Ok();
  }
  for (int algo : {kNBitsGemvAlgoUnrolled, kNBitsGemvAlgoLoop, kNBitsGemvAlgoPerBlock}) {
    if (text == std::to_string(algo)) {
      *out = {algo};
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInvalidArgument,
                "--nbits-algo: expected 0, 1, 2 or all but got \"" + text + "\"");
}

Status parse_zero_points(const std::string& text, NBitsZeroPoints* out) {
  for (auto zp : {NBitsZeroPoints::kNone, NBitsZeroPoints::kPacked, NBitsZeroPoints::kTyped}) {
    if (text == nbits_zero_points_name(zp)) {
      *out = zp;
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInvalidArgument,
                "--zero-points: expected none, packed or typed but got \"" + text + "\"");
}

// The inputs of the cases that differ only in M.
class NBitsInputs : public GroupInputs {
 public:
  // `prepack`: the weight's parts include its prepacked scales and zeros (the reference's
  // layout, nbits_prepacked, which the GPU tests pin to prepack_nbits_matmul's output).
  NBitsInputs(reference::NBitsCase host, bool prepack) : host_(std::move(host)) {
    if (prepack) prepacked_ = reference::nbits_prepacked(host_);
  }

  const NBitsMatMulAttrs& attrs() const { return host_.attrs; }
  const HostTensor& a() const override { return host_.a; }
  std::vector<NamedTensor> weight() const override {
    return {{"b", &host_.b},
            {"scales", &host_.scales},
            {"zero_points", host_.zero_points ? &*host_.zero_points : nullptr},
            {"prepacked", prepacked_ ? &*prepacked_ : nullptr}};
  }
  std::vector<OtherInput> others() override {
    std::vector<OtherInput> t;
    if (host_.g_idx) t.push_back({"g_idx", &*host_.g_idx, &g_idx_});
    if (host_.bias) t.push_back({"bias", &*host_.bias, &bias_});
    return t;
  }
  std::vector<double> reference_row(int64_t row) const override {
    return reference::nbits_matmul_reference(host_, row, row + 1);
  }
  std::function<HostTensor()> emulation(int64_t m) const override {
    reference::NBitsCase exact = host_;  // the case with exactly M rows of A
    exact.a = first_rows(host_.a, m);
    return [exact = std::move(exact)] {
      return reference::nbits_matmul_emulate_dequant_gemm(exact);
    };
  }

  Status create_dense_baseline(const Gpu& gpu, std::unique_ptr<DenseBaseline>* out) const override {
    // The dense baseline multiplies this weight dequantized to bfloat16: the dequant
    // kernel reads its scales (and typed zero points) in the output type, so those go up
    // as bfloat16 copies for this one untimed fill.
    const auto to_bf16 = [](const HostTensor& t) {
      HostTensor b = HostTensor::zeros(DType::kBFloat16, t.shape);
      for (int64_t i = 0; i < t.numel(); ++i) b.set(i, t.get(i));
      return b;
    };
    DeviceTensor scales_bf16, typed_zp_bf16;
    BQMM_RETURN_IF_ERROR(DeviceTensor::upload(to_bf16(host_.scales), &scales_bf16));
    if (host_.zero_point_kind() == NBitsZeroPoints::kTyped)
      BQMM_RETURN_IF_ERROR(DeviceTensor::upload(to_bf16(*host_.zero_points), &typed_zp_bf16));
    cuda::NBitsDequantArgs d =
        dequant_args(0, DType::kBFloat16, scales_bf16.data(), typed_zp_bf16.data());
    return DenseBaseline::create(
        gpu, host_.a, host_.n(),
        [&](void* weight_bf16, cudaStream_t stream) {
          d.out = weight_bf16;
          // Scalar kernel: it takes every K, and this runs once, untimed.
          return cuda::launch_nbits_dequant(d, /*vec8=*/false, stream);
        },
        out);
  }

  const uint8_t* b(int64_t copy) const { return weights.part(copy, 0); }
  const uint8_t* scales(int64_t copy) const { return weights.part(copy, 1); }
  const uint8_t* zero_points(int64_t copy) const { return weights.part(copy, 2); }
  const uint8_t* prepacked(int64_t copy) const { return weights.part(copy, 3); }
  // The dequantize kernel's arguments for weight copy `copy`, writing `dtype`: the kernel
  // reads the scales and typed zero points in that type, from `scale_data` and `typed_zp`
  // (used only when the zero points are typed).
  cuda::NBitsDequantArgs dequant_args(int64_t copy, DType dtype, const void* scale_data,
                                      const void* typed_zp) const {
    cuda::NBitsDequantArgs d;
    d.dtype = dtype;
    d.bits = host_.bits();
    d.b = b(copy);
    d.scales = scale_data;
    if (host_.zero_point_kind() == NBitsZeroPoints::kPacked) d.zp_packed = zero_points(copy);
    if (host_.zero_point_kind() == NBitsZeroPoints::kTyped) d.zp_typed = typed_zp;
    d.g_idx = host_.g_idx ? static_cast<const int32_t*>(g_idx_.data()) : nullptr;
    d.rows = host_.n();
    d.k = host_.k();
    d.block_size = host_.block_size();
    return d;
  }
  // Args of case c on weight copy `copy`, writing y.
  NBitsMatMulArgs device_args(const NBitsProfileCase& c, int64_t copy,
                              const MutableTensorView& y) const {
    NBitsMatMulArgs args;
    args.a = TensorView{device_a.data(), c.dtype, Shape{c.m, c.k}};
    args.b = TensorView{b(copy), DType::kUInt8, host_.b.shape};
    args.scales = TensorView{scales(copy), c.dtype, host_.scales.shape};
    if (host_.zero_points)
      args.zero_points =
          TensorView{zero_points(copy), host_.zero_points->dtype, host_.zero_points->shape};
    if (host_.g_idx) args.g_idx = g_idx_.view();
    if (host_.bias) args.bias = bias_.view();
    if (prepacked_) args.prepacked = TensorView{prepacked(copy), prepacked_->dtype, prepacked_->shape};
    args.y = y;
    return args;
  }

 private:
  reference::NBitsCase host_;
  std::optional<HostTensor> prepacked_;
  DeviceTensor g_idx_, bias_;  // GPU only
};

class NBitsProfiler : public OpProfiler {
 public:
  const char* name() const override { return "nbits"; }
  std::vector<FlagSpec> flags() const override {
    return {
        {"--bits", "BITS", "weight width: 4 (default) or 8"},
        {"--zero-points", "KIND", "none (default, 2^(bits-1)), packed (uint8) or typed (T1)"},
        {"--g-idx", nullptr, "pass a random act-order g_idx"},
        {"--nbits-algo", "ALGO",
         "GEMV K-loop algorithm: 0 unrolled, 1 loop, 2 per block, or all (each case of M <= 8 "
         "once per algorithm); default: the planner's choice"},
    };
  }
  Status make_cases(const Flags& flags, const Settings& settings, CaseList* out) override;
  std::vector<NamedView> call_tensors(const CaseSpec& c) const override;
  Status check_case(const CaseSpec& c, const DeviceInfo& device, CaseCheck* out) override;

 protected:
  std::unique_ptr<GroupInputs> make_inputs(const CaseSpec& c, int64_t max_m,
                                           uint64_t seed) override;
  Status plan_case(const CaseSpec& c, const GroupInputs& inputs, const MutableTensorView& y,
                   const Gpu& gpu, PlannedCase* out) override;

 private:
  PlanOverride force_for(const NBitsProfileCase& c) const;

  NBitsMatMulOptions options_;
  PlanOverride force_;
};

Status NBitsProfiler::make_cases(const Flags& flags, const Settings& settings, CaseList* out) {
  BQMM_RETURN_IF_ERROR(read_options(&options_, &force_));
  if (settings.suite == "smoke") {
    for (const char* flag : {"--bits", "--zero-points", "--g-idx"})
      if (flags.has(flag))
        return Status(StatusCode::kInvalidArgument,
                      std::string(flag) + ": --suite smoke sets it per case itself");
  }
  int bits = 4;
  BQMM_RETURN_IF_ERROR(parse_bits(flags.get("--bits", "4"), &bits));
  NBitsZeroPoints zero_points = NBitsZeroPoints::kNone;
  BQMM_RETURN_IF_ERROR(parse_zero_points(flags.get("--zero-points", "none"), &zero_points));
  const bool g_idx = flags.has("--g-idx");
  std::vector<int> algos = {-1};
  if (flags.has("--nbits-algo")) BQMM_RETURN_IF_ERROR(parse_algos(flags.get("--nbits-algo"), &algos));

  const auto add = [&](DType dtype, int64_t m, int64_t n, int64_t k, int64_t block_size,
                       int case_bits, NBitsZeroPoints zp, bool case_g_idx, bool bias) {
    // A forced algorithm only matters to cases the GEMV can take.
    const bool gemv_candidate = m <= 8 && !case_g_idx && zp != NBitsZeroPoints::kTyped;
    for (int algo : algos) {
      if (algo >= 0 && !gemv_candidate && algo != algos.front()) continue;
      auto c = new_case<NBitsProfileCase>(dtype, m, n, k, block_size, bias);
      c->bits = case_bits;
      c->zero_points = zp;
      c->g_idx = case_g_idx;
      c->gemv_algo = gemv_candidate ? algo : -1;
      c->prepack = settings.prepack;
      out->push_back(std::move(c));
    }
  };

  out->clear();
  if (settings.suite == "smoke") {
    for (const SmokeCase& s : kSmokeCases)
      if (!settings.dtype || *settings.dtype == s.dtype)
        add(s.dtype, s.m, s.n, s.k, s.block_size, s.bits, s.zero_points, s.g_idx, s.bias);
    return Status::Ok();
  }
  return for_each_shape(settings, [&](DType dtype, int64_t m, int64_t n, int64_t k) {
    add(dtype, m, n, k, settings.block_size, bits, zero_points, g_idx, settings.bias);
  });
}

// The plan override for case c: read_options' with --nbits-algo's forced algorithm.
PlanOverride NBitsProfiler::force_for(const NBitsProfileCase& c) const {
  PlanOverride o = force_;
  if (c.gemv_algo >= 0) o.algo = c.gemv_algo;
  return o;
}

std::vector<NamedView> NBitsProfiler::call_tensors(const CaseSpec& c) const {
  const NBitsMatMulArgs args = placeholder_args(static_cast<const NBitsProfileCase&>(c));
  std::vector<NamedView> t = {{"a", args.a}, {"b", args.b}, {"scales", args.scales}};
  if (args.zero_points) t.push_back({"zero_points", *args.zero_points});
  if (args.g_idx) t.push_back({"g_idx", *args.g_idx});
  if (args.bias) t.push_back({"bias", *args.bias});
  if (args.prepacked) t.push_back({"prepacked", *args.prepacked});
  t.push_back({"y", TensorView{args.y.data, args.y.dtype, args.y.shape}});
  return t;
}

Status NBitsProfiler::check_case(const CaseSpec& spec, const DeviceInfo& device, CaseCheck* out) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  NBitsMatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(placeholder_args(c), attrs_of(c), &problem));
  NBitsMatMulPlan plan;
  const PlanOverride force = force_for(c);
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, device, options_, force, &plan));
  out->plan = to_text(plan);
  out->workspace_bytes = plan.workspace_bytes;
  if (const char* why = nbits_mixed_gemm_refusal(problem, device, force);
      why != nullptr && problem.m >= kMixedMinRows)
    out->mixed_gemm_refusal = why;
  if (const char* why = nbits_fused_gemm_refusal(problem, device, force);
      why != nullptr && plan.path != NBitsPath::kMixedGemm)
    out->fused_gemm_refusal = why;
  if (const char* why = nbits_wgmma_refusal(problem, device, force);
      why != nullptr && plan.path == NBitsPath::kFusedGemm)
    out->wgmma_refusal = why;
  if (const char* why = nbits_wgmma_tile_128_refusal(problem, device, force);
      why != nullptr && plan.path == NBitsPath::kFusedGemm && plan.gemm.wgmma && problem.m > 64)
    out->wgmma_tile_128_refusal = why;
  return Status::Ok();
}

std::unique_ptr<GroupInputs> NBitsProfiler::make_inputs(const CaseSpec& spec, int64_t max_m,
                                                        uint64_t seed) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  reference::NBitsCaseSpec s;
  s.dtype = c.dtype;
  s.m = max_m;
  s.n = c.n;
  s.k = c.k;
  s.bits = c.bits;
  s.block_size = c.block_size;
  s.zero_points = c.zero_points;
  s.g_idx = c.g_idx;
  s.bias = c.bias;
  // Every code with equal weight: fast to draw for 200M-element weights, and it exercises
  // the whole integer range.
  s.init = reference::WeightInit::kAllCodes;
  return std::make_unique<NBitsInputs>(reference::make_random_nbits_case(s, seed), c.prepack);
}

Status NBitsProfiler::plan_case(const CaseSpec& spec, const GroupInputs& inputs,
                                const MutableTensorView& y, const Gpu& gpu, PlannedCase* out) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  const auto& in = static_cast<const NBitsInputs&>(inputs);
  NBitsMatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(in.device_args(c, 0, y), in.attrs(), &problem));
  NBitsMatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, gpu.info(), options_, force_for(c), &plan));
  out->path = nbits_path_name(plan.path);
  out->text = to_text(plan);
  out->workspace_bytes = plan.workspace_bytes;
  out->dequant_gemm = plan.path == NBitsPath::kDequantGemm;
  out->run = [&c, &in, y, &gpu, plan](int64_t copy, void* workspace, size_t workspace_bytes) {
    return run_nbits_matmul(gpu.handle(), plan, in.device_args(c, copy, y), workspace,
                            workspace_bytes, gpu.stream());
  };
  out->dequantize = [&c, &in, &gpu, vec8 = plan.dequant.vector](int64_t copy, void* dequantized) {
    cuda::NBitsDequantArgs d =
        in.dequant_args(copy, c.dtype, in.scales(copy), in.zero_points(copy));
    d.out = dequantized;
    return cuda::launch_nbits_dequant(d, vec8, gpu.stream());
  };
  return Status::Ok();
}

}  // namespace

std::unique_ptr<OpProfiler> make_nbits_profiler() { return std::make_unique<NBitsProfiler>(); }

}  // namespace bqmm::profile
