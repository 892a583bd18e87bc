#include "runtime/parallel/groups.h"

namespace hypertrain::dist {

StatusOr<ShardingStrategy> ParseShardingStrategy(const std::string& s) {
  if (s == "hybrid_shard") return ShardingStrategy::kHybridShard;
  if (s == "hybrid_shard_zero2" || s == "_hybrid_shard_zero2") return ShardingStrategy::kHybridShardZero2;
  if (s == "full_shard") return ShardingStrategy::kFullShard;
  if (s == "shard_grad_op") return ShardingStrategy::kShardGradOp;
  if (s == "no_shard") return ShardingStrategy::kNoShard;
  return InvalidArgument("sharding_strategy '" + s +
                         "' is not one of hybrid_shard, hybrid_shard_zero2, full_shard, "
                         "shard_grad_op, no_shard");
}

const char* ShardingStrategyName(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::kHybridShard: return "hybrid_shard";
    case ShardingStrategy::kHybridShardZero2: return "hybrid_shard_zero2";
    case ShardingStrategy::kFullShard: return "full_shard";
    case ShardingStrategy::kShardGradOp: return "shard_grad_op";
    case ShardingStrategy::kNoShard: return "no_shard";
  }
  return "?";
}

StatusOr<GroupLayout> ComputeGroupLayout(ShardingStrategy strategy, int shard_degree,
                                         int world_size, int local_world_size, int rank) {
  auto s = [](int v) { return std::to_string(v); };
  if (world_size < 1 || rank < 0 || rank >= world_size || local_world_size < 1 ||
      world_size % local_world_size != 0) {
    return InvalidArgument("invalid world: rank " + s(rank) + ", world size " + s(world_size) +
                           ", local world size " + s(local_world_size));
  }
  if (shard_degree < 0) return InvalidArgument("shard_degree must be >= 0, got " + s(shard_degree));
  GroupLayout g;
  g.strategy = strategy;
  g.world_size = world_size;
  g.rank = rank;
  int degree = 1;
  switch (strategy) {
    case ShardingStrategy::kHybridShard:
    case ShardingStrategy::kHybridShardZero2:
      degree = shard_degree > 0 ? shard_degree : local_world_size;
      break;
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kShardGradOp:
    case ShardingStrategy::kNoShard: {
      const int fixed = strategy == ShardingStrategy::kNoShard ? 1 : world_size;
      if (shard_degree > 0 && shard_degree != fixed) {
        return InvalidArgument(std::string("shard_degree ") + s(shard_degree) + " conflicts with " +
                               ShardingStrategyName(strategy) + " (which shards over " + s(fixed) +
                               " ranks); use hybrid_shard to choose the degree");
      }
      degree = fixed;
      break;
    }
  }
  if (degree > world_size || world_size % degree != 0) {
    return InvalidArgument("shard_degree " + s(degree) + " must divide the world size " + s(world_size));
  }
  g.shard_degree = degree;
  g.replica_degree = world_size / degree;
  g.shard_group = rank / degree;
  g.shard_rank = rank % degree;
  for (int i = 0; i < degree; ++i) g.shard_ranks.push_back(g.shard_group * degree + i);
  for (int k = 0; k < g.replica_degree; ++k) g.replica_ranks.push_back(g.shard_rank + k * degree);
  g.reshard_after_forward =
      strategy == ShardingStrategy::kHybridShard || strategy == ShardingStrategy::kFullShard;
  return g;
}

}  // namespace hypertrain::dist
