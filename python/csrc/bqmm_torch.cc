// The PyTorch binding of bqmm: the ops bqmm::fp8_matmul and bqmm::nbits_matmul, and
// bqmm::fp8_prepack / bqmm::nbits_prepack (the weight's prepacked scales they may take).
//
// Thin by design: torch tensors -> bqmm::TensorView, validate, plan (cached per problem,
// device and pointer alignment), workspace from torch's caching allocator, run on torch's
// current stream. Never synchronizes. A non-OK Status becomes a Python exception whose
// message is the Status's ("bqmm: InvalidArgument: b_scale: expected ..."):
//   kInvalidArgument, kWorkspaceTooSmall -> ValueError
//   kNotSupported                        -> NotImplementedError
//   kCudaError, kCublasError, kInternal  -> RuntimeError
// Only the public API (include/bqmm/) is used.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <bqmm/bqmm.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bqmm_torch {
namespace {

[[noreturn]] void throw_status(const bqmm::Status& s) {
  const std::string msg = "bqmm: " + s.to_string();
  switch (s.code()) {
    case bqmm::StatusCode::kInvalidArgument:
    case bqmm::StatusCode::kWorkspaceTooSmall:
      C10_THROW_ERROR(ValueError, msg);
    case bqmm::StatusCode::kNotSupported:
      C10_THROW_ERROR(NotImplementedError, msg);
    default:
      C10_THROW_ERROR(Error, msg);
  }
}

inline void check(const bqmm::Status& s) {
  if (!s.ok()) throw_status(s);
}

bqmm::DType to_bqmm_dtype(const at::Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return bqmm::DType::kFloat32;
    case at::kHalf: return bqmm::DType::kFloat16;
    case at::kBFloat16: return bqmm::DType::kBFloat16;
    case at::kFloat8_e4m3fn: return bqmm::DType::kFloat8E4M3;
    case at::kByte: return bqmm::DType::kUInt8;
    case at::kInt: return bqmm::DType::kInt32;
    default: break;
  }
  C10_THROW_ERROR(ValueError, c10::str("bqmm: InvalidArgument: ", name, ": dtype ",
                                       t.scalar_type(),
                                       " is not one of bqmm's (float32, float16, bfloat16, "
                                       "float8_e4m3fn, uint8, int32)"));
}

bqmm::Shape to_shape(at::IntArrayRef sizes, const char* name) {
  TORCH_CHECK_VALUE(sizes.size() <= static_cast<size_t>(bqmm::Shape::kMaxRank),
                    "bqmm: InvalidArgument: ", name, ": rank ", sizes.size(),
                    " exceeds bqmm's maximum of ", bqmm::Shape::kMaxRank);
  return bqmm::Shape::from(sizes.data(), static_cast<int>(sizes.size()));
}

// Tensors are views without strides: every input must be contiguous (a no-op when it is).
// The device is checked here, since bqmm cannot see it.
at::Tensor prepare(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.device() == device, "bqmm: InvalidArgument: ", name,
                    ": expected a tensor on ", device, " (A's device) but got one on ",
                    t.device());
  return t.contiguous();
}

bqmm::TensorView view(const at::Tensor& t, const char* name) {
  return bqmm::TensorView{t.data_ptr(), to_bqmm_dtype(t, name), to_shape(t.sizes(), name)};
}

// ---------------------------------------------------------------- per-device state

// One Handle (cuBLAS handle) per device, created on first use, never destroyed (the
// process may exit with CUDA already torn down). A mutex per device serializes run_*,
// since a Handle is not thread-safe across concurrent calls.
struct DeviceState {
  std::unique_ptr<bqmm::Handle> handle;
  std::mutex mu;
};

DeviceState& device_state(int device) {
  static std::mutex mu;
  static std::vector<DeviceState*> states;  // leaked on purpose
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(states.size())) states.resize(device + 1, nullptr);
  if (states[device] == nullptr) {
    auto* st = new DeviceState();
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));  // create() sets it
    check(bqmm::Handle::create(device, &st->handle));
    states[device] = st;
  }
  return *states[device];
}

