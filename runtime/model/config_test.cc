#include "runtime/model/config.h"

#include <gtest/gtest.h>

namespace hypertrain::model {
namespace {

TEST(ModelConfigTest, OneBIsLlama32) {
  auto c = NamedModelConfig("1b");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->Validate().ok());
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  // Llama-3.2-1B has 1,235,814,400 parameters (tied).
  EXPECT_EQ(c->NumParams(), 1235814400);
}

TEST(ModelConfigTest, EightBParamCount) {
  auto c = NamedModelConfig("8b");
  ASSERT_TRUE(c.ok());
  // Llama-3.1-8B: 8,030,261,248 parameters.
  EXPECT_EQ(c->NumParams(), 8030261248);
}

TEST(ModelConfigTest, AllNamedShapesValid) {
  for (const std::string& n : NamedModelConfigNames()) {
    auto c = NamedModelConfig(n);
    ASSERT_TRUE(c.ok()) << n;
    EXPECT_TRUE(c->Validate().ok()) << n << ": " << c->Validate().ToString();
  }
}

TEST(ModelConfigTest, UnknownNameListsAccepted) {
  auto c = NamedModelConfig("70b");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("tiny, 125m, 1b, 8b"), std::string::npos);
}

TEST(ModelConfigTest, ValidateNamesTheField) {
  ModelConfig c = *NamedModelConfig("tiny");
  c.num_key_value_heads = 3;
  Status s = c.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("num_key_value_heads"), std::string::npos);
  c = *NamedModelConfig("tiny");
  c.hidden_size = 0;
  EXPECT_NE(c.Validate().message().find("model.hidden_size must be > 0"), std::string::npos);
}

TEST(ModelConfigTest, FlopsFormula) {
  ModelConfig c = *NamedModelConfig("125m");
  const double n = static_cast<double>(c.NumMatmulParams());
  // 12 layers of (768*768*2 + 2*768*256 + 3*768*2048) + lm head 32000*768.
  EXPECT_EQ(c.NumMatmulParams(), 12 * (768 * 768 * 2 + 2 * 768 * 256 + 3 * 768 * 2048) + 32000 * 768);
  EXPECT_DOUBLE_EQ(c.TrainFlopsPerToken(2048), 6 * n + 12.0 * 12 * 768 * 2048);
  EXPECT_GT(c.MegatronFlopsPerIteration(1, 2048), 0);
}

}  // namespace
}  // namespace hypertrain::model
