// Timing, not a test: the FP8 cast / transpose kernels at the model's
// activation shapes against the copy floor (cudaMemcpy of the same bf16
// tensor), median of 50 runs with CUDA events. Bytes counted: what each
// kernel must read and write (bf16 in 2 B, codes out 1 B each).
//
// SwiGLU's FP8 kernels against the bf16 ones (the same bytes moved).
//
// QLoRA with an FP8 base: NF4 -> e4m3 codes in one pass (nf4_fp8.h) against
// the two passes it replaced (NF4 -> bf16, then the cast) at 8b's weights.
// Bytes: one pass 0.5 in + 1 out per element, two passes 0.5 + 2 + 2 + 1.
//
//   bazel run //runtime/kernels/cuda:fp8_cast_bench   (on a GPU)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/kernels/cuda/bench_timing.h"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/fp8_rope.h"
#include "runtime/kernels/cuda/fp8_swiglu.h"
#include "runtime/kernels/cuda/nf4_dequant.h"
#include "runtime/kernels/cuda/nf4_fp8.h"
#include "runtime/model/nf4.h"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/swiglu.h"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using bench::MedianMs;

void Report(const char* what, int rows, int cols, double bytes, double ms, double floor_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-28s %6d x %-5d %8.1f us %7.0f GB/s  %5.1f%% of copy\n", what, rows, cols,
              ms * 1e3, gbs, 100.0 * gbs / floor_gbs);
}

void Shape(int rows, int cols, std::mt19937& rng, cudaStream_t stream) {
  const size_t n = size_t(rows) * cols;
  bf16* x = bench::RandomBf16Device(rng, n);
  bf16* y = nullptr;
  uint8_t *q = nullptr, *qt = nullptr;
  float *scale = nullptr, *amax = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&y, n * sizeof(bf16)));
  HT_BENCH_CHECK(cudaMalloc(&q, n));
  HT_BENCH_CHECK(cudaMalloc(&qt, n));
  HT_BENCH_CHECK(cudaMalloc(&scale, sizeof(float)));
  HT_BENCH_CHECK(cudaMalloc(&amax, sizeof(float)));
  const float s = 64.0f;
  HT_BENCH_CHECK(cudaMemcpy(scale, &s, sizeof(float), cudaMemcpyHostToDevice));
  HT_BENCH_CHECK(cudaMemset(amax, 0, sizeof(float)));
  const int iters = 50;
  const double copy_ms = MedianMs(iters, stream, [&] {
    HT_BENCH_CHECK(cudaMemcpyAsync(y, x, n * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
  });
  const double floor_gbs = 4.0 * n / (copy_ms * 1e-3) / 1e9;
  Report("copy bf16 (floor)", rows, cols, 4.0 * n, copy_ms, floor_gbs);
  Report("cast (q)", rows, cols, 3.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Fp8Cast(q, x, n, scale, amax, Fp8Format::kE4M3, stream));
         }), floor_gbs);
  Report("cast+transpose (q, qt)", rows, cols, 4.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Fp8CastTranspose(q, qt, x, rows, cols, scale, amax, Fp8Format::kE5M2, stream));
         }), floor_gbs);
  Report("cast+transpose (qt)", rows, cols, 3.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Fp8CastTranspose<bf16>(nullptr, qt, x, rows, cols, scale, nullptr,
                                                 Fp8Format::kE4M3, stream));
         }), floor_gbs);
  Report("transpose codes", rows, cols, 2.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Fp8Transpose(qt, q, rows, cols, stream));
         }), floor_gbs);
  if (cols % 1280 == 0) {  // 125m's q|k|v: 12 + 4 rotated heads of 64, 4 of v
    std::vector<double> inv_freq(32);
    for (int i = 0; i < 32; ++i) inv_freq[i] = std::pow(10000.0, -i / 32.0);
    const std::vector<float> table = RopeCosSinTable(inv_freq, 2048);
    float* dtable = nullptr;
    HT_BENCH_CHECK(cudaMalloc(&dtable, table.size() * sizeof(float)));
    HT_BENCH_CHECK(cudaMemcpy(dtable, table.data(), table.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
    Report("rope bwd (bf16, in place)", rows, 1024, 8.0 * rows * 1024, MedianMs(iters, stream, [&] {
             HT_BENCH_CHECK(RopeBackward<bf16>(y, cols, y, cols, dtable, rows, 2048, 16, 64, stream));
           }), floor_gbs);
    Report("rope bwd + cast+transpose", rows, cols, 4.0 * n, MedianMs(iters, stream, [&] {
             HT_BENCH_CHECK(RopeBackwardFp8Transpose(q, qt, x, rows, cols, dtable, 2048, 16, 64,
                                                     scale, amax, Fp8Format::kE5M2, stream));
           }), floor_gbs);
    HT_BENCH_CHECK(cudaFree(dtable));
  }
  for (void* p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(q),
                  static_cast<void*>(qt), static_cast<void*>(scale), static_cast<void*>(amax)}) {
    HT_BENCH_CHECK(cudaFree(p));
  }
}

