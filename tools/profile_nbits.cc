// bqmm-profile --op nbits: NBitsMatMul (MatMulNBits) through the public API exactly as
// users call it (Handle, validate, plan, run with a workspace of plan.workspace_bytes on
// a created stream), checked against the float64 reference.
//
// --nbits-algo all runs every case of M <= 8 once per GEMV K-loop algorithm, so the
// measurement behind the planner's default algorithm per block size is one command:
//   for bs in 16 32 64 128 256; do
//     bqmm-profile --op nbits --bits 4 --block-size $bs --m 1 --n 8192 --k 8192 --nbits-algo all
//   done
#include <chrono>
#include <cstdio>
#include <sstream>

#include "bqmm/nbits_matmul.h"
#include "core/workspace.h"
#include "cuda/cuda_check.h"
#include "cuda/launchers.h"
#include "profile.h"
#include "reference/nbits_reference.h"

namespace bqmm::profile {
namespace {

using harness::DeviceBuffer;
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
    {DType::kFloat16, 64, 320, 384, 128, 4, NBitsZeroPoints::kPacked, false, true},  // prefill
    {DType::kFloat32, 64, 256, 512, 32, 8, NBitsZeroPoints::kNone, false, true},     // prefill float32
};

NBitsMatMulProblem problem_of(const NBitsProfileCase& c) {
  NBitsMatMulProblem p;
  p.dtype = c.dtype;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.bits = c.bits;
  p.block_size = c.block_size;
  p.zero_points = c.zero_points;
  p.has_g_idx = c.g_idx;
  p.has_bias = c.bias;
  return p;
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
struct Group {
  reference::NBitsCase host;  // A with the group's largest M; each case uses a prefix
  // GPU only.
  DeviceTensor a, g_idx, bias;
  // Each copy: B, then scales at scale_offset, then zero points at zp_offset.
  harness::RotatingCopies weights;
  size_t scale_offset = 0, zp_offset = 0;
  std::unique_ptr<DenseBaseline> dense;
  // The dequantize kernel's time does not depend on M: timed once per group.
  std::optional<harness::TimingStats> dequant;
  // Last member, so destroyed first: its destructor waits for the worker threads that
  // still read `host`.
  std::unique_ptr<ReferenceRows> reference;
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
         "once per algorithm); default: the planner's choice (BQMM_NBITS_GEMV_ALGO)"},
    };
  }
  Status make_cases(const Flags& flags, const Settings& settings, CaseList* out) override;
  Status describe_plan(const CaseSpec& c, const DeviceInfo& device, std::string* out) override;
  Status load_group(const CaseSpec& c, int64_t max_m, uint64_t seed, const Gpu* gpu) override;
  Status run_case(const CaseSpec& c, const Gpu* gpu, const std::string& dump_dir,
                  CaseResult* result) override;

 private:
  Status upload_group(const Gpu& gpu, Group* g) const;
  Status run_gpu(const NBitsProfileCase& c, const Gpu& gpu, HostTensor* y, CaseResult* result);
  Status run_cpu(const NBitsProfileCase& c, HostTensor* y, CaseResult* result) const;
  NBitsMatMulOptions options_for(const NBitsProfileCase& c) const;
  // Args of case c on weight copy `copy` of the group, writing y.
  NBitsMatMulArgs device_args(const NBitsProfileCase& c, int64_t copy, const DeviceTensor& y) const;

  NBitsMatMulOptions options_;
  bool print_plan_ = false;
  std::unique_ptr<Group> group_;
};