// ---------------------------------------------------------------- plan caches

// A plan depends on the problem (shapes, dtype, attributes, optional inputs, pointer
// alignment) and the device: the key is those fields, spelled out.
using Key = std::array<int64_t, 14>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (int64_t v : k) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

Key key_of(int device, const bqmm::Fp8MatMulProblem& p) {
  return Key{device, static_cast<int64_t>(p.dtype), p.m, p.n, p.k, p.block_size,
             p.has_bias, p.has_a_scale, p.alignment, p.dynamic_act_quant,
             p.b_scale_block_rows, p.has_prepacked, 0, 0};
}
Key key_of(int device, const bqmm::NBitsMatMulProblem& p) {
  return Key{device, static_cast<int64_t>(p.dtype), p.m, p.n, p.k, p.block_size,
             p.has_bias, p.bits, static_cast<int64_t>(p.zero_points), p.has_g_idx,
             p.alignment, p.scale_alignment, 1, p.has_prepacked};
}

template <typename Problem, typename Plan, typename PlanFn>
const Plan& cached_plan(int device, const Problem& problem, PlanFn&& make_plan) {
  static std::mutex mu;
  static std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> cache;
  const Key key = key_of(device, problem);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  check(make_plan(plan.get()));
  return *cache.emplace(key, std::move(plan)).first->second;  // stable: owned by pointer
}

at::Tensor workspace_for(size_t bytes, const at::Device& device) {
  // The caching allocator's blocks are at least 512-byte aligned (bqmm needs 256).
  return at::empty({static_cast<int64_t>(bytes)},
                   at::TensorOptions().dtype(at::kByte).device(device));
}

// Y of [..., n] like A (its dtype and leading dims), and its view for the operator.
at::Tensor make_output(const at::Tensor& a, int64_t n, const bqmm::Shape& y_shape,
                       bqmm::DType dtype, bqmm::MutableTensorView* view) {
  std::vector<int64_t> y_sizes(a.sizes().begin(), a.sizes().end());
  if (y_sizes.empty()) y_sizes.push_back(n); else y_sizes.back() = n;
  at::Tensor y = at::empty(y_sizes, a.options());
  *view = bqmm::MutableTensorView{y.data_ptr(), dtype, y_shape};
  return y;
}

