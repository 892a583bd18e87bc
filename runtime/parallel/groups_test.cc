#include "runtime/parallel/groups.h"

#include <gtest/gtest.h>

namespace hypertrain::parallel {
namespace {

TEST(Groups, HybridShardDefaultsToTheNode) {
  auto g = ComputeGroupLayout(ShardingStrategy::kHybridShard, 0, 8, 4, 6);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shard_degree, 4);
  EXPECT_EQ(g->replica_degree, 2);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{2, 6}));
  EXPECT_EQ(g->shard_rank, 2);
  EXPECT_TRUE(g->reshard_after_forward);
}

TEST(Groups, StrategiesAndDegrees) {
  auto g = ComputeGroupLayout(ShardingStrategy::kHybridShardZero2, 2, 8, 4, 5);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_FALSE(g->reshard_after_forward);
  g = ComputeGroupLayout(ShardingStrategy::kFullShard, 0, 4, 2, 3);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{3}));
  g = ComputeGroupLayout(ShardingStrategy::kNoShard, 0, 4, 2, 3);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{3}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(g->reshard_after_forward);
}

TEST(Groups, ClearErrors) {
  auto bad = ComputeGroupLayout(ShardingStrategy::kHybridShard, 3, 8, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shard_degree 3 does not divide the world size 8"), std::string::npos);
  bad = ComputeGroupLayout(ShardingStrategy::kFullShard, 2, 8, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("conflicts with full_shard"), std::string::npos);
  auto p = ParseShardingStrategy("zero3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'zero3'"), std::string::npos);
  EXPECT_EQ(*ParseShardingStrategy("shard_grad_op"), ShardingStrategy::kShardGradOp);
}

}  // namespace
}  // namespace hypertrain::parallel
