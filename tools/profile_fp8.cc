// bqmm-profile --op fp8: Fp8WeightMatMul (MatMulBlockQuantizedFp8Weight) through the
// public API exactly as users call it (Handle, validate, plan, run with a workspace of
// plan.workspace_bytes on a created stream), checked against the float64 reference.
#include <chrono>
#include <cstdio>
#include <sstream>

#include "bqmm/fp8_matmul.h"
#include "core/workspace.h"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"
#include "profile.h"
#include "reference/fp8_reference.h"

namespace bqmm::profile {
namespace {

using harness::DeviceBuffer;
using harness::DeviceTensor;

struct Fp8CaseSpec : CaseSpec {
  bool w8a8 = false;  // an a_scale input: the activation is QDQ'd to e4m3 first

  std::string variant() const override { return w8a8 ? "w8a8" : ""; }
  void write_json(JsonLine* line) const override { line->add_bool("w8a8", w8a8); }
};

std::unique_ptr<CaseSpec> make_case(DType dtype, int64_t m, int64_t n, int64_t k,
                                    int64_t block_size, bool bias, bool w8a8) {
  auto c = std::make_unique<Fp8CaseSpec>();
  c->dtype = dtype;
  c->m = m;
  c->n = n;
  c->k = k;
  c->block_size = block_size;
  c->bias = bias;
  c->w8a8 = w8a8;
  return c;
}

// Small enough for the CPU reference to take milliseconds, and between them reaching
// every path of the planner on an SM80+ GPU with both dtypes, bias and W8A8.
struct SmokeCase {
  DType dtype;
  int64_t m, n, k, block_size;
  bool bias, w8a8;
};
constexpr SmokeCase kSmokeCases[] = {
    {DType::kFloat16, 1, 512, 1024, 128, false, false},  // decode M = 1: gemv_mma
    {DType::kBFloat16, 8, 256, 512, 128, true, false},   // decode M = 8 with bias
    {DType::kFloat16, 8, 384, 256, 128, true, true},     // decode W8A8 with bias
    {DType::kBFloat16, 2, 320, 384, 64, false, true},    // block size 64
    {DType::kBFloat16, 5, 160, 96, 32, true, false},     // K % 64 != 0: gemv_fma
    {DType::kFloat16, 3, 200, 200, 128, false, false},   // K % 16 != 0, partial block: dequant_gemm
    {DType::kFloat16, 64, 320, 384, 128, true, false},   // prefill: dequant_gemm with bias
    {DType::kBFloat16, 64, 256, 512, 128, true, true},   // prefill W8A8: QDQ + dequant_gemm
};

Fp8MatMulProblem problem_of(const Fp8CaseSpec& c) {
  Fp8MatMulProblem p;
  p.dtype = c.dtype;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.block_size = c.block_size;
  p.has_bias = c.bias;
  p.has_a_scale = c.w8a8;
  return p;
}

// The inputs of the cases that differ only in M.
struct Group {
  reference::Fp8Case host;  // A with the group's largest M; each case uses a prefix
  // GPU only.
  DeviceTensor a, a_scale, bias;
  harness::RotatingCopies weights;  // each copy: B, then b_scale at scale_offset
  size_t scale_offset = 0;
  std::unique_ptr<DenseBaseline> dense;
  // The dequantize kernel's time does not depend on M: timed once per group.
  std::optional<harness::TimingStats> dequant;
  // Last member, so destroyed first: its destructor waits for the worker threads that
  // still read `host`.
  std::unique_ptr<ReferenceRows> reference;
};

class Fp8Profiler : public OpProfiler {
 public:
  const char* name() const override { return "fp8"; }
  std::vector<FlagSpec> flags() const override {
    return {
        {"--w8a8", nullptr, "pass an a_scale: the activation is quantized to e4m3 first (W8A8)"}};
  }
  Status make_cases(const Flags& flags, const Settings& settings, CaseList* out) override;
  Status describe_plan(const CaseSpec& c, const DeviceInfo& device, std::string* out) override;
  Status load_group(const CaseSpec& c, int64_t max_m, uint64_t seed, const Gpu* gpu) override;
  Status run_case(const CaseSpec& c, const Gpu* gpu, const std::string& dump_dir,
                  CaseResult* result) override;