// Both ops' tail: the problem's plan (made once per device and problem by `plan_fn(device
// info, &plan)`, the operator's options from the environment), workspace from torch's
// caching allocator, and `run_fn(handle, plan, workspace, stream)` on torch's current stream.
template <typename Problem, typename Plan, typename PlanFn, typename RunFn>
void plan_and_run(const at::Device& device, const Problem& problem, PlanFn&& plan_fn,
                  RunFn&& run_fn) {
  const int dev = device.index();
  DeviceState& st = device_state(dev);
  const Plan& plan = cached_plan<Problem, Plan>(
      dev, problem, [&](Plan* p) { return plan_fn(st.handle->device_info(), p); });
  at::Tensor ws;
  if (plan.workspace_bytes > 0) ws = workspace_for(plan.workspace_bytes, device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(dev).stream();
  std::lock_guard<std::mutex> lock(st.mu);
  check(run_fn(*st.handle, plan, ws.defined() ? ws.data_ptr() : nullptr, stream));
}

// ---------------------------------------------------------------- fp8_matmul

at::Tensor fp8_matmul(const at::Tensor& a_in, const at::Tensor& b_in,
                      const at::Tensor& b_scale_in, const std::optional<at::Tensor>& a_scale_in,
                      const std::optional<at::Tensor>& bias_in, int64_t block_size,
                      bool dynamic_act_quant, int64_t b_scale_block_rows,
                      const std::optional<at::Tensor>& prepacked_in) {
  TORCH_CHECK_VALUE(a_in.is_cuda(), "bqmm: InvalidArgument: a: expected a CUDA tensor but got one on ",
                    a_in.device());
  const at::Device device = a_in.device();
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor a = prepare(a_in, "a", device);
  const at::Tensor b = prepare(b_in, "b", device);
  const at::Tensor b_scale = prepare(b_scale_in, "b_scale", device);
  std::optional<at::Tensor> a_scale, bias, prepacked;
  if (a_scale_in) a_scale = prepare(*a_scale_in, "a_scale", device);
  if (bias_in) bias = prepare(*bias_in, "bias", device);
  if (prepacked_in) prepacked = prepare(*prepacked_in, "prepacked", device);

  bqmm::Fp8MatMulArgs args;
  args.a = view(a, "a");
  // B as float8_e4m3fn, or as uint8 holding the e4m3 bytes (how checkpoints and tools
  // without a float8 dtype store it; torch's schema checker cannot compare float8 tensors
  // on CUDA, so opcheck runs on this form).
  args.b = b.scalar_type() == at::kByte
               ? bqmm::TensorView{b.data_ptr(), bqmm::DType::kFloat8E4M3, to_shape(b.sizes(), "b")}
               : view(b, "b");
  args.b_scale = view(b_scale, "b_scale");
  if (a_scale) args.a_scale = view(*a_scale, "a_scale");
  if (bias) args.bias = view(*bias, "bias");
  if (prepacked) args.prepacked = view(*prepacked, "prepacked");

  // N from B: a wrong-rank B is reported by validate (with a placeholder N here).
  const int64_t n = b.dim() >= 1 ? b.size(0) : 0;
  bqmm::Shape y_shape;
  check(bqmm::fp8_matmul_output_shape(args.a.shape, n, &y_shape));
  at::Tensor y = make_output(a, n, y_shape, args.a.dtype, &args.y);

  bqmm::Fp8MatMulAttrs attrs;
  attrs.block_size = block_size;
  attrs.dynamic_act_quant = dynamic_act_quant;
  // A promise about b_scale's values (rows sharing each scale), checked >= 1 by validate.
  attrs.b_scale_block_rows = b_scale_block_rows;
  bqmm::Fp8MatMulProblem problem;
  check(bqmm::validate_fp8_matmul(args, attrs, &problem));

  plan_and_run<bqmm::Fp8MatMulProblem, bqmm::Fp8MatMulPlan>(
      device, problem,
      [&](const bqmm::DeviceInfo& info, bqmm::Fp8MatMulPlan* p) {
        bqmm::Fp8MatMulOptions options;
        BQMM_RETURN_IF_ERROR(bqmm::fp8_matmul_options_from_env(&options));
        return bqmm::plan_fp8_matmul(problem, info, options, p);
      },
      [&](const bqmm::Handle& handle, const bqmm::Fp8MatMulPlan& plan, void* ws,
          cudaStream_t stream) {
        return bqmm::run_fp8_matmul(handle, plan, args, ws, plan.workspace_bytes, stream);
      });
  return y;
}

// ---------------------------------------------------------------- nbits_matmul

at::Tensor nbits_matmul(const at::Tensor& a_in, const at::Tensor& b_in,
                        const at::Tensor& scales_in,
                        const std::optional<at::Tensor>& zero_points_in,
                        const std::optional<at::Tensor>& g_idx_in,
                        const std::optional<at::Tensor>& bias_in, int64_t K, int64_t N,
                        int64_t bits, int64_t block_size, int64_t accuracy_level,
                        const std::optional<at::Tensor>& prepacked_in) {
  TORCH_CHECK_VALUE(a_in.is_cuda(), "bqmm: InvalidArgument: a: expected a CUDA tensor but got one on ",
                    a_in.device());
  const at::Device device = a_in.device();
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor a = prepare(a_in, "a", device);
  const at::Tensor b = prepare(b_in, "b", device);
  const at::Tensor scales = prepare(scales_in, "scales", device);
  std::optional<at::Tensor> zero_points, g_idx, bias, prepacked;
  if (zero_points_in) zero_points = prepare(*zero_points_in, "zero_points", device);
  if (g_idx_in) g_idx = prepare(*g_idx_in, "g_idx", device);
  if (bias_in) bias = prepare(*bias_in, "bias", device);
  if (prepacked_in) prepacked = prepare(*prepacked_in, "prepacked", device);

  bqmm::NBitsMatMulArgs args;
  args.a = view(a, "a");
  args.b = view(b, "b");
  args.scales = view(scales, "scales");
  if (zero_points) args.zero_points = view(*zero_points, "zero_points");
  if (g_idx) args.g_idx = view(*g_idx, "g_idx");
  if (bias) args.bias = view(*bias, "bias");
  if (prepacked) args.prepacked = view(*prepacked, "prepacked");

  bqmm::Shape y_shape;
  check(bqmm::nbits_matmul_output_shape(args.a.shape, N, &y_shape));
  at::Tensor y = make_output(a, N, y_shape, args.a.dtype, &args.y);

  bqmm::NBitsMatMulAttrs attrs;
  attrs.k = K;
  attrs.n = N;
  attrs.bits = bits;
  attrs.block_size = block_size;
  attrs.accuracy_level = accuracy_level;
  bqmm::NBitsMatMulProblem problem;
  check(bqmm::validate_nbits_matmul(args, attrs, &problem));

  plan_and_run<bqmm::NBitsMatMulProblem, bqmm::NBitsMatMulPlan>(
      device, problem,
      [&](const bqmm::DeviceInfo& info, bqmm::NBitsMatMulPlan* p) {
        bqmm::NBitsMatMulOptions options;
        BQMM_RETURN_IF_ERROR(bqmm::nbits_matmul_options_from_env(&options));
        return bqmm::plan_nbits_matmul(problem, info, options, p);
      },
      [&](const bqmm::Handle& handle, const bqmm::NBitsMatMulPlan& plan, void* ws,
          cudaStream_t stream) {
        return bqmm::run_nbits_matmul(handle, plan, args, ws, plan.workspace_bytes, stream);
      });
  return y;
}

// ---------------------------------------------------------------- prepack ops

// A tensor of `shape` and `dtype` (float32, float16 or bfloat16) on `device` for a prepack
// op's output (the caching allocator's blocks are 512-byte aligned; bqmm needs 16) and its
// view.
at::Tensor make_prepacked(const bqmm::Shape& shape, bqmm::DType dtype, const at::Device& device,
                          bqmm::MutableTensorView* view) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < shape.rank(); ++i) sizes.push_back(shape[i]);
  const at::ScalarType type = dtype == bqmm::DType::kFloat16    ? at::kHalf
                              : dtype == bqmm::DType::kBFloat16 ? at::kBFloat16
                                                                : at::kFloat;
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type).device(device));
  *view = bqmm::MutableTensorView{t.data_ptr(), to_bqmm_dtype(t, "prepacked"), shape};
  return t;
}

