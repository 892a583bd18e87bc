#pragma once
// Shared by the CUDA PEFT backend tests (peft_backend_test.cc,
// peft_fp8_base_test.cc): a small model, LoRA options, random tokens, a
// frozen base and adapters exact in bf16 written into several backends, and
// the pass / step / comparison helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/backends/cuda/backend.h"
#include "runtime/model/peft.h"

namespace hypertrain::cuda::peft_testing {

using model::ActivationCheckpointing;
using model::Precision;
using model::StateKind;

inline model::ModelConfig SmallConfig(bool tied) {
  model::ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;  // head_dim 64: the bf16 flash kernels
  c.num_key_value_heads = 1;
  c.intermediate_size = 352;
  c.max_context_width = 64;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

inline model::BackendOptions Options(Precision p, double dropout,
                              ActivationCheckpointing ck = ActivationCheckpointing::kNone) {
  model::BackendOptions o;
  o.precision = p;
  o.checkpointing = ck;
  o.micro_batch_size = 2;
  o.seq_len = 64;
  o.seed = 21;
  o.peft.type = model::PeftType::kLora;
  o.peft.rank = 8;
  o.peft.alpha = 16;
  o.peft.dropout = dropout;
  return o;
}

struct Tokens {
  std::vector<int32_t> inputs, targets;
  model::TokenBatch view(uint64_t rng_offset) const {
    model::TokenBatch b{inputs.data(), targets.data(), 2, 64};
    b.rng_offset = rng_offset;
    return b;
  }
};

inline Tokens RandomTokens(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  Tokens t;
  for (int i = 0; i < 128; ++i) {
    t.inputs.push_back(d(rng));
    t.targets.push_back(i % 11 == 3 ? -100 : d(rng));
  }
  return t;
}

// A multiple of 1/1024 with at most 7 significant bits: exact in bf16.
inline float Bf16Exact(std::mt19937& rng, double scale) {
  std::normal_distribution<double> n01;
  const double v = std::round(std::clamp(n01(rng), -3.9, 3.9) * 32.0) / 32.0;  // |v| * 32 <= 125
  return static_cast<float>(v * scale);
}

// The same random base (norms around 1) and adapters (B non-zero, so every
// path matters) in every backend given.
inline void Randomize(const std::vector<model::Backend*>& backends, uint32_t seed) {
  std::mt19937 rng(seed);
  const model::ParamLayout& base = *backends[0]->BaseLayout();
  for (const model::UnitLayout& u : base.units()) {
    std::vector<float> v(u.padded_numel, 0.0f);
    for (const model::TensorSlot& t : u.tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        // Norms 1 + j/64, |j| <= 16: exact in bf16 too.
        v[i] = t.kind == model::TensorKind::kNorm
                   ? 1.0f + static_cast<float>(static_cast<int>(rng() % 33) - 16) / 64.0f
                   : Bf16Exact(rng, 1.0 / 16);
      }
    }
    for (model::Backend* b : backends) {
      ASSERT_TRUE(b->WriteBase(u.index, {0, u.padded_numel}, v.data()).ok());
    }
  }
  const model::ParamLayout& ad = backends[0]->layout();
  for (const model::UnitLayout& u : ad.units()) {
    std::vector<float> v(u.padded_numel, 0.0f);
    for (const model::TensorSlot& t : u.tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) v[i] = Bf16Exact(rng, 1.0 / 64);
    }
    for (model::Backend* b : backends) {
      ASSERT_TRUE(b->WriteState(u.index, StateKind::kMasterParams, v.data()).ok());
    }
  }
}

inline std::vector<float> Read(model::Backend& b, int u, StateKind k) {
  std::vector<float> v(b.Owned(u).size());
  const Status st = b.ReadState(u, k, v.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return v;
}

inline std::vector<float> ReadAll(model::Backend& b, StateKind k) {
  std::vector<float> all;
  for (int u = 0; u < b.layout().num_units(); ++u) {
    const std::vector<float> v = Read(b, u, k);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// ||x - ref|| / ||ref||.
inline double RelL2(const std::vector<float>& x, const std::vector<float>& ref) {
  EXPECT_EQ(x.size(), ref.size());
  double d = 0, n = 0;
  for (size_t i = 0; i < x.size() && i < ref.size(); ++i) {
    d += (double(x[i]) - ref[i]) * (double(x[i]) - ref[i]);
    n += double(ref[i]) * ref[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

inline double Norm(const std::vector<float>& x) {
  double n = 0;
  for (float v : x) n += double(v) * v;
  return std::sqrt(n);
}

inline double Pass(model::Backend& b, const Tokens& t, uint64_t rng_offset) {
  model::NoOpUnitHooks hooks;
  EXPECT_TRUE(b.ZeroGrads().ok());
  auto loss = b.ForwardBackward(t.view(rng_offset), 1.0f, hooks);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  return loss.ok() ? *loss : NAN;
}

// One optimizer step as runtime/train drives it (global-norm clipping at 1).
// Comparisons across backends pass a large eps: AdamW's first steps are
// nearly sign(g), so a gradient within rounding of zero would flip a whole
// lr-sized update; with eps above the gradients the update is ~linear in g.
inline double TrainStep(model::Backend& b, const Tokens& t, int step, float eps = 1e-8f) {
  const double loss = Pass(b, t, static_cast<uint64_t>(step));
  double sumsq = 0;
  for (int u = 0; u < b.layout().num_units(); ++u) sumsq += *b.GradSumSquares(u);
  kernels::AdamWParams p;
  p.lr = 1e-3f;
  p.weight_decay = 0.1f;
  p.step = step;
  p.eps = eps;
  p.grad_scale = static_cast<float>(std::min(1.0, 1.0 / (std::sqrt(sumsq) + 1e-6)));
  for (int u = 0; u < b.layout().num_units(); ++u) EXPECT_TRUE(b.OptimizerStep(u, p).ok());
  return loss;
}

struct Pair {
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<CudaBackend> gpu;
};

inline Pair MakePair(const model::ModelConfig& c, const model::BackendOptions& o) {
  Pair p;
  auto cpu = cpu::CpuBackend::Create(c, o);
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto gpu = CudaBackend::Create(c, o);
  EXPECT_TRUE(gpu.ok()) << gpu.status().ToString();
  if (cpu.ok()) p.cpu = std::move(*cpu);
  if (gpu.ok()) p.gpu = std::move(*gpu);
  return p;
}

struct Tolerance {
  double loss;      // relative
  double grads;     // relative L2, per unit
  double updates;   // relative L2 of the adapters' change after the steps
};

}  // namespace hypertrain::cuda::peft_testing