 private:
  Status upload_group(const Gpu& gpu, Group* g) const;
  Status run_gpu(const Fp8CaseSpec& c, const Gpu& gpu, HostTensor* y, CaseResult* result);
  Status run_cpu(const Fp8CaseSpec& c, HostTensor* y, CaseResult* result) const;
  // Args of case c on weight copy `copy` of the group, writing y.
  Fp8MatMulArgs device_args(const Fp8CaseSpec& c, int64_t copy, const DeviceTensor& y) const;

  Fp8MatMulOptions options_;
  bool print_plan_ = false;
  std::unique_ptr<Group> group_;
};

Status Fp8Profiler::make_cases(const Flags& flags, const Settings& settings, CaseList* out) {
  BQMM_RETURN_IF_ERROR(fp8_matmul_options_from_env(&options_));
  print_plan_ = settings.print_plan;
  if (settings.dtype && *settings.dtype != DType::kFloat16 && *settings.dtype != DType::kBFloat16)
    return Status(StatusCode::kInvalidArgument,
                  std::string("--op fp8 takes --activation-dtype fp16 or bf16, not ") +
                      dtype_flag_name(*settings.dtype));
  const bool w8a8 = flags.has("--w8a8");
  // Suites cover both dtypes unless --activation-dtype picks one.
  const auto wanted = [&](DType d) { return !settings.dtype || *settings.dtype == d; };

  out->clear();
  if (settings.suite.empty()) {
    out->push_back(make_case(settings.dtype.value_or(DType::kFloat16), *settings.m, *settings.n,
                             *settings.k, settings.block_size, settings.bias, w8a8));
  } else if (settings.suite == "smoke") {
    if (w8a8) return Status(StatusCode::kInvalidArgument, "--suite smoke sets w8a8 itself");
    for (const SmokeCase& s : kSmokeCases)
      if (wanted(s.dtype))
        out->push_back(make_case(s.dtype, s.m, s.n, s.k, s.block_size, s.bias, s.w8a8));
  } else {
    std::vector<SuiteShape> shapes;
    BQMM_RETURN_IF_ERROR(suite_shapes(settings.suite, &shapes));
    for (DType d : {DType::kFloat16, DType::kBFloat16}) {
      if (!wanted(d)) continue;
      for (const SuiteShape& s : shapes)
        out->push_back(make_case(d, s.m, s.n, s.k, settings.block_size, settings.bias, w8a8));
    }
  }
  return Status::Ok();
}

Status Fp8Profiler::describe_plan(const CaseSpec& c, const DeviceInfo& device, std::string* out) {
  Fp8MatMulPlan plan;
  BQMM_RETURN_IF_ERROR(
      plan_fp8_matmul(problem_of(static_cast<const Fp8CaseSpec&>(c)), device, options_, &plan));
  std::ostringstream os;
  os << plan;
  *out = os.str();
  return Status::Ok();
}

Status Fp8Profiler::load_group(const CaseSpec& spec, int64_t max_m, uint64_t seed, const Gpu* gpu) {
  const auto& c = static_cast<const Fp8CaseSpec&>(spec);
  group_.reset();  // the previous group's device memory goes before the next is allocated
  auto g = std::make_unique<Group>();
  // Every non-NaN e4m3 code with equal weight: fast to draw for 200M-element weights,
  // and it exercises the whole e4m3 range.
  g->host = reference::make_random_fp8_case(c.dtype, max_m, c.n, c.k, c.block_size, c.bias, c.w8a8,
                                            seed, reference::WeightInit::kAllCodes);
  const reference::Fp8Case* host = &g->host;
  g->reference = std::make_unique<ReferenceRows>(
      [host](int64_t row) { return reference::fp8_matmul_reference(*host, row, row + 1); },
      gpu != nullptr ? std::launch::async : std::launch::deferred);
  if (gpu != nullptr) BQMM_RETURN_IF_ERROR(upload_group(*gpu, g.get()));
  group_ = std::move(g);
  return Status::Ok();
}

Status Fp8Profiler::upload_group(const Gpu& gpu, Group* g) const {
  const reference::Fp8Case& h = g->host;
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(h.a, &g->a));
  if (h.a_scale) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*h.a_scale, &g->a_scale));
  if (h.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*h.bias, &g->bias));

  // One blob per copy, so that a run's B and b_scale come from the same copy; b_scale
  // starts 256-byte aligned like a separate allocation would.
  g->scale_offset = align_up(h.b.bytes.size(), kWorkspaceAlign);
  const size_t copy_bytes = g->scale_offset + h.b_scale.bytes.size();
  BQMM_RETURN_IF_ERROR(
      harness::RotatingCopies::allocate(copy_bytes, gpu.copies_for(copy_bytes), &g->weights));
  auto* first = static_cast<uint8_t*>(g->weights.copy(0));
  BQMM_CUDA_RETURN(
      cudaMemcpyAsync(first, h.b.data(), h.b.bytes.size(), cudaMemcpyHostToDevice, gpu.stream()));
  BQMM_CUDA_RETURN(cudaMemcpyAsync(first + g->scale_offset, h.b_scale.data(),
                                   h.b_scale.bytes.size(), cudaMemcpyHostToDevice, gpu.stream()));
  BQMM_RETURN_IF_ERROR(g->weights.replicate_first(gpu.stream()));

  const int64_t n = h.n(), k = h.k(), block_size = h.block_size;
  const auto* scale = reinterpret_cast<const float*>(first + g->scale_offset);
  BQMM_RETURN_IF_ERROR(DenseBaseline::create(
      gpu, h.a, n,
      [&](void* weight_bf16, cudaStream_t stream) {
        // Scalar kernel: it takes every K, and this runs once, untimed.
        return cuda::launch_fp8_dequant(DType::kBFloat16, first, scale, n, k, block_size,
                                        /*vec16=*/false, weight_bf16, stream);
      },
      &g->dense));
  return gpu.synchronize();
}

