#include "core/env_lookup.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace hypertrain {
namespace {

TEST(EnvLookup, ProcessEnvironmentReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_SET", "a value", 1), 0);
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_EMPTY", "", 1), 0);
  ::unsetenv("HT_ENV_LOOKUP_TEST_UNSET");
  const EnvLookup env = ProcessEnvironment();
  EXPECT_STREQ(env("HT_ENV_LOOKUP_TEST_SET"), "a value");
  EXPECT_STREQ(env("HT_ENV_LOOKUP_TEST_EMPTY"), "");  // set, empty
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_UNSET"), nullptr);
  // Read at call time, not when the lookup was made.
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_SET", "changed", 1), 0);
  EXPECT_STREQ(env("HT_ENV_LOOKUP_TEST_SET"), "changed");
}

TEST(EnvLookup, MapLooksOnlyAtItsOwnVariables) {
  ASSERT_EQ(::setenv("HT_ENV_LOOKUP_TEST_REAL", "real", 1), 0);
  const EnvLookup env = EnvFromMap({{"A", "1"}, {"EMPTY", ""}});
  EXPECT_STREQ(env("A"), "1");
  EXPECT_STREQ(env("EMPTY"), "");
  EXPECT_EQ(env("B"), nullptr);
  EXPECT_EQ(env("HT_ENV_LOOKUP_TEST_REAL"), nullptr);  // the process's are not seen
}

}  // namespace
}  // namespace hypertrain
