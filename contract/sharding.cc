#include "contract/sharding.h"

namespace hypertrain::contract {
namespace {

struct Named {
  ShardingStrategy strategy;
  const char* name;
};

constexpr Named kStrategies[] = {
    {ShardingStrategy::kHybridShard, "hybrid_shard"},
    {ShardingStrategy::kFullShard, "full_shard"},
    {ShardingStrategy::kHybridShardZero2, "hybrid_shard_zero2"},
    {ShardingStrategy::kShardGradOp, "shard_grad_op"},
    {ShardingStrategy::kNoShard, "no_shard"},
};

}  // namespace

const std::vector<std::string>& ShardingStrategyNames() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const Named& s : kStrategies) names.emplace_back(s.name);
    return names;
  }();
  return k;
}

const char* ShardingStrategyName(ShardingStrategy s) {
  for (const Named& n : kStrategies) {
    if (n.strategy == s) return n.name;
  }
  return "?";
}

std::optional<ShardingStrategy> ParseShardingStrategy(std::string_view name) {
  for (const Named& n : kStrategies) {
    if (name == n.name) return n.strategy;
  }
  return std::nullopt;
}

std::string UnknownShardingStrategyMessage(std::string_view name) {
  std::string list;
  for (const Named& n : kStrategies) list += (list.empty() ? "" : ", ") + std::string(n.name);
  return "'" + std::string(name) + "' is not one of " + list;
}

std::optional<int64_t> ResolveShardDegree(ShardingStrategy strategy, int64_t requested, int64_t world_size,
                                          int64_t ranks_per_node, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<int64_t> {
    *error = std::move(message);
    return std::nullopt;
  };
  auto s = [](int64_t v) { return std::to_string(v); };
  if (world_size < 1 || ranks_per_node < 1 || world_size % ranks_per_node != 0) {
    return fail("invalid world: " + s(world_size) + " ranks, " + s(ranks_per_node) + " per node");
  }
  if (requested < 0) return fail(s(requested) + " must be >= 0 (0: the strategy's default)");
  int64_t degree = 0;
  switch (strategy) {
    case ShardingStrategy::kHybridShard:
    case ShardingStrategy::kHybridShardZero2:
      degree = requested > 0 ? requested : ranks_per_node;
      break;
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kShardGradOp:
    case ShardingStrategy::kNoShard: {
      const int64_t fixed = strategy == ShardingStrategy::kNoShard ? 1 : world_size;
      if (requested > 0 && requested != fixed) {
        return fail(s(requested) + " conflicts with " + ShardingStrategyName(strategy) + " (which shards over " +
                    s(fixed) + " ranks); use hybrid_shard to choose the degree");
      }
      degree = fixed;
      break;
    }
  }
  if (degree > world_size || world_size % degree != 0) {
    return fail(s(degree) + " does not divide the world size " + s(world_size));
  }
  return degree;
}

bool ReshardsAfterForward(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kHybridShard:
    case ShardingStrategy::kFullShard:
      return true;
    case ShardingStrategy::kHybridShardZero2:
    case ShardingStrategy::kShardGradOp:
    case ShardingStrategy::kNoShard:
      return false;
  }
  return false;
}

bool SplitsEmbeddingGrad(int64_t shard_degree, int64_t tokens_per_rank, int64_t vocab_size) {
  return shard_degree > 1 && tokens_per_rank > 0 && vocab_size > 0 &&
         shard_degree <= vocab_size / tokens_per_rank;  // D * N <= V without overflow
}

}  // namespace hypertrain::contract
