// The W8A8 quantize pass (src/cuda/gemm/act_quant_e4m3.cuh) at 1, 2, 4 rows a thread by
// 1, 2, 4 chunks a lane, and as the library launches it. Standalone (CMake compiles it,
// unlinked, as a check):
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90 -Iinclude -Isrc -o /tmp/quant_pass tools/microbench/quant_pass.cu && /tmp/quant_pass
//
// First every variant's codes and scales against one row and one chunk a thread's, bit for
// bit (float16 and bfloat16, static and dynamic, blocks of 128 / 256 / 512, short last
// blocks, padding rows, NaN and zero blocks); then the time per call, float16, block 128:
// each variant captured 20 (hot: one A, L2-resident where it fits) or up to 40 times (cold:
// rotating copies of A over 400 MB) in one CUDA graph, median of 7 replays. docs/PERF.md
// ("The quantize pass") has the numbers behind the library's rule.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>
#include "cuda/gemm/act_quant_e4m3.cuh"
#include "microbench.cuh"  // CK
using namespace bqmm::cuda;

// The variants: rows a thread (1, 2, 4) by 16-byte chunks a lane (1, 2, 4; a block of
// 128 over 16, 8, 4 lanes), then the library's choice.
struct Variant { int rows; int chunks; const char* name; };
static const Variant kVariants[] = {{1, 1, "r1c1"}, {2, 1, "r2c1"}, {4, 1, "r4c1"}, {1, 2, "r1c2"},
                                    {2, 2, "r2c2"}, {1, 4, "r1c4"}, {0, 0, "library"}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

template <typename T, bool kDyn, int kRows, int kChunks>
bqmm::Status launch_variant(const Fp8KernelArgs& args, int64_t rows, int block, int64_t kb, uint8_t* codes, float* scales, cudaStream_t st) {
  return act_quant::launch_act_quant<T, kDyn, kRows, kChunks>(args, rows, block, kb, rows, codes, scales, st);
}

template <typename T, bool kDyn>
void launch(int which, const T* a, const float* as, int64_t m, int64_t rows, int64_t k, int block, uint8_t* codes, float* scales, cudaStream_t st) {
  const int64_t kb = (k + block - 1) / block;
  Fp8KernelArgs args; args.a = a; args.a_scale = as; args.m = m; args.k = k; args.block_size = block;
  const Variant v = kVariants[which];
  const int key = v.rows * 10 + v.chunks;
  const bqmm::Status status =
      key == 11   ? launch_variant<T, kDyn, 1, 1>(args, rows, block, kb, codes, scales, st)
      : key == 21 ? launch_variant<T, kDyn, 2, 1>(args, rows, block, kb, codes, scales, st)
      : key == 41 ? launch_variant<T, kDyn, 4, 1>(args, rows, block, kb, codes, scales, st)
      : key == 12 ? launch_variant<T, kDyn, 1, 2>(args, rows, block, kb, codes, scales, st)
      : key == 22 ? launch_variant<T, kDyn, 2, 2>(args, rows, block, kb, codes, scales, st)
      : key == 14 ? launch_variant<T, kDyn, 1, 4>(args, rows, block, kb, codes, scales, st)
                  : launch_act_quant_e4m3<T, kDyn>(args, rows, block, kb, rows, codes, scales, st);
  if (!status.ok()) { printf("%s: %s\n", v.name, status.message().c_str()); exit(1); }
}

// One configuration: M rows of A (rows: M rounded up to 4, odd seeds up to 128, the GEMMs'
// padding), a zero block in row 1, a NaN in row 2's second block, a large value in row 3.
template <typename T, bool kDyn>
bool check(int64_t m, int64_t k, int block, uint32_t seed) {
  const int64_t rows = (m + 3) / 4 * 4 + (seed % 2 ? 128 - ((m + 3) / 4 * 4) % 128 : 0);
  const int64_t kb = (k + block - 1) / block;
  std::vector<T> h(m * k);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (auto& v : h) v = T(nd(rng));
  if (m > 2 && kb > 1) { for (int i = 0; i < std::min<int64_t>(block, k); ++i) h[1 * k + i] = T(0.f); h[2 * k + block + 5] = T(NAN); }
  if (m > 3) h[3 * k + 7] = T(60000.f);
  T* a; float* as; CK(cudaMalloc(&a, h.size() * sizeof(T))); CK(cudaMalloc(&as, 4));
  float sc = 0.0123f; CK(cudaMemcpy(as, &sc, 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(a, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  std::vector<std::vector<uint8_t>> c(kNumVariants); std::vector<std::vector<float>> s(kNumVariants);
  uint8_t* codes; float* scales; CK(cudaMalloc(&codes, rows * k)); CK(cudaMalloc(&scales, kb * rows * 4));
  for (int w = 0; w < kNumVariants; ++w) {
    CK(cudaMemset(codes, 0xAB, rows * k)); CK(cudaMemset(scales, 0xCD, kb * rows * 4));
    launch<T, kDyn>(w, a, kDyn ? nullptr : as, m, rows, k, block, codes, scales, 0);
    CK(cudaDeviceSynchronize());
    c[w].resize(rows * k); s[w].resize(kb * rows);
    CK(cudaMemcpy(c[w].data(), codes, rows * k, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(s[w].data(), scales, kb * rows * 4, cudaMemcpyDeviceToHost));
  }
  bool ok = true;
  for (int w = 1; w < kNumVariants; ++w)
    if (memcmp(c[w].data(), c[0].data(), c[0].size()) || memcmp(s[w].data(), s[0].data(), s[0].size() * 4)) {
      printf("MISMATCH %s against one row and chunk a thread: T=%s dyn=%d m=%ld rows=%ld k=%ld block=%d\n", kVariants[w].name, std::is_same<T, __half>::value ? "f16" : "bf16", kDyn, (long)m, (long)rows, (long)k, block);
      ok = false;
    }
  cudaFree(a); cudaFree(as); cudaFree(codes); cudaFree(scales);
  return ok;
}

template <bool kDyn>
void bench(int64_t m, int64_t k, bool cold) {
  using T = __half;
  const int64_t rows = (m + 3) / 4 * 4, block = 128, kb = k / block;
  const int64_t abytes = m * k * 2;
  const int copies = cold ? std::max<int64_t>(1, (int64_t)(400e6 / abytes)) : 1;
  const int calls = cold ? std::min(copies, 40) : 20;
  T* a; CK(cudaMalloc(&a, abytes * copies)); CK(cudaMemset(a, 0x3c, abytes * copies));
  float* as; CK(cudaMalloc(&as, 4)); float sc = 0.01f; CK(cudaMemcpy(as, &sc, 4, cudaMemcpyHostToDevice));
  uint8_t* codes; float* scales; CK(cudaMalloc(&codes, rows * k)); CK(cudaMalloc(&scales, kb * rows * 4));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  printf("%-7s %-4s M=%5ld K=%5ld:", kDyn ? "dynamic" : "static", cold ? "cold" : "hot", (long)m, (long)k);
  for (int w = 0; w < kNumVariants; ++w) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < calls; ++i) launch<T, kDyn>(w, a + (i % copies) * m * k, kDyn ? nullptr : as, m, rows, k, block, codes, scales, st);
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 7; ++r) { cudaEventRecord(e0, st); CK(cudaGraphLaunch(ge, st)); cudaEventRecord(e1, st); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms * 1000 / calls); }
    std::sort(t.begin(), t.end());
    printf(" %s %6.2f", kVariants[w].name, t[3]);
    cudaEventDestroy(e0); cudaEventDestroy(e1); cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  }
  printf("  (%.1f MB moved)\n", (abytes + rows * k) / 1e6);
  cudaFree(a); cudaFree(as); cudaFree(codes); cudaFree(scales); cudaStreamDestroy(st);
}

int main() {
  bool ok = true; int n = 0;
  for (int64_t m : {1, 3, 16, 17, 64, 100, 257, 1024})
    for (int64_t k : {1168, 4096, 2064})
      for (int block : {128, 256, 512})
        for (uint32_t seed : {1u, 2u}) {
          ok &= check<__half, false>(m, k, block, seed); ok &= check<__half, true>(m, k, block, seed);
          ok &= check<__nv_bfloat16, false>(m, k, block, seed); ok &= check<__nv_bfloat16, true>(m, k, block, seed);
          n += 4;
        }
  printf("equality: %d configurations x %d variants against r1c1: %s\n", n, kNumVariants - 1, ok ? "all bit-identical" : "MISMATCHES");
  for (bool cold : {false, true})
    for (int64_t k : {4096, 8192, 14336})
      for (int64_t m : {16, 64, 128, 256, 1024, 4096}) { bench<false>(m, k, cold); bench<true>(m, k, cold); }
  return ok ? 0 : 1;
}
