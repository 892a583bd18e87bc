// The node agent's termination message follows the kubelet: the termination
// log first; the log's tail only under FallbackToLogsOnError and only for a
// failed container.
#include "localcluster/nodeagent/agent.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace hypertrain::nodeagent {
namespace {

std::string Tmp(const std::string& name, const std::string& content) {
  const std::string p = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  return p;
}

TEST(TerminationMessageTest, FollowsThePolicyLikeTheKubelet) {
  std::string log_text;
  for (int i = 0; i < 100; ++i) log_text += "line " + std::to_string(i) + "\n";
  const std::string log = Tmp("container.log", log_text);
  const std::string empty = Tmp("empty-termination-log", "");
  const std::string cause = Tmp("termination-log", "rank 1 (local rank 1) was killed by signal 9 (Killed)\n");

  // File (the API default): only the file; nothing written → no message.
  EXPECT_EQ(TerminationMessage(empty, log, "File", 1), "");
  EXPECT_EQ(TerminationMessage(cause, log, "File", 137), "rank 1 (local rank 1) was killed by signal 9 (Killed)");
  // FallbackToLogsOnError: the file wins; else the last 80 lines for a failure only.
  EXPECT_EQ(TerminationMessage(cause, log, "FallbackToLogsOnError", 137),
            "rank 1 (local rank 1) was killed by signal 9 (Killed)");
  const std::string tail = TerminationMessage(empty, log, "FallbackToLogsOnError", 2);
  EXPECT_EQ(tail.rfind("line 99"), tail.size() - 7);
  EXPECT_EQ(tail.find("line 19\n"), std::string::npos) << "at most 80 lines";
  EXPECT_LE(tail.size(), 2048u);
  EXPECT_EQ(TerminationMessage(empty, log, "FallbackToLogsOnError", 0), "") << "a success shows no log";
  // At most 4096 bytes of the file.
  EXPECT_EQ(TerminationMessage(Tmp("big", std::string(10000, 'x')), log, "File", 1).size(), 4096u);
}

}  // namespace
}  // namespace hypertrain::nodeagent
