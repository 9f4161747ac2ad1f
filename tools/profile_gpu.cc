// bqmm-profile: the GPU every case runs on, the rotated weight copies and the dense
// cuBLAS baseline.
#include <unistd.h>

#include <algorithm>

#include "core/workspace.h"
#include "cuda/cublas_gemm.h"
#include "cuda/cuda_check.h"
#include "profile.h"

namespace bqmm::profile {

Status find_machine(const Settings& settings, Machine* out) {
  Machine m;
  m.host_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                 static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  std::string why;
  if (settings.cpu) {
    m.cpu_reason = "--device cpu";
  } else if (!harness::cuda_device_available(&why)) {
    m.cpu_reason = "no CUDA device (" + why + ")";
  } else {
    m.gpu = true;
  }
  m.device = kDefaultDevice;
  if (m.gpu) {
    constexpr int kDevice = 0;  // the device Gpu::open runs on
    BQMM_RETURN_IF_ERROR(query_device_info(kDevice, &m.device));
    if (!settings.explain) {
      size_t free_bytes = 0, total_bytes = 0;
      BQMM_CUDA_RETURN(cudaSetDevice(kDevice));
      BQMM_CUDA_RETURN(cudaMemGetInfo(&free_bytes, &total_bytes));
      m.device_free_bytes = free_bytes;
    }
  }
  if (settings.device_override) m.device = *settings.device_override;
  *out = std::move(m);
  return Status::Ok();
}

Status Gpu::open(int warmup, int repeat, bool between_kernel, std::unique_ptr<Gpu>* out) {
  constexpr int kDevice = 0;
  std::unique_ptr<Gpu> gpu(new Gpu());
  gpu->warmup_ = warmup;
  gpu->repeat_ = repeat;
  BQMM_CUDA_RETURN(cudaSetDevice(kDevice));
  if (between_kernel) BQMM_RETURN_IF_ERROR(harness::DeviceBuffer::allocate(kBetweenBytes, &gpu->between_));
  BQMM_RETURN_IF_ERROR(Handle::create(kDevice, &gpu->handle_));
  // A blocking stream: the harness's uploads, poisoning and downloads run on the legacy
  // default stream, and a blocking stream is ordered with it.
  BQMM_CUDA_RETURN(cudaStreamCreate(&gpu->stream_));
  cudaDeviceProp prop{};
  BQMM_CUDA_RETURN(cudaGetDeviceProperties(&prop, kDevice));
  gpu->name_ = prop.name;
  gpu->l2_bytes_ = static_cast<size_t>(prop.l2CacheSize);

  // 1 GiB per buffer is far beyond any cache and long enough (~0.5 ms on an H200) for
  // event resolution not to matter; smaller GPUs get a quarter of their free memory.
  size_t free_bytes = 0, total_bytes = 0;
  BQMM_CUDA_RETURN(cudaMemGetInfo(&free_bytes, &total_bytes));
  gpu->copy_probe_bytes_ = std::min<size_t>(size_t{1} << 30, free_bytes / 8 >> 20 << 20);
  BQMM_RETURN_IF_ERROR(harness::measure_copy_bandwidth(gpu->copy_probe_bytes_, 3, 20, gpu->stream_,
                                                       &gpu->copy_bandwidth_));
  *out = std::move(gpu);
  return Status::Ok();
}

Gpu::~Gpu() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status Gpu::time(const harness::TimedRun& run, harness::TimingStats* out) const {
  if (between_.size() == 0) return harness::time_with_events(stream_, warmup_, repeat_, run, out);
  return harness::time_with_events(
      stream_, warmup_, repeat_,
      [&](int iteration) {
        BQMM_RETURN_IF_ERROR(launch_between_kernel(between_.data(), between_.size(), stream_));
        return run(iteration);
      },
      out);
}

Status Gpu::synchronize() const {
  return cuda::cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Status WeightCopies::upload(const Gpu& gpu, const std::vector<NamedTensor>& parts,
                            WeightCopies* out) {
  WeightCopies w;
  size_t copy_bytes = 0;
  for (const NamedTensor& p : parts) {
    w.offsets_.push_back(align_up(copy_bytes, kWorkspaceAlign));
    copy_bytes = w.offsets_.back() + (p.second != nullptr ? p.second->bytes.size() : 0);
  }
  BQMM_RETURN_IF_ERROR(
      harness::RotatingCopies::allocate(copy_bytes, gpu.copies_for(copy_bytes), &w.copies_));
  auto* first = static_cast<uint8_t*>(w.copies_.copy(0));
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostTensor* t = parts[i].second;
    if (t != nullptr && !t->bytes.empty())
      BQMM_CUDA_RETURN(cudaMemcpyAsync(first + w.offsets_[i], t->data(), t->bytes.size(),
                                       cudaMemcpyHostToDevice, gpu.stream()));
  }
  BQMM_RETURN_IF_ERROR(w.copies_.replicate_first(gpu.stream()));
  *out = std::move(w);
  return Status::Ok();
}

Status DenseBaseline::create(const Gpu& gpu, const HostTensor& a, int64_t n,
                             const FillWeight& fill_weight, std::unique_ptr<DenseBaseline>* out) {
  std::unique_ptr<DenseBaseline> d(new DenseBaseline());
  d->n_ = n;
  d->k_ = a.shape[1];
  const int64_t max_m = a.shape[0];
  if (max_m == 0 || n == 0 || d->k_ == 0) {  // nothing to multiply: time() reports nothing
    *out = std::move(d);
    return Status::Ok();
  }

  HostTensor a_bf16 = HostTensor::zeros(DType::kBFloat16, a.shape);
  if (a.dtype == DType::kBFloat16) {
    a_bf16.bytes = a.bytes;
  } else {
    for (int64_t i = 0; i < a.numel(); ++i) a_bf16.set(i, a.get(i));
  }
  BQMM_RETURN_IF_ERROR(harness::DeviceTensor::upload(a_bf16, &d->a_));

  const size_t weight_bytes = static_cast<size_t>(n * d->k_) * dtype_size(DType::kBFloat16);
  BQMM_RETURN_IF_ERROR(
      harness::RotatingCopies::allocate(weight_bytes, gpu.copies_for(weight_bytes), &d->weight_));
  BQMM_RETURN_IF_ERROR(fill_weight(d->weight_.copy(0), gpu.stream()));
  BQMM_RETURN_IF_ERROR(d->weight_.replicate_first(gpu.stream()));

  BQMM_RETURN_IF_ERROR(harness::DeviceBuffer::allocate(
      static_cast<size_t>(max_m * n) * dtype_size(DType::kBFloat16), &d->y_));
  BQMM_RETURN_IF_ERROR(harness::DeviceBuffer::allocate(cublas_workspace_bytes(gpu.info().sm),
                                                       &d->cublas_workspace_));
  BQMM_RETURN_IF_ERROR(gpu.synchronize());
  *out = std::move(d);
  return Status::Ok();
}

Status DenseBaseline::time(const Gpu& gpu, int64_t m,
                           std::optional<harness::TimingStats>* out) const {
  out->reset();
  if (m == 0 || n_ == 0 || k_ == 0) return Status::Ok();
  cuda::GemmRowMajorArgs args;
  args.dtype = DType::kBFloat16;
  args.m = m;
  args.n = n_;
  args.k = k_;
  args.a = a_.data();
  args.y = y_.data();
  args.ldy = n_;
  harness::TimingStats t;
  BQMM_RETURN_IF_ERROR(gpu.time(
      [&](int iteration) {
        args.w = weight_.copy(iteration);
        return cuda::gemm_row_major_awt(gpu.handle(), args, cublas_workspace_.data(),
                                        cublas_workspace_.size(), gpu.stream());
      },
      &t));
  *out = t;
  return Status::Ok();
}

}  // namespace bqmm::profile
