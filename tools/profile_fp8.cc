// bqmm-profile --op fp8: Fp8WeightMatMul (MatMulBlockQuantizedFp8Weight) through the
// public API exactly as users call it (Handle, validate, plan, run with a workspace of
// plan.workspace_bytes on a created stream), checked against the float64 reference.
#include "bqmm/fp8_matmul.h"
#include "cuda/launchers.h"
#include "core/plan_explain.h"
#include "core/plan_override.h"
#include "profile.h"
#include "reference/fp8_reference.h"

namespace bqmm::profile {
namespace {

using harness::DeviceTensor;

// How the activation is quantized (--act-quant): not at all (W8A16), statically (an
// a_scale input, W8A8) or dynamically (Fp8MatMulAttrs::dynamic_act_quant).
enum class ActQuant { kNone, kStatic, kDynamic };

struct Fp8CaseSpec : CaseSpec {
  bool w8a8 = false;     // an a_scale input: the activation is QDQ'd to e4m3 first
  bool dynamic = false;  // dynamic per-row, per-K-block activation quantization
  int64_t scale_rows = 1;  // Fp8MatMulAttrs::b_scale_block_rows, the weight's scales made to keep it

  std::string variant() const override {
    std::string v = w8a8 ? "w8a8" : dynamic ? "dynamic" : "";
    if (scale_rows != 1) v += (v.empty() ? "" : " ") + std::string("scale_rows=") + std::to_string(scale_rows);
    return v;
  }
  void write_json(JsonLine* line) const override {
    line->add_bool("w8a8", w8a8);
    line->add_string("act_quant", w8a8 ? "static" : dynamic ? "dynamic" : "none");
    line->add_int("b_scale_block_rows", scale_rows);
  }
  Fp8MatMulAttrs attrs() const { return Fp8MatMulAttrs{block_size, dynamic, scale_rows}; }
};

std::unique_ptr<CaseSpec> make_case(DType dtype, int64_t m, int64_t n, int64_t k,
                                    int64_t block_size, bool bias, ActQuant act, int64_t scale_rows = 1) {
  auto c = new_case<Fp8CaseSpec>(dtype, m, n, k, block_size, bias);
  c->w8a8 = act == ActQuant::kStatic;
  c->dynamic = act == ActQuant::kDynamic;
  c->scale_rows = scale_rows;
  return c;
}

Status parse_act_quant(const std::string& text, ActQuant* out) {
  if (text == "none") *out = ActQuant::kNone;
  else if (text == "static") *out = ActQuant::kStatic;
  else if (text == "dynamic") *out = ActQuant::kDynamic;
  else
    return Status(StatusCode::kInvalidArgument,
                  "--act-quant: expected none, static or dynamic but got \"" + text + "\"");
  return Status::Ok();
}

// Small enough for the CPU reference to take milliseconds, and between them reaching
// every path of the planner on an SM80+ GPU with both dtypes, bias, W8A8 and dynamic
// activation quantization.
struct SmokeCase {
  DType dtype;
  int64_t m, n, k, block_size;
  bool bias;
  ActQuant act;
};
constexpr ActQuant none = ActQuant::kNone, w8a8 = ActQuant::kStatic, dyn = ActQuant::kDynamic;
constexpr SmokeCase kSmokeCases[] = {
    {DType::kFloat16, 1, 512, 1024, 128, false, none},  // decode M = 1: gemv_mma
    {DType::kBFloat16, 8, 256, 512, 128, true, none},   // decode M = 8 with bias
    {DType::kFloat16, 8, 384, 256, 128, true, w8a8},    // decode W8A8 with bias
    {DType::kBFloat16, 2, 320, 384, 64, false, w8a8},   // block size 64
    {DType::kBFloat16, 5, 160, 96, 32, true, none},     // K % 64 != 0: gemv_fma
    {DType::kFloat16, 3, 200, 200, 128, false, none},   // K % 16 != 0, partial block: dequant_gemm
    {DType::kFloat16, 33, 320, 384, 128, true, none},   // fused_gemm with bias, tile_m 64
    {DType::kBFloat16, 64, 256, 512, 128, true, w8a8},  // fused_gemm, W8A8: QDQ first
    {DType::kFloat16, 16, 256, 2048, 128, true, none},  // fused_gemm, K split 4 (partial sums)
    {DType::kFloat16, 80, 320, 384, 128, true, none},   // prefill: fused_gemm with bias
    {DType::kBFloat16, 80, 256, 520, 128, true, w8a8},  // W8A8, K % 16 != 0: QDQ + dequant_gemm
    {DType::kFloat16, 4, 300, 400, 128, true, dyn},     // dynamic quantization, decode
    {DType::kBFloat16, 70, 300, 400, 128, false, dyn},  // dynamic, fused_gemm
};

// The operator's options (BQMM_DEQUANT_SCRATCH_MIB) and the internal plan override
// (BQMM_PLAN_OVERRIDE, core/plan_override.h), as the library's users and its tests set them.
Status read_options(Fp8MatMulOptions* options, PlanOverride* force) {
  BQMM_RETURN_IF_ERROR(fp8_matmul_options_from_env(options));
  return plan_override_from_env(force);
}

Fp8MatMulProblem problem_of(const Fp8CaseSpec& c) {
  auto p = common_problem<Fp8MatMulProblem>(c);
  p.has_a_scale = c.w8a8;
  p.dynamic_act_quant = c.dynamic;
  p.b_scale_block_rows = c.scale_rows;
  return p;
}

// The library call of case `c` with its tensors at Placeholders addresses: the shapes and
// dtypes the real call has (make_random_fp8_case's and Fp8Inputs::device_args's).
Fp8MatMulArgs placeholder_args(const Fp8CaseSpec& c) {
  Placeholders at;
  const int64_t k_blocks = problem_of(c).k_blocks();
  Fp8MatMulArgs args;
  args.a = at.input(c.dtype, Shape{c.m, c.k});
  args.b = at.input(DType::kFloat8E4M3, Shape{c.n, c.k});
  args.b_scale = at.input(DType::kFloat32, Shape{c.n, k_blocks});
  if (c.w8a8) args.a_scale = at.input(DType::kFloat32, Shape{});
  if (c.bias) args.bias = at.input(c.dtype, Shape{c.n});
  if (c.prepack) args.prepacked = at.input(DType::kFloat32, fp8_matmul_prepacked_shape(c.n, k_blocks));
  args.y = at.output(c.dtype, Shape{c.m, c.n});
  return args;
}

// The inputs of the cases that differ only in M.
class Fp8Inputs : public GroupInputs {
 public:
  // `prepack`: the weight's parts include its prepacked scales (the reference's layout,
  // fp8_prepacked, which the GPU tests pin to prepack_fp8_matmul's output).
  Fp8Inputs(reference::Fp8Case host, bool prepack) : host_(std::move(host)) {
    if (prepack) prepacked_ = reference::fp8_prepacked(host_);
  }

