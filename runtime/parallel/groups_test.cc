#include "runtime/parallel/groups.h"

#include <gtest/gtest.h>

namespace hypertrain::parallel {
namespace {

TEST(Groups, HybridShardDefaultsToTheNode) {
  auto g = ComputeGroupLayout(ShardingStrategy::kHybridShard, 0, 8, 4, 6);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shard_degree, 4);
  EXPECT_EQ(g->replica_degree, 2);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{2, 6}));
  EXPECT_EQ(g->shard_rank, 2);
  EXPECT_TRUE(g->reshard_after_forward);
}

TEST(Groups, StrategiesAndDegrees) {
  auto g = ComputeGroupLayout(ShardingStrategy::kHybridShardZero2, 2, 8, 4, 5);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_FALSE(g->reshard_after_forward);
  g = ComputeGroupLayout(ShardingStrategy::kFullShard, 0, 4, 2, 3);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{3}));
  g = ComputeGroupLayout(ShardingStrategy::kNoShard, 0, 4, 2, 3);
  EXPECT_EQ(g->shard_ranks, (std::vector<int>{3}));
  EXPECT_EQ(g->replica_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(g->reshard_after_forward);
}

// The layout takes reshard-after-forward from the contract's one rule, for
// every strategy and every degree it accepts on 8 ranks of 4 per node.
TEST(Groups, ReshardAfterForwardFollowsTheContract) {
  for (const std::string& name : contract::ShardingStrategyNames()) {
    const ShardingStrategy strategy = *contract::ParseShardingStrategy(name);
    for (int degree : {0, 1, 2, 4, 8}) {
      auto g = ComputeGroupLayout(strategy, degree, 8, 4, 5);
      if (!g.ok()) continue;  // a degree this strategy does not allow
      EXPECT_EQ(g->reshard_after_forward, contract::ReshardsAfterForward(strategy)) << name << " degree " << degree;
      EXPECT_EQ(g->reshard_after_forward,
                strategy == ShardingStrategy::kHybridShard || strategy == ShardingStrategy::kFullShard)
          << name;
    }
  }
}

TEST(Groups, ClearErrors) {
  auto bad = ComputeGroupLayout(ShardingStrategy::kHybridShard, 3, 8, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shard_degree 3 does not divide the world size 8"), std::string::npos);
  bad = ComputeGroupLayout(ShardingStrategy::kFullShard, 2, 8, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("conflicts with full_shard"), std::string::npos);
}

TEST(TransportPeerAddress, TheFarEndGlooNames) {
  EXPECT_EQ(TransportPeerAddress("[./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:12205: Connection "
                                 "reset by peer"),
            "[127.0.0.1]:12205");
  EXPECT_EQ(TransportPeerAddress("[../gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.1.2.3]:41234"),
            "[10.1.2.3]:41234");
  EXPECT_EQ(TransportPeerAddress("Write error [::1]:5000: Broken pipe"), "[::1]:5000");
  EXPECT_EQ(TransportPeerAddress("[./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms"), "");
}

TEST(DescribeFailedPeer, NamesThePeerBehindAFailedConnection) {
  const std::vector<PeerAddress> peers = {
      {"[10.0.0.5]:41000", 1, ""}, {"[10.0.0.7]:41234", 3, "ip-10-0-0-7"}, {"[10.0.0.7]:41235", 2, ""}};
  EXPECT_EQ(DescribeFailedPeer("[/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.7]:41234",
                               peers, 2),
            "peer rank 3 (node 1, host ip-10-0-0-7, [10.0.0.7]:41234) closed the connection: that rank exited or "
            "its node was lost");
  EXPECT_EQ(DescribeFailedPeer("Read error [10.0.0.7]:41235: Connection reset by peer", peers, 2),
            "peer rank 2 (node 1, [10.0.0.7]:41235) closed the connection: that rank exited or its node was lost");
  EXPECT_EQ(DescribeFailedPeer("Write error [10.0.0.5]:41000: Broken pipe", peers, 2),
            "the failed connection is to peer rank 1 (node 0, [10.0.0.5]:41000)");
  // No address named (a timeout) or an unknown one: nothing to add.
  EXPECT_EQ(DescribeFailedPeer("Timed out waiting 1800000ms for recv operation to complete", peers, 2), "");
  EXPECT_EQ(DescribeFailedPeer("Connection closed by peer [10.0.0.9]:1", peers, 2), "");
}

}  // namespace
}  // namespace hypertrain::parallel
