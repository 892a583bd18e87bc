#include "contract/elastic.h"

namespace hypertrain::contract {

std::optional<int64_t> ElasticAccumulation(int64_t accum, int64_t desired_nodes, int64_t nodes, std::string* error) {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (accum < 1 || desired_nodes < 1 || nodes < 1) {
    *error = "grad_accumulation_steps " + s(accum) + ", desired nodes " + s(desired_nodes) + " and nodes " +
             s(nodes) + " must all be >= 1";
    return std::nullopt;
  }
  const int64_t total = accum * desired_nodes;
  if (total % nodes != 0) {
    *error = "grad_accumulation_steps " + s(accum) + " x " + s(desired_nodes) + " desired nodes = " + s(total) +
             " micro-batches per rank slot do not split evenly over " + s(nodes) + " nodes";
    return std::nullopt;
  }
  return total / nodes;
}

std::string ElasticSizeProblem(int64_t accum, int64_t desired_nodes, int64_t nodes, ShardingStrategy strategy,
                               int64_t requested_shard_degree, int64_t ranks_per_node) {
  std::string error;
  if (!ElasticAccumulation(accum, desired_nodes, nodes, &error)) return error;
  if (!ResolveShardDegree(strategy, requested_shard_degree, nodes * ranks_per_node, ranks_per_node, &error)) {
    return "model.shard_degree on " + std::to_string(nodes) + " nodes: " + error;
  }
  return "";
}

}  // namespace hypertrain::contract
