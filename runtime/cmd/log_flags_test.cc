#include "runtime/cmd/log_flags.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace hypertrain::cmd {
namespace {

using Args = std::vector<std::string>;

TEST(LogFlagsTest, BothSpellingsAreTakenOutAndTheRestIsKept) {
  Args a = {"train",  "--log-format",      "json",  "--config",
            "x.yaml", "--log-level=debug", "--set", "a=1"};
  LogFlags f;
  ASSERT_TRUE(TakeLogFlags(&a, 1, false, &f).ok());
  EXPECT_EQ(f.format, "json");
  EXPECT_EQ(f.level, "debug");
  EXPECT_EQ(a, (Args{"train", "--config", "x.yaml", "--set", "a=1"}));
  EXPECT_EQ(f.AsArgs(), (Args{"--log-format=json", "--log-level=debug"}));
}

TEST(LogFlagsTest, DefaultsAreTextAndInfo) {
  Args a = {"prepare", "--out", "d", "f.txt"};
  LogFlags f;
  ASSERT_TRUE(TakeLogFlags(&a, 1, false, &f).ok());
  EXPECT_EQ(f.format, "text");
  EXPECT_EQ(f.level, "info");
  EXPECT_EQ(a.size(), 4u);
}

TEST(LogFlagsTest, StopsAtDoubleDashAndForLaunchAtTheLaunchedCommand) {
  Args a = {"launch", "--nproc-per-node", "2", "--log-level=warn", "train", "--log-level=debug"};
  LogFlags f;
  ASSERT_TRUE(TakeLogFlags(&a, 1, true, &f, {"--nproc-per-node"}).ok());
  EXPECT_EQ(f.level, "warn");  // the launched train's own flag stays with it
  EXPECT_EQ(a, (Args{"launch", "--nproc-per-node", "2", "train", "--log-level=debug"}));
  Args b = {"launch", "--", "/bin/prog", "--log-format", "x"};
  LogFlags g;
  ASSERT_TRUE(TakeLogFlags(&b, 1, true, &g).ok());
  EXPECT_EQ(b.size(), 5u);
  EXPECT_EQ(g.format, "text");
}

TEST(LogFlagsTest, AFlagWithoutItsValueIsAnError) {
  Args a = {"train", "--log-level"};
  LogFlags f;
  const Status s = TakeLogFlags(&a, 1, false, &f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--log-level needs a value");
}

launch::EnvLookup FromMap(std::map<std::string, std::string> m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST(LogFlagsTest, RanksOfSeveralCarryTheirRankAndLaunchersTheirNode) {
  EXPECT_EQ(LogContext("train", FromMap({{"RANK", "3"}, {"WORLD_SIZE", "4"}})),
            (log::Fields{{"rank", "3"}}));
  EXPECT_TRUE(LogContext("train", FromMap({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).empty());
  EXPECT_TRUE(LogContext("train", FromMap({})).empty());
  EXPECT_EQ(LogContext("launch", FromMap({{"PET_NODE_RANK", "1"}})), (log::Fields{{"node", "1"}}));
}

}  // namespace
}  // namespace hypertrain::cmd
