#include "common/nbits_runner.h"

#include "harness/accuracy.h"

namespace bqmm::testing {

using harness::DeviceBuffer;
using harness::DeviceTensor;
using harness::HostTensor;

Status NBitsDeviceCase::run(const Handle& handle, cudaStream_t stream) const {
  return run_nbits_matmul(handle, plan, args, workspace.data(), workspace.size(), stream);
}

Status upload_nbits_case(const reference::NBitsCase& c, NBitsDeviceCase* d, size_t a_offset,
                         size_t b_offset) {
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.a, &d->a, a_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b, &d->b, b_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.scales, &d->scales));
  if (c.zero_points) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.zero_points, &d->zero_points));
  if (c.g_idx) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.g_idx, &d->g_idx));
  if (c.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.bias, &d->bias));
  BQMM_RETURN_IF_ERROR(upload_poisoned(c.dtype(), c.y_shape(), &d->y));
  d->args.a = d->a.view();
  d->args.b = d->b.view();
  d->args.scales = d->scales.view();
  if (c.zero_points) d->args.zero_points = d->zero_points.view();
  if (c.g_idx) d->args.g_idx = d->g_idx.view();
  if (c.bias) d->args.bias = d->bias.view();
  d->args.y = d->y.mutable_view();
  return Status::Ok();
}

Status plan_nbits_case(const Handle& handle, const reference::NBitsCase& c,
                       const NBitsKnobs& knobs, NBitsDeviceCase* d) {
  NBitsMatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(d->args, c.attrs, &problem));
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, handle.device_info(), knobs.options, knobs.force, &d->plan));
  return DeviceBuffer::allocate(d->plan.workspace_bytes, &d->workspace);
}

Status run_nbits_on_device(const Handle& handle, const reference::NBitsCase& c,
                           const NBitsKnobs& knobs, NBitsRun* out, size_t a_offset,
                           size_t b_offset) {
  NBitsDeviceCase d;
  BQMM_RETURN_IF_ERROR(upload_nbits_case(c, &d, a_offset, b_offset));
  BQMM_RETURN_IF_ERROR(plan_nbits_case(handle, c, knobs, &d));
  BQMM_RETURN_IF_ERROR(run_on_fresh_stream([&](cudaStream_t s) { return d.run(handle, s); }));
  out->plan = d.plan;
  return d.y.download(&out->y);
}

::testing::AssertionResult matches_reference(const reference::NBitsCase& c, const HostTensor& y) {
  const std::vector<double> ref = reference::nbits_matmul_reference(c, 0, c.m());
  const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
  if (r.passed) return ::testing::AssertionSuccess() << r.to_string();
  return ::testing::AssertionFailure() << r.to_string();
}

reference::NBitsCaseSpec nbits_spec(DType dtype, int bits, int64_t m, int64_t n, int64_t k,
                                    int64_t block_size, NBitsZeroPoints zero_points, bool bias) {
  reference::NBitsCaseSpec s;
  s.dtype = dtype;
  s.bits = bits;
  s.m = m;
  s.n = n;
  s.k = k;
  s.block_size = block_size;
  s.zero_points = zero_points;
  s.bias = bias;
  return s;
}

cuda::NBitsGemvArgs nbits_gemv_args(const reference::NBitsCase& c, const NBitsDeviceCase& d) {
  cuda::NBitsGemvArgs g;
  g.dtype = c.dtype();
  g.bits = c.bits();
  g.a = d.a.data();
  g.b = static_cast<const uint8_t*>(d.b.data());
  g.scales = d.scales.data();
  g.zp_packed = c.zero_points ? static_cast<const uint8_t*>(d.zero_points.data()) : nullptr;
  g.bias = c.bias ? d.bias.data() : nullptr;
  g.y = d.y.data();
  g.m = c.m();
  g.n = c.n();
  g.k = c.k();
  g.block_size = c.block_size();
  return g;
}

}  // namespace bqmm::testing