  const HostTensor& a() const override { return host_.a; }
  std::vector<NamedTensor> weight() const override {
    return {{"b", &host_.b}, {"b_scale", &host_.b_scale}, {"prepacked", prepacked_ ? &*prepacked_ : nullptr}};
  }
  std::vector<OtherInput> others() override {
    std::vector<OtherInput> t;
    if (host_.a_scale) t.push_back({"a_scale", &*host_.a_scale, &a_scale_});
    if (host_.bias) t.push_back({"bias", &*host_.bias, &bias_});
    return t;
  }
  std::vector<double> reference_row(int64_t row) const override {
    return reference::fp8_matmul_reference(host_, row, row + 1);
  }
  std::function<HostTensor()> emulation(int64_t m) const override {
    reference::Fp8Case exact;  // the case with exactly M rows of A
    exact.block_size = host_.block_size;
    exact.a = first_rows(host_.a, m);
    exact.b = host_.b;
    exact.b_scale = host_.b_scale;
    exact.a_scale = host_.a_scale;
    exact.bias = host_.bias;
    exact.dynamic_act_quant = host_.dynamic_act_quant;
    exact.b_scale_block_rows = host_.b_scale_block_rows;
    return [exact = std::move(exact)] { return reference::fp8_matmul_emulate_dequant_gemm(exact); };
  }

  Status create_dense_baseline(const Gpu& gpu, std::unique_ptr<DenseBaseline>* out) const override {
    const int64_t n = host_.n(), k = host_.k(), block_size = host_.block_size;
    return DenseBaseline::create(
        gpu, host_.a, n,
        [&](void* weight_bf16, cudaStream_t stream) {
          // Scalar kernel: it takes every K, and this runs once, untimed.
          return cuda::launch_fp8_dequant(DType::kBFloat16, b(0), b_scale(0), n, k, block_size,
                                          /*vec16=*/false, weight_bf16, stream);
        },
        out);
  }