at::Tensor fp8_prepack(const at::Tensor& b_scale_in) {
  TORCH_CHECK_VALUE(b_scale_in.is_cuda(), "bqmm: InvalidArgument: b_scale: expected a CUDA tensor but got one on ",
                    b_scale_in.device());
  const at::Device device = b_scale_in.device();
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor b_scale = prepare(b_scale_in, "b_scale", device);
  const bqmm::TensorView s = view(b_scale, "b_scale");
  TORCH_CHECK_VALUE(s.shape.rank() == 2, "bqmm: InvalidArgument: b_scale: expected rank 2 [N, ceil(K/block_size)] but got ",
                    s.shape.to_string());
  bqmm::MutableTensorView out_view;
  at::Tensor out =
      make_prepacked(bqmm::fp8_matmul_prepacked_shape(s.shape[0], s.shape[1]), bqmm::DType::kFloat32, device, &out_view);
  check(bqmm::prepack_fp8_matmul(s, out_view, at::cuda::getCurrentCUDAStream(device.index()).stream()));
  return out;
}

at::Tensor nbits_prepack(const at::Tensor& scales_in, const std::optional<at::Tensor>& zero_points_in,
                         int64_t K, int64_t N, int64_t bits, int64_t block_size) {
  TORCH_CHECK_VALUE(scales_in.is_cuda(), "bqmm: InvalidArgument: scales: expected a CUDA tensor but got one on ",
                    scales_in.device());
  const at::Device device = scales_in.device();
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor scales = prepare(scales_in, "scales", device);
  std::optional<at::Tensor> zero_points;
  if (zero_points_in) zero_points = prepare(*zero_points_in, "zero_points", device);
  std::optional<bqmm::TensorView> zp_view;
  if (zero_points) zp_view = view(*zero_points, "zero_points");
  bqmm::NBitsMatMulAttrs attrs;
  attrs.k = K;
  attrs.n = N;
  attrs.bits = bits;
  attrs.block_size = block_size;
  // k_blocks as the operator computes it (a block_size <= 0 is reported by the prepack's
  // check of the attributes; the placeholder shape is never used then).
  const int64_t k_blocks = block_size > 0 && K > 0 ? K / block_size + (K % block_size != 0 ? 1 : 0) : 0;
  bqmm::MutableTensorView out_view;
  // Its type follows the scales' (the prepack's checks report scales of another type).
  const bqmm::DType dtype = bqmm::nbits_matmul_prepacked_dtype(to_bqmm_dtype(scales, "scales"), bits);
  at::Tensor out = make_prepacked(bqmm::nbits_matmul_prepacked_shape(std::max<int64_t>(N, 0), std::max<int64_t>(k_blocks, 0)),
                                  dtype, device, &out_view);
  check(bqmm::prepack_nbits_matmul(attrs, view(scales, "scales"), zp_view, out_view,
                                   at::cuda::getCurrentCUDAStream(device.index()).stream()));
  return out;
}

}  // namespace
}  // namespace bqmm_torch

