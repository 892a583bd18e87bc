#include "runtime/model/layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "runtime/model/init.h"

namespace hypertrain::model {
namespace {

TEST(LayoutTest, UnitsAreContiguousAndNamedLikeHf) {
  ModelConfig c = *NamedModelConfig("tiny");
  auto l = ParamLayout::Build(c, {.tensor_alignment = 64, .pad_multiple = 1});
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->num_units(), 1 + c.num_hidden_layers);
  EXPECT_EQ(l->total_param_numel(), c.NumParams());
  const UnitLayout& b = l->unit(ParamLayout::BlockUnit(2));
  ASSERT_EQ(b.tensors.size(), static_cast<size_t>(kNumBlockTensors));
  EXPECT_EQ(b.tensors[kQProj].name, "model.layers.2.self_attn.q_proj.weight");
  EXPECT_EQ(b.tensors[kKProj].shape, (std::vector<int64_t>{c.kv_dim(), c.hidden_size}));
  EXPECT_EQ(b.tensors[kDownProj].name, "model.layers.2.mlp.down_proj.weight");
  EXPECT_FALSE(b.tensors[kInputNorm].weight_decay);
  EXPECT_TRUE(b.tensors[kGateProj].weight_decay);
  int64_t prev_end = 0;
  for (const TensorSlot& t : b.tensors) {
    EXPECT_EQ(t.offset % 64, 0) << t.name;
    EXPECT_GE(t.offset, prev_end);
    prev_end = t.offset + t.numel;
  }
  EXPECT_EQ(b.numel, prev_end);
  EXPECT_EQ(b.no_decay_ranges.size(), 2u);
  EXPECT_EQ(b.decay_ranges.size(), 7u);
  const UnitLayout& e = l->unit(ParamLayout::kEmbeddingUnit);
  EXPECT_NE(e.Find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(e.Find("lm_head.weight"), nullptr);  // tied
}

TEST(LayoutTest, PaddingToShardMultiple) {
  ModelConfig c = *NamedModelConfig("tiny");
  c.tie_word_embeddings = false;
  auto l = ParamLayout::Build(c, {.tensor_alignment = 1, .pad_multiple = 12});
  ASSERT_TRUE(l.ok());
  EXPECT_NE(l->unit(0).Find("lm_head.weight"), nullptr);
  for (const UnitLayout& u : l->units()) {
    EXPECT_EQ(u.padded_numel % 12, 0);
    EXPECT_GE(u.padded_numel, u.numel);
  }
  EXPECT_FALSE(ParamLayout::Build(c, {.tensor_alignment = 0}).ok());
}

TEST(LayoutTest, InitIsIndependentOfRange) {
  ModelConfig c = *NamedModelConfig("tiny");
  auto l = *ParamLayout::Build(c);
  const UnitLayout& u = l.unit(1);
  std::vector<float> whole(u.padded_numel), a(100), b(u.padded_numel - 100);
  InitUnitParams(l, 1, 7, {0, u.padded_numel}, whole.data());
  InitUnitParams(l, 1, 7, {0, 100}, a.data());
  InitUnitParams(l, 1, 7, {100, u.padded_numel}, b.data());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(whole[i], a[i]);
  for (int64_t i = 100; i < u.padded_numel; ++i) ASSERT_EQ(whole[i], b[i - 100]);
  // Norm weights are 1, linear weights ~ N(0, 0.02).
  EXPECT_EQ(whole[u.tensors[kInputNorm].offset], 1.0f);
  const TensorSlot& q = u.tensors[kQProj];
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < q.numel; ++i) {
    s += whole[q.offset + i];
    s2 += double(whole[q.offset + i]) * whole[q.offset + i];
  }
  EXPECT_NEAR(s / q.numel, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(s2 / q.numel), 0.02, 0.001);
}

}  // namespace
}  // namespace hypertrain::model
