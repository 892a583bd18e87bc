#include "runtime/launch/env.h"

#include <gtest/gtest.h>

#include <map>

namespace hypertrain::launch {
namespace {

EnvLookup FromMap(const std::map<std::string, std::string>& m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST(Env, PetAliasesFillNodeEnv) {
  auto n = ParseNodeEnv(FromMap({{"PET_MASTER_ADDR", "job-node-0-0.job"},
                                 {"PET_MASTER_PORT", "29400"},
                                 {"PET_NNODES", "2:2"},
                                 {"PET_NODE_RANK", "1"},
                                 {"PET_NPROC_PER_NODE", "4"},
                                 {"HYPERTRAIN_JOB_NAME", "j1"},
                                 {"RESTART_ATTEMPT", "3"}}));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->master_addr, "job-node-0-0.job");
  EXPECT_EQ(n->master_port, 29400);
  EXPECT_EQ(n->nnodes, 2);
  EXPECT_EQ(n->node_rank, 1);
  EXPECT_EQ(n->nproc_per_node, 4);
  EXPECT_EQ(n->world_size, 0);  // unset
  EXPECT_EQ(n->job_id, "j1");
  EXPECT_EQ(n->restart_attempt, 3);
}

// What Kubeflow's training operator puts in a PyTorchJob pod (v1: MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE = pods, RANK = pod index; with nprocPerNode also the
// PET_ variables, whose default is "auto").
TEST(Env, KubeflowPyTorchJobPodsRunUnchanged) {
  auto n = ParseNodeEnv(FromMap({{"MASTER_ADDR", "llama-master-0"},
                                 {"MASTER_PORT", "23456"},
                                 {"WORLD_SIZE", "4"},
                                 {"RANK", "2"},
                                 {"PYTHONUNBUFFERED", "0"}}));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->nnodes, 4);
  EXPECT_EQ(n->node_rank, 2);
  EXPECT_EQ(n->world_size, 0);  // a pod count, not ranks
  EXPECT_EQ(n->master_port, 23456);
  EXPECT_EQ(*LocalWorldSize(*n, 8), 8);
  // With nprocPerNode: PET_NNODES and PET_NODE_RANK; WORLD_SIZE still counts pods.
  n = ParseNodeEnv(FromMap({{"MASTER_ADDR", "llama-master-0"},
                            {"PET_MASTER_ADDR", "llama-master-0"},
                            {"PET_NNODES", "2"},
                            {"PET_NODE_RANK", "1"},
                            {"PET_NPROC_PER_NODE", "8"},
                            {"WORLD_SIZE", "2"},
                            {"RANK", "1"}}));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->nnodes, 2);
  EXPECT_EQ(n->node_rank, 1);
  EXPECT_EQ(*LocalWorldSize(*n, 0), 8);
  // nprocPerNode "auto": the launcher needs its flag, and says so.
  n = ParseNodeEnv(FromMap({{"MASTER_ADDR", "m"}, {"PET_NNODES", "2"}, {"PET_NODE_RANK", "0"}, {"PET_NPROC_PER_NODE", "auto"}}));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->nproc_per_node, 0);
  auto missing = LocalWorldSize(*n, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("is 'auto'"), std::string::npos) << missing.status().message();
  EXPECT_EQ(*LocalWorldSize(*n, 4), 4);
  // A rank's own env (LOCAL_RANK set) is never read as a pod's.
  EXPECT_FALSE(ParseRankEnv(FromMap({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}})).ok());
}

// A rank that torchrun or HyperPod's hyperpodrun (a HyperPodPyTorchJob pod)
// started: the agent's per-worker variables, the pod's NNODES/NPROC_PER_NODE
// from the HyperPod operator, an elastic PET_NNODES range, no NODE_RANK.
TEST(Env, TorchrunAndHyperpodrunWorkersRunUnchanged) {
  std::map<std::string, std::string> worker = {
      {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "16"},
      {"RANK", "13"},              {"LOCAL_RANK", "5"},      {"LOCAL_WORLD_SIZE", "8"},
      {"GROUP_RANK", "1"},         {"GROUP_WORLD_SIZE", "2"}, {"ROLE_RANK", "13"},
      {"TORCHELASTIC_RUN_ID", "llama"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"NNODES", "2"},             {"NPROC_PER_NODE", "8"}};
  auto r = ParseRankEnv(FromMap(worker), /*require_rank_vars=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.nnodes, 2);
  EXPECT_EQ(r->node.node_rank, 1);
  EXPECT_EQ(r->rank, 13);
  EXPECT_EQ(r->local_rank, 5);
  EXPECT_EQ(r->node.master_port, 29500);
  EXPECT_EQ(r->node.StorePort(), 29501) << "the agent serves its own store on MASTER_PORT";
  // Elastic --nnodes=1:4 (PET_NNODES a range): the agent's GROUP_WORLD_SIZE is the size.
  worker.erase("NNODES");
  worker["PET_NNODES"] = "1:4";
  worker["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  r = ParseRankEnv(FromMap(worker), true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node.nnodes, 2);
  EXPECT_EQ(r->node.StorePort(), 29500);
  // A pod's NODE_RANK that contradicts the agent is an error naming both.
  worker["NODE_RANK"] = "0";
  r = ParseRankEnv(FromMap(worker), true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GROUP_WORLD_SIZE/GROUP_RANK (2/1)"), std::string::npos)
      << r.status().message();
  worker.erase("NODE_RANK");
  worker["MASTER_PORT"] = "65535";
  worker["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  r = ParseRankEnv(FromMap(worker), true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("MASTER_PORT + 1"), std::string::npos) << r.status().message();
}

TEST(Env, DefaultsForASingleNode) {
  auto n = ParseNodeEnv(FromMap({}));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->master_addr, "127.0.0.1");
  EXPECT_EQ(n->master_port, 29500);
  EXPECT_EQ(n->nnodes, 1);
  EXPECT_EQ(n->job_id, "default");
  EXPECT_EQ(n->restart_attempt, 0);
  auto r = ParseRankEnv(FromMap({}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->world_size, 1);
  EXPECT_FALSE(ParseRankEnv(FromMap({}), /*require_rank_vars=*/true).ok());
}

