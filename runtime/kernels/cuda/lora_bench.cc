// Times the LoRA adapter ops against the frozen projections they sit beside
// (not a test): CUDA events, median of many runs, random bf16 inputs, one
// transformer block of the Llama-3.2-1B and Llama-3.1-8B shapes at 2x2048
// tokens, rank 16 on all seven projections (the issue 26 benchmark's setup).
// Per block it prints
//   frozen: base GEMMs of a frozen projection (forward Y = X W^T, dX = dY W)
//   adapter: LoraForward + LoraBackward (with dX, dropout off and on)
//   full: a trained projection's three GEMMs (forward, dX, dW in fp32)
// so (frozen + adapter) / full is what LoRA costs in the block GEMMs.
//   bazel run //runtime/kernels:lora_bench [-- --iters=N --rank=R --tokens=T]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/lora.h"

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

void Check(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    std::exit(1);
  }
}

using bf16 = __nv_bfloat16;

bf16* RandomDevice(size_t n, std::mt19937& rng, float scale) {
  std::vector<bf16> h(n);
  std::normal_distribution<float> d(0.0f, scale);
  for (auto& v : h) v = __float2bfloat16_rn(d(rng));
  bf16* p = nullptr;
  BENCH_CHECK(cudaMalloc(&p, n * sizeof(bf16)));
  BENCH_CHECK(cudaMemcpy(p, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
  return p;
}

float* ZeroDeviceF32(size_t n) {
  float* p = nullptr;
  BENCH_CHECK(cudaMalloc(&p, n * sizeof(float)));
  BENCH_CHECK(cudaMemset(p, 0, n * sizeof(float)));
  return p;
}

// Median milliseconds of `iters` timed runs of fn (after 3 warm-up runs).
double MedianMs(int iters, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    BENCH_CHECK(cudaEventRecord(a));
    fn();
    BENCH_CHECK(cudaEventRecord(b));
    BENCH_CHECK(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

struct Proj {
  const char* name;
  int in, out;
};

void BenchModel(const char* model, int hidden, int kv, int inter, int tokens, int rank,
                int iters, Gemm& gemm) {
  const std::vector<Proj> projs = {{"q", hidden, hidden}, {"k", hidden, kv},
                                   {"v", hidden, kv},     {"o", hidden, hidden},
                                   {"gate", hidden, inter}, {"up", hidden, inter},
                                   {"down", inter, hidden}};
  std::mt19937 rng(7);
  double frozen = 0, full = 0, adapter = 0, adapter_dropout = 0;
  for (const Proj& p : projs) {
    bf16* x = RandomDevice(size_t(tokens) * p.in, rng, 1.0f);
    bf16* w = RandomDevice(size_t(p.out) * p.in, rng, 0.02f);
    bf16* y = RandomDevice(size_t(tokens) * p.out, rng, 1.0f);
    bf16* dy = RandomDevice(size_t(tokens) * p.out, rng, 1.0f);
    bf16* dx = RandomDevice(size_t(tokens) * p.in, rng, 1.0f);
    bf16* u = RandomDevice(size_t(tokens) * p.in, rng, 1.0f);
    bf16* a = RandomDevice(size_t(rank) * p.in, rng, 0.02f);
    bf16* b = RandomDevice(size_t(p.out) * rank, rng, 0.02f);
    bf16* t = RandomDevice(size_t(tokens) * rank, rng, 1.0f);
    bf16* dt = RandomDevice(size_t(tokens) * rank, rng, 1.0f);
    float* dw = ZeroDeviceF32(size_t(p.out) * p.in);
    float* da = ZeroDeviceF32(size_t(rank) * p.in);
    float* db = ZeroDeviceF32(size_t(p.out) * rank);
    const GemmShape fwd{tokens, p.out, p.in, false, true};
    const GemmShape bwd_x{tokens, p.in, p.out, false, false};
    const GemmShape bwd_w{p.out, p.in, tokens, true, false};
    auto base = [&] {
      Check(gemm.Matmul(fwd, x, w, DType::kBF16, y, DType::kBF16, 1, 0, nullptr));
      Check(gemm.Matmul(bwd_x, dy, w, DType::kBF16, dx, DType::kBF16, 1, 0, nullptr));
    };
    const double f = MedianMs(iters, base);
    const double full_ms = MedianMs(iters, [&] {
      base();
      Check(gemm.Matmul(bwd_w, dy, x, DType::kBF16, dw, DType::kF32, 1, 1, nullptr));
    });
    const LoraShape s{tokens, p.in, p.out, rank, 2.0f};
    auto lora = [&](const model::DropoutMask& m) {
      return MedianMs(iters, [&] {
        Check(LoraForward<bf16>(gemm, s, y, t, u, x, a, b, m, nullptr));
        Check(LoraBackward<bf16>(gemm, s, dx, da, db, dt, u, dy, x, t, a, b, m, nullptr));
      });
    };
    model::PeftOptions o;
    o.type = model::PeftType::kLora;
    o.dropout = 0.1;
    const double ad = lora(model::DropoutMask{});
    const double ad_drop = lora(model::MakeDropoutMask(o, 1, 1, 0, 0));
    std::printf("%s %-4s [%5d x %5d]: frozen %.3f ms, adapter %.3f ms (dropout 0.1: %.3f), "
                "full %.3f ms\n",
                model, p.name, p.in, p.out, f, ad, ad_drop, full_ms);
    frozen += f;
    full += full_ms;
    adapter += ad;
    adapter_dropout += ad_drop;
    for (void* ptr : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(y),
                      static_cast<void*>(dy), static_cast<void*>(dx), static_cast<void*>(u),
                      static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(t),
                      static_cast<void*>(dt), static_cast<void*>(dw), static_cast<void*>(da),
                      static_cast<void*>(db)}) {
      BENCH_CHECK(cudaFree(ptr));
    }
  }
  std::printf("%s block (%d tokens, rank %d): frozen base %.3f ms + adapters %.3f ms "
              "(dropout 0.1: %.3f) = %.3f ms vs full training %.3f ms: LoRA block GEMMs "
              "%.2fx of full\n",
              model, tokens, rank, frozen, adapter, adapter_dropout, frozen + adapter_dropout,
              full, (frozen + adapter_dropout) / full);
}

int Flag(int argc, char** argv, const char* name, int def) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return std::atoi(argv[i] + n + 1);
  }
  return def;
}

}  // namespace
}  // namespace hypertrain::kernels::cuda

int main(int argc, char** argv) {
  using namespace hypertrain::kernels::cuda;
  const int iters = Flag(argc, argv, "--iters", 30);
  const int rank = Flag(argc, argv, "--rank", 16);
  const int tokens = Flag(argc, argv, "--tokens", 4096);
  auto gemm = Gemm::Create(/*allow_tf32=*/false);
  Check(gemm.status());
  BenchModel("1b", 2048, 512, 8192, tokens, rank, iters, **gemm);
  BenchModel("8b", 4096, 1024, 14336, tokens, rank, iters, **gemm);
  return 0;
}
