#include "runtime/model/peft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hypertrain::model {
namespace {

TEST(PeftTest, AdapterLayoutHasPeftNamesAndShapes) {
  const ModelConfig c = *NamedModelConfig("tiny");
  PeftOptions o;
  o.type = PeftType::kLora;
  o.rank = 4;
  o.targets = {kQProj, kVProj, kDownProj};
  auto l = BuildAdapterLayout(c, o);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->num_units(), 1 + c.num_hidden_layers);
  EXPECT_TRUE(l->unit(0).tensors.empty());
  EXPECT_GE(l->unit(0).padded_numel, 1);
  const UnitLayout& b = l->unit(ParamLayout::BlockUnit(1));
  ASSERT_EQ(b.tensors.size(), 6u);
  EXPECT_EQ(b.tensors[0].name, "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(b.tensors[0].shape, (std::vector<int64_t>{4, c.hidden_size}));
  EXPECT_EQ(b.tensors[1].name, "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(b.tensors[1].shape, (std::vector<int64_t>{c.q_dim(), 4}));
  EXPECT_EQ(b.tensors[5].name, "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  EXPECT_EQ(b.tensors[4].shape, (std::vector<int64_t>{4, c.intermediate_size}));
  const AdapterSlots s = AdapterSlots::For(o.targets);
  EXPECT_EQ(s.lora_a[kVProj], 2);
  EXPECT_EQ(s.lora_b[kVProj], 3);
  EXPECT_FALSE(s.has(kKProj));
  EXPECT_FALSE(s.has(kInputNorm));
}

// Llama-3.2-1B, rank 16 on all seven projections: 11,272,192 adapter
// parameters (what PEFT's print_trainable_parameters reports for it).
TEST(PeftTest, FlopsPerTokenCountNoBaseWeightGradients) {
  const ModelConfig c = *NamedModelConfig("1b");
  PeftOptions o;
  o.type = PeftType::kLora;
  o.rank = 16;
  auto f = PeftTrainFlopsPerToken(c, o, 2048);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const double attention = 12.0 * 16 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(*f, 4.0 * static_cast<double>(c.NumMatmulParams()) + 6.0 * 11272192 + attention);
  EXPECT_LT(*f, c.TrainFlopsPerToken(2048));
  o.type = PeftType::kNone;
  EXPECT_FALSE(PeftTrainFlopsPerToken(c, o, 2048).ok());
}

TEST(PeftTest, InitIsPeftsKaimingUniformAndZeroB) {
  const ModelConfig c = *NamedModelConfig("tiny");
  PeftOptions o;
  o.type = PeftType::kLora;
  o.rank = 8;
  auto l = *BuildAdapterLayout(c, o);
  const UnitLayout& u = l.unit(1);
  std::vector<float> w(u.padded_numel);
  InitUnitParams(l, 1, 3, {0, u.padded_numel}, w.data());
  for (const TensorSlot& t : u.tensors) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
    double sum = 0, sq = 0;
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
      if (t.kind == TensorKind::kLoraB) {
        ASSERT_EQ(w[i], 0.0f);
      } else {
        ASSERT_LE(std::abs(w[i]), bound);
        sum += w[i];
        sq += w[i] * w[i];
      }
    }
    if (t.kind == TensorKind::kLoraA) {
      // U(-b, b): mean 0, variance b^2 / 3.
      EXPECT_NEAR(sum / t.numel, 0.0, 0.1 * bound);
      EXPECT_NEAR(sq / t.numel, bound * bound / 3, 0.15 * bound * bound / 3);
    }
  }
}

TEST(PeftTest, ParsingAndValidation) {
  EXPECT_EQ(*ParsePeftType("LORA"), PeftType::kLora);
  EXPECT_EQ(*ParsePeftType("qlora"), PeftType::kQlora);
  EXPECT_EQ(*ParsePeftType(""), PeftType::kNone);
  EXPECT_FALSE(ParsePeftType("ia3").ok());
  EXPECT_EQ(*ParseTargetModule("gate_proj"), kGateProj);
  EXPECT_EQ(*ParseTargetModule("o"), kOProj);
  EXPECT_NE(ParseTargetModule("lm_head").status().message().find("q_proj, k_proj"), std::string::npos);
  PeftOptions o;
  o.type = PeftType::kLora;
  EXPECT_TRUE(o.Validate().ok());
  o.dropout = 1.0;
  EXPECT_NE(o.Validate().message().find("model.peft.dropout"), std::string::npos);
  o.dropout = 0.1;
  o.rank = 0;
  EXPECT_NE(o.Validate().message().find("model.peft.rank"), std::string::npos);
  o.rank = 32;
  o.alpha = 16;
  EXPECT_DOUBLE_EQ(o.scaling(), 0.5);
}

TEST(PeftTest, DropoutKeepsAboutOneMinusP) {
  PeftOptions o;
  o.type = PeftType::kLora;
  o.dropout = 0.25;
  const DropoutMask m = MakeDropoutMask(o, 1, 2, 3, kQProj);
  ASSERT_TRUE(m.active());
  EXPECT_FLOAT_EQ(m.scale, 1.0f / 0.75f);
  int kept = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) kept += DropoutKeep(m.key, i, m.threshold);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.005);
  // Masks differ across passes, layers and targets.
  const DropoutMask m2 = MakeDropoutMask(o, 1, 3, 3, kQProj);
  const DropoutMask m3 = MakeDropoutMask(o, 1, 2, 3, kKProj);
  EXPECT_NE(m.key, m2.key);
  EXPECT_NE(m.key, m3.key);
  o.dropout = 0;
  EXPECT_FALSE(MakeDropoutMask(o, 1, 2, 3, kQProj).active());
}

}  // namespace
}  // namespace hypertrain::model