TEST(Env, ClearErrors) {
  auto expect_error = [](const std::map<std::string, std::string>& m, const std::string& needle) {
    auto r = ParseRankEnv(FromMap(m));
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error({{"MASTER_PORT", "abc"}}, "MASTER_PORT='abc' is not an integer");
  expect_error({{"MASTER_PORT", "70000"}}, "out of range");
  expect_error({{"MASTER_ADDR", "a"}, {"PET_MASTER_ADDR", "b"}}, "disagree");
  expect_error({{"NNODES", "1:4"}}, "elastic");
  expect_error({{"NNODES", "2"}}, "MASTER_ADDR");
  expect_error({{"NNODES", "2"}, {"NODE_RANK", "2"}, {"MASTER_ADDR", "m"}}, "NODE_RANK=2 must be < NNODES=2");
  expect_error({{"RANK", "0"}}, "WORLD_SIZE is unset");
  const std::map<std::string, std::string> ok = {
      {"MASTER_ADDR", "m"}, {"NNODES", "2"}, {"NODE_RANK", "1"}, {"WORLD_SIZE", "4"},
      {"RANK", "3"},        {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}};
  auto r = ParseRankEnv(FromMap(ok));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rank, 3);
  auto bad = ok;
  bad["RANK"] = "2";
  expect_error(bad, "RANK=2 must equal NODE_RANK (1) x LOCAL_WORLD_SIZE (2) + LOCAL_RANK (1)");
  bad = ok;
  bad["WORLD_SIZE"] = "6";
  expect_error(bad, "WORLD_SIZE=6 must equal NNODES (2) x LOCAL_WORLD_SIZE (2)");
  bad = ok;
  bad["NPROC_PER_NODE"] = "8";
  expect_error(bad, "NPROC_PER_NODE=8 disagrees with LOCAL_WORLD_SIZE=2");
}

TEST(Env, JobNameIsTheStoreIdentity) {
  auto n = ParseNodeEnv(FromMap({{"HYPERTRAIN_JOB_NAME", "llama"}, {"RESTART_ATTEMPT", "2"}}));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->job_id, "llama");
  EXPECT_EQ(n->restart_attempt, 2);
  n = ParseNodeEnv(FromMap({{"HYPERTRAIN_JOB_NAME", "a/b"}}));
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("HYPERTRAIN_JOB_NAME='a/b' must not contain '/'"), std::string::npos);
}

TEST(Env, LocalWorldSizeFromTheFlagElseTheEnvAndCheckedAgainstWorldSize) {
  auto node = [](const std::map<std::string, std::string>& m) {
    auto n = ParseNodeEnv(FromMap(m));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : NodeEnv{};
  };
  // What the operator sets for 2 nodes x 4 ranks.
  const std::map<std::string, std::string> pod = {
      {"MASTER_ADDR", "m"}, {"NNODES", "2"}, {"NODE_RANK", "1"}, {"NPROC_PER_NODE", "4"}, {"WORLD_SIZE", "8"}};
  EXPECT_EQ(node(pod).world_size, 8);
  EXPECT_EQ(*LocalWorldSize(node(pod), 0), 4);
  EXPECT_EQ(*LocalWorldSize(node(pod), 4), 4);
  auto wrong = LocalWorldSize(node(pod), 2);  // a command that starts 2 ranks in an 8-rank job
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(), "WORLD_SIZE=8 disagrees with NNODES (2) x 2 ranks per node (--nproc-per-node)");
  auto bad = pod;
  bad["WORLD_SIZE"] = "6";
  EXPECT_EQ(LocalWorldSize(node(bad), 0).status().message(),
            "WORLD_SIZE=6 disagrees with NNODES (2) x 4 ranks per node (NPROC_PER_NODE)");
  // Local runs set neither WORLD_SIZE nor NPROC_PER_NODE: the flag decides.
  EXPECT_EQ(*LocalWorldSize(node({}), 3), 3);
  EXPECT_NE(LocalWorldSize(node({}), 0).status().message().find("--nproc-per-node is not given"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::launch