Fp8MatMulArgs Fp8Profiler::device_args(const Fp8CaseSpec& c, int64_t copy,
                                       const DeviceTensor& y) const {
  const Group& g = *group_;
  const auto* weights = static_cast<const uint8_t*>(g.weights.copy(copy));
  Fp8MatMulArgs args;
  args.a = TensorView{g.a.data(), c.dtype, Shape{c.m, c.k}};
  args.b = TensorView{weights, DType::kFloat8E4M3, Shape{c.n, c.k}};
  args.b_scale =
      TensorView{weights + g.scale_offset, DType::kFloat32, Shape{c.n, g.host.b_scale.shape[1]}};
  if (c.w8a8) args.a_scale = g.a_scale.view();
  if (c.bias) args.bias = g.bias.view();
  args.y = y.mutable_view();
  return args;
}

Status Fp8Profiler::run_gpu(const Fp8CaseSpec& c, const Gpu& gpu, HostTensor* y,
                            CaseResult* result) {
  Group& g = *group_;
  DeviceTensor y_dev;
  y_dev.dtype = c.dtype;
  y_dev.shape = Shape{c.m, c.n};
  BQMM_RETURN_IF_ERROR(
      DeviceBuffer::allocate(static_cast<size_t>(c.m * c.n) * dtype_size(c.dtype), &y_dev.buffer));

  const Fp8MatMulArgs args = device_args(c, 0, y_dev);
  Fp8MatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_fp8_matmul(args, Fp8MatMulAttrs{c.block_size}, &problem));
  Fp8MatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, gpu.info(), options_, &plan));
  if (print_plan_) {
    std::ostringstream os;
    os << plan;
    std::printf("  plan: %s\n", os.str().c_str());
  }
  result->path = fp8_path_name(plan.path);
  DeviceBuffer workspace;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(plan.workspace_bytes, &workspace));

  // Correctness: every element must be written, so Y starts as NaN.
  BQMM_RETURN_IF_ERROR(y_dev.poison());
  BQMM_RETURN_IF_ERROR(
      run_fp8_matmul(gpu.handle(), plan, args, workspace.data(), workspace.size(), gpu.stream()));
  BQMM_RETURN_IF_ERROR(gpu.synchronize());
  BQMM_RETURN_IF_ERROR(y_dev.download(y));

  // The plan made for copy 0 holds for every copy: they share the 256-byte alignment.
  harness::TimingStats t;
  BQMM_RETURN_IF_ERROR(gpu.time(
      [&](int iteration) {
        return run_fp8_matmul(gpu.handle(), plan, device_args(c, iteration, y_dev),
                              workspace.data(), workspace.size(), gpu.stream());
      },
      &t));
  result->kernel = t;
  result->weight_copies = g.weights.count();

  if (plan.path == Fp8Path::kDequantGemm && !g.dequant) {
    DeviceBuffer dequantized;
    BQMM_RETURN_IF_ERROR(
        DeviceBuffer::allocate(static_cast<size_t>(c.n * c.k) * dtype_size(c.dtype), &dequantized));
    BQMM_RETURN_IF_ERROR(gpu.time(
        [&](int iteration) {
          const auto* weights = static_cast<const uint8_t*>(g.weights.copy(iteration));
          return cuda::launch_fp8_dequant(
              c.dtype, weights, reinterpret_cast<const float*>(weights + g.scale_offset), c.n, c.k,
              c.block_size, plan.dequant_vec16, dequantized.data(), gpu.stream());
        },
        &t));
    g.dequant = t;
  }
  if (plan.path == Fp8Path::kDequantGemm) result->dequant = g.dequant;
  return g.dense->time(gpu, c.m, &result->cublas);
}

