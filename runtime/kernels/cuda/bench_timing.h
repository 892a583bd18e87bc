#pragma once
// What the kernel benchmarks (*_bench.cc; timing, not tests) share: exit on a
// CUDA error or a failed Status, random bf16 device inputs, and the median
// time of many runs measured with CUDA events.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/status.h"

// Exits with the call, file and line when a CUDA call fails.
#define HT_BENCH_CHECK(expr)                                                                     \
  do {                                                                                           \
    const cudaError_t ht_bench_err_ = (expr);                                                    \
    if (ht_bench_err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                         \
                   cudaGetErrorString(ht_bench_err_));                                           \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace hypertrain::kernels::cuda::bench {

inline void CheckStatus(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    std::exit(1);
  }
}

// n bf16 values drawn from N(0, stddev^2), in a new device buffer (cudaFree it).
inline __nv_bfloat16* RandomBf16Device(std::mt19937& rng, size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<__nv_bfloat16> h(n);
  for (auto& v : h) v = __float2bfloat16_rn(dist(rng));
  __nv_bfloat16* d = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&d, n * sizeof(__nv_bfloat16)));
  HT_BENCH_CHECK(cudaMemcpy(d, h.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  return d;
}

// Median milliseconds of `iters` runs of fn(), each timed between two CUDA
// events on `stream` (the stream fn enqueues its work on), after 3 warm-up
// runs (module load, shared-memory attributes, cuBLASLt heuristics). The runs
// are enqueued back to back, with one host synchronisation at the end.
template <typename Fn>
double MedianMs(int iters, cudaStream_t stream, Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  HT_BENCH_CHECK(cudaStreamSynchronize(stream));
  iters = std::max(iters, 1);
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& e : ev) HT_BENCH_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    HT_BENCH_CHECK(cudaEventRecord(ev[i], stream));
    fn();
    HT_BENCH_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  HT_BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) HT_BENCH_CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
  for (auto& e : ev) HT_BENCH_CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[iters / 2];
}

}  // namespace hypertrain::kernels::cuda::bench
