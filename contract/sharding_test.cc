#include "contract/sharding.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

int64_t Degree(ShardingStrategy s, int64_t requested, int64_t world, int64_t per_node) {
  std::string error;
  auto d = ResolveShardDegree(s, requested, world, per_node, &error);
  EXPECT_TRUE(d.has_value()) << error;
  return d.value_or(-1);
}

std::string Error(ShardingStrategy s, int64_t requested, int64_t world, int64_t per_node) {
  std::string error;
  EXPECT_FALSE(ResolveShardDegree(s, requested, world, per_node, &error).has_value());
  return error;
}

TEST(Sharding, NamesParseBackAndUnknownNamesListTheAccepted) {
  ASSERT_EQ(ShardingStrategyNames().size(), 5u);
  for (const std::string& name : ShardingStrategyNames()) {
    auto s = ParseShardingStrategy(name);
    ASSERT_TRUE(s.has_value()) << name;
    EXPECT_EQ(ShardingStrategyName(*s), name);
  }
  EXPECT_EQ(ShardingStrategyName(kDefaultShardingStrategy), std::string("hybrid_shard"));
  EXPECT_FALSE(ParseShardingStrategy("zero3").has_value());
  EXPECT_FALSE(ParseShardingStrategy("Hybrid_Shard").has_value());
  EXPECT_EQ(UnknownShardingStrategyMessage("zero3"),
            "'zero3' is not one of hybrid_shard, full_shard, hybrid_shard_zero2, shard_grad_op, no_shard");
}

TEST(Sharding, DefaultDegreePerStrategy) {
  // 4 nodes x 8 ranks.
  EXPECT_EQ(Degree(ShardingStrategy::kHybridShard, 0, 32, 8), 8);
  EXPECT_EQ(Degree(ShardingStrategy::kHybridShardZero2, 0, 32, 8), 8);
  EXPECT_EQ(Degree(ShardingStrategy::kFullShard, 0, 32, 8), 32);
  EXPECT_EQ(Degree(ShardingStrategy::kShardGradOp, 0, 32, 8), 32);
  EXPECT_EQ(Degree(ShardingStrategy::kNoShard, 0, 32, 8), 1);
}

TEST(Sharding, ChosenDegrees) {
  EXPECT_EQ(Degree(ShardingStrategy::kHybridShard, 16, 16, 8), 16);  // across 2 nodes (HyperPod allows it)
  EXPECT_EQ(Degree(ShardingStrategy::kHybridShard, 2, 16, 8), 2);
  EXPECT_EQ(Degree(ShardingStrategy::kFullShard, 16, 16, 8), 16);  // the fixed degree, spelled out
  EXPECT_EQ(Degree(ShardingStrategy::kNoShard, 1, 16, 8), 1);
}

TEST(Sharding, RuleViolationsSayWhatIsWrong) {
  EXPECT_EQ(Error(ShardingStrategy::kHybridShard, 3, 16, 8), "3 does not divide the world size 16");
  EXPECT_EQ(Error(ShardingStrategy::kHybridShard, 32, 16, 8), "32 does not divide the world size 16");
  EXPECT_EQ(Error(ShardingStrategy::kHybridShard, -1, 16, 8), "-1 must be >= 0 (0: the strategy's default)");
  EXPECT_EQ(Error(ShardingStrategy::kFullShard, 8, 16, 8),
            "8 conflicts with full_shard (which shards over 16 ranks); use hybrid_shard to choose the degree");
  EXPECT_EQ(Error(ShardingStrategy::kNoShard, 2, 16, 8),
            "2 conflicts with no_shard (which shards over 1 ranks); use hybrid_shard to choose the degree");
  EXPECT_EQ(Error(ShardingStrategy::kHybridShard, 0, 12, 8), "invalid world: 12 ranks, 8 per node");
  EXPECT_EQ(Error(ShardingStrategy::kHybridShard, 0, 0, 1), "invalid world: 0 ranks, 1 per node");
}

// The split embedding gradient's gather (D x N token rows) is planned only
// while it is no larger than the table (V rows); never for one rank.
TEST(Sharding, EmbeddingGradSplitsOnlyWithinTheTablesRows) {
  EXPECT_TRUE(SplitsEmbeddingGrad(2, 8192, 128256));
  EXPECT_TRUE(SplitsEmbeddingGrad(15, 8192, 128256));   // 122,880 rows
  EXPECT_FALSE(SplitsEmbeddingGrad(16, 8192, 128256));  // 131,072 > 128,256
  EXPECT_TRUE(SplitsEmbeddingGrad(16, 8016, 128256));   // exactly the table
  EXPECT_FALSE(SplitsEmbeddingGrad(64, 16384, 128256));  // the 8B recipe
  EXPECT_FALSE(SplitsEmbeddingGrad(1, 16, 256));
  EXPECT_FALSE(SplitsEmbeddingGrad(0, 16, 256));
  EXPECT_FALSE(SplitsEmbeddingGrad(2, 0, 256));
  EXPECT_FALSE(SplitsEmbeddingGrad(int64_t{1} << 40, int64_t{1} << 40, 256));  // no overflow
}

// One table: which strategies free gathered parameters after forward. The
// degree does not change the answer (a pooled run of any degree follows it).
TEST(Sharding, ReshardAfterForwardPerStrategy) {
  const struct {
    ShardingStrategy strategy;
    bool reshards;
  } kTable[] = {
      {ShardingStrategy::kHybridShard, true},         {ShardingStrategy::kFullShard, true},
      {ShardingStrategy::kHybridShardZero2, false},   {ShardingStrategy::kShardGradOp, false},
      {ShardingStrategy::kNoShard, false},
  };
  ASSERT_EQ(std::size(kTable), ShardingStrategyNames().size());  // every strategy is in the table
  for (const auto& row : kTable) {
    EXPECT_EQ(ReshardsAfterForward(row.strategy), row.reshards) << ShardingStrategyName(row.strategy);
  }
}

}  // namespace
}  // namespace hypertrain::contract