Status Fp8Profiler::run_cpu(const Fp8CaseSpec& c, HostTensor* y, CaseResult* result) const {
  const reference::Fp8Case& h = group_->host;
  reference::Fp8Case exact;  // the case with exactly M rows of A
  exact.block_size = h.block_size;
  exact.a = first_rows(h.a, c.m);
  exact.b = h.b;
  exact.b_scale = h.b_scale;
  exact.a_scale = h.a_scale;
  exact.bias = h.bias;
  const auto start = std::chrono::steady_clock::now();
  *y = reference::fp8_matmul_emulate_dequant_gemm(exact);
  result->cpu_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  result->path = "cpu_emulated_dequant_gemm";
  return Status::Ok();
}

Status Fp8Profiler::run_case(const CaseSpec& spec, const Gpu* gpu, const std::string& dump_dir,
                             CaseResult* result) {
  const auto& c = static_cast<const Fp8CaseSpec&>(spec);
  const reference::Fp8Case& h = group_->host;
  const std::vector<int64_t> rows = sampled_rows(c.m);
  group_->reference->request(rows);  // on worker threads while the GPU runs

  const double b_bytes = static_cast<double>(h.b.bytes.size());
  const double scale_bytes = static_cast<double>(h.b_scale.bytes.size());
  result->weight_bytes = b_bytes + scale_bytes;
  result->dequant_bytes = b_bytes + b_bytes * dtype_size(c.dtype) + scale_bytes;

  HostTensor y;
  BQMM_RETURN_IF_ERROR(gpu != nullptr ? run_gpu(c, *gpu, &y, result) : run_cpu(c, &y, result));
  result->accuracy = compare_rows(y, c.n, rows, group_->reference->get(rows));

  if (dump_dir.empty()) return Status::Ok();
  const HostTensor a = first_rows(h.a, c.m);
  std::vector<std::pair<std::string, const HostTensor*>> tensors = {
      {"a", &a}, {"b", &h.b}, {"b_scale", &h.b_scale}};
  if (h.a_scale) tensors.emplace_back("a_scale", &*h.a_scale);
  if (h.bias) tensors.emplace_back("bias", &*h.bias);
  tensors.emplace_back("y", &y);
  return dump_tensors(dump_dir + "/" + case_dir_name(name(), c), tensors);
}

}  // namespace

std::unique_ptr<OpProfiler> make_fp8_profiler() { return std::make_unique<Fp8Profiler>(); }

}  // namespace bqmm::profile
