#include "operator/api/trainer_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hypertrain::api {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] = R"(
trainer:
  max_steps: 1000
  num_nodes: 2
  devices: 8
model:
  sharding_strategy: hybrid_shard
  shard_degree: 8
  train_batch_size: 4
exp_manager:
  checkpoint_dir: /fsx/ckpt/llama
)";

TEST(TrainerConfigTest, AcceptsARecipeAndSummarises) {
  auto r = ValidateTrainerConfig(kGood, 2, 8);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_steps, 1000);
  EXPECT_EQ(r->sharding_strategy, "hybrid_shard");
  EXPECT_EQ(r->shard_degree, 8);
  EXPECT_EQ(r->checkpoint_dir, "/fsx/ckpt/llama");
  EXPECT_EQ(r->requested_shard_degree, 8);
  EXPECT_EQ(r->grad_accumulation_steps, 1);
}

TEST(TrainerConfigTest, GradientAccumulationInEitherSpelling) {
  auto a = ValidateTrainerConfig("trainer: {}\nmodel: {grad_accumulation_steps: 4}\n", 2, 8);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->grad_accumulation_steps, 4);
  EXPECT_EQ(a->requested_shard_degree, 0);
  auto b = ValidateTrainerConfig("trainer: {}\nmodel: {gradient_accumulation_steps: 3}\n", 2, 8);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->grad_accumulation_steps, 3);
  auto bad = ValidateTrainerConfig("trainer: {}\nmodel: {grad_accumulation_steps: 0}\n", 2, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("model.grad_accumulation_steps: must be > 0"));
}

TEST(TrainerConfigTest, DefaultShardDegreePerStrategy) {
  auto hybrid = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {}\n", 4, 8);
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ(hybrid->sharding_strategy, "hybrid_shard");
  EXPECT_EQ(hybrid->shard_degree, 8);
  EXPECT_FALSE(hybrid->checkpoint_dir.has_value());
  auto full = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: full_shard}\n", 4, 8);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->shard_degree, 32);
  auto none = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: no_shard}\n", 4, 8);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shard_degree, 1);
}

TEST(TrainerConfigTest, ShardDegreeThatContradictsTheStrategyIsRejectedAsTheTrainerWould) {
  // The trainer's rule (contract/sharding.h): admitting this would crash-loop
  // every pod with exit 2.
  auto r = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: full_shard, shard_degree: 8}\n",
                                 2, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("model.shard_degree: 8 conflicts with full_shard"));
  EXPECT_TRUE(
      ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: full_shard, shard_degree: 16}\n", 2, 8)
          .ok());
}

TEST(TrainerConfigTest, ShardDegreeMustDivideTheWorld) {
  auto r = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {shard_degree: 3}\n", 2, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::StartsWith("spec.trainerConfig.inline: "));
  EXPECT_THAT(r.status().message(), HasSubstr("model.shard_degree"));
  EXPECT_THAT(r.status().message(), HasSubstr("world size 16"));
  // Larger than the world.
  EXPECT_FALSE(ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {shard_degree: 32}\n", 2, 8).ok());
  // 16 across 2 nodes (HyperPod's shard_degree > ranks per node) is fine.
  EXPECT_TRUE(ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {shard_degree: 16}\n", 2, 8).ok());
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {shard_degree: -1}\n", 2, 8).status().message(),
              HasSubstr("must be >= 0"));
  auto zero = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {shard_degree: 0}\n", 2, 8);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->shard_degree, 8);
}

TEST(TrainerConfigTest, ShapeMismatchesNameTheKey) {
  auto nodes = ValidateTrainerConfig("trainer: {max_steps: 5, num_nodes: 4}\nmodel: {}\n", 2, 8);
  ASSERT_FALSE(nodes.ok());
  EXPECT_THAT(nodes.status().message(), HasSubstr("trainer.num_nodes: 4 disagrees with spec.nodes 2"));
  auto devices = ValidateTrainerConfig("trainer: {max_steps: 5, devices: 4}\nmodel: {}\n", 2, 8);
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.status().message(), HasSubstr("trainer.devices"));
}

TEST(TrainerConfigTest, RejectsBadYamlAndMissingKeys) {
  auto bad = ValidateTrainerConfig("trainer: [unclosed\n", 1, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not valid YAML"));
  EXPECT_THAT(bad.status().message(), HasSubstr("line"));

  EXPECT_THAT(ValidateTrainerConfig("- a\n- b\n", 1, 1).status().message(), HasSubstr("mapping"));
  EXPECT_THAT(ValidateTrainerConfig("model: {}\n", 1, 1).status().message(),
              HasSubstr("trainer: required section is missing"));
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: 5}\n", 1, 1).status().message(),
              HasSubstr("model: required section is missing"));
  auto no_steps = ValidateTrainerConfig("trainer: {}\nmodel: {}\n", 1, 1);
  ASSERT_TRUE(no_steps.ok());
  EXPECT_EQ(no_steps->max_steps, kDefaultMaxSteps);
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: ten}\nmodel: {}\n", 1, 1).status().message(),
              HasSubstr("trainer.max_steps: 'ten' is not an integer"));
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: -1}\nmodel: {}\n", 1, 1).status().message(),
              HasSubstr("trainer.max_steps: must be > 0"));
  EXPECT_THAT(ValidateTrainerConfig("trainer: 3\nmodel: {}\n", 1, 1).status().message(),
              HasSubstr("trainer: must be a mapping"));
}

TEST(TrainerConfigTest, RejectsUnknownStrategyListingTheAccepted) {
  auto r = ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: zero3}\n", 1, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("model.sharding_strategy: 'zero3' is not one of hybrid_shard"));
  EXPECT_THAT(r.status().message(), HasSubstr("no_shard"));
}

TEST(TrainerConfigTest, OtherFieldChecks) {
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {train_batch_size: 0}\n", 1, 1).status().message(),
              HasSubstr("model.train_batch_size"));
  EXPECT_THAT(ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {}\nexp_manager: {checkpoint_dir: ''}\n", 1, 1)
                  .status()
                  .message(),
              HasSubstr("exp_manager.checkpoint_dir"));
  EXPECT_THAT(
      ValidateTrainerConfig("trainer: {max_steps: 5}\nmodel: {sharding_strategy: no_shard, shard_degree: 2}\n", 1, 2)
          .status()
          .message(),
      HasSubstr("no_shard"));
}

}  // namespace
}  // namespace hypertrain::api