// Schemas mirror the ONNX operators: inputs in ONNX order (optional ones None when
// absent), attributes after them, keyword-only.
TORCH_LIBRARY(bqmm, m) {
  m.def(
      "fp8_matmul(Tensor a, Tensor b, Tensor b_scale, Tensor? a_scale=None, "
      "Tensor? bias=None, *, int block_size=128, bool dynamic_act_quant=False, "
      "int b_scale_block_rows=1, Tensor? prepacked=None) -> Tensor");
  m.def(
      "nbits_matmul(Tensor a, Tensor b, Tensor scales, Tensor? zero_points=None, "
      "Tensor? g_idx=None, Tensor? bias=None, *, int K, int N, int bits=4, int block_size, "
      "int accuracy_level=0, Tensor? prepacked=None) -> Tensor");
  m.def("fp8_prepack(Tensor b_scale) -> Tensor");
  m.def(
      "nbits_prepack(Tensor scales, Tensor? zero_points=None, *, int K, int N, int bits=4, "
      "int block_size) -> Tensor");
}

TORCH_LIBRARY_IMPL(bqmm, CUDA, m) {
  m.impl("fp8_matmul", &bqmm_torch::fp8_matmul);
  m.impl("nbits_matmul", &bqmm_torch::nbits_matmul);
  m.impl("fp8_prepack", &bqmm_torch::fp8_prepack);
  m.impl("nbits_prepack", &bqmm_torch::nbits_prepack);
}

// CPU tensors get the same functions, which reject them with a ValueError naming `a`
// (rather than the dispatcher's "could not run with the CPU backend").
TORCH_LIBRARY_IMPL(bqmm, CPU, m) {
  m.impl("fp8_matmul", &bqmm_torch::fp8_matmul);
  m.impl("nbits_matmul", &bqmm_torch::nbits_matmul);
  m.impl("fp8_prepack", &bqmm_torch::fp8_prepack);
  m.impl("nbits_prepack", &bqmm_torch::nbits_prepack);
}