// SwiGLU at [rows, cols] (gate|up [rows, 2 cols]): the bf16 kernels and the
// FP8 ones that write the codes and their transpose (the same bytes moved).
void SwiGlu(int rows, int cols, std::mt19937& rng, cudaStream_t stream) {
  const size_t n = size_t(rows) * cols;
  bf16* gu = bench::RandomBf16Device(rng, 2 * n);
  bf16* dout = bench::RandomBf16Device(rng, n);
  bf16 *act = nullptr, *dgu = nullptr;
  uint8_t *q = nullptr, *qt = nullptr;
  float *scale = nullptr, *amax = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&act, n * sizeof(bf16)));
  HT_BENCH_CHECK(cudaMalloc(&dgu, 2 * n * sizeof(bf16)));
  HT_BENCH_CHECK(cudaMalloc(&q, 2 * n));
  HT_BENCH_CHECK(cudaMalloc(&qt, 2 * n));
  HT_BENCH_CHECK(cudaMalloc(&scale, sizeof(float)));
  HT_BENCH_CHECK(cudaMalloc(&amax, sizeof(float)));
  const float s = 64.0f;
  HT_BENCH_CHECK(cudaMemcpy(scale, &s, sizeof(float), cudaMemcpyHostToDevice));
  HT_BENCH_CHECK(cudaMemset(amax, 0, sizeof(float)));
  const int iters = 50;
  const bf16 *g = gu, *u = gu + cols;
  const long st = 2L * cols;
  const double fwd_ms = MedianMs(iters, stream, [&] {
    HT_BENCH_CHECK(SwiGluForward<bf16>(act, cols, g, u, st, rows, cols, stream));
  });
  const double floor_gbs = 6.0 * n / (fwd_ms * 1e-3) / 1e9;
  Report("swiglu fwd bf16", rows, cols, 6.0 * n, fwd_ms, floor_gbs);
  Report("swiglu fwd fp8 (q, qt)", rows, cols, 6.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(SwiGluForwardFp8Transpose(q, qt, g, u, st, rows, cols, scale, amax,
                                                    Fp8Format::kE4M3, stream));
         }), floor_gbs);
  Report("swiglu bwd bf16", rows, cols, 10.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(SwiGluBackward<bf16>(dgu, dgu + cols, st, dout, cols, g, u, st, rows,
                                               cols, stream));
         }), floor_gbs);
  Report("swiglu bwd fp8 (dq, dqt)", rows, cols, 10.0 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(SwiGluBackwardFp8Transpose(q, qt, dout, cols, g, u, st, rows, cols,
                                                     scale, amax, Fp8Format::kE5M2, stream));
         }), floor_gbs);
  for (void* p : {static_cast<void*>(gu), static_cast<void*>(dout), static_cast<void*>(act),
                  static_cast<void*>(dgu), static_cast<void*>(q), static_cast<void*>(qt),
                  static_cast<void*>(scale), static_cast<void*>(amax)}) {
    HT_BENCH_CHECK(cudaFree(p));
  }
}

