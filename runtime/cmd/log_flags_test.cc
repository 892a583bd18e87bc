#include "runtime/cmd/log_flags.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace hypertrain::cmd {
namespace {

using Args = std::vector<std::string>;

// Parses argv (argv[0] = the program) with the log flags declared on a
// binary and on its "train" subcommand, as main.cc does.
LogFlags Parse(Args args, std::string* error = nullptr) {
  CLI::App app("test", "hypertrain");
  LogFlags f;
  AddLogFlags(app, &f);
  CLI::App* train = app.add_subcommand("train");
  AddLogFlags(*train, &f);
  std::string config;
  train->add_option("--config", config);
  args.insert(args.begin(), "hypertrain");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    if (error) *error = e.what();
  }
  return f;
}

TEST(LogFlagsTest, BothSpellingsBeforeOrAfterTheCommand) {
  LogFlags f = Parse({"--log-format", "json", "train", "--config", "x.yaml", "--log-level=debug"});
  EXPECT_EQ(f.format, "json");
  EXPECT_EQ(f.level, "debug");
  EXPECT_EQ(f.AsArgs(), (Args{"--log-format=json", "--log-level=debug"}));
  f = Parse({"--log-level=warn", "train", "--log-format=json"});
  EXPECT_EQ(f.format, "json");
  EXPECT_EQ(f.level, "warn");
}

TEST(LogFlagsTest, DefaultsAreTextAndInfo) {
  LogFlags f = Parse({"train", "--config", "x.yaml"});
  EXPECT_EQ(f.format, "text");
  EXPECT_EQ(f.level, "info");
}

TEST(LogFlagsTest, BadValuesAndMissingValuesAreErrorsNamingTheFlag) {
  std::string error;
  Parse({"train", "--log-format=yaml"}, &error);
  EXPECT_NE(error.find("--log-format"), std::string::npos) << error;
  EXPECT_NE(error.find("log format 'yaml' is not text or json"), std::string::npos) << error;
  error.clear();
  Parse({"train", "--log-level"}, &error);
  EXPECT_NE(error.find("--log-level"), std::string::npos) << error;
  error.clear();
  Parse({"--log-level", "loud", "train"}, &error);
  EXPECT_NE(error.find("loud"), std::string::npos) << error;
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
