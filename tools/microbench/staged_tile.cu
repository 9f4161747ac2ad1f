// The library's staged row tile (src/cuda/gemv/staged_rows.cu: NBitsMatMul at M = 9..16,
// the activations staged in shared memory as the mma's A operand) compiled here alone,
// without building the library: each form checked against a float64 reference, then
// timed back to back (bqmm-profile's b2b_us: 100 launches in one CUDA graph over copies of
// the weight whose total exceeds 4x the L2) beside the floor (the fastest pure read of the
// same bytes, ../stream_read.cuh). A first look at the tile in under a minute of GPU time;
// its sweep against the planners' choices runs in the profiler (scripts/sweep_cases/staged_rows16.txt).
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Iinclude -Isrc -o /tmp/staged_tile tools/microbench/staged_tile.cu && /tmp/staged_tile
//
// (scripts/gpu_check.sh micro with MICRO=staged_tile does the same.) Float16 activations,
// scales in (0.001, 0.01), blocks of 128, default zero points unless said; splits 4 and 8,
// fragment loads and line loads; N-bit codes (launch_nbits_gemv_staged) and e4m3
// (launch_fp8_gemv_staged, float32 scales).
#include "cuda/gemv/staged_rows.cu"  // the kernel and its launchers, built here
#include "core/tensor.cc"             // dtype_name, for the launcher's messages

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../stream_read.cuh"
#include "microbench.cuh"