Status NBitsProfiler::make_cases(const Flags& flags, const Settings& settings, CaseList* out) {
  BQMM_RETURN_IF_ERROR(nbits_matmul_options_from_env(&options_));
  print_plan_ = settings.print_plan;
  int64_t bits = 4;
  BQMM_RETURN_IF_ERROR(flags.get_int("--bits", 4, 8, &bits));
  if (bits != 4 && bits != 8)
    return Status(StatusCode::kInvalidArgument,
                  "--bits: expected 4 or 8 but got " + std::to_string(bits));
  NBitsZeroPoints zero_points = NBitsZeroPoints::kNone;
  BQMM_RETURN_IF_ERROR(parse_zero_points(flags.get("--zero-points", "none"), &zero_points));
  const bool g_idx = flags.has("--g-idx");
  std::vector<int> algos = {-1};
  const std::string algo_text = flags.get("--nbits-algo", "");
  if (algo_text == "all") {
    algos = {0, 1, 2};
  } else if (!algo_text.empty()) {
    int64_t algo = -1;
    BQMM_RETURN_IF_ERROR(flags.get_int("--nbits-algo", 0, 2, &algo));
    algos = {static_cast<int>(algo)};
  }

  const auto add = [&](DType dtype, int64_t m, int64_t n, int64_t k, int64_t block_size,
                       int case_bits, NBitsZeroPoints zp, bool case_g_idx, bool bias) {
    // A forced algorithm only matters to cases the GEMV can take.
    const bool gemv_candidate = m <= 8 && !case_g_idx && zp != NBitsZeroPoints::kTyped;
    for (int algo : algos) {
      if (algo >= 0 && !gemv_candidate && algo != algos.front()) continue;
      auto c = std::make_unique<NBitsProfileCase>();
      c->dtype = dtype;
      c->m = m;
      c->n = n;
      c->k = k;
      c->block_size = block_size;
      c->bias = bias;
      c->bits = case_bits;
      c->zero_points = zp;
      c->g_idx = case_g_idx;
      c->gemv_algo = gemv_candidate ? algo : -1;
      out->push_back(std::move(c));
    }
  };
  // Suites cover float16 and bfloat16 unless --activation-dtype picks one (float32 too).
  const auto wanted = [&](DType d) { return settings.dtype ? *settings.dtype == d : d != DType::kFloat32; };

  out->clear();
  if (settings.suite.empty()) {
    add(settings.dtype.value_or(DType::kFloat16), *settings.m, *settings.n, *settings.k,
        settings.block_size, static_cast<int>(bits), zero_points, g_idx, settings.bias);
  } else if (settings.suite == "smoke") {
    for (const SmokeCase& s : kSmokeCases)
      if (!settings.dtype || *settings.dtype == s.dtype)
        add(s.dtype, s.m, s.n, s.k, s.block_size, s.bits, s.zero_points, s.g_idx, s.bias);
  } else {
    std::vector<SuiteShape> shapes;
    BQMM_RETURN_IF_ERROR(suite_shapes(settings.suite, &shapes));
    for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
      if (!wanted(d)) continue;
      for (const SuiteShape& s : shapes)
        add(d, s.m, s.n, s.k, settings.block_size, static_cast<int>(bits), zero_points, g_idx,
            settings.bias);
    }
  }
  return Status::Ok();
}

NBitsMatMulOptions NBitsProfiler::options_for(const NBitsProfileCase& c) const {
  NBitsMatMulOptions o = options_;
  if (c.gemv_algo >= 0) o.gemv_algo = c.gemv_algo;
  return o;
}

Status NBitsProfiler::describe_plan(const CaseSpec& spec, const DeviceInfo& device, std::string* out) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  NBitsMatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem_of(c), device, options_for(c), &plan));
  std::ostringstream os;
  os << plan;
  *out = os.str();
  return Status::Ok();
}

Status NBitsProfiler::load_group(const CaseSpec& spec, int64_t max_m, uint64_t seed, const Gpu* gpu) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  group_.reset();  // the previous group's device memory goes before the next is allocated
  auto g = std::make_unique<Group>();
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
  g->host = reference::make_random_nbits_case(s, seed);
  const reference::NBitsCase* host = &g->host;
  g->reference = std::make_unique<ReferenceRows>(
      [host](int64_t row) { return reference::nbits_matmul_reference(*host, row, row + 1); },
      gpu != nullptr ? std::launch::async : std::launch::deferred);
  if (gpu != nullptr) BQMM_RETURN_IF_ERROR(upload_group(*gpu, g.get()));
  group_ = std::move(g);
  return Status::Ok();
}

