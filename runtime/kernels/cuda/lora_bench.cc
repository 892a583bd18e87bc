// Times the LoRA adapter ops against the frozen projections they sit beside
// (not a test): CUDA events, median of many runs, random bf16 inputs, one
// transformer block of the Llama-3.2-1B and Llama-3.1-8B shapes at 2x2048
// tokens, rank 16 on all seven projections (the issue 26 benchmark's setup).
// Per block it prints
//   frozen: base GEMMs of a frozen projection (forward Y = X W^T, dX = dY W)
//   adapter: LoraForward + LoraBackward (with dX, dropout off and on)
//   full: a trained projection's three GEMMs (forward, dX, dW in fp32)
// so (frozen + adapter) / full is what LoRA costs in the block GEMMs.
//   bazel run //runtime/kernels/cuda:lora_bench [-- --iters=N --rank=R --tokens=T]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/bench_timing.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/lora.h"

namespace hypertrain::kernels::cuda {
namespace {

using bench::CheckStatus;
using bench::MedianMs;
using bench::RandomBf16Device;
using bf16 = __nv_bfloat16;

float* ZeroDeviceF32(size_t n) {
  float* p = nullptr;
  HT_BENCH_CHECK(cudaMalloc(&p, n * sizeof(float)));
  HT_BENCH_CHECK(cudaMemset(p, 0, n * sizeof(float)));
  return p;
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
    bf16* x = RandomBf16Device(rng, size_t(tokens) * p.in, 1.0f);
    bf16* w = RandomBf16Device(rng, size_t(p.out) * p.in, 0.02f);
    bf16* y = RandomBf16Device(rng, size_t(tokens) * p.out, 1.0f);
    bf16* dy = RandomBf16Device(rng, size_t(tokens) * p.out, 1.0f);
    bf16* dx = RandomBf16Device(rng, size_t(tokens) * p.in, 1.0f);
    bf16* u = RandomBf16Device(rng, size_t(tokens) * p.in, 1.0f);
    bf16* a = RandomBf16Device(rng, size_t(rank) * p.in, 0.02f);
    bf16* b = RandomBf16Device(rng, size_t(p.out) * rank, 0.02f);
    bf16* t = RandomBf16Device(rng, size_t(tokens) * rank, 1.0f);
    bf16* dt = RandomBf16Device(rng, size_t(tokens) * rank, 1.0f);
    float* dw = ZeroDeviceF32(size_t(p.out) * p.in);
    float* da = ZeroDeviceF32(size_t(rank) * p.in);
    float* db = ZeroDeviceF32(size_t(p.out) * rank);
    const GemmShape fwd{tokens, p.out, p.in, false, true};
    const GemmShape bwd_x{tokens, p.in, p.out, false, false};
    const GemmShape bwd_w{p.out, p.in, tokens, true, false};
    auto base = [&] {
      CheckStatus(gemm.Matmul(fwd, x, w, DType::kBF16, y, DType::kBF16, 1, 0, nullptr));
      CheckStatus(gemm.Matmul(bwd_x, dy, w, DType::kBF16, dx, DType::kBF16, 1, 0, nullptr));
    };
    const double f = MedianMs(iters, nullptr, base);
    const double full_ms = MedianMs(iters, nullptr, [&] {
      base();
      CheckStatus(gemm.Matmul(bwd_w, dy, x, DType::kBF16, dw, DType::kF32, 1, 1, nullptr));
    });
    const LoraShape s{tokens, p.in, p.out, rank, 2.0f};
    auto lora = [&](const model::DropoutMask& m) {
      return MedianMs(iters, nullptr, [&] {
        CheckStatus(LoraForward<bf16>(gemm, s, y, t, u, x, a, b, m, nullptr));
        CheckStatus(LoraBackward<bf16>(gemm, s, dx, da, db, dt, u, dy, x, t, a, b, m, nullptr));
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
      HT_BENCH_CHECK(cudaFree(ptr));
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
  CheckStatus(gemm.status());
  BenchModel("1b", 2048, 512, 8192, tokens, rank, iters, **gemm);
  BenchModel("8b", 4096, 1024, 14336, tokens, rank, iters, **gemm);
  return 0;
}
