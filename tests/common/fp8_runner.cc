#include "common/fp8_runner.h"

#include <cuda_runtime_api.h>

#include <optional>

#include "harness/accuracy.h"
#include "harness/device_buffer.h"

namespace bqmm::testing {

using harness::DeviceBuffer;
using harness::DeviceTensor;
using harness::HostTensor;

Status run_fp8_on_device(const Handle& handle, const reference::Fp8Case& c,
                         const Fp8MatMulOptions& options, Fp8Run* out, size_t b_offset) {
  DeviceTensor a, b, b_scale, a_scale, bias, y;
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.a, &a));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b, &b, b_offset));
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(c.b_scale, &b_scale));
  if (c.a_scale) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.a_scale, &a_scale));
  if (c.bias) BQMM_RETURN_IF_ERROR(DeviceTensor::upload(*c.bias, &bias));
  HostTensor y_host = HostTensor::zeros(c.dtype(), c.y_shape());
  BQMM_RETURN_IF_ERROR(DeviceTensor::upload(y_host, &y));
  BQMM_RETURN_IF_ERROR(y.poison());

  Fp8MatMulArgs args;
  args.a = a.view();
  args.b = b.view();
  args.b_scale = b_scale.view();
  if (c.a_scale) args.a_scale = a_scale.view();
  if (c.bias) args.bias = bias.view();
  args.y = y.mutable_view();

  Fp8MatMulProblem problem;
  BQMM_RETURN_IF_ERROR(validate_fp8_matmul(args, c.attrs(), &problem));
  BQMM_RETURN_IF_ERROR(plan_fp8_matmul(problem, handle.device_info(), options, &out->plan));
  DeviceBuffer workspace;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(out->plan.workspace_bytes, &workspace));
  BQMM_RETURN_IF_ERROR(run_on_fresh_stream([&](cudaStream_t stream) {
    return run_fp8_matmul(handle, out->plan, args, workspace.data(), workspace.size(), stream);
  }));
  BQMM_RETURN_IF_ERROR(y.download(&y_host));
  out->y = std::move(y_host);
  return Status::Ok();
}

::testing::AssertionResult matches_reference(const reference::Fp8Case& c, const HostTensor& y) {
  const std::vector<double> ref = reference::fp8_matmul_reference(c, 0, c.m());
  const harness::AccuracyReport r = harness::compare(y, c.n(), 0, ref);
  if (r.passed) return ::testing::AssertionSuccess() << r.to_string();
  return ::testing::AssertionFailure() << r.to_string();
}

}  // namespace bqmm::testing
