#include "runtime/parallel/groups.h"

#include <regex>

namespace hypertrain::parallel {

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
  g.reshard_after_forward = contract::ReshardsAfterForward(strategy);
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

std::string TransportPeerAddress(const std::string& transport_error) {
  // "[host]:port"; Gloo's "[file.cc:123] " source prefix has no ":port" after it.
  static const std::regex kAddress(R"(\[[^\]\s]+\]:[0-9]+)");
  std::smatch m;
  return std::regex_search(transport_error, m, kAddress) ? m.str() : "";
}

std::string DescribeFailedPeer(const std::string& transport_error, const std::vector<PeerAddress>& peers,
                               int local_world_size) {
  for (const PeerAddress& p : peers) {
    if (p.address.empty() || transport_error.find(p.address) == std::string::npos) continue;
    const int node = p.world_rank / (local_world_size > 0 ? local_world_size : 1);
    const std::string who = "peer rank " + std::to_string(p.world_rank) + " (node " + std::to_string(node) + ", " +
                            (p.host.empty() ? "" : "host " + p.host + ", ") + p.address + ")";
    if (transport_error.find("closed by peer") != std::string::npos ||
        transport_error.find("reset by peer") != std::string::npos) {
      return who + " closed the connection: that rank exited or its node was lost";
    }
    return "the failed connection is to " + who;
  }
  return "";
}

}  // namespace hypertrain::parallel
