// Launch-floor micro-benchmark: what does an ideal weight stream of S bytes take under
// bqmm-profile's timing, and how much of that is the fixed cost of one launch?
// Standalone (CMake compiles it unlinked; no bqmm code but the profiler's ../stream_read.cuh):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/launch_floor tools/microbench/launch_floor.cu
//   /tmp/launch_floor
//
// The kernel is the fastest load shape of stream_shapes.cu (each warp instruction reads
// 512 contiguous bytes, 8 16-byte loads in flight per lane, loads past L1;
// stream_read.cuh), over a buffer of S bytes; copies of it rotate so that their total
// exceeds 4x the L2 (cold, as the profiler). Three ways to time R = 100 runs of it, each replayed from a CUDA graph:
//   events      a pair of events around every run inside the graph, median (what
//               harness::time_with_events does for every bqmm-profile number)
//   b2b         the R runs back to back, one event pair around all, total / R
//   b2b+pdl     the same with programmatic dependent launch: a run may start while the
//               previous one drains (each kernel allows it at its start), in three forms:
//                 wait-first   griddepcontrol.wait before any load (a kernel whose every
//                              input may come from the previous kernel)
//                 prefetch     one cp.async.bulk.prefetch.L2 of the warp's first 4 KB, then
//                              the wait (safe for any input: L2 is the point of coherence)
//                 wait-last    every load before the wait (only for inputs no earlier
//                              kernel writes: the upper bound)
// Prints per S: us and TB/s for each, and a least-squares fit time = S / B + t0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../stream_read.cuh"
#include "microbench.cuh"  // CK


constexpr int kThreads = 256;

// Each warp streams one contiguous slab; lane l reads 16-byte words l, l + 32, ...
enum Pdl { kNoPdl = 0, kWaitFirst = 1, kPrefetch = 2, kWaitLast = 3 };
template <int kPdl>
__global__ void __launch_bounds__(kThreads) stream_kernel(const uint4* buf, size_t words,
                                                        uint32_t* out) {
  if constexpr (kPdl != kNoPdl) asm volatile("griddepcontrol.launch_dependents;");
  const stream_read::WarpRange r = stream_read::warp_range<kThreads>(words);
  const size_t begin = r.begin, end = r.end;
  if constexpr (kPdl == kPrefetch) {
    const size_t bytes = 16 * (end - begin < 256 ? end - begin : 256);
    if (threadIdx.x % 32 == 0 && bytes > 0)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(buf + begin),
                   "r"(static_cast<uint32_t>(bytes))
                   : "memory");
  }
  if constexpr (kPdl == kWaitFirst || kPdl == kPrefetch)
    asm volatile("griddepcontrol.wait;" ::: "memory");
  const uint32_t acc = stream_read::read_range(buf, r, threadIdx.x % 32);
  if constexpr (kPdl == kWaitLast) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (acc == stream_read::kNeverStored) out[0] = acc;  // keeps the loads; practically never stores
}

__global__ void empty_kernel() {}

// Timing modes; the last three are back to back with each PDL form.
enum class Mode { kEvents, kBackToBack, kPdlWaitFirst, kPdlPrefetch, kPdlWaitLast };
constexpr int kModes = 5;
int pdl_of(Mode m) {
  return m == Mode::kPdlWaitFirst ? kWaitFirst
         : m == Mode::kPdlPrefetch ? kPrefetch
         : m == Mode::kPdlWaitLast ? kWaitLast : kNoPdl;
}

struct Setup {
  const uint8_t* pool;
  size_t bytes;  // per copy
  int copies;
  int blocks;
  uint32_t* out;
  bool empty = false;
};

