#include "harness/timing.h"

#include <algorithm>
#include <cmath>

#include "core/workspace.h"
#include "cuda/cuda_check.h"

namespace bqmm::harness {
namespace {

// Owns a captured graph and its executable instance.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

// Owns the CUDA events of one timing loop, so that every early return destroys them.
class EventSet {
 public:
  ~EventSet() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status create(size_t count) {
    events_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      cudaEvent_t e = nullptr;
      BQMM_CUDA_RETURN(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return Status::Ok();
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

}  // namespace

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (pos - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

TimingStats summarize_us(const std::vector<double>& samples_us) {
  TimingStats s;
  s.median_us = percentile(samples_us, 0.5);
  s.p10_us = percentile(samples_us, 0.1);
  s.p90_us = percentile(samples_us, 0.9);
  s.runs = static_cast<int>(samples_us.size());
  return s;
}

namespace {

Status record(cudaEvent_t event, cudaStream_t stream) {
  return cuda::cuda_status(cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal),
                           "event record");
}

// Captures the `repeat` timed runs as one instantiated graph: each between its own pair of
// event records (per_run), or kBackToBackChains chains of `repeat` runs back to back, chain c
// between events[c] and events[c + 1] (the next copies of the rotated inputs each).
Status capture_timed_runs(cudaStream_t stream, int first_iteration, int repeat,
                          const TimedRun& run, bool per_run, EventSet& events, Graph* graph) {
  BQMM_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const int chains = per_run ? 1 : kBackToBackChains;
  Status captured = per_run ? Status::Ok() : record(events[0], stream);
  for (int c = 0; c < chains && captured.ok(); ++c) {
    for (int i = 0; i < repeat && captured.ok(); ++i) {
      if (per_run) captured = record(events[2 * i], stream);
      if (captured.ok()) captured = run(first_iteration + c * repeat + i);
      if (captured.ok() && per_run) captured = record(events[2 * i + 1], stream);
    }
    if (captured.ok() && !per_run) captured = record(events[c + 1], stream);
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph->graph);
  BQMM_RETURN_IF_ERROR(captured);
  BQMM_CUDA_RETURN(ended);
  BQMM_CUDA_RETURN(cudaGraphInstantiate(&graph->exec, graph->graph, 0));
  return Status::Ok();
}

}  // namespace

Status time_with_events(cudaStream_t stream, int warmup, int repeat, const TimedRun& run,
                        TimingStats* out, Replay replay) {
  if (warmup < 0 || repeat < 1)
    return Status(StatusCode::kInvalidArgument,
                  "time_with_events: expected warmup >= 0 and repeat >= 1 but got " +
                      std::to_string(warmup) + " and " + std::to_string(repeat));
  // A pair of events per run rather than one pair around all runs: the spread (p10, p90)
  // shows clock and contention noise that a single average would hide.
  EventSet events;
  BQMM_RETURN_IF_ERROR(events.create(2 * static_cast<size_t>(repeat)));

  // The timed runs, each between its two event records, are captured as one CUDA graph:
  // replayed, they run back to back paced by the GPU alone, as in a graph-captured model.
  // Enqueued one by one instead, runs shorter than their host-side cost (validation,
  // launches, event records: a few microseconds) would be timed with the host's gaps in
  // them, and a GPU that waited for the host would drop its clocks. A second graph holds
  // three chains of as many runs (the next copies of the rotated inputs) with no events
  // inside a chain, for the back-to-back time (their median).
  Graph graph, chain;
  EventSet ends;
  BQMM_RETURN_IF_ERROR(ends.create(kBackToBackChains + 1));
  const bool use_graph =
      replay == Replay::kGraph &&
      capture_timed_runs(stream, warmup, repeat, run, true, events, &graph).ok() &&
      capture_timed_runs(stream, warmup + repeat, repeat, run, false, ends, &chain).ok();
  if (!use_graph && replay == Replay::kGraph) cudaGetLastError();  // clear the failed capture

  // Warm-up runs, then the timed runs right behind them with no synchronization in
  // between, so that they start on a GPU already busy at its working clocks.
  for (int i = 0; i < warmup; ++i) BQMM_RETURN_IF_ERROR(run(i));
  if (use_graph) {
    BQMM_CUDA_RETURN(cudaGraphLaunch(graph.exec, stream));
    BQMM_CUDA_RETURN(cudaGraphLaunch(chain.exec, stream));
  } else {
    for (int i = 0; i < repeat; ++i) {
      BQMM_CUDA_RETURN(cudaEventRecord(events[2 * i], stream));
      BQMM_RETURN_IF_ERROR(run(warmup + i));
      BQMM_CUDA_RETURN(cudaEventRecord(events[2 * i + 1], stream));
    }
  }
  BQMM_CUDA_RETURN(cudaStreamSynchronize(stream));

  std::vector<double> samples_us(repeat);
  for (int i = 0; i < repeat; ++i) {
    float ms = 0;
    BQMM_CUDA_RETURN(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
    samples_us[i] = 1e3 * ms;
  }
  *out = summarize_us(samples_us);
  out->graph = use_graph;
  if (use_graph) {
    std::vector<double> chains_us(kBackToBackChains);
    for (int c = 0; c < kBackToBackChains; ++c) {
      float ms = 0;
      BQMM_CUDA_RETURN(cudaEventElapsedTime(&ms, ends[c], ends[c + 1]));
      chains_us[c] = 1e3 * ms / repeat;
    }
    out->back_to_back_us = percentile(chains_us, 0.5);
  }
  return Status::Ok();
}

int cold_l2_copy_count(size_t bytes_per_copy, size_t l2_bytes) {
  if (bytes_per_copy == 0) return 1;
  return static_cast<int>(4 * l2_bytes / bytes_per_copy + 1);
}

Status RotatingCopies::allocate(size_t bytes, int count, RotatingCopies* out) {
  if (count < 1)
    return Status(StatusCode::kInvalidArgument,
                  "RotatingCopies: expected count >= 1 but got " + std::to_string(count));
  RotatingCopies r;
  r.bytes_ = bytes;
  r.stride_ = align_up(bytes, kWorkspaceAlign);
  r.count_ = count;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(r.stride_ * count, &r.buffer_));
  *out = std::move(r);
  return Status::Ok();
}

Status RotatingCopies::replicate_first(cudaStream_t stream) const {
  auto* base = static_cast<uint8_t*>(buffer_.data());
  for (int filled = 1; filled < count_;) {
    const int n = std::min(filled, count_ - filled);
    BQMM_CUDA_RETURN(cudaMemcpyAsync(base + filled * stride_, base, n * stride_,
                                     cudaMemcpyDeviceToDevice, stream));
    filled += n;
  }
  return Status::Ok();
}

void* RotatingCopies::copy(int64_t i) const {
  return static_cast<uint8_t*>(buffer_.data()) + (i % count_) * stride_;
}

Status measure_copy_bandwidth(size_t bytes, int warmup, int repeat, cudaStream_t stream,
                              double* bytes_per_second) {
  DeviceBuffer src, dst;
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(bytes, &src));
  BQMM_RETURN_IF_ERROR(DeviceBuffer::allocate(bytes, &dst));
  TimingStats t;
  BQMM_RETURN_IF_ERROR(time_with_events(
      stream, warmup, repeat,
      [&](int) {
        return cuda::cuda_status(
            cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (copy bandwidth)");
      },
      &t, Replay::kEager));
  *bytes_per_second = 2.0 * static_cast<double>(bytes) / (t.median_us * 1e-6);
  return Status::Ok();
}

}  // namespace bqmm::harness
