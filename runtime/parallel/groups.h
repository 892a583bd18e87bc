#pragma once
// The process groups of a sharding strategy (the strategies and the
// shard-degree rule are the contract's: contract/sharding.h). Ranks are laid
// out node-major (rank = node * local_world_size + local).
//
//   strategy             shard group                       params kept fwd->bwd
//   hybrid_shard         shard_degree consecutive ranks    no (re-gathered)
//                        (default: the ranks of one node)
//   hybrid_shard_zero2   same as hybrid_shard              yes
//   full_shard           all ranks                         no
//   shard_grad_op        all ranks                         yes
//   no_shard             each rank alone (degree 1)        yes (nothing to gather)
//
// The replica group of a rank holds the ranks with the same position in every
// other shard group: {r % D + k * D}. Gradients are reduce-scattered in the
// shard group and the shards all-reduced across the replica group.
#include <string>
#include <vector>

#include "contract/sharding.h"
#include "core/status.h"

namespace hypertrain::parallel {

using contract::ShardingStrategy;
using contract::ShardingStrategyName;

struct GroupLayout {
  ShardingStrategy strategy = ShardingStrategy::kHybridShard;
  int world_size = 1;
  int rank = 0;
  int shard_degree = 1;      // ranks per shard group
  int replica_degree = 1;    // shard groups (= ranks per replica group)
  int shard_group = 0;       // which shard group this rank is in
  int shard_rank = 0;        // position inside it
  std::vector<int> shard_ranks;    // world ranks of this rank's shard group
  std::vector<int> replica_ranks;  // world ranks of this rank's replica group
  // zero2-style strategies keep the gathered parameters from forward to backward.
  bool reshard_after_forward = true;
  // Data-parallel position for sampling: every rank sees distinct data.
  int dp_rank() const { return rank; }
  int dp_size() const { return world_size; }
};

// shard_degree 0 = the strategy's default. The degree follows the contract's
// rule (contract::ResolveShardDegree); errors (kInvalidArgument) name the
// offending value: degree not dividing the world, or set for a strategy that
// fixes it.
StatusOr<GroupLayout> ComputeGroupLayout(ShardingStrategy strategy, int shard_degree,
                                         int world_size, int local_world_size, int rank);

// "node ranks [1] (ranks [2, 3])": the nodes and world ranks of `ranks`
// (ascending), the node of rank r being r / local_world_size. For messages
// about ranks that never joined or were lost.
std::string DescribeMissingRanks(const std::vector<int>& ranks, int local_world_size);

// One peer of a connected group: the address its end of our connection has
// (what the transport names when that connection fails, e.g. Gloo's
// "Connection closed by peer [10.0.0.7]:41234") and its world rank.
struct PeerAddress {
  std::string address;
  int world_rank = 0;
  std::string host;  // the peer's host name ("" unknown)
};

// The "[10.0.0.7]:41234" a transport error names as the far end of the
// connection that failed (Gloo: "Read error [10.0.0.7]:41234: Connection
// reset by peer", "Connection closed by peer [...]:p"); "" when none.
std::string TransportPeerAddress(const std::string& transport_error);

// When `transport_error` names one of `peers`' addresses, who that peer is and
// what happened to it: "peer rank 3 (node 1, host ip-10-0-0-7,
// [10.0.0.7]:41234) closed the connection: that rank exited or its node was
// lost" (a closed connection),
// else "the failed connection is to peer rank 3 (node 1, ...)"; "" when no
// peer is named (a timeout, a local error).
std::string DescribeFailedPeer(const std::string& transport_error, const std::vector<PeerAddress>& peers,
                               int local_world_size);

}  // namespace hypertrain::parallel
