#pragma once
// The trainer's sharding strategies (model.sharding_strategy, HyperPod recipe
// names) and the shard-degree rule. The operator checks a job's config with
// them at admission; the runtime builds its process groups from them
// (runtime/parallel/groups.h), so an inline config the operator admits is one
// the trainer accepts.
//
//   strategy             shard group (degree D)                 D when 0/absent
//   hybrid_shard         D consecutive ranks, D chosen freely   ranks per node
//   hybrid_shard_zero2   as hybrid_shard                        ranks per node
//   full_shard           all ranks                              world size
//   shard_grad_op        all ranks                              world size
//   no_shard             each rank alone                        1
//
// D must divide the world size. A D given for full_shard, shard_grad_op or
// no_shard must equal the one the strategy fixes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::contract {

enum class ShardingStrategy { kHybridShard, kHybridShardZero2, kFullShard, kShardGradOp, kNoShard };

inline constexpr ShardingStrategy kDefaultShardingStrategy = ShardingStrategy::kHybridShard;

// The accepted names, in the order error messages list them.
const std::vector<std::string>& ShardingStrategyNames();
const char* ShardingStrategyName(ShardingStrategy s);
// nullopt when `name` is none of ShardingStrategyNames().
std::optional<ShardingStrategy> ParseShardingStrategy(std::string_view name);
// "'<name>' is not one of hybrid_shard, full_shard, ..." (no key prefix).
std::string UnknownShardingStrategyMessage(std::string_view name);

// The shard degree of `strategy` for a world of `world_size` ranks with
// `ranks_per_node` per node, from the configured `requested` (0: the
// strategy's default). nullopt with *error set (a message without a key
// prefix, e.g. "3 does not divide the world size 16") when the rule above is
// broken or the world is malformed.
std::optional<int64_t> ResolveShardDegree(ShardingStrategy strategy, int64_t requested, int64_t world_size,
                                          int64_t ranks_per_node, std::string* error);

// Whether `strategy` frees a unit's gathered parameters after its forward and
// gathers them again for backward (hybrid_shard, full_shard: two parameter
// slots suffice), or keeps them from forward to backward (hybrid_shard_zero2,
// shard_grad_op: a slot per block; no_shard holds every unit anyway). The
// runtime's process groups (runtime/parallel/groups.h) and the memory estimate
// (contract/estimate.h) both take it from here.
bool ReshardsAfterForward(ShardingStrategy strategy);

// The split embedding gradient (runtime/parallel/hsdp.h) all-gathers every
// shard rank's token ids and embedding-output gradients: shard_degree x
// tokens_per_rank rows on each GPU. It is used only while those rows are no
// more than the table's (shard_degree * tokens_per_rank <= vocab_size).
// Beyond that the gather would move more bytes than the reduce-scatter of the
// table it replaces, and its buffer would keep growing with the shard degree;
// the embedding unit is then reduce-scattered whole like every other unit. So
// the gather buffer never exceeds vocab_size x (hidden + 1) elements, whatever
// the world size. Both backends and the memory estimate follow this rule.
bool SplitsEmbeddingGrad(int64_t shard_degree, int64_t tokens_per_rank, int64_t vocab_size);

}  // namespace hypertrain::contract
