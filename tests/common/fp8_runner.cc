#include "common/fp8_runner.h"

#include "harness/accuracy.h"

namespace bqmm::testing {

using harness::DeviceBuffer;
using harness::DeviceTensor;
using harness::HostTensor;

Status Fp8DeviceCase::run(const Handle& handle, cudaStream_t stream) const {
  return run_fp8_matmul(handle, plan, args, workspace.data(), workspace.size(), stream);
}

Status upload_fp8_case(const reference::Fp8Case& c, Fp8DeviceCase* d, size_t b_offset) {
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.a, &d->a));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b, &d->b, b_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b_scale, &d->b_scale));
  if (c.a_scale) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.a_scale, &d->a_scale));
  if (c.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.bias, &d->bias));
  BQMM_RETURN_IF_ERROR(upload_poisoned(c.dtype(), c.y_shape(), &d->y));
  d->args.a = d->a.view();
  d->args.b = d->b.view();
  d->args.b_scale = d->b_scale.view();
  if (c.a_scale) d->args.a_scale = d->a_scale.view();
  if (c.bias) d->args.bias = d->bias.view();
  d->args.y = d->y.mutable_view();
  return Status::Ok();
}

Status plan_fp8_case(const Handle& handle, const reference::Fp8Case& c,
                     const Fp8Knobs& knobs, Fp8DeviceCase* d) {
  Fp8MatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_fp8_matmul(d->args, c.attrs(), &problem));
  BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, handle.device_info(), knobs.options, knobs.force, &d->plan));
  return DeviceBuffer::allocate(d->plan.workspace_bytes, &d->workspace);
}

Status run_fp8_on_device(const Handle& handle, const reference::Fp8Case& c,
                         const Fp8Knobs& knobs, Fp8Run* out, size_t b_offset) {
  Fp8DeviceCase d;
  BQMM_RETURN_IF_ERROR(upload_fp8_case(c, &d, b_offset));
  BQMM_RETURN_IF_ERROR(plan_fp8_case(handle, c, knobs, &d));
  BQMM_RETURN_IF_ERROR(run_on_fresh_stream([&](cudaStream_t s) { return d.run(handle, s); }));
  out->plan = d.plan;
  return d.y.download(&out->y);
}

::testing::AssertionResult matches_reference(const reference::Fp8Case& c, const HostTensor& y) {
  const std::vector<double> ref = reference::fp8_matmul_reference(c, 0, c.m());
  const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
  if (r.passed) return ::testing::AssertionSuccess() << r.to_string();
  return ::testing::AssertionFailure() << r.to_string();
}

cuda::Fp8KernelArgs fp8_kernel_args(const reference::Fp8Case& c, const Fp8DeviceCase& d) {
  cuda::Fp8KernelArgs g;
  g.dtype = c.dtype();
  g.a = d.a.data();
  g.b = static_cast<const uint8_t*>(d.b.data());
  g.b_scale = static_cast<const float*>(d.b_scale.data());
  g.a_scale = c.a_scale ? static_cast<const float*>(d.a_scale.data()) : nullptr;
  g.bias = c.bias ? d.bias.data() : nullptr;
  g.y = d.y.data();
  g.m = c.m();
  g.n = c.n();
  g.k = c.k();
  g.block_size = c.block_size;
  return g;
}

}  // namespace bqmm::testing
