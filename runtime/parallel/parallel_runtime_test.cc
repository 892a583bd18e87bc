// CreateParallelRuntime's HSDP knobs: accepted values pass, anything else is a
// clear InvalidArgument naming the variable and the accepted values (before
// any rendezvous or backend memory).
#include "runtime/parallel/parallel_runtime.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hypertrain::parallel {
namespace {

launch::EnvLookup FromMap(const std::map<std::string, std::string>& m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

// Rank 1 of 2 ranks on one node: a multi-process runtime (no store is joined
// until MakeHooks).
std::map<std::string, std::string> TwoRanks() {
  return {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "2"},
          {"RANK", "1"},                {"LOCAL_RANK", "1"},      {"LOCAL_WORLD_SIZE", "2"}};
}

TEST(ParallelRuntime, HsdpKnobsAcceptTheirValuesAndNameBadOnes) {
  const config::TrainConfig c;
  const std::map<std::string, std::string> good[] = {
      {}, {{"HT_REDUCE_DTYPE", "bf16"}}, {{"HT_REDUCE_DTYPE", "fp32"}},
      {{"HT_SPLIT_EMBEDDING_GRAD", "0"}}, {{"HT_SPLIT_EMBEDDING_GRAD", "1"}},
      {{"HT_REPLICA_REDUCE", "after"}}, {{"HT_REPLICA_REDUCE", "overlap"}},
      {{"HT_REPLICA_REDUCE", ""}}};  // empty: the default
  for (const auto& extra : good) {
    auto env = TwoRanks();
    env.insert(extra.begin(), extra.end());
    auto rt = CreateParallelRuntime(c, FromMap(env), nullptr);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    EXPECT_EQ((*rt)->world_size(), 2);
  }
  const std::pair<std::string, std::string> bad[] = {
      {"HT_REDUCE_DTYPE", "HT_REDUCE_DTYPE='fp16' is not one of fp32, bf16"},
      {"HT_SPLIT_EMBEDDING_GRAD", "HT_SPLIT_EMBEDDING_GRAD='fp16' is not one of 0, 1"},
      {"HT_REPLICA_REDUCE", "HT_REPLICA_REDUCE='fp16' is not one of overlap, after"}};
  for (const auto& [name, message] : bad) {
    auto env = TwoRanks();
    env[name] = "fp16";
    auto rt = CreateParallelRuntime(c, FromMap(env), nullptr);
    ASSERT_FALSE(rt.ok()) << name;
    EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(rt.status().message(), message);
  }
}

}  // namespace
}  // namespace hypertrain::parallel
