#include "common/nbits_runner.h"

#include <cuda_runtime_api.h>

#include "harness/accuracy.h"
#include "harness/device_buffer.h"

namespace bqmm::testing {

using harness::DeviceBuffer;
using harness::DeviceTensor;
using harness::HostTensor;

Status run_nbits_on_device(const Handle& handle, const reference::NBitsCase& c,
                           const NBitsMatMulOptions& options, NBitsRun* out, size_t a_offset,
                           size_t b_offset) {
  DeviceTensor a, b, scales, zero_points, g_idx, bias, y;
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.a, &a, a_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b, &b, b_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.scales, &scales));
  if (c.zero_points) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.zero_points, &zero_points));
  if (c.g_idx) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.g_idx, &g_idx));
  if (c.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.bias, &bias));
  HostTensor y_host = HostTensor::zeros(c.dtype(), c.y_shape());
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(y_host, &y));
  BQMM_RETURN_IF_ERROR(y.poison());

  NBitsMatMulArgs args;
  args.a = a.view();
  args.b = b.view();
  args.scales = scales.view();
  if (c.zero_points) args.zero_points = zero_points.view();
  if (c.g_idx) args.g_idx = g_idx.view();
  if (c.bias) args.bias = bias.view();
  args.y = y.mutable_view();

  NBitsMatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_nbits_matmul(args, c.attrs, &problem));
  BQMM_RETURN_IF_ERROR(plan_nbits_matmul(problem, handle.device_info(), options, &out->plan));
  DeviceBuffer workspace;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(out->plan.workspace_bytes, &workspace));
  BQMM_RETURN_IF_ERROR(run_on_fresh_stream([&](cudaStream_t stream) {
    return run_nbits_matmul(handle, out->plan, args, workspace.data(), workspace.size(), stream);
  }));
  BQMM_RETURN_IF_ERROR(y.download(&y_host));
  out->y = std::move(y_host);
  return Status::Ok();
}

::testing::AssertionResult matches_reference(const reference::NBitsCase& c, const HostTensor& y) {
  const std::vector<double> ref = reference::nbits_matmul_reference(c, 0, c.m());
  const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
  if (r.passed) return ::testing::AssertionSuccess() << r.to_string();
  return ::testing::AssertionFailure() << r.to_string();
}

}  // namespace bqmm::testing
