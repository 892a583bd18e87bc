#include "runtime/train/termination.h"

#include <gtest/gtest.h>

#include "contract/env.h"
#include "core/env_lookup.h"

namespace hypertrain::train {
namespace {

// The grace budget comes through an EnvLookup: a map here, never the process's environment.
StatusOr<double> Grace(std::map<std::string, std::string> vars) {
  return Termination::GraceFromEnv(EnvFromMap(std::move(vars)));
}

TEST(Termination, GraceFromTheEnvironmentOrTheDefault) {
  const std::string name = contract::env::kTerminationGraceS;
  auto g = Grace({});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(*g, kDefaultTerminationGraceS);
  g = Grace({{name, ""}});  // set but empty: the default
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, kDefaultTerminationGraceS);
  g = Grace({{name, "12.5"}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 12.5);
  g = Grace({{name, "0"}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 0);
}

TEST(Termination, BadGraceNamesTheVariable) {
  const std::string name = contract::env::kTerminationGraceS;
  for (const std::string bad : {"abc", "-1", "86401", "5s", "nan"}) {
    auto g = Grace({{name, bad}});
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(g.status().message().find(name + "='" + bad + "'"), std::string::npos) << g.status().message();
  }
}

}  // namespace
}  // namespace hypertrain::train
