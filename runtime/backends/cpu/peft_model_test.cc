// CpuModel with LoRA adapters on a frozen base, and packed samples:
// fp64 gradients of every adapter element against finite differences (with
// dropout, packed rows and a frozen base), a packed row against its samples
// run one by one, checkpointing modes bit-identical, and a fresh adapter
// changing nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backends/cpu/model.h"
#include "runtime/model/init.h"
#include "runtime/model/peft.h"

namespace hypertrain::cpu {
namespace {

using model::ActivationCheckpointing;
using model::ModelConfig;
using model::ParamLayout;

ModelConfig Micro() {
  ModelConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.intermediate_size = 12;
  c.max_context_width = 8;
  c.rope_theta = 100.0;
  return c;
}

model::PeftOptions Lora(double dropout) {
  model::PeftOptions o;
  o.type = model::PeftType::kLora;
  o.rank = 2;
  o.alpha = 3;
  o.dropout = dropout;
  return o;
}

// Unit buffers initialised from the layout, then perturbed so that every path
// matters (LoRA B starts at zero; norms at one).
template <typename T>
struct Buffers {
  std::vector<std::vector<T>> p, g;
  std::vector<T*> pp, gp;
  Buffers(const ParamLayout& l, uint64_t seed, double scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01;
    for (int u = 0; u < l.num_units(); ++u) {
      const int64_t n = l.unit(u).padded_numel;
      std::vector<float> f(n);
      model::InitUnitParams(l, u, seed, {0, n}, f.data());
      p.emplace_back(n, T(0));
      for (const auto& t : l.unit(u).tensors) {
        for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
          p.back()[i] = static_cast<T>(t.kind == model::TensorKind::kNorm ? 1.0 + 0.2 * n01(rng)
                                                                          : scale * n01(rng));
        }
      }
      g.emplace_back(n, T(0));
    }
    for (auto& v : p) pp.push_back(v.data());
    for (auto& v : g) gp.push_back(v.data());
  }
  void Zero() {
    for (auto& v : g) std::fill(v.begin(), v.end(), T(0));
  }
};

std::vector<int32_t> Tokens(int64_t n, int64_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % V);
  return t;
}

TEST(PeftModelTest, AdapterGradientsMatchFiniteDifferencesWithDropoutAndPacking) {
  const ModelConfig c = Micro();
  const auto peft = Lora(0.3);
  auto base = *ParamLayout::Build(c, {.tensor_alignment = 4, .pad_multiple = 3});
  auto ad = *model::BuildAdapterLayout(c, peft, {.tensor_alignment = 4, .pad_multiple = 3});
  const int64_t B = 2, T = 8;
  CpuModel<double> m(base, B, T, ActivationCheckpointing::kSelective, -100, &ad, peft, 9);
  Buffers<double> W(base, 1, 0.5), A(ad, 2, 0.5);
  const std::vector<double*> frozen(base.num_units(), nullptr);
  auto in = Tokens(B * T, c.vocab_size, 3), tg = Tokens(B * T, c.vocab_size, 4);
  tg[2] = -100;
  // Row 0: samples of 3 and 5 tokens; row 1: one of 4, one of 2, one of 2.
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 0, 1};
  PassExtras<double> x{pos.data(), 17, &A.pp, &A.gp};
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE(m.ForwardBackward(in.data(), tg.data(), 1.0, W.pp, frozen, hooks, x).ok());
  const double h = 1e-5;
  int checked = 0;
  for (int u = 0; u < ad.num_units(); ++u) {
    for (const auto& t : ad.unit(u).tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        double& w = A.p[u][i];
        const double old = w;
        w = old + h;
        const double fp = *m.Loss(in.data(), tg.data(), W.pp, hooks, x);
        w = old - h;
        const double fm = *m.Loss(in.data(), tg.data(), W.pp, hooks, x);
        w = old;
        const double num = (fp - fm) / (2 * h);
        ASSERT_NEAR(A.g[u][i], num, 1e-6 + 1e-5 * std::abs(num))
            << t.name << "[" << i - t.offset << "]";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, ad.total_param_numel());
  EXPECT_GT(checked, 0);
  // Another pass number draws other dropout masks: another loss.
  PassExtras<double> y = x;
  y.rng_offset = 18;
  EXPECT_NE(*m.Loss(in.data(), tg.data(), W.pp, hooks, x), *m.Loss(in.data(), tg.data(), W.pp, hooks, y));
}

