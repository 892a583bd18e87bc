// CreateParallelRuntime's HSDP knobs: accepted values pass, anything else is a
// clear InvalidArgument naming the variable and the accepted values (before
// any rendezvous or backend memory); the backend options it gives PEFT.
#include "runtime/parallel/parallel_runtime.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace hypertrain::parallel {
namespace {

launch::EnvLookup FromMap(const std::map<std::string, std::string>& m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

// Rank 1 of 2 ranks on one node: a multi-process runtime (no store is joined
// until MakeHooks).
std::map<std::string, std::string> TwoRanks() {
  return {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "2"},
          {"RANK", "1"},                {"LOCAL_RANK", "1"},      {"LOCAL_WORLD_SIZE", "2"}};
}

// The HSDP knobs come typed from the config (distributed.*; their HT_*
// environment overrides are mapped and checked in runtime/config).
TEST(ParallelRuntime, HsdpKnobsComeFromTheConfig) {
  for (config::ReduceDtype reduce : {config::ReduceDtype::kFp32, config::ReduceDtype::kBf16}) {
    for (bool split : {false, true}) {
      for (const char* replica : {"overlap", "after"}) {
        config::TrainConfig c;
        c.distributed.reduce_dtype = reduce;
        c.distributed.split_embedding_grad = split;
        c.distributed.replica_reduce = replica;
        c.distributed.rendezvous_timeout_s = 30;
        auto rt = CreateParallelRuntime(c, FromMap(TwoRanks()), nullptr);
        ASSERT_TRUE(rt.ok()) << rt.status().ToString();
        EXPECT_EQ((*rt)->world_size(), 2);
      }
    }
  }
}

// PEFT: the adapters stay whole (no owned ranges, no unit pool) and the
// frozen base is sharded over the shard group: rank 1 of 2 under
// hybrid_shard / full_shard keeps slice 1 of 2; no_shard keeps it whole.
TEST(ParallelRuntime, PeftShardsTheFrozenBaseOverTheShardGroup) {
  const model::ModelConfig m = *model::NamedModelConfig("tiny");
  for (const auto& [strategy, size, rank] :
       std::vector<std::tuple<ShardingStrategy, int, int>>{{ShardingStrategy::kHybridShard, 2, 1},
                                                           {ShardingStrategy::kFullShard, 2, 1},
                                                           {ShardingStrategy::kNoShard, 1, 0}}) {
    config::TrainConfig c;
    c.sharding_strategy = strategy;
    c.distributed.rendezvous_timeout_s = 30;
    auto rt = CreateParallelRuntime(c, FromMap(TwoRanks()), nullptr);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    model::BackendOptions o;
    o.peft.type = model::PeftType::kLora;
    auto sharded = (*rt)->ShardOptions(m, o);
    ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
    EXPECT_EQ(sharded->base_shard.size, size) << ShardingStrategyName(strategy);
    EXPECT_EQ(sharded->base_shard.rank, rank) << ShardingStrategyName(strategy);
    EXPECT_TRUE(sharded->owned.empty()) << ShardingStrategyName(strategy);
    EXPECT_FALSE(sharded->unit_pool) << ShardingStrategyName(strategy);
  }
}

}  // namespace
}  // namespace hypertrain::parallel
