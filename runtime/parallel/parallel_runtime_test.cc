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

// The HSDP knobs come typed from the config (distributed.*; their HT_*
// environment overrides are mapped and checked in runtime/config).
TEST(ParallelRuntime, HsdpKnobsComeFromTheConfig) {
  for (const char* reduce : {"fp32", "bf16"}) {
    for (bool split : {false, true}) {
      for (const char* replica : {"overlap", "after"}) {
        config::TrainConfig c;
        c.distributed.reduce_dtype = reduce;
        c.distributed.split_embedding_grad = split;
        c.distributed.replica_reduce = replica;
        c.distributed.rendezvous_timeout_s = 30;
        auto rt = CreateParallelRuntime(c, FromMap(TwoRanks()), nullptr);
        ASSERT_TRUE(rt.ok()) << rt.status().ToString();
        EXPECT_EQ((*rt)->world_size(), 2);
      }
    }
  }
}

}  // namespace
}  // namespace hypertrain::parallel
