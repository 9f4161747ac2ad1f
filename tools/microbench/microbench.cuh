// What the standalone microbenchmarks of this folder share: the CUDA error check, the SM
// clock read with the global timer, the best of a few timed launches, and back-to-back
// time in a CUDA graph (bqmm-profile's b2b_us).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t err_ = (x);                                                \
    if (err_ != cudaSuccess) {                                             \
      printf("CUDA %s at line %d\n", cudaGetErrorString(err_), __LINE__); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

// The SM's clock and the global timer (nanoseconds) at one point of a kernel: two stamps
// give its cycles, its time and so the clock it ran at.
struct ClockStamp {
  long long cycles;
  unsigned long long ns;
};

__device__ __forceinline__ ClockStamp clock_stamp() {
  ClockStamp s;
  s.cycles = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(s.ns));
  return s;
}

// The fastest of `reps` runs of launch() on the default stream, in milliseconds (CUDA
// events); on_best() runs after each run that is the fastest so far, to read what that
// run wrote.
template <typename Launch, typename OnBest>
float best_ms(int reps, Launch launch, OnBest on_best) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < reps; ++rep) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) {
      best = ms;
      on_best();
    }
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return best;
}

// Microseconds per launch, back to back as bqmm-profile's b2b_us: `launch(i)` for i =
// warmup .. warmup + repeat - 1 captured in one CUDA graph (launch(i) picks the i-th
// rotating copy of its inputs), after `warmup` eager launches; the graph replayed `reps`
// times, the fastest replay's total / repeat.
template <typename Launch>
double graph_b2b_us(cudaStream_t stream, Launch launch, int warmup, int repeat, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CK(cudaEventRecordWithFlags(e0, stream, cudaEventRecordExternal));
  for (int i = 0; i < repeat; ++i) launch(warmup + i);
  CK(cudaEventRecordWithFlags(e1, stream, cudaEventRecordExternal));
  CK(cudaStreamEndCapture(stream, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < warmup; ++i) launch(i);
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    CK(cudaGraphLaunch(exec, stream));
    CK(cudaStreamSynchronize(stream));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (1e3 * ms / repeat < best) best = 1e3 * ms / repeat;
  }
  CK(cudaGetLastError());
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return best;
}