Status NBitsProfiler::upload_group(const Gpu& gpu, Group* g) const {
  const reference::NBitsCase& h = g->host;
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(h.a, &g->a));
  if (h.g_idx) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*h.g_idx, &g->g_idx));
  if (h.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*h.bias, &g->bias));

  // One blob per copy, so that a run's B, scales and zero points come from the same copy;
  // each part starts 256-byte aligned like a separate allocation would.
  const size_t zp_bytes = h.zero_points ? h.zero_points->bytes.size() : 0;
  g->scale_offset = align_up(h.b.bytes.size(), kWorkspaceAlign);
  g->zp_offset = align_up(g->scale_offset + h.scales.bytes.size(), kWorkspaceAlign);
  const size_t copy_bytes = g->zp_offset + zp_bytes;
  BQMM_RETURN_IF_ERROR(
      harness::RotatingCopies::allocate(copy_bytes, gpu.copies_for(copy_bytes), &g->weights));
  auto* first = static_cast<uint8_t*>(g->weights.copy(0));
  BQMM_CUDA_RETURN(
      cudaMemcpyAsync(first, h.b.data(), h.b.bytes.size(), cudaMemcpyHostToDevice, gpu.stream()));
  BQMM_CUDA_RETURN(cudaMemcpyAsync(first + g->scale_offset, h.scales.data(), h.scales.bytes.size(),
                                   cudaMemcpyHostToDevice, gpu.stream()));
  if (zp_bytes > 0)
    BQMM_CUDA_RETURN(cudaMemcpyAsync(first + g->zp_offset, h.zero_points->data(), zp_bytes,
                                     cudaMemcpyHostToDevice, gpu.stream()));
  BQMM_RETURN_IF_ERROR(g->weights.replicate_first(gpu.stream()));

  // The dense baseline multiplies this weight dequantized to bfloat16: the dequant kernel
  // reads its scales (and typed zero points) in the output type, so those go up as
  // bfloat16 copies for this one untimed fill.
  const auto to_bf16 = [](const HostTensor& t) {
    HostTensor b = HostTensor::zeros(DType::kBFloat16, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) b.set(i, t.get(i));
    return b;
  };
  DeviceTensor scales_bf16, typed_zp_bf16;
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(to_bf16(h.scales), &scales_bf16));
  const bool typed = h.zero_point_kind() == NBitsZeroPoints::kTyped;
  if (typed) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(to_bf16(*h.zero_points), &typed_zp_bf16));
  cuda::NBitsDequantArgs d;
  d.dtype = DType::kBFloat16;
  d.bits = h.bits();
  d.b = first;
  d.scales = scales_bf16.data();
  if (h.zero_point_kind() == NBitsZeroPoints::kPacked) d.zp_packed = first + g->zp_offset;
  if (typed) d.zp_typed = typed_zp_bf16.data();
  d.g_idx = h.g_idx ? static_cast<const int32_t*>(g->g_idx.data()) : nullptr;
  d.rows = h.n();
  d.k = h.k();
  d.block_size = h.block_size();
  BQMM_RETURN_IF_ERROR(DenseBaseline::create(
      gpu, h.a, h.n(),
      [&](void* weight_bf16, cudaStream_t stream) {
        d.out = weight_bf16;
        // Scalar kernel: it takes every K, and this runs once, untimed.
        return cuda::launch_nbits_dequant(d, /*vec8=*/false, stream);
      },
      &g->dense));
  return gpu.synchronize();
}

NBitsMatMulArgs NBitsProfiler::device_args(const NBitsProfileCase& c, int64_t copy,
                                           const DeviceTensor& y) const {
  const Group& g = *group_;
  const reference::NBitsCase& h = g.host;
  const auto* weights = static_cast<const uint8_t*>(g.weights.copy(copy));
  NBitsMatMulArgs args;
  args.a = TensorView{g.a.data(), c.dtype, Shape{c.m, c.k}};
  args.b = TensorView{weights, DType::kUInt8, h.b.shape};
  args.scales = TensorView{weights + g.scale_offset, c.dtype, h.scales.shape};
  if (h.zero_points)
    args.zero_points = TensorView{weights + g.zp_offset, h.zero_points->dtype, h.zero_points->shape};
  if (h.g_idx) args.g_idx = g.g_idx.view();
  if (h.bias) args.bias = g.bias.view();
  args.y = y.mutable_view();
  return args;
}

