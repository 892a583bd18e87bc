#include "contract/elastic.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

int64_t Accum(int64_t accum, int64_t desired, int64_t nodes) {
  std::string error;
  auto a = ElasticAccumulation(accum, desired, nodes, &error);
  EXPECT_TRUE(a.has_value()) << error;
  return a.value_or(-1);
}

TEST(Elastic, FewerNodesRunMoreMicroBatchesPerStep) {
  EXPECT_EQ(Accum(1, 2, 2), 1);
  EXPECT_EQ(Accum(1, 2, 1), 2);  // 2 x 2 ranks -> 1 x 2 ranks: doubled
  EXPECT_EQ(Accum(3, 16, 12), 4);
  EXPECT_EQ(Accum(2, 4, 8), 1);  // above the desired size (maxNodes > nodes)
  EXPECT_EQ(Accum(8, 8, 1), 64);
}

TEST(Elastic, SizesThatBreakTheGlobalBatchAreRefusedWithTheNumbers) {
  std::string error;
  EXPECT_FALSE(ElasticAccumulation(1, 4, 3, &error).has_value());
  EXPECT_EQ(error, "grad_accumulation_steps 1 x 4 desired nodes = 4 micro-batches per rank slot do not split evenly "
                   "over 3 nodes");
  EXPECT_FALSE(ElasticAccumulation(1, 2, 4, &error).has_value());  // growing past what the batch allows
  EXPECT_FALSE(ElasticAccumulation(0, 2, 1, &error).has_value());
  EXPECT_EQ(error, "grad_accumulation_steps 0, desired nodes 2 and nodes 1 must all be >= 1");
  EXPECT_FALSE(ElasticAccumulation(1, 2, 0, &error).has_value());
}

TEST(Elastic, SizeProblemAlsoChecksTheShardDegree) {
  // hybrid_shard within a node: every node count that keeps the batch works.
  EXPECT_EQ(ElasticSizeProblem(1, 4, 2, ShardingStrategy::kHybridShard, 0, 8), "");
  EXPECT_EQ(ElasticSizeProblem(1, 4, 1, ShardingStrategy::kHybridShard, 8, 8), "");
  // A shard group of two nodes cannot run on one.
  EXPECT_EQ(ElasticSizeProblem(1, 4, 1, ShardingStrategy::kHybridShard, 16, 8),
            "model.shard_degree on 1 nodes: 16 does not divide the world size 8");
  EXPECT_EQ(ElasticSizeProblem(1, 4, 2, ShardingStrategy::kHybridShard, 16, 8), "");
  // full_shard follows the world unless a degree is spelled out.
  EXPECT_EQ(ElasticSizeProblem(1, 4, 2, ShardingStrategy::kFullShard, 0, 8), "");
  EXPECT_NE(ElasticSizeProblem(1, 4, 2, ShardingStrategy::kFullShard, 32, 8), "");
  EXPECT_NE(ElasticSizeProblem(1, 4, 3, ShardingStrategy::kHybridShard, 0, 8), "");
}

}  // namespace
}  // namespace hypertrain::contract
