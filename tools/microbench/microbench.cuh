// What the standalone microbenchmarks of this folder share: the CUDA error check, the SM
// clock read with the global timer, and the best of a few timed launches.
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
