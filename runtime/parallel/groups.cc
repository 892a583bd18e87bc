#include "runtime/parallel/groups.h"

namespace hypertrain::parallel {

StatusOr<ShardingStrategy> ParseShardingStrategy(const std::string& s) {
  std::optional<ShardingStrategy> parsed = contract::ParseShardingStrategy(s);
  if (!parsed) return InvalidArgument("sharding_strategy " + contract::UnknownShardingStrategyMessage(s));
  return *parsed;
}

StatusOr<GroupLayout> ComputeGroupLayout(ShardingStrategy strategy, int shard_degree,
                                         int world_size, int local_world_size, int rank) {
  auto s = [](int v) { return std::to_string(v); };
  if (world_size < 1 || rank < 0 || rank >= world_size || local_world_size < 1 ||
      world_size % local_world_size != 0) {
    return InvalidArgument("invalid world: rank " + s(rank) + ", world size " + s(world_size) +
                           ", local world size " + s(local_world_size));
  }
  std::string why;
  const std::optional<int64_t> resolved =
      contract::ResolveShardDegree(strategy, shard_degree, world_size, local_world_size, &why);
  if (!resolved) return InvalidArgument("shard_degree " + why);
  const int degree = static_cast<int>(*resolved);
  GroupLayout g;
  g.strategy = strategy;
  g.world_size = world_size;
  g.rank = rank;
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

std::string DescribeMissingRanks(const std::vector<int>& ranks, int local_world_size) {
  auto join = [](const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return "[" + s + "]";
  };
  std::vector<int> nodes;
  for (int r : ranks) {
    const int n = r / (local_world_size > 0 ? local_world_size : 1);
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  return "node ranks " + join(nodes) + " (ranks " + join(ranks) + ")";
}

}  // namespace hypertrain::parallel
