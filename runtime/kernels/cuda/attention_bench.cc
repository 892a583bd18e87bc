// Times the CUDA attention kernels (not a test): median of many runs, CUDA
// events, random bf16 inputs, for the 1b-like and 125m-like attention shapes.
// FLOPs counted as causal: forward 4*B*T^2*H*D/2, backward 2.5x that (the
// dense-equivalent work; the deterministic dQ pass does more than that).
//   bazel run //runtime/kernels:attention_bench [-- --iters=N --impl=simple]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/attention_internal.h"

namespace hypertrain::kernels::cuda {
namespace {

#define BENCH_CHECK(expr)                                                                  \
  do {                                                                                     \
    const cudaError_t e_ = (expr);                                                         \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                   \
                   cudaGetErrorString(e_));                                                \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

void CheckStatus(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    std::exit(1);
  }
}

void* RandomDevice(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> h(n);
  for (auto& x : h) x = __nv_bfloat16_raw(__float2bfloat16_rn(dist(rng))).x;
  void* d = nullptr;
  BENCH_CHECK(cudaMalloc(&d, n * 2));
  BENCH_CHECK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

template <typename Fn>
double MedianMs(int iters, cudaStream_t stream, Fn fn) {
  for (int i = 0; i < 3; ++i) fn();  // warm-up (module load, smem attributes)
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& e : ev) BENCH_CHECK(cudaEventCreate(&e));
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    BENCH_CHECK(cudaEventRecord(ev[i], stream));
    fn();
    BENCH_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < iters; ++i) BENCH_CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
  for (auto& e : ev) BENCH_CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[iters / 2];
}

void Run(int B, int T, int H, int KV, int D, int iters, internal::Impl impl) {
  AttentionParams p;
  p.batch = B;
  p.seq = T;
  p.n_heads = H;
  p.n_kv_heads = KV;
  p.head_dim = D;
  p.scale = 1.0f / std::sqrt(float(D));
  p.dtype = AttentionDtype::kBf16;
  const size_t nq = size_t(B) * T * H * D, nkv = size_t(B) * T * KV * D;
  std::mt19937 rng(1);
  void* q = RandomDevice(rng, nq);
  void* k = RandomDevice(rng, nkv);
  void* v = RandomDevice(rng, nkv);
  void* dout = RandomDevice(rng, nq);
  void *out, *dq, *dk, *dv, *ws;
  float* lse;
  const size_t ws_bytes = AttentionBackwardWorkspaceBytes(p);
  BENCH_CHECK(cudaMalloc(&out, nq * 2));
  BENCH_CHECK(cudaMalloc(&dq, nq * 2));
  BENCH_CHECK(cudaMalloc(&dk, nkv * 2));
  BENCH_CHECK(cudaMalloc(&dv, nkv * 2));
  BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  BENCH_CHECK(cudaMalloc(&lse, size_t(B) * H * T * 4));
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));

  // Tiled forward: time both variants (1 and 2 m-tiles per warp) and the default.
  if (impl == internal::Impl::kTiled) {
    for (int mt : {1, 2}) {
      const double ms = MedianMs(iters, stream, [&] {
        CheckStatus(internal::Forward(impl, p, q, k, v, out, lse, stream, mt));
      });
      std::printf("  forward variant m_tiles=%d: %8.3f ms %6.1f TFLOP/s\n", mt, ms,
                  4.0 * B * double(T) * T * H * D / 2 / ms * 1e-9);
    }
  }
  const double fwd_ms = MedianMs(iters, stream, [&] {
    CheckStatus(internal::Forward(impl, p, q, k, v, out, lse, stream));
  });
  const double bwd_ms = MedianMs(iters, stream, [&] {
    CheckStatus(internal::Backward(impl, p, q, k, v, out, dout, lse, dq, dk, dv, ws, ws_bytes,
                                   stream));
  });
  BENCH_CHECK(cudaGetLastError());
  const double fwd_flops = 4.0 * B * double(T) * T * H * D / 2;
  const double bwd_flops = 2.5 * fwd_flops;
  std::printf("%-7s B=%-2d T=%-5d H=%-2d KV=%-2d D=%-3d | fwd %8.3f ms %6.1f TFLOP/s | "
              "bwd %8.3f ms %6.1f TFLOP/s | fwd+bwd %6.1f TFLOP/s\n",
              internal::ImplName(impl), B, T, H, KV, D, fwd_ms, fwd_flops / fwd_ms * 1e-9,
              bwd_ms, bwd_flops / bwd_ms * 1e-9,
              (fwd_flops + bwd_flops) / (fwd_ms + bwd_ms) * 1e-9);
  std::fflush(stdout);
  for (void* ptr : {q, k, v, dout, out, dq, dk, dv, ws}) BENCH_CHECK(cudaFree(ptr));
  BENCH_CHECK(cudaFree(lse));
  BENCH_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace hypertrain::kernels::cuda

int main(int argc, char** argv) {
  using hypertrain::kernels::cuda::internal::Impl;
  int iters = 50;
  Impl impl = Impl::kTiled;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--iters=", 0) == 0) {
      iters = std::max(1, std::atoi(a.c_str() + 8));
    } else if (a == "--impl=simple") {
      impl = Impl::kSimple;
    } else if (a == "--impl=tiled") {
      impl = Impl::kTiled;
    } else {
      std::fprintf(stderr, "usage: %s [--iters=N] [--impl=tiled|simple]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), median of %d runs, bf16, causal\n", prop.name,
              prop.multiProcessorCount, iters);
  hypertrain::kernels::cuda::Run(4, 2048, 32, 8, 128, iters, impl);   // 1b: bs 4 x 2048
  hypertrain::kernels::cuda::Run(16, 2048, 12, 4, 64, iters, impl);   // 125m: bs 16 x 2048
  return 0;
}
