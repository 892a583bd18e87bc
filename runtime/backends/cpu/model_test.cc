// Whole-model checks of CpuModel: fp64 gradient check against finite
// differences, checkpointing modes, micro-batch accumulation, hook order.
#include "runtime/backends/cpu/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/model/init.h"

namespace hypertrain::cpu {
namespace {

using model::ActivationCheckpointing;
using model::ModelConfig;
using model::ParamLayout;

ModelConfig Micro(bool tied) {
  ModelConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.intermediate_size = 12;
  c.max_context_width = 5;
  c.rope_theta = 100.0;
  c.rope_scaling = {model::RopeScalingType::kLlama3, 4.0, 1.0, 2.0, 4};
  c.tie_word_embeddings = tied;
  return c;
}

template <typename T>
struct Params {
  std::vector<std::vector<T>> p, g;
  std::vector<T*> pp, gp;
  Params(const ParamLayout& l, uint64_t seed, double scale = 1.0) {
    for (int u = 0; u < l.num_units(); ++u) {
      const int64_t n = l.unit(u).padded_numel;
      std::vector<float> f(n);
      model::InitUnitParams(l, u, seed, {0, n}, f.data());
      // Larger weights than the 0.02 init so that every path matters.
      p.emplace_back(n);
      for (int64_t i = 0; i < n; ++i) p.back()[i] = static_cast<T>(f[i] == 1.0f ? 1.0 + 0.3 * std::sin(double(i)) : f[i] * scale);
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

class ModelGradCheck : public ::testing::TestWithParam<bool> {};

TEST_P(ModelGradCheck, MatchesFiniteDifferencesInFp64) {
  const ModelConfig c = Micro(GetParam());
  auto layout = *ParamLayout::Build(c, {.tensor_alignment = 4, .pad_multiple = 3});
  const int64_t B = 2, T = 5;
  CpuModel<double> m(layout, B, T, ActivationCheckpointing::kNone);
  Params<double> P(layout, 3, 25.0);  // std 0.5
  auto in = Tokens(B * T, c.vocab_size, 1), tg = Tokens(B * T, c.vocab_size, 2);
  tg[3] = -100;
  tg[7] = -100;
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE(m.ForwardBackward(in.data(), tg.data(), 1.0, P.pp, P.gp, hooks).ok());
  const double h = 1e-5;
  double max_err = 0;
  int checked = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    for (const auto& t : layout.unit(u).tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        double& w = P.p[u][i];
        const double old = w;
        w = old + h;
        const double fp = *m.Loss(in.data(), tg.data(), P.pp, hooks);
        w = old - h;
        const double fm = *m.Loss(in.data(), tg.data(), P.pp, hooks);
        w = old;
        const double num = (fp - fm) / (2 * h);
        const double err = std::abs(num - P.g[u][i]) / std::max(1e-3, std::abs(num));
        max_err = std::max(max_err, std::abs(num - P.g[u][i]));
        ASSERT_LT(err, 1e-5) << t.name << "[" << i - t.offset << "] numeric " << num
                             << " analytic " << P.g[u][i];
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, c.NumParams());
  // Padding and alignment gaps get no gradient.
  int gaps = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    const auto& unit = layout.unit(u);
    for (int64_t i = unit.numel; i < unit.padded_numel; ++i, ++gaps) EXPECT_EQ(P.g[u][i], 0.0);
    for (size_t t = 1; t < unit.tensors.size(); ++t) {
      const int64_t prev_end = unit.tensors[t - 1].offset + unit.tensors[t - 1].numel;
      for (int64_t i = prev_end; i < unit.tensors[t].offset; ++i, ++gaps) EXPECT_EQ(P.g[u][i], 0.0);
    }
  }
  EXPECT_GT(gaps, 0);
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, ModelGradCheck, ::testing::Values(true, false));

TEST(CpuModelTest, CheckpointingModesGiveIdenticalGradients) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.max_context_width = 16;
  auto layout = *ParamLayout::Build(c);
  const int64_t B = 2, T = 16;
  auto in = Tokens(B * T, c.vocab_size, 5), tg = Tokens(B * T, c.vocab_size, 6);
  model::NoOpUnitHooks hooks;
  std::vector<std::vector<std::vector<float>>> grads;
  std::vector<double> losses;
  std::vector<int64_t> bytes;
  for (auto mode : {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
                    ActivationCheckpointing::kFull}) {
    CpuModel<float> m(layout, B, T, mode);
    Params<float> P(layout, 9);
    auto loss = m.ForwardBackward(in.data(), tg.data(), 1.0, P.pp, P.gp, hooks);
    ASSERT_TRUE(loss.ok());
    losses.push_back(*loss);
    grads.push_back(P.g);
    bytes.push_back(m.activation_bytes());
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(losses[0], losses[2]);
  EXPECT_EQ(grads[0], grads[1]);  // bit-identical
  EXPECT_EQ(grads[0], grads[2]);
  EXPECT_GT(bytes[0], bytes[1]);
  EXPECT_GT(bytes[1], bytes[2]);
}

TEST(CpuModelTest, MicroBatchesSumToTheFullBatch) {
  const ModelConfig c = Micro(true);
  auto layout = *ParamLayout::Build(c);
  const int64_t k = 3, b = 2, T = 5;
  auto in = Tokens(k * b * T, c.vocab_size, 7), tg = Tokens(k * b * T, c.vocab_size, 8);
  model::NoOpUnitHooks hooks;
  Params<double> full(layout, 4, 10.0), acc(layout, 4, 10.0);
  CpuModel<double> big(layout, k * b, T, ActivationCheckpointing::kNone);
  const double loss_full = *big.ForwardBackward(in.data(), tg.data(), 1.0, full.pp, full.gp, hooks);
  CpuModel<double> small(layout, b, T, ActivationCheckpointing::kSelective);
  double loss_acc = 0;
  for (int64_t i = 0; i < k; ++i) {
    loss_acc += *small.ForwardBackward(in.data() + i * b * T, tg.data() + i * b * T, 1.0 / k,
                                       acc.pp, acc.gp, hooks) / k;
  }
  EXPECT_NEAR(loss_acc, loss_full, 1e-12);
  for (int u = 0; u < layout.num_units(); ++u) {
    for (size_t i = 0; i < full.g[u].size(); ++i) {
      ASSERT_NEAR(acc.g[u][i], full.g[u][i], 1e-12) << "unit " << u << " elem " << i;
    }
  }
}

class RecordingHooks : public model::UnitHooks {
 public:
  std::vector<std::string> log;
  Status BeforeForward(int u) override { return Add("BF", u); }
  Status AfterForward(int u) override { return Add("AF", u); }
  Status BeforeBackward(int u) override { return Add("BB", u); }
  Status AfterBackward(int u) override { return Add("AB", u); }
  std::string fail_on;

 private:
  Status Add(const char* what, int u) {
    log.push_back(what + std::to_string(u));
    if (log.back() == fail_on) return DeadlineExceeded("injected collective timeout");
    return Status::Ok();
  }
};

TEST(CpuModelTest, CallsHooksInTheDocumentedOrderAndStopsOnError) {
  const ModelConfig c = Micro(true);
  auto layout = *ParamLayout::Build(c);
  CpuModel<float> m(layout, 1, 5, ActivationCheckpointing::kFull);
  Params<float> P(layout, 1);
  auto in = Tokens(5, c.vocab_size, 1), tg = Tokens(5, c.vocab_size, 2);
  RecordingHooks h;
  ASSERT_TRUE(m.ForwardBackward(in.data(), tg.data(), 1.0, P.pp, P.gp, h).ok());
  const std::vector<std::string> want = {"BF0", "BF1", "AF1", "BF2", "AF2", "AF0",
                                         "BB0", "BB2", "AB2", "BB1", "AB1", "AB0"};
  EXPECT_EQ(h.log, want);
  RecordingHooks fail;
  fail.fail_on = "BB2";
  auto r = m.ForwardBackward(in.data(), tg.data(), 1.0, P.pp, P.gp, fail);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(fail.log.back(), "BB2");
}

TEST(CpuModelTest, RejectsOutOfVocabularyTokens) {
  const ModelConfig c = Micro(true);
  auto layout = *ParamLayout::Build(c);
  CpuModel<float> m(layout, 1, 5, ActivationCheckpointing::kNone);
  Params<float> P(layout, 1);
  std::vector<int32_t> in = {1, 2, 11, 0, 0}, tg = {1, 2, 3, 4, 5};
  model::NoOpUnitHooks hooks;
  auto r = m.ForwardBackward(in.data(), tg.data(), 1.0, P.pp, P.gp, hooks);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input token 11 at position 2"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::cpu
