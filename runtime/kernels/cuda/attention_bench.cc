// Times the CUDA attention kernels (not a test): median of many runs, CUDA
// events, random bf16 inputs, for the 1b-like and 125m-like attention shapes.
// FLOPs counted as causal: forward 4*B*T^2*H*D/2, backward 2.5x that (the
// dense-equivalent work; the deterministic dQ pass does more than that).
// Times each implementation (default: tiled, cudnn, cudnn-fast) for the 1b
// (H 32 / KV 8 / D 64), 125m (H 12 / KV 4 / D 64) and a D 128 shape; --fused
// lays q/k/v out as slices of one fused QKV row, as the trainer does.
//   bazel run //runtime/kernels/cuda:attention_bench [-- --iters=N --impl=NAME[,NAME] --fused]
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

#include "core/log.h"
#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/bench_timing.h"
#include "runtime/kernels/cuda/attention_cudnn.h"
#include "runtime/kernels/cuda/attention_internal.h"

namespace hypertrain::kernels::cuda {
namespace {

using bench::CheckStatus;
using bench::MedianMs;
using bench::RandomBf16Device;

void Run(int B, int T, int H, int KV, int D, int iters, internal::Impl impl, bool fused) {
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
  // One buffer for q, k, v (and one for their gradients): [q | k | v] blocks,
  // or with --fused interleaved rows of width (H + 2 KV) D.
  char* qkv = reinterpret_cast<char*>(RandomBf16Device(rng, nq + 2 * nkv));
  void* dout = RandomBf16Device(rng, nq);
  char* dqkv = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&dqkv, (nq + 2 * nkv) * 2));
  void *q = qkv, *k = qkv + nq * 2, *v = qkv + (nq + nkv) * 2;
  void *dq = dqkv, *dk = dqkv + nq * 2, *dv = dqkv + (nq + nkv) * 2;
  if (fused) {
    p.q_row_stride = p.k_row_stride = p.v_row_stride = int64_t(H + 2 * KV) * D;
    k = qkv + size_t(H) * D * 2, v = qkv + size_t(H + KV) * D * 2;
    dk = dqkv + size_t(H) * D * 2, dv = dqkv + size_t(H + KV) * D * 2;
  }
  void *out, *ws;
  float* lse;
  const size_t ws_bytes = internal::BackwardWorkspaceBytes(impl, p);
  HT_BENCH_CHECK(cudaMalloc(&out, nq * 2));
  HT_BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  HT_BENCH_CHECK(cudaMalloc(&lse, size_t(B) * H * T * 4));
  cudaStream_t stream;
  HT_BENCH_CHECK(cudaStreamCreate(&stream));

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
  HT_BENCH_CHECK(cudaGetLastError());
  const double fwd_flops = 4.0 * B * double(T) * T * H * D / 2;
  const double bwd_flops = 2.5 * fwd_flops;
  std::printf("%-10s B=%-2d T=%-5d H=%-2d KV=%-2d D=%-3d%s | fwd %7.3f ms %6.1f TFLOP/s | "
              "bwd %7.3f ms %6.1f TFLOP/s | fwd+bwd %7.3f ms %6.1f TFLOP/s | ws %.1f MiB\n",
              AttentionImplName(impl), B, T, H, KV, D, fused ? " fused" : "", fwd_ms,
              fwd_flops / fwd_ms * 1e-9, bwd_ms, bwd_flops / bwd_ms * 1e-9, fwd_ms + bwd_ms,
              (fwd_flops + bwd_flops) / (fwd_ms + bwd_ms) * 1e-9, ws_bytes / 1048576.0);
  std::fflush(stdout);
  for (void* ptr : {static_cast<void*>(qkv), static_cast<void*>(dqkv), dout, out, ws}) {
    HT_BENCH_CHECK(cudaFree(ptr));
  }
  HT_BENCH_CHECK(cudaFree(lse));
  HT_BENCH_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace hypertrain::kernels::cuda

int main(int argc, char** argv) {
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  using hypertrain::kernels::cuda::internal::Impl;
  namespace internal = hypertrain::kernels::cuda::internal;
  int iters = 50;
  bool fused = false;
  std::vector<Impl> impls = {Impl::kTiled, Impl::kCudnn, Impl::kCudnnFast};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--iters=", 0) == 0) {
      iters = std::max(1, std::atoi(a.c_str() + 8));
    } else if (a == "--fused") {
      fused = true;
    } else if (a.rfind("--impl=", 0) == 0) {
      impls.clear();
      std::string list = a.substr(7);
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const auto impl = hypertrain::kernels::ParseAttentionImpl(list.substr(pos, comma - pos));
        if (!impl.ok()) {
          std::fprintf(stderr, "%s\n", impl.status().ToString().c_str());
          return 2;
        }
        impls.push_back(*impl);
        pos = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--iters=N] [--impl=auto|cudnn|cudnn-fast|tiled|simple,...] "
                   "[--fused]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  HT_BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), cuDNN %zu, median of %d runs, bf16, causal\n", prop.name,
              prop.multiProcessorCount, hypertrain::kernels::cuda::cudnn_attention::LoadedVersion(),
              iters);
  struct Shape {
    int b, t, h, kv, d;
  };
  const Shape shapes[] = {{4, 2048, 32, 8, 64},    // 1b: bs 4 x 2048
                          {16, 2048, 12, 4, 64},   // 125m: bs 16 x 2048
                          {4, 2048, 32, 8, 128}};  // head_dim 128 (8b-like heads)
  for (const Shape& s : shapes) {
    for (Impl impl : impls) {
      hypertrain::kernels::cuda::Run(s.b, s.t, s.h, s.kv, s.d, iters, impl, fused);
    }
  }
  return 0;
}