  const uint8_t* b(int64_t copy) const { return weights.part(copy, 0); }
  const float* b_scale(int64_t copy) const {
    return reinterpret_cast<const float*>(weights.part(copy, 1));
  }
  // Args of case c on weight copy `copy`, writing y.
  Fp8MatMulArgs device_args(const Fp8CaseSpec& c, int64_t copy, const MutableTensorView& y) const {
    Fp8MatMulArgs args;
    args.a = TensorView{device_a.data(), c.dtype, Shape{c.m, c.k}};
    args.b = TensorView{b(copy), DType::kFloat8E4M3, Shape{c.n, c.k}};
    args.b_scale = TensorView{b_scale(copy), DType::kFloat32, Shape{c.n, host_.b_scale.shape[1]}};
    if (c.w8a8) args.a_scale = a_scale_.view();
    if (c.bias) args.bias = bias_.view();
    if (prepacked_) args.prepacked = TensorView{weights.part(copy, 2), DType::kFloat32, prepacked_->shape};
    args.y = y;
    return args;
  }

 private:
  reference::Fp8Case host_;
  std::optional<HostTensor> prepacked_;
  DeviceTensor a_scale_, bias_;  // GPU only
};

class Fp8Profiler : public OpProfiler {
 public:
  const char* name() const override { return "fp8"; }
  std::vector<FlagSpec> flags() const override {
    return {
        {"--act-quant", "MODE",
         "none (default), static (pass an a_scale: W8A8) or dynamic (a scale per row and K "
         "block, amax / 448)"},
        {"--w8a8", nullptr, "the same as --act-quant static"},
        {"--b-scale-block-rows", "R",
         "weight scales shared by aligned groups of R rows (the random scales made so), passed "
         "as b_scale_block_rows (default 1)"}};
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
  Fp8MatMulOptions options_;
  PlanOverride force_;
};

Status Fp8Profiler::make_cases(const Flags& flags, const Settings& settings, CaseList* out) {
  BQMM_RETURN_IF_ERROR(read_options(&options_, &force_));
  ActQuant act = ActQuant::kNone;
  BQMM_RETURN_IF_ERROR(parse_act_quant(flags.get("--act-quant", "none"), &act));
  if (flags.has("--w8a8")) {
    if (act == ActQuant::kDynamic)
      return Status(StatusCode::kInvalidArgument, "--w8a8: conflicts with --act-quant dynamic");
    act = ActQuant::kStatic;
  }
  int64_t scale_rows = 1;
  BQMM_RETURN_IF_ERROR(flags.get_int("--b-scale-block-rows", 1, int64_t{1} << 30, &scale_rows));

  out->clear();
  if (settings.suite == "smoke") {
    for (const char* flag : {"--w8a8", "--act-quant", "--b-scale-block-rows"})
      if (flags.has(flag))
        return Status(StatusCode::kInvalidArgument,
                      std::string(flag) + ": --suite smoke sets it per case itself");
    // --activation-dtype only picks smoke cases here: fp32 picks none of fp8's.
    for (const SmokeCase& s : kSmokeCases)
      if (!settings.dtype || *settings.dtype == s.dtype)
        out->push_back(make_case(s.dtype, s.m, s.n, s.k, s.block_size, s.bias, s.act));
    for (auto& c : *out) c->prepack = settings.prepack;
    return Status::Ok();
  }
  if (settings.dtype && *settings.dtype != DType::kFloat16 && *settings.dtype != DType::kBFloat16)
    return Status(StatusCode::kInvalidArgument,
                  std::string("--activation-dtype: --op fp8 takes fp16 or bf16 but got ") +
                      dtype_flag_name(*settings.dtype));
  return for_each_shape(settings, [&](DType dtype, int64_t m, int64_t n, int64_t k) {
    auto c = make_case(dtype, m, n, k, settings.block_size, settings.bias, act, scale_rows);
    c->prepack = settings.prepack;
    out->push_back(std::move(c));
  });
}

std::vector<NamedView> Fp8Profiler::call_tensors(const CaseSpec& c) const {
  const Fp8MatMulArgs args = placeholder_args(static_cast<const Fp8CaseSpec&>(c));
  std::vector<NamedView> t = {{"a", args.a}, {"b", args.b}, {"b_scale", args.b_scale}};
  if (args.a_scale) t.push_back({"a_scale", *args.a_scale});
  if (args.bias) t.push_back({"bias", *args.bias});
  if (args.prepacked) t.push_back({"prepacked", *args.prepacked});
  t.push_back({"y", TensorView{args.y.data, args.y.dtype, args.y.shape}});
  return t;
}

Status Fp8Profiler::check_case(const CaseSpec& c, const DeviceInfo& device, CaseCheck* out) {
  Fp8MatMulProblem problem;
  const auto& spec = static_cast<const Fp8CaseSpec&>(c);
  BQMM_RETURN_IF_ERROR(validate_fp8_matmul(placeholder_args(spec), spec.attrs(), &problem));
  Fp8MatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, device, options_, force_, &plan));
  out->plan = to_text(plan);
  out->workspace_bytes = plan.workspace_bytes;
  if (const char* why = fp8_w8a8_gemm_refusal(problem, device, force_);
      why != nullptr && problem.quantizes_activation())
    out->w8a8_gemm_refusal = why;
  const bool w8a8 = plan.path == Fp8Path::kW8a8Gemm || plan.path == Fp8Path::kW8a8Cublaslt;
  if (const char* why = fp8_w8a8_cublaslt_refusal(problem, device, force_);
      why != nullptr && w8a8 && plan.path != Fp8Path::kW8a8Cublaslt)
    out->w8a8_cublaslt_refusal = why;
  if (const char* why = fp8_mixed_gemm_refusal(problem, device, force_);
      why != nullptr && !w8a8 && problem.m >= kMixedMinRows)
    out->mixed_gemm_refusal = why;
  if (const char* why = fp8_fused_gemm_refusal(problem, device, force_);
      why != nullptr && !w8a8 && plan.path != Fp8Path::kMixedGemm)
    out->fused_gemm_refusal = why;
  if (const char* why = fp8_wgmma_refusal(problem, device, force_);
      why != nullptr && plan.path == Fp8Path::kFusedGemm)
    out->wgmma_refusal = why;
  if (const char* why = fp8_wgmma_tile_128_refusal(problem, device, force_);
      why != nullptr && plan.path == Fp8Path::kFusedGemm && plan.gemm.wgmma && problem.m > 64)
    out->wgmma_tile_128_refusal = why;
  return Status::Ok();
}

std::unique_ptr<GroupInputs> Fp8Profiler::make_inputs(const CaseSpec& spec, int64_t max_m,
                                                      uint64_t seed) {
  const auto& c = static_cast<const Fp8CaseSpec&>(spec);
  // Every non-NaN e4m3 code with equal weight: fast to draw for 200M-element weights,
  // and it exercises the whole e4m3 range.
  reference::Fp8Case host = reference::make_random_fp8_case(
      c.dtype, max_m, c.n, c.k, c.block_size, c.bias, c.w8a8, seed,
      reference::WeightInit::kAllCodes);
  host.dynamic_act_quant = c.dynamic;
  if (c.scale_rows != 1) reference::share_scale_rows(c.scale_rows, &host);
  return std::make_unique<Fp8Inputs>(std::move(host), c.prepack);
}

Status Fp8Profiler::plan_case(const CaseSpec& spec, const GroupInputs& inputs,
                              const MutableTensorView& y, const Gpu& gpu, PlannedCase* out) {
  const auto& c = static_cast<const Fp8CaseSpec&>(spec);
  const auto& in = static_cast<const Fp8Inputs&>(inputs);
  Fp8MatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_fp8_matmul(in.device_args(c, 0, y), c.attrs(), &problem));
  Fp8MatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, gpu.info(), options_, force_, &plan));
  out->path = fp8_path_name(plan.path);
  out->text = to_text(plan);
  out->workspace_bytes = plan.workspace_bytes;
  out->dequant_gemm = plan.path == Fp8Path::kDequantGemm;
  out->run = [&c, &in, y, &gpu, plan](int64_t copy, void* workspace, size_t workspace_bytes) {
    return run_fp8_matmul(gpu.handle(), plan, in.device_args(c, copy, y), workspace,
                          workspace_bytes, gpu.stream());
  };
  out->dequantize = [&c, &in, &gpu, vec16 = plan.dequant.vector](int64_t copy, void* dequantized) {
    return cuda::launch_fp8_dequant(c.dtype, in.b(copy), in.b_scale(copy), c.n, c.k, c.block_size,
                                    vec16, dequantized, gpu.stream());
  };
  return Status::Ok();
}

}  // namespace

std::unique_ptr<OpProfiler> make_fp8_profiler() { return std::make_unique<Fp8Profiler>(); }

}  // namespace bqmm::profile