// One [rows, cols] weight in NF4 (random codes and block scales).
void Nf4ToFp8(int rows, int cols, std::mt19937& rng, cudaStream_t stream) {
  const int64_t n = int64_t(rows) * cols;
  const int64_t blocks = n / model::kNf4BlockSize;
  std::vector<uint8_t> codes(n / 2);
  std::vector<int8_t> sc(blocks);
  std::vector<float> sa((blocks + model::kNf4ScaleGroup - 1) / model::kNf4ScaleGroup);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
  for (int8_t& c : sc) c = static_cast<int8_t>(rng() % 255 - 127);
  for (float& a : sa) a = 0.01f + float(rng() % 1000) * 1e-5f;
  uint8_t *dcodes = nullptr, *q = nullptr;
  int8_t* dsc = nullptr;
  float *dsa = nullptr, *scale = nullptr;
  bf16* tmp = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&dcodes, codes.size()));
  HT_BENCH_CHECK(cudaMalloc(&dsc, sc.size()));
  HT_BENCH_CHECK(cudaMalloc(&dsa, sa.size() * sizeof(float)));
  HT_BENCH_CHECK(cudaMalloc(&scale, sizeof(float)));
  HT_BENCH_CHECK(cudaMalloc(&q, n));
  HT_BENCH_CHECK(cudaMalloc(&tmp, n * sizeof(bf16)));
  HT_BENCH_CHECK(cudaMemcpy(dcodes, codes.data(), codes.size(), cudaMemcpyHostToDevice));
  HT_BENCH_CHECK(cudaMemcpy(dsc, sc.data(), sc.size(), cudaMemcpyHostToDevice));
  HT_BENCH_CHECK(cudaMemcpy(dsa, sa.data(), sa.size() * sizeof(float), cudaMemcpyHostToDevice));
  const float s = 2048.0f;
  HT_BENCH_CHECK(cudaMemcpy(scale, &s, sizeof(float), cudaMemcpyHostToDevice));
  const Nf4View v{dcodes, dsc, dsa, 0.0f, n};
  const int iters = 50;
  const double copy_ms = MedianMs(iters, stream, [&] {
    HT_BENCH_CHECK(cudaMemcpyAsync(q, tmp, n, cudaMemcpyDeviceToDevice, stream));
  });
  const double floor_gbs = 2.0 * n / (copy_ms * 1e-3) / 1e9;
  Report("copy 1 B/element (floor)", rows, cols, 2.0 * n, copy_ms, floor_gbs);
  Report("nf4 -> e4m3, one pass", rows, cols, 1.5 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Nf4ToFp8E4m3(q, v, model::kNf4Codebook, scale, stream));
         }), floor_gbs);
  Report("nf4 -> bf16 -> e4m3", rows, cols, 5.5 * n, MedianMs(iters, stream, [&] {
           HT_BENCH_CHECK(Nf4Dequantize<bf16>(tmp, v, model::kNf4Codebook, stream));
           HT_BENCH_CHECK(Fp8Cast(q, tmp, n, scale, nullptr, Fp8Format::kE4M3, stream));
         }), floor_gbs);
  for (void* p : {static_cast<void*>(dcodes), static_cast<void*>(dsc), static_cast<void*>(dsa),
                  static_cast<void*>(scale), static_cast<void*>(q), static_cast<void*>(tmp)}) {
    HT_BENCH_CHECK(cudaFree(p));
  }
}

}  // namespace
}  // namespace hypertrain::kernels::cuda

int main() {
  using namespace hypertrain::kernels::cuda;
  cudaDeviceProp prop{};
  HT_BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s\n", prop.name);
  cudaStream_t stream = nullptr;
  HT_BENCH_CHECK(cudaStreamCreate(&stream));
  std::mt19937 rng(7);
  // 125m at 16 x 2048 tokens: hidden, q|k|v, intermediate x 2 (gate|up); 1b at 4 x 2048.
  for (int cols : {768, 1280, 4096}) Shape(32768, cols, rng, stream);
  for (int cols : {2048, 8192}) Shape(8192, cols, rng, stream);
  SwiGlu(32768, 2048, rng, stream);  // 125m (the SwiGLU floors: bf16 moves the same bytes)
  SwiGlu(8192, 8192, rng, stream);   // 1b
  Nf4ToFp8(6144, 4096, rng, stream);   // 8b q|k|v
  Nf4ToFp8(28672, 4096, rng, stream);  // 8b gate|up
  HT_BENCH_CHECK(cudaStreamDestroy(stream));
  return 0;
}