void launch(const Setup& s, int i, cudaStream_t stream, int pdl) {
  if (s.empty) {
    empty_kernel<<<1, 32, 0, stream>>>();
    return;
  }
  const uint4* buf = reinterpret_cast<const uint4*>(s.pool + (i % s.copies) * s.bytes);
  const size_t words = s.bytes / 16;
  if (pdl == kNoPdl) {
    stream_kernel<kNoPdl><<<s.blocks, kThreads, 0, stream>>>(buf, words, s.out);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(s.blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  void (*kernel)(const uint4*, size_t, uint32_t*) =
      pdl == kWaitFirst ? stream_kernel<kWaitFirst>
      : pdl == kPrefetch ? stream_kernel<kPrefetch> : stream_kernel<kWaitLast>;
  CK(cudaLaunchKernelEx(&cfg, kernel, buf, words, s.out));
}

// Microseconds of one run, timed by `mode` over `repeat` graph-replayed runs.
double time_us(const Setup& s, Mode mode, cudaStream_t stream) {
  constexpr int kWarmup = 10, kRepeat = 100;
  const int pdl = pdl_of(mode);
  std::vector<cudaEvent_t> ev(2 * kRepeat);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  if (mode != Mode::kEvents) CK(cudaEventRecordWithFlags(ev[0], stream, cudaEventRecordExternal));
  for (int i = 0; i < kRepeat; ++i) {
    if (mode == Mode::kEvents)
      CK(cudaEventRecordWithFlags(ev[2 * i], stream, cudaEventRecordExternal));
    launch(s, kWarmup + i, stream, pdl);
    if (mode == Mode::kEvents)
      CK(cudaEventRecordWithFlags(ev[2 * i + 1], stream, cudaEventRecordExternal));
  }
  if (mode != Mode::kEvents) CK(cudaEventRecordWithFlags(ev[1], stream, cudaEventRecordExternal));
  CK(cudaStreamEndCapture(stream, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < kWarmup; ++i) launch(s, i, stream, kNoPdl);
  CK(cudaGraphLaunch(exec, stream));
  CK(cudaStreamSynchronize(stream));
  double result;
  if (mode == Mode::kEvents) {
    std::vector<double> t(kRepeat);
    for (int i = 0; i < kRepeat; ++i) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
      t[i] = 1e3 * ms;
    }
    std::sort(t.begin(), t.end());
    result = 0.5 * (t[kRepeat / 2 - 1] + t[kRepeat / 2]);
  } else {
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    result = 1e3 * ms / kRepeat;
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  return result;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t kPool = size_t{1} << 30;
  uint8_t* pool;
  CK(cudaMalloc(&pool, 2 * kPool));
  CK(cudaMemset(pool, 1, 2 * kPool));
  uint32_t* out;
  CK(cudaMalloc(&out, 4));

  // Copy bandwidth as the profiler measures it: 1 GiB device-to-device, eager, best of 5.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e9f;
  for (int i = 0; i < 6; ++i) {
    CK(cudaEventRecord(e0, stream));
    CK(cudaMemcpyAsync(pool + kPool, pool, kPool, cudaMemcpyDeviceToDevice, stream));
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (i > 0) best = std::min(best, ms);
  }
  const double copy_tbps = 2.0 * kPool / (best * 1e-3) / 1e12;
  printf("%s, %d SMs, L2 %d MB; copy bandwidth (r+w, 1 GiB) %.2f TB/s\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize >> 20, copy_tbps);

  const char* names[] = {"events", "b2b", "pdl-wait-first", "pdl-prefetch", "pdl-wait-last"};
  {
    Setup s{pool, 0, 1, 1, out, true};
    printf("empty kernel <<<1, 32>>>:");
    for (int m = 0; m < 2; ++m) printf("  %s %.2f us", names[m], time_us(s, Mode(m), stream));
    printf("\n");
  }
  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  for (int blocks_per_sm : {4, 8}) {
    printf("\nstream_read, %d blocks of %d threads per SM\n", blocks_per_sm, kThreads);
    printf("%8s %6s |", "MB", "copies");
    for (const char* n : names) printf(" %-17s|", n);
    printf("\n");
    std::vector<double> xs, ys[kModes];
    for (size_t mb : {4, 8, 17, 35, 69, 138, 242, 484}) {
      const size_t bytes = mb << 20;
      const int copies = static_cast<int>(std::min<size_t>(2 * kPool / bytes, 4 * l2 / bytes + 1));
      if (copies * bytes < 4 * l2 && copies < 2) continue;
      Setup s{pool, bytes, std::max(copies, 1), blocks_per_sm * prop.multiProcessorCount, out};
      printf("%8zu %6d |", mb, s.copies);
      xs.push_back(static_cast<double>(bytes));
      for (int m = 0; m < kModes; ++m) {
        const double us = time_us(s, Mode(m), stream);
        ys[m].push_back(us);
        const double tbps = bytes / (us * 1e-6) / 1e12;
        printf(" %6.2f %4.2f %3.0f%% |", us, tbps, 100 * tbps / copy_tbps);
      }
      printf("\n");
    }
    for (int m = 0; m < kModes; ++m) {  // least squares: us = bytes / B + t0
      const double n = xs.size();
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        sx += xs[i]; sy += ys[m][i]; sxx += xs[i] * xs[i]; sxy += xs[i] * ys[m][i];
      }
      const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), t0 = (sy - slope * sx) / n;
      printf("fit %-15s: B = %.2f TB/s, t0 = %.2f us\n", names[m], 1e-6 / slope, t0);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
