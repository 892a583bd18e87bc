#include "core/env_lookup.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace hypertrain {
namespace {

TEST(EnvLookup, ProcessEnvironmentReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_SET", "a value", 1), 0);
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_EMPTY", "", 1), 0);
  ::unsetenv("HT_ENV_LOOKUP_TEST_UNSET");
  const EnvLookup env = ProcessEnvironment();
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_SET"), std::optional<std::string>("a value"));
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_EMPTY"), std::optional<std::string>(""));  // set, empty
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_UNSET"), std::nullopt);
  // Read at call time, not when the lookup was made.
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_SET", "changed", 1), 0);
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_SET"), std::optional<std::string>("changed"));
}

TEST(EnvLookup, MapLooksOnlyAtItsOwnVariables) {
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_REAL", "real", 1), 0);
  const EnvLookup env = EnvFromMap({{"A", "1"}, {"EMPTY", ""}});
  EXPECT_EQ(env("A"), std::optional<std::string>("1"));
  EXPECT_EQ(env("EMPTY"), std::optional<std::string>(""));
  EXPECT_EQ(env("B"), std::nullopt);
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_REAL"), std::nullopt);  // the process's are not seen
}

TEST(EnvLookup, PointerLookupsAdapt) {
  const EnvLookup env = FromPointerLookup([](const char* n) -> const char* {
    return std::string(n) == "X" ? "x" : nullptr;
  });
  EXPECT_EQ(env("X"), std::optional<std::string>("x"));
  EXPECT_EQ(env("Y"), std::nullopt);
  EXPECT_EQ(FromPointerLookup(nullptr)("X"), std::nullopt);
}

}  // namespace
}  // namespace hypertrain