TEST(PeftModelTest, PackedRowEqualsItsSamplesRunOneByOne) {
  const ModelConfig c = Micro();
  const auto peft = Lora(0.0);
  auto base = *ParamLayout::Build(c);
  auto ad = *model::BuildAdapterLayout(c, peft);
  Buffers<double> W(base, 5, 0.5), A(ad, 6, 0.5);
  const std::vector<double*> frozen(base.num_units(), nullptr);
  model::NoOpUnitHooks hooks;
  // Three samples packed into one row of 8 (lengths 3, 4, 1).
  const std::vector<int64_t> lens = {3, 4, 1};
  auto in = Tokens(8, c.vocab_size, 7), tg = Tokens(8, c.vocab_size, 8);
  tg[0] = -100;  // a prompt token
  std::vector<int32_t> pos;
  for (int64_t L : lens)
    for (int64_t i = 0; i < L; ++i) pos.push_back(static_cast<int32_t>(i));
  int64_t count = 0;
  for (int32_t t : tg) count += t != -100;
  CpuModel<double> packed(base, 1, 8, ActivationCheckpointing::kNone, -100, &ad, peft, 1);
  PassExtras<double> x{pos.data(), 0, &A.pp, &A.gp};
  const double loss = *packed.ForwardBackward(in.data(), tg.data(), static_cast<double>(count),
                                              W.pp, frozen, hooks, x);
  const std::vector<std::vector<double>> packed_grads = A.g;
  A.Zero();
  double sum = 0;
  int64_t start = 0;
  for (int64_t L : lens) {
    CpuModel<double> one(base, 1, L, ActivationCheckpointing::kNone, -100, &ad, peft, 1);
    PassExtras<double> y{nullptr, 0, &A.pp, &A.gp};
    int64_t n = 0;
    for (int64_t i = 0; i < L; ++i) n += tg[start + i] != -100;
    const double l = *one.ForwardBackward(in.data() + start, tg.data() + start,
                                          static_cast<double>(n), W.pp, frozen, hooks, y);
    sum += l * static_cast<double>(n);
    start += L;
  }
  EXPECT_NEAR(loss * static_cast<double>(count), sum, 1e-12 * std::abs(sum));
  for (int u = 0; u < ad.num_units(); ++u) {
    for (size_t i = 0; i < A.g[u].size(); ++i) {
      ASSERT_NEAR(packed_grads[u][i], A.g[u][i], 1e-12 + 1e-10 * std::abs(A.g[u][i]))
          << "unit " << u << " element " << i;
    }
  }
}

TEST(PeftModelTest, CheckpointingModesAreBitIdenticalWithDropout) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.max_context_width = 16;
  auto peft = Lora(0.1);
  peft.rank = 4;
  auto base = *ParamLayout::Build(c);
  auto ad = *model::BuildAdapterLayout(c, peft);
  Buffers<float> W(base, 1, 0.05), A(ad, 2, 0.05);
  const std::vector<float*> frozen(base.num_units(), nullptr);
  auto in = Tokens(2 * 16, c.vocab_size, 3), tg = Tokens(2 * 16, c.vocab_size, 4);
  model::NoOpUnitHooks hooks;
  std::vector<std::vector<std::vector<float>>> grads;
  std::vector<double> losses;
  for (auto mode : {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
                    ActivationCheckpointing::kFull}) {
    CpuModel<float> m(base, 2, 16, mode, -100, &ad, peft, 3);
    A.Zero();
    PassExtras<float> x{nullptr, 5, &A.pp, &A.gp};
    losses.push_back(*m.ForwardBackward(in.data(), tg.data(), 1.0, W.pp, frozen, hooks, x));
    grads.push_back(A.g);
  }
  for (size_t k = 1; k < grads.size(); ++k) {
    EXPECT_EQ(losses[k], losses[0]);
    EXPECT_EQ(grads[k], grads[0]) << "mode " << k;
  }
}

TEST(PeftModelTest, FreshAdapterChangesNothingAndBaseGetsNoGradient) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.max_context_width = 16;
  const auto peft = Lora(0.0);
  auto base = *ParamLayout::Build(c);
  auto ad = *model::BuildAdapterLayout(c, peft);
  Buffers<float> W(base, 1, 0.05);
  // The adapters exactly as initialised: lora_B = 0.
  std::vector<std::vector<float>> ap;
  std::vector<float*> app, agp;
  std::vector<std::vector<float>> ag;
  for (int u = 0; u < ad.num_units(); ++u) {
    ap.emplace_back(ad.unit(u).padded_numel);
    model::InitUnitParams(ad, u, 4, {0, ad.unit(u).padded_numel}, ap.back().data());
    ag.emplace_back(ad.unit(u).padded_numel, 0.0f);
  }
  for (auto& v : ap) app.push_back(v.data());
  for (auto& v : ag) agp.push_back(v.data());
  auto in = Tokens(16, c.vocab_size, 3), tg = Tokens(16, c.vocab_size, 4);
  model::NoOpUnitHooks hooks;
  CpuModel<float> plain(base, 1, 16, ActivationCheckpointing::kNone);
  CpuModel<float> lora(base, 1, 16, ActivationCheckpointing::kNone, -100, &ad, peft, 1);
  const std::vector<float*> frozen(base.num_units(), nullptr);
  const double l0 = *plain.Loss(in.data(), tg.data(), W.pp, hooks);
  PassExtras<float> x{nullptr, 0, &app, &agp};
  const double l1 = *lora.ForwardBackward(in.data(), tg.data(), 1.0, W.pp, frozen, hooks, x);
  EXPECT_EQ(l0, l1);
  // B = 0: lora_A gets no gradient, lora_B does.
  double a_norm = 0, b_norm = 0;
  for (int u = 1; u < ad.num_units(); ++u) {
    for (const auto& t : ad.unit(u).tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        (t.kind == model::TensorKind::kLoraA ? a_norm : b_norm) += ag[u][i] * ag[u][i];
      }
    }
  }
  EXPECT_EQ(a_norm, 0.0);
  EXPECT_GT(b_norm, 0.0);
}

TEST(PeftModelTest, BadPositionsAreRefused) {
  const ModelConfig c = Micro();
  auto base = *ParamLayout::Build(c);
  CpuModel<float> m(base, 1, 8, ActivationCheckpointing::kNone);
  Buffers<float> W(base, 1, 0.05);
  auto in = Tokens(8, c.vocab_size, 3), tg = Tokens(8, c.vocab_size, 4);
  model::NoOpUnitHooks hooks;
  const std::vector<int32_t> bad = {0, 1, 3, 0, 1, 2, 3, 4};
  PassExtras<float> x{bad.data()};
  const auto s = m.Loss(in.data(), tg.data(), W.pp, hooks, x);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("positions[0][2] = 3"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::cpu
