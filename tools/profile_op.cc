// bqmm-profile: a case of a weight-quantized matmul from its group's inputs to its
// result, the same for every operator: the device copies and the dense baseline, the
// check on NaN-poisoned output, the timed runs over rotated weight copies, the dequantize
// kernel's time, the CPU emulation and the dumps. The operator plugs in through
// OpProfiler's make_inputs and plan_case.
#include <chrono>
#include <cstdio>
#include <new>

#include "profile.h"

namespace bqmm::profile {

using harness::DeviceBuffer;
using harness::DeviceTensor;

// The inputs of the cases that differ only in M.
struct OpProfiler::Group {
  std::unique_ptr<GroupInputs> inputs;
  std::unique_ptr<DenseBaseline> dense;  // GPU only
  // The dequantize kernel's time does not depend on M: timed once per group; so is the
  // floor's (a pure read of the weight bytes).
  std::optional<harness::TimingStats> dequant;
  std::optional<harness::TimingStats> floor;
  // Last member, so destroyed first: its destructor waits for the worker threads that
  // still read `inputs`.
  std::unique_ptr<ReferenceRows> reference;
};

OpProfiler::OpProfiler() = default;
OpProfiler::~OpProfiler() = default;

Status OpProfiler::host_memory_error(const CaseSpec& c, const std::string& what) const {
  return Status(StatusCode::kInvalidArgument,
                "out of host memory (std::bad_alloc) " + what + " of " + case_label(name(), c) +
                    ": its tensors take " + tensor_bytes_text(call_tensors(c)));
}

Status OpProfiler::load_group(const CaseSpec& c, int64_t max_m, uint64_t seed, const Gpu* gpu) {
  group_.reset();  // the previous group's device memory goes before the next is allocated
  auto g = std::make_unique<Group>();
  try {
    g->inputs = make_inputs(c, max_m, seed);
  } catch (const std::bad_alloc&) {
    return host_memory_error(c, "making the inputs");
  }
  const GroupInputs* inputs = g->inputs.get();
  g->reference = std::make_unique<ReferenceRows>(
      [inputs](int64_t row) { return inputs->reference_row(row); },
      gpu != nullptr ? std::launch::async : std::launch::deferred);
  if (gpu != nullptr) {
    GroupInputs& in = *g->inputs;
    BQMM_RETURN_IF_ERROR(DeviceTensor::upload(in.a(), &in.device_a));
    for (const OtherInput& other : in.others())
      BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*other.host, other.device));
    BQMM_RETURN_IF_ERROR(WeightCopies::upload(*gpu, in.weight(), &in.weights));
    BQMM_RETURN_IF_ERROR(in.create_dense_baseline(*gpu, &g->dense));
    BQMM_RETURN_IF_ERROR(gpu->synchronize());
  }
  group_ = std::move(g);
  return Status::Ok();
}

