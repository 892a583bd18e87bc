// The node agent's termination message follows kubelet 1.26 (measured on a
// real kubelet: //tests/e2e:termination_parity_realnode_test): the termination
// log's last 4096 bytes verbatim first; the log's tail, verbatim, only under
// FallbackToLogsOnError and only for a failed container.
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
  EXPECT_EQ(TerminationMessage(cause, log, "File", 137), "rank 1 (local rank 1) was killed by signal 9 (Killed)\n");
  // FallbackToLogsOnError: the file wins; else the last 80 lines for a failure only.
  EXPECT_EQ(TerminationMessage(cause, log, "FallbackToLogsOnError", 137),
            "rank 1 (local rank 1) was killed by signal 9 (Killed)\n");
  const std::string tail = TerminationMessage(empty, log, "FallbackToLogsOnError", 2);
  std::string last80;
  for (int i = 20; i < 100; ++i) last80 += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(tail, last80) << "the last 80 lines, newlines kept";
  std::string wide;
  for (int i = 0; i < 100; ++i) wide += "line " + std::to_string(i) + std::string(40, '.') + "\n";
  const std::string wide_tail = TerminationMessage(empty, Tmp("wide.log", wide), "FallbackToLogsOnError", 3);
  EXPECT_EQ(wide_tail, wide.substr(wide.size() - 2048)) << "the last 2048 bytes of them";
  EXPECT_EQ(TerminationMessage(empty, log, "FallbackToLogsOnError", 0), "") << "a success shows no log";
  // The file's last 4096 bytes.
  EXPECT_EQ(TerminationMessage(Tmp("big", std::string(6000, 'a') + std::string(4000, 'b')), log, "File", 1),
            std::string(96, 'a') + std::string(4000, 'b'));
}

}  // namespace
}  // namespace hypertrain::nodeagent
