#pragma once
// Elastic TrainingJobs (spec.elastic): which node counts a job may run on and
// how the trainer keeps the training identical on each.
//
// The trainer config describes the job at its desired size D (spec.nodes; the
// operator passes it as HYPERTRAIN_DESIRED_NNODES): its global batch is
//   micro_batch x grad_accumulation_steps x D x ranks_per_node
// sequences. On N nodes the trainer runs grad_accumulation_steps x D / N
// micro-batches per optimizer step, so the global batch, the samples of every
// step (runtime/data/sampler.h) and with them the learning-rate schedule and
// step count are those of the desired size. N must divide
// grad_accumulation_steps x D; the shard degree rule (sharding.h) must hold for
// the world of N nodes. The operator only picks such sizes (ElasticSizeProblem)
// and the trainer refuses any other at start (exit 2, naming the numbers).

#include <cstdint>
#include <optional>
#include <string>

#include "contract/sharding.h"

namespace hypertrain::contract {

// The micro-batches per step on `nodes` nodes: accum x desired_nodes / nodes.
// nullopt with *error set (e.g. "grad_accumulation_steps 1 x 4 desired nodes
// = 4 micro-batches per rank-set do not split evenly over 3 nodes") when it
// does not divide or an argument is not positive.
std::optional<int64_t> ElasticAccumulation(int64_t accum, int64_t desired_nodes, int64_t nodes, std::string* error);

// Why a job whose config is (accum, strategy, requested shard degree) for
// `desired_nodes` x `ranks_per_node` cannot run on `nodes` nodes; "" when it can.
std::string ElasticSizeProblem(int64_t accum, int64_t desired_nodes, int64_t nodes, ShardingStrategy strategy,
                               int64_t requested_shard_degree, int64_t ranks_per_node);

}  // namespace hypertrain::contract