Status OpProfiler::run_gpu(const CaseSpec& c, const Gpu& gpu, bool print_plan, HostTensor* y,
                           CaseResult* result) {
  Group& g = *group_;
  DeviceTensor y_dev;
  y_dev.dtype = c.dtype;
  y_dev.shape = Shape{c.m, c.n};
  BQMM_RETURN_IF_ERROR(
      DeviceBuffer::allocate(static_cast<size_t>(c.m * c.n) * dtype_size(c.dtype), &y_dev.buffer));

  PlannedCase plan;
  BQMM_RETURN_IF_ERROR(plan_case(c, *g.inputs, y_dev.mutable_view(), gpu, &plan));
  if (print_plan) std::printf("  plan: %s\n", plan.text.c_str());
  result->path = plan.path;
  result->plan = plan.text;
  DeviceBuffer workspace;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(plan.workspace_bytes, &workspace));

  // Correctness: every element must be written, so Y starts as NaN.
  BQMM_RETURN_IF_ERROR(y_dev.poison());
  BQMM_RETURN_IF_ERROR(plan.run(0, workspace.data(), workspace.size()));
  BQMM_RETURN_IF_ERROR(gpu.synchronize());
  BQMM_RETURN_IF_ERROR(y_dev.download(y));

  harness::TimingStats t;
  BQMM_RETURN_IF_ERROR(gpu.time(
      [&](int iteration) { return plan.run(iteration, workspace.data(), workspace.size()); },
      &t));
  result->kernel = t;
  result->weight_copies = g.inputs->weights.count();

  if (plan.dequant_gemm && !g.dequant) {
    DeviceBuffer dequantized;
    BQMM_RETURN_IF_ERROR(
        DeviceBuffer::allocate(static_cast<size_t>(c.n * c.k) * dtype_size(c.dtype), &dequantized));
    BQMM_RETURN_IF_ERROR(gpu.time(
        [&](int iteration) { return plan.dequantize(iteration, dequantized.data()); }, &t));
    g.dequant = t;
  }
  if (plan.dequant_gemm) result->dequant = g.dequant;
  if (!g.floor) {
    DeviceBuffer sink;
    BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(sizeof(uint32_t), &sink));
    const WeightCopies& w = g.inputs->weights;
    BQMM_RETURN_IF_ERROR(gpu.time(
        [&](int iteration) {
          return launch_stream_read(w.blob(iteration), w.blob_bytes(), gpu.info().num_sms,
                                    static_cast<uint32_t*>(sink.data()), gpu.stream());
        },
        &t));
    g.floor = t;
  }
  result->floor = g.floor;
  return g.dense->time(gpu, c.m, &result->cublas);
}

Status OpProfiler::run_case(const CaseSpec& c, const Gpu* gpu, const Settings& settings,
                            CaseResult* result) {
  try {
    return run_loaded_case(c, gpu, settings, result);
  } catch (const std::bad_alloc&) {
    return host_memory_error(c, "running the case");
  }
}

Status OpProfiler::run_loaded_case(const CaseSpec& c, const Gpu* gpu, const Settings& settings,
                                   CaseResult* result) {
  Group& g = *group_;
  const std::vector<int64_t> rows = sampled_rows(c.m);
  g.reference->request(rows);  // on worker threads while the GPU runs

  // What a decode kernel must stream: the quantized weight with its scales (and zero
  // points). The dequantize kernel reads as much and writes T [N, K].
  const std::vector<NamedTensor> weight = g.inputs->weight();
  double weight_bytes = 0;
  for (const NamedTensor& part : weight)
    if (part.second != nullptr) weight_bytes += static_cast<double>(part.second->bytes.size());
  result->weight_bytes = weight_bytes;
  result->dequant_bytes =
      weight_bytes + static_cast<double>(c.n * c.k) * static_cast<double>(dtype_size(c.dtype));

  HostTensor y;
  if (gpu != nullptr) {
    BQMM_RETURN_IF_ERROR(run_gpu(c, *gpu, settings.print_plan, &y, result));
  } else {
    const std::function<HostTensor()> emulate = g.inputs->emulation(c.m);
    const auto start = std::chrono::steady_clock::now();
    y = emulate();
    result->cpu_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    result->path = "cpu_emulated_dequant_gemm";
  }
  result->accuracy = compare_rows(y, c.n, rows, g.reference->get(rows));

  if (settings.dump_dir.empty()) return Status::Ok();
  const HostTensor a = first_rows(g.inputs->a(), c.m);
  std::vector<NamedTensor> tensors = {{"a", &a}};
  for (const NamedTensor& part : weight)
    if (part.second != nullptr) tensors.push_back(part);
  for (const OtherInput& other : g.inputs->others()) tensors.emplace_back(other.name, other.host);
  tensors.emplace_back("y", &y);
  return dump_tensors(settings.dump_dir + "/" + case_dir_name(name(), c), tensors);
}

}  // namespace bqmm::profile