namespace {

constexpr int kBlock = 128;
constexpr int kRows = 16;  // activation rows of the host data

constexpr int kStreamThreads = 256;

// e4m3 (bias 7, no infinities; 0x7f / 0xff are NaN and never generated) as a double.
double e4m3_value(uint8_t c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return c & 0x80 ? -v : v;
}

// One weight: codes [n][k * bits / 8] (ORT packing; bits 0: e4m3 [n][k]), scales
// [n][k / 128] (float16; float32 for e4m3), packed zero points [n][ceil(k_blocks * bits /
// 8)] (random where used, else absent), and the float16 activations [16][k].
struct HostWeight {
  int bits, n, k;
  bool zero_points;
  std::vector<uint8_t> codes, zp;
  std::vector<__half> scales, a;
  std::vector<float> fp8_scales;
  bool fp8() const { return bits == 0; }
  int k_blocks() const { return k / kBlock; }
  int zp_row_bytes() const { return (k_blocks() * bits + 7) / 8; }
  double scale(int row, int kb) const {
    const size_t i = static_cast<size_t>(row) * k_blocks() + kb;
    return fp8() ? fp8_scales[i] : __half2float(scales[i]);
  }
  // The weight value before its scale: q - zp, or the e4m3 value.
  double value(int row, int kk) const {
    if (fp8()) return e4m3_value(codes[static_cast<size_t>(row) * k + kk]);
    return code(row, kk) - zero(row, kk / kBlock);
  }
  int code(int row, int kk) const {
    if (bits == 8) return codes[static_cast<size_t>(row) * k + kk];
    const uint8_t b = codes[static_cast<size_t>(row) * (k / 2) + kk / 2];
    return kk % 2 == 0 ? b & 0xF : b >> 4;
  }
  int zero(int row, int kb) const {
    if (!zero_points) return 1 << (bits - 1);
    const uint8_t b = zp[static_cast<size_t>(row) * zp_row_bytes() + (bits == 8 ? kb : kb / 2)];
    return bits == 8 ? b : (kb % 2 == 0 ? b & 0xF : b >> 4);
  }
};

HostWeight make_weight(int bits, int n, int k, bool zero_points, uint32_t seed) {
  std::mt19937 rng(seed);
  HostWeight w{bits, n, k, zero_points, {}, {}, {}, {}, {}};
  w.codes.resize(static_cast<size_t>(n) * k * (w.fp8() ? 8 : bits) / 8);
  for (auto& c : w.codes) {
    c = static_cast<uint8_t>(rng());
    if (w.fp8() && (c & 0x7F) == 0x7F) c ^= 1;  // not NaN
  }
  if (zero_points) {
    w.zp.resize(static_cast<size_t>(n) * w.zp_row_bytes());
    for (auto& z : w.zp) z = static_cast<uint8_t>(rng());
  }
  std::uniform_real_distribution<float> sd(0.001f, 0.01f), ad(-1.0f, 1.0f);
  if (w.fp8()) {
    w.fp8_scales.resize(static_cast<size_t>(n) * w.k_blocks());
    for (auto& s : w.fp8_scales) s = sd(rng);
  } else {
    w.scales.resize(static_cast<size_t>(n) * w.k_blocks());
    for (auto& s : w.scales) s = __float2half(sd(rng));
  }
  w.a.resize(static_cast<size_t>(kRows) * k);
  for (auto& v : w.a) v = __float2half(ad(rng));
  return w;
}

// Max |y - reference| / max |reference| over M rows and every `stride`-th column.
double check(const HostWeight& w, const std::vector<__half>& y, int m, int stride) {
  double max_err = 0, max_ref = 0;
  for (int col = 0; col < w.n; col += stride)
    for (int row = 0; row < m; ++row) {
      double ref = 0;
      for (int kb = 0; kb < w.k_blocks(); ++kb) {
        double part = 0;
        for (int kk = kb * kBlock; kk < (kb + 1) * kBlock; ++kk)
          part += w.value(col, kk) * static_cast<double>(__half2float(w.a[static_cast<size_t>(row) * w.k + kk]));
        ref += part * w.scale(col, kb);
      }
      max_err = std::max(max_err, std::fabs(__half2float(y[static_cast<size_t>(row) * w.n + col]) - ref));
      max_ref = std::max(max_ref, std::fabs(ref));
    }
  return max_err / std::max(max_ref, 1e-30);
}

// Copies of one weight blob (codes, scales, zero points), each 256-byte aligned.
struct DeviceWeight {
  uint8_t* pool = nullptr;
  size_t blob = 0, scale_offset = 0, zp_offset = 0, used = 0;
  int copies = 0;
};

DeviceWeight upload(const HostWeight& w, size_t l2_bytes) {
  DeviceWeight d;
  const auto up = [](size_t x) { return (x + 255) / 256 * 256; };
  d.scale_offset = up(w.codes.size());
  const size_t scale_bytes = w.fp8() ? w.fp8_scales.size() * 4 : w.scales.size() * 2;
  d.zp_offset = up(d.scale_offset + scale_bytes);
  d.used = d.zp_offset + w.zp.size();
  d.blob = up(d.used);
  d.copies = static_cast<int>(4 * l2_bytes / d.blob + 2);
  CK(cudaMalloc(&d.pool, d.blob * d.copies));
  for (int c = 0; c < d.copies; ++c) {
    uint8_t* base = d.pool + c * d.blob;
    CK(cudaMemcpy(base, w.codes.data(), w.codes.size(), cudaMemcpyHostToDevice));
    const void* scales = w.fp8() ? static_cast<const void*>(w.fp8_scales.data()) : w.scales.data();
    CK(cudaMemcpy(base + d.scale_offset, scales, scale_bytes, cudaMemcpyHostToDevice));
    if (!w.zp.empty()) CK(cudaMemcpy(base + d.zp_offset, w.zp.data(), w.zp.size(), cudaMemcpyHostToDevice));
  }
  return d;
}

// Launches the tile on weight copy `copy` (N-bit or e4m3 by w.bits).
bqmm::Status launch_copy(const HostWeight& w, const DeviceWeight& d, int copy, int m, const __half* a,
                         __half* y, int split, bool lines, cudaStream_t stream) {
  const uint8_t* base = d.pool + static_cast<size_t>(copy % d.copies) * d.blob;
  if (w.fp8()) {
    bqmm::cuda::Fp8KernelArgs f;
    f.dtype = bqmm::DType::kFloat16;
    f.a = a;
    f.b = base;
    f.b_scale = reinterpret_cast<const float*>(base + d.scale_offset);
    f.y = y;
    f.m = m;
    f.n = w.n;
    f.k = w.k;
    f.block_size = kBlock;
    return bqmm::cuda::launch_fp8_gemv_staged(f, split, lines, stream);
  }
  bqmm::cuda::NBitsGemvArgs g;
  g.dtype = bqmm::DType::kFloat16;
  g.bits = w.bits;
  g.a = a;
  g.b = base;
  g.scales = base + d.scale_offset;
  g.zp_packed = w.zero_points ? base + d.zp_offset : nullptr;
  g.y = y;
  g.m = m;
  g.n = w.n;
  g.k = w.k;
  g.block_size = kBlock;
  return bqmm::cuda::launch_nbits_gemv_staged(g, split, lines, stream);
}

void run_shape(int bits, int n, int k, bool zero_points, const cudaDeviceProp& prop,
               cudaStream_t stream, uint32_t* out) {
  const HostWeight w = make_weight(bits, n, k, zero_points, 1234u + n + k + bits);
  const DeviceWeight d = upload(w, prop.l2CacheSize);
  __half *a, *y;
  CK(cudaMalloc(&a, w.a.size() * 2));
  CK(cudaMemcpy(a, w.a.data(), w.a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&y, sizeof(__half) * kRows * n));
  double floor = 1e30;
  for (int per_sm : {4, 8})
    floor = std::min(floor, graph_b2b_us(stream, [&](int i) {
      stream_read::read_kernel<kStreamThreads><<<per_sm * prop.multiProcessorCount, kStreamThreads, 0, stream>>>(
          reinterpret_cast<const uint4*>(d.pool + static_cast<size_t>(i % d.copies) * d.blob), d.used / 16, out);
    }, 10, 100, 1));
  printf("\n%d x %d (N x K), %s%s, blocks of 128, float16, %d copies of %.1f MB: floor %.2f us\n", n, k,
         bits == 0 ? "e4m3" : bits == 4 ? "4-bit" : "8-bit", zero_points ? ", packed zero points" : "",
         d.copies, d.blob / 1e6, floor);
  for (const int m : {16, 9})
    for (const bool lines : {false, true})
      for (const int split : {4, 8}) {
        const auto launch = [&](int i) {
          const bqmm::Status s = launch_copy(w, d, i, m, a, y, split, lines, stream);
          if (!s.ok()) {
            printf("launch failed: %s\n", s.message().c_str());
            exit(1);
          }
        };
        CK(cudaMemset(y, 0xFF, sizeof(__half) * kRows * n));  // NaN: an unwritten output fails
        launch(0);
        CK(cudaStreamSynchronize(stream));
        std::vector<__half> hy(static_cast<size_t>(kRows) * n);
        CK(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost));
        bool written = true;
        for (int i = 0; i < m * n; ++i) written = written && !std::isnan(__half2float(hy[i]));
        const double err = check(w, hy, m, n >= 4096 ? 61 : 1);
        const double us = graph_b2b_us(stream, launch, 10, 100, 2);
        printf("  M = %2d  %-6s split %d: %7.2f us  %5.1f %% of floor  rel err %.1e%s\n", m,
               lines ? "lines" : "frags", split, us, 100 * floor / us, err,
               written && err < 2e-3 ? "" : "  WRONG");
      }
  CK(cudaFree(d.pool));
  CK(cudaFree(a));
  CK(cudaFree(y));
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  uint32_t* out;
  CK(cudaMalloc(&out, 4));
  run_shape(4, 8192, 8192, false, prop, stream, out);
  run_shape(4, 8192, 8192, true, prop, stream, out);
  run_shape(8, 8192, 8192, false, prop, stream, out);
  run_shape(4, 14336, 4096, false, prop, stream, out);
  run_shape(4, 4096, 14336, false, prop, stream, out);
  run_shape(0, 8192, 8192, false, prop, stream, out);  // e4m3
  run_shape(4, 1000, 1024, true, prop, stream, out);  // partial column block, every split
  run_shape(0, 1000, 1024, false, prop, stream, out);
  return 0;
}
