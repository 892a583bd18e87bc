#include "contract/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace hypertrain::contract {
namespace {

using ::testing::UnorderedElementsAreArray;

TEST(EnvContract, NamesAreUniqueAndEachSaysWhatReadsIt) {
  std::set<std::string_view> seen;
  for (const EnvVarSpec& v : EnvVars()) {
    EXPECT_TRUE(seen.insert(v.name).second) << "defined twice: " << v.name;
    EXPECT_FALSE(v.read_by.empty()) << v.name << " has no reader: the operator must not set it";
    EXPECT_EQ(FindEnvVar(v.name), &v);
  }
  EXPECT_EQ(FindEnvVar("NOT_A_CONTRACT_VARIABLE"), nullptr);
}

TEST(EnvContract, EveryAliasStandsForAnOperatorVariable) {
  int aliases = 0;
  for (const EnvVarSpec& v : EnvVars()) {
    if (v.alias_of.empty()) continue;
    ++aliases;
    EXPECT_EQ(v.name, "PET_" + std::string(v.alias_of));
    const EnvVarSpec* plain = FindEnvVar(v.alias_of);
    ASSERT_NE(plain, nullptr) << v.name;
    EXPECT_EQ(plain->set_by, SetBy::kOperator);
    EXPECT_EQ(v.set_by, plain->set_by);
  }
  EXPECT_EQ(aliases, 5);
}

TEST(EnvContract, ReservedAreWhatTheOperatorAndTheLauncherSet) {
  std::vector<std::string> expected;
  for (const EnvVarSpec& v : EnvVars()) {
    if (v.set_by == SetBy::kOperator || v.set_by == SetBy::kOperatorElastic || v.set_by == SetBy::kLauncher) {
      expected.emplace_back(v.name);
    }
  }
  EXPECT_THAT(ReservedEnvNames(), UnorderedElementsAreArray(expected));
  const auto reserved = [](const char* n) {
    const auto& r = ReservedEnvNames();
    return std::find(r.begin(), r.end(), n) != r.end();
  };
  for (const char* n : {env::kMasterAddr, env::kWorldSize, env::kRank, env::kLocalRank, env::kPetNnodes,
                        env::kRestartAttempt, env::kConfig, env::kCheckpointDir, env::kJobName,
                        env::kDesiredNnodes, env::kResizeReason}) {
    EXPECT_TRUE(reserved(n)) << n;
  }
  // Library defaults and user knobs stay overridable.
  for (const char* n : {env::kNcclDebug, env::kFiProvider, env::kProgressIntervalS, env::kPodNamespaceFallback}) {
    EXPECT_FALSE(reserved(n)) << n;
  }
}

TEST(EnvContract, NamesNothingReadsAreGone) {
  // Set or reserved once, read by nothing (issue 17): no longer part of the contract.
  for (const char* n : {"HYPERTRAIN_RESTART_ATTEMPT", "HYPERTRAIN_NODE_NAME", "HT_JOB_ID"}) {
    EXPECT_EQ(FindEnvVar(n), nullptr) << n;
  }
}

}  // namespace
}  // namespace hypertrain::contract