Status NBitsProfiler::run_gpu(const NBitsProfileCase& c, const Gpu& gpu, HostTensor* y,
                              CaseResult* result) {
  Group& g = *group_;
  DeviceTensor y_dev;
  y_dev.dtype = c.dtype;
  y_dev.shape = Shape{c.m, c.n};
  BQMM_RETURN_IF_ERROR(
      DeviceBuffer::allocate(static_cast<size_t>(c.m * c.n) * dtype_size(c.dtype), &y_dev.buffer));

  const NBitsMatMulArgs args = device_args(c, 0, y_dev);
  NBitsMatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(args, g.host.attrs, &problem));
  NBitsMatMulPlan plan;
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, gpu.info(), options_for(c), &plan));
  if (print_plan_) {
    std::ostringstream os;
    os << plan;
    std::printf("  plan: %s\n", os.str().c_str());
  }
  result->path = nbits_path_name(plan.path);
  DeviceBuffer workspace;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(plan.workspace_bytes, &workspace));

  // Correctness: every element must be written, so Y starts as NaN.
  BQMM_RETURN_IF_ERROR(y_dev.poison());
  BQMM_RETURN_IF_ERROR(
      run_nbits_matmul(gpu.handle(), plan, args, workspace.data(), workspace.size(), gpu.stream()));
  BQMM_RETURN_IF_ERROR(gpu.synchronize());
  BQMM_RETURN_IF_ERROR(y_dev.download(y));

  // The plan made for copy 0 holds for every copy: they share the 256-byte alignment.
  harness::TimingStats t;
  BQMM_RETURN_IF_ERROR(gpu.time(
      [&](int iteration) {
        return run_nbits_matmul(gpu.handle(), plan, device_args(c, iteration, y_dev),
                                workspace.data(), workspace.size(), gpu.stream());
      },
      &t));
  result->kernel = t;
  result->weight_copies = g.weights.count();

  if (plan.path == NBitsPath::kDequantGemm && !g.dequant) {
    DeviceBuffer dequantized;
    BQMM_RETURN_IF_ERROR(
        DeviceBuffer::allocate(static_cast<size_t>(c.n * c.k) * dtype_size(c.dtype), &dequantized));
    BQMM_RETURN_IF_ERROR(gpu.time(
        [&](int iteration) {
          const NBitsMatMulArgs a = device_args(c, iteration, y_dev);
          cuda::NBitsDequantArgs d;
          d.dtype = c.dtype;
          d.bits = c.bits;
          d.b = static_cast<const uint8_t*>(a.b.data);
          d.scales = a.scales.data;
          if (c.zero_points == NBitsZeroPoints::kPacked)
            d.zp_packed = static_cast<const uint8_t*>(a.zero_points->data);
          if (c.zero_points == NBitsZeroPoints::kTyped) d.zp_typed = a.zero_points->data;
          d.g_idx = a.g_idx ? static_cast<const int32_t*>(a.g_idx->data) : nullptr;
          d.rows = c.n;
          d.k = c.k;
          d.block_size = c.block_size;
          d.out = dequantized.data();
          return cuda::launch_nbits_dequant(d, plan.dequant_vec8, gpu.stream());
        },
        &t));
    g.dequant = t;
  }
  if (plan.path == NBitsPath::kDequantGemm) result->dequant = g.dequant;
  return g.dense->time(gpu, c.m, &result->cublas);
}

Status NBitsProfiler::run_cpu(const NBitsProfileCase& c, HostTensor* y, CaseResult* result) const {
  reference::NBitsCase exact = group_->host;  // the case with exactly M rows of A
  exact.a = first_rows(group_->host.a, c.m);
  const auto start = std::chrono::steady_clock::now();
  *y = reference::nbits_matmul_emulate_dequant_gemm(exact);
  result->cpu_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  result->path = "cpu_emulated_dequant_gemm";
  return Status::Ok();
}

Status NBitsProfiler::run_case(const CaseSpec& spec, const Gpu* gpu, const std::string& dump_dir,
                               CaseResult* result) {
  const auto& c = static_cast<const NBitsProfileCase&>(spec);
  const reference::NBitsCase& h = group_->host;
  const std::vector<int64_t> rows = sampled_rows(c.m);
  group_->reference->request(rows);  // on worker threads while the GPU runs

  // What a decode kernel must stream: the packed weight, its scales and zero points.
  const double b_bytes = static_cast<double>(h.b.bytes.size());
  const double meta_bytes = static_cast<double>(h.scales.bytes.size()) +
                            (h.zero_points ? static_cast<double>(h.zero_points->bytes.size()) : 0.0);
  result->weight_bytes = b_bytes + meta_bytes;
  result->dequant_bytes =
      b_bytes + meta_bytes + static_cast<double>(c.n * c.k) * static_cast<double>(dtype_size(c.dtype));

  HostTensor y;
  BQMM_RETURN_IF_ERROR(gpu != nullptr ? run_gpu(c, *gpu, &y, result) : run_cpu(c, &y, result));
  result->accuracy = compare_rows(y, c.n, rows, group_->reference->get(rows));

  if (dump_dir.empty()) return Status::Ok();
  const HostTensor a = first_rows(h.a, c.m);
  std::vector<std::pair<std::string, const HostTensor*>> tensors = {
      {"a", &a}, {"b", &h.b}, {"scales", &h.scales}};
  if (h.zero_points) tensors.emplace_back("zero_points", &*h.zero_points);
  if (h.g_idx) tensors.emplace_back("g_idx", &*h.g_idx);
  if (h.bias) tensors.emplace_back("bias", &*h.bias);
  tensors.emplace_back("y", &y);
  return dump_tensors(dump_dir + "/" + case_dir_name(name(), c), tensors);
}

}  // namespace

std::unique_ptr<OpProfiler> make_nbits_profiler() { return std::make_unique<NBitsProfiler>(); }

}  // namespace bqmm::profile
