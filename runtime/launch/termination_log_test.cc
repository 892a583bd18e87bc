// The launcher's termination message as Kubernetes reads it: a rank killed by a
// signal is named in one line; a rank that exits with its own code (it logged
// why) leaves the file empty, so FallbackToLogsOnError shows the log instead.
#include "runtime/launch/termination_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/launch/launch.h"

namespace hypertrain::launch {
namespace {

std::string TmpPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs the launcher (2 ranks of `/bin/sh -c SCRIPT`) in a child
// with the termination log at `log`; returns the launcher's exit code.
int Launch(const std::string& script, const std::string& log) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("NNODES", "1", 1);
    setenv("NODE_RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29999", 1);
    setenv(kTerminationLogEnv, log.c_str(), 1);
    LaunchConfig config;
    config.nproc_per_node = 2;
    config.grace_period_s = 2;
    config.command = {"/bin/sh", "-c", script};
    _exit(RunLauncher(config));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(TerminationLogTest, RankKilledBySignalIsNamedInOneLine) {
  const std::string log = TmpPath("killed.log");
  // Local rank 1 kills itself with SIGKILL; rank 0 waits to be stopped.
  EXPECT_EQ(Launch("if [ \"$LOCAL_RANK\" = 1 ]; then kill -9 $$; fi; sleep 30", log), 137);
  const std::string msg = Read(log);
  EXPECT_EQ(msg, "rank 1 (local rank 1) was killed by signal 9 (Killed)\n");
}

TEST(TerminationLogTest, OwnExitCodeLeavesTheLogToExplain) {
  const std::string log = TmpPath("exit2.log");
  EXPECT_EQ(Launch("echo 'trainer.backend: must be cpu or cuda' >&2; exit 2", log), 2);
  EXPECT_EQ(Read(log), "") << "the pod's log (FallbackToLogsOnError) carries the trainer's own error";
}

TEST(TerminationLogTest, WritesOneLineAndNeverCreatesTheDefaultPath) {
  const std::string log = TmpPath("direct.log");
  setenv(kTerminationLogEnv, log.c_str(), 1);
  ASSERT_TRUE(WriteTerminationMessage("two\nlines"));
  EXPECT_EQ(Read(log), "two lines\n");
  ASSERT_TRUE(WriteTerminationMessage(std::string(5000, 'x')));
  EXPECT_EQ(Read(log).size(), 1025u);
  unsetenv(kTerminationLogEnv);
  if (access(kDefaultTerminationLog, F_OK) != 0) {
    EXPECT_FALSE(WriteTerminationMessage("outside Kubernetes"));
    EXPECT_NE(access(kDefaultTerminationLog, F_OK), 0) << "created " << kDefaultTerminationLog;
  }
}

// The path comes through an EnvLookup: a map names it, the process's environment is not read.
TEST(TerminationLogTest, ReadsItsPathThroughTheLookup) {
  const std::string log = TmpPath("mapped.log");
  ASSERT_TRUE(WriteTerminationMessage("from a map", EnvFromMap({{kTerminationLogEnv, log}})));
  EXPECT_EQ(Read(log), "from a map\n");
}

}  // namespace
}  // namespace hypertrain::launch
