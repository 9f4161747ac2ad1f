// GPU timing for the CLI and the benchmarks (docs/PERF.md, "Method"): CUDA
// events around every run after a warm-up, median and p10/p90 of the runs, weights
// rotated among enough copies that the timed runs read them from HBM, not from L2, and
// the device-to-device copy bandwidth that the results are compared with.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "bqmm/status.h"
#include "harness/device_buffer.h"

namespace bqmm::harness {

struct TimingStats {
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  int runs = 0;
  bool graph = false;  // the timed runs were replayed from a captured CUDA graph
  // The same number of runs replayed back to back from a second graph with no events
  // between them, one event pair around all: total / runs, the median of three such chains
  // replayed one after the other. What a run adds to a graph of consecutive
  // layers: its launch, ramp-up and drain, but not the event nodes (about 1.4 us on the
  // H200, tools/microbench/launch_floor.cu). 0 when not measured (no graph).
  double back_to_back_us = 0;
};

// The q-quantile (q in [0, 1]) of `samples`, interpolating linearly between the two
// nearest ranks (NumPy's default); 0 for no samples.
double percentile(std::vector<double> samples, double q);

// Median, p10 and p90 of per-run times in microseconds.
TimingStats summarize_us(const std::vector<double>& samples_us);

// One timed operation: enqueues run `iteration` on the stream being timed (never
// synchronizes). The iteration number keeps counting through warm-up and timed runs, so
// the caller can pick copy `iteration` of its rotated inputs and no two consecutive runs
// read the same copy.
using TimedRun = std::function<Status(int iteration)>;

// Captures `repeat` runs, each between its own pair of CUDA events, as one CUDA graph;
// then runs `run` `warmup` times and replays the graph right behind them, with one
// synchronization at the end: the GPU, not the host, paces the timed runs, so each time
// is the device time of one run inside a graph replay. Should the capture fail (a `run`
// that cannot be captured), the runs are enqueued one by one instead, each between its
// events, and TimingStats::graph says which. Summarizes the event times. With a graph it
// then captures and replays three chains of as many runs without the per-run events
// (TimingStats::back_to_back_us).
// Replay::kEager skips the capture: for work whose graph node is not what the stream
// would run (a device-to-device cudaMemcpyAsync runs as a copy kernel on a stream but as
// a copy-engine memcpy node in a graph, at about 2/3 of the kernel's bandwidth on H200).
enum class Replay { kGraph, kEager };
// Back-to-back chains per measurement; their median is the result, so one chain slowed by
// something outside the kernel (a clock dip) does not become the case's time.
constexpr int kBackToBackChains = 3;
Status time_with_events(cudaStream_t stream, int warmup, int repeat, const TimedRun& run,
                        TimingStats* out, Replay replay = Replay::kGraph);

// How many copies of a `bytes_per_copy` working set make all copies together exceed
// 4 x `l2_bytes`, so that a copy is evicted before it is read again: at least 1.
int cold_l2_copy_count(size_t bytes_per_copy, size_t l2_bytes);

// `count` copies of one device blob of `bytes`, at a 256-byte aligned stride in one
// allocation (one cudaMalloc whatever the count; the alignment keeps every copy valid
// for vectorized loads and cuBLAS).
class RotatingCopies {
 public:
  static Status allocate(size_t bytes, int count, RotatingCopies* out);
  // Fills copies 1..count-1 from copy 0 on the device, doubling the filled prefix with
  // each cudaMemcpyAsync (log2(count) calls).
  Status replicate_first(cudaStream_t stream) const;
  // Copy `i` modulo count.
  void* copy(int64_t i) const;
  int count() const { return count_; }
  size_t bytes() const { return bytes_; }
  size_t total_bytes() const { return buffer_.size(); }

 private:
  DeviceBuffer buffer_;
  size_t bytes_ = 0;
  size_t stride_ = 0;
  int count_ = 0;
};

// Device-to-device copy bandwidth in bytes per second: a cudaMemcpyAsync of `bytes`
// between two fresh buffers, (bytes read + bytes written) / median time of `repeat`
// copies after `warmup`, enqueued eagerly (Replay::kEager). The ceiling a weight-streaming kernel is compared with.
Status measure_copy_bandwidth(size_t bytes, int warmup, int repeat, cudaStream_t stream,
                              double* bytes_per_second);

}  // namespace bqmm::harness
