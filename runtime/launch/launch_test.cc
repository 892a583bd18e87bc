// The launcher as a real process supervising real rank processes
// (launch_test_rank), on this machine only.
#include "runtime/launch/launch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace hypertrain::launch {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string RankBinary() {
  char buf[PATH_MAX];
  if (!realpath("runtime/launch/launch_test_rank", buf)) return "runtime/launch/launch_test_rank";
  return buf;
}

std::string MakeDir() {
  std::string tmpl = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/launchXXXXXX";
  return mkdtemp(tmpl.data());
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A process is gone when /proc has no entry or only a zombie is left.
bool Alive(pid_t pid) {
  const std::string stat = Read("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' &&
         stat[close + 2] != 'X';
}

// Forks a launcher with `env` added to this process's environment.
pid_t StartLauncher(const std::map<std::string, std::string>& env, std::vector<std::string> args) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  for (const char* k : {"NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE",
                        "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "RANK", "WORLD_SIZE"})
    unsetenv(k);
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  args.insert(args.begin(), "launch");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  LaunchConfig config;
  std::string error;
  if (!ParseLaunchArgs(static_cast<int>(args.size()), argv.data(), &config, &error)) _exit(2);
  _exit(RunLauncher(config));
}

// Exit code of `pid` (128+sig when signalled), or -1 after `timeout` (then killed).
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(5ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Waits until every rank wrote its pid file; returns the pids.
std::vector<pid_t> WaitForRanks(const std::string& dir, int first, int n) {
  std::vector<pid_t> pids;
  const auto end = Clock::now() + 10s;
  for (int r = first; r < first + n; ++r) {
    const std::string f = dir + "/rank" + std::to_string(r) + ".pid";
    while (!Exists(f) && Clock::now() < end) std::this_thread::sleep_for(5ms);
    pids.push_back(atoi(Read(f).c_str()));
  }
  return pids;
}

TEST(Launch, SetsTheEnvContractAndSucceedsWhenAllRanksDo) {
  const std::string dir = MakeDir();
  const pid_t l = StartLauncher({{"PET_NNODES", "2:2"}, {"PET_NODE_RANK", "1"}, {"MASTER_ADDR", "job-master-0"},
                                 {"MASTER_PORT", "23456"}},
                                {"--nproc-per-node", "2", "--", RankBinary(), dir, "--exit-after-ms", "50"});
  EXPECT_EQ(WaitExit(l, 20s), 0);
  for (int local = 0; local < 2; ++local) {
    const std::string env = Read(dir + "/rank" + std::to_string(2 + local) + ".env");
    EXPECT_NE(env.find("RANK=" + std::to_string(2 + local) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("LOCAL_RANK=" + std::to_string(local) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("WORLD_SIZE=4\n"), std::string::npos) << env;
    EXPECT_NE(env.find("LOCAL_WORLD_SIZE=2\n"), std::string::npos) << env;
    EXPECT_NE(env.find("NODE_RANK=1\n"), std::string::npos) << env;
    EXPECT_NE(env.find("MASTER_ADDR=job-master-0\n"), std::string::npos) << env;
    EXPECT_NE(env.find("MASTER_PORT=23456\n"), std::string::npos) << env;
    EXPECT_NE(env.find("PET_NNODES=2\n"), std::string::npos) << env;  // normalised, no "2:2" clash
  }
}

// A Kubeflow PyTorchJob worker pod as the training operator sets it up:
// WORLD_SIZE counts pods, RANK is the pod's index, nprocPerNode is "auto".
TEST(Launch, RunsUnchangedInAKubeflowPyTorchJobPod) {
  const std::string dir = MakeDir();
  const pid_t l = StartLauncher({{"MASTER_ADDR", "llama-master-0"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "2"},
                                 {"RANK", "1"}, {"PET_NPROC_PER_NODE", "auto"}},
                                {"--nproc-per-node", "2", "--", RankBinary(), dir, "--exit-after-ms", "50"});
  EXPECT_EQ(WaitExit(l, 20s), 0);
  for (int local = 0; local < 2; ++local) {
    const std::string env = Read(dir + "/rank" + std::to_string(2 + local) + ".env");
    EXPECT_NE(env.find("RANK=" + std::to_string(2 + local) + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("WORLD_SIZE=4\n"), std::string::npos) << env;
    EXPECT_NE(env.find("NODE_RANK=1\n"), std::string::npos) << env;
    EXPECT_NE(env.find("NNODES=2\n"), std::string::npos) << env;
  }
}

TEST(Launch, KilledRankStopsTheOthersWithinTheGracePeriodAndLeavesNoOrphans) {
  const std::string dir = MakeDir();
  // Rank 2 ignores SIGTERM (needs the SIGKILL escalation); every rank has a child of its own.
  const pid_t l = StartLauncher({}, {"--nproc-per-node", "3", "--grace-period-s", "1", "--", RankBinary(), dir,
                                     "--ignore-term-rank", "2", "--grandchild"});
  const auto pids = WaitForRanks(dir, 0, 3);
  std::vector<pid_t> grandchildren;
  for (int r = 0; r < 3; ++r) grandchildren.push_back(atoi(Read(dir + "/rank" + std::to_string(r) + ".grandchild").c_str()));
  for (pid_t p : pids) ASSERT_GT(p, 0);
  const auto start = Clock::now();
  ASSERT_EQ(kill(pids[1], SIGKILL), 0);
  EXPECT_EQ(WaitExit(l, 10s), 128 + SIGKILL);  // the first failure's code
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 900ms);  // rank 2 held out until the SIGKILL
  EXPECT_LT(took, 3s);
  EXPECT_TRUE(Exists(dir + "/rank0.term"));   // got SIGTERM first
  EXPECT_FALSE(Exists(dir + "/rank2.term"));  // ignored it, then was killed
  std::this_thread::sleep_for(50ms);          // let the kernel finish tearing down
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "rank pid " << p;
  for (pid_t p : grandchildren) EXPECT_FALSE(Alive(p)) << "grandchild pid " << p;
}

TEST(Launch, ExitsWithTheFirstFailuresCode) {
  const std::string dir = MakeDir();
  const pid_t l = StartLauncher({}, {"--nproc-per-node=2", "--grace-period-s=5", RankBinary(), dir,
                                     "--fail-rank", "1", "--fail-code", "2", "--fail-after-ms", "100"});
  const auto start = Clock::now();
  EXPECT_EQ(WaitExit(l, 10s), 2);  // config error: not retried by the operator
  EXPECT_LT(Clock::now() - start, 4s);
  EXPECT_TRUE(Exists(dir + "/rank0.term"));
}

TEST(Launch, StartsNoRankWhenThePodsWorldSizeDisagrees) {
  // The operator's WORLD_SIZE says 2 nodes x 4 ranks; a command that starts 2
  // per node would train another world than the job asked for.
  const std::string dir = MakeDir();
  const pid_t l = StartLauncher({{"NNODES", "2"}, {"NODE_RANK", "0"}, {"MASTER_ADDR", "m"}, {"WORLD_SIZE", "8"},
                                 {"NPROC_PER_NODE", "4"}},
                                {"--nproc-per-node", "2", "--", RankBinary(), dir, "--exit-after-ms", "50"});
  EXPECT_EQ(WaitExit(l, 10s), 2);
  EXPECT_FALSE(Exists(dir + "/rank0.pid"));
  // Without the flag the launcher starts NPROC_PER_NODE ranks, which agree.
  const pid_t ok = StartLauncher({{"NNODES", "1"}, {"WORLD_SIZE", "2"}, {"NPROC_PER_NODE", "2"}},
                                 {"--", RankBinary(), dir, "--exit-after-ms", "50"});
  EXPECT_EQ(WaitExit(ok, 20s), 0);
  EXPECT_TRUE(Exists(dir + "/rank1.pid"));
}

TEST(Launch, ForwardsSigtermToEveryRank) {
  const std::string dir = MakeDir();
  const pid_t l = StartLauncher({}, {"--nproc-per-node", "2", "--", RankBinary(), dir});
  WaitForRanks(dir, 0, 2);
  ASSERT_EQ(kill(l, SIGTERM), 0);
  EXPECT_EQ(WaitExit(l, 10s), 128 + SIGTERM);
  EXPECT_EQ(Read(dir + "/rank0.term"), "SIGTERM");
  EXPECT_EQ(Read(dir + "/rank1.term"), "SIGTERM");
}

TEST(Launch, ConfigErrorsExitWithTheConfigCode) {
  EXPECT_EQ(WaitExit(StartLauncher({}, {"--nproc-per-node", "2"}), 5s), 2);             // no command
  EXPECT_EQ(WaitExit(StartLauncher({}, {"--nproc-per-node", "0", "x"}), 5s), 2);        // bad count
  EXPECT_EQ(WaitExit(StartLauncher({}, {"--bogus", "x"}), 5s), 2);                      // unknown flag
  EXPECT_EQ(WaitExit(StartLauncher({}, {"x"}), 5s), 2);                                 // no nproc
  EXPECT_EQ(WaitExit(StartLauncher({{"NNODES", "2"}}, {"--nproc-per-node", "1", "x"}), 5s), 2);  // no master
  EXPECT_EQ(WaitExit(StartLauncher({}, {"--nproc-per-node", "1", "/nonexistent/prog"}), 5s), 2);
}

// The observer seam the operator's progress reporter will use (issue 8).
TEST(Launch, ObserverSeesStartExitsAndFinish) {
  const std::string dir = MakeDir();
  fflush(nullptr);
  const pid_t l = fork();
  if (l == 0) {
    class Recorder : public LaunchObserver {
     public:
      explicit Recorder(std::string path) : f_(std::move(path)) {}
      void OnRanksStarted(int node, const std::vector<pid_t>& pids) override {
        f_ << "started node " << node << " ranks " << pids.size() << "\n" << std::flush;
      }
      void OnRankExited(int local, int global, int code) override {
        f_ << "exited " << local << " " << global << " " << code << "\n" << std::flush;
      }
      void OnFinished(int code) override { f_ << "finished " << code << "\n" << std::flush; }

     private:
      std::ofstream f_;
    } rec(dir + "/events");
    for (const char* k : {"NNODES", "NODE_RANK", "MASTER_ADDR", "PET_NNODES", "PET_NODE_RANK"}) unsetenv(k);
    LaunchConfig c;
    c.nproc_per_node = 2;
    c.command = {RankBinary(), dir, "--exit-after-ms", "20"};
    const int code = RunLauncher(c, &rec);
    _exit(code);
  }
  EXPECT_EQ(WaitExit(l, 10s), 0);
  const std::string ev = Read(dir + "/events");
  EXPECT_NE(ev.find("started node 0 ranks 2\n"), std::string::npos) << ev;
  EXPECT_NE(ev.find("exited 0 0 0\n"), std::string::npos) << ev;
  EXPECT_NE(ev.find("exited 1 1 0\n"), std::string::npos) << ev;
  EXPECT_NE(ev.find("finished 0\n"), std::string::npos) << ev;
}

TEST(Launch, ParsesArgs) {
  LaunchConfig c;
  std::string err;
  std::vector<std::string> a = {"launch", "--nproc-per-node", "4", "--grace-period-s", "2.5", "--", "train", "--config", "x.yaml"};
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  ASSERT_TRUE(ParseLaunchArgs(static_cast<int>(argv.size()), argv.data(), &c, &err)) << err;
  EXPECT_EQ(c.nproc_per_node, 4);
  EXPECT_DOUBLE_EQ(c.grace_period_s, 2.5);
  EXPECT_EQ(c.command, (std::vector<std::string>{"train", "--config", "x.yaml"}));
}

// ParseLaunchArgs on `a`; the error ("" when it parsed).
std::string Parse(std::vector<std::string> a, LaunchConfig* c) {
  a.insert(a.begin(), "launch");
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  std::string err;
  return ParseLaunchArgs(static_cast<int>(argv.size()), argv.data(), c, &err) ? "" : err;
}

TEST(Launch, PassesEverythingFromTheCommandOnUntouched) {
  LaunchConfig c;
  ASSERT_EQ(Parse({"--nproc_per_node=2", "--metrics-port", "0", "--", "train", "--nproc-per-node", "3", "--",
                   "--help", "--log-level=debug"},
                  &c),
            "");
  EXPECT_EQ(c.nproc_per_node, 2);
  EXPECT_EQ(c.metrics_port, 0);
  EXPECT_EQ(c.command,
            (std::vector<std::string>{"train", "--nproc-per-node", "3", "--", "--help", "--log-level=debug"}));
  // Without "--" the command starts at the first argument that is not a flag.
  LaunchConfig d;
  ASSERT_EQ(Parse({"--grace-period-s=1", "/bin/prog", "-h", "--config", "x"}, &d), "");
  EXPECT_DOUBLE_EQ(d.grace_period_s, 1);
  EXPECT_EQ(d.nproc_per_node, 0);  // NPROC_PER_NODE decides
  EXPECT_EQ(d.metrics_port, -1);   // HYPERTRAIN_METRICS_PORT decides
  EXPECT_EQ(d.command, (std::vector<std::string>{"/bin/prog", "-h", "--config", "x"}));
}

TEST(Launch, ArgumentErrorsNameTheFlag) {
  LaunchConfig c;
  EXPECT_EQ(Parse({"--frob", "--", "train"}, &c), "unknown launch flag '--frob'");
  EXPECT_EQ(Parse({"--nproc-per-node", "2", "--frob", "3", "train"}, &c), "unknown launch flag '--frob'");
  EXPECT_EQ(Parse({"--nproc-per-node", "0", "train"}, &c),
            "--nproc-per-node: must be an integer in [1, 4096], got '0'");
  EXPECT_EQ(Parse({"--metrics-port=65536", "train"}, &c), "--metrics-port: must be an integer in [0, 65535], got '65536'");
  EXPECT_EQ(Parse({"--grace-period-s", "-1", "--", "train"}, &c).rfind("--grace-period-s", 0), 0u);
  EXPECT_NE(Parse({"--nproc-per-node"}, &c).find("--nproc-per-node"), std::string::npos);
  EXPECT_EQ(Parse({"--nproc-per-node", "2", "--"}, &c), "no command to launch (hypertrain launch [flags] -- train ...)");
  EXPECT_EQ(Parse({}, &c), "no command to launch (hypertrain launch [flags] -- train ...)");
}

}  // namespace
}  // namespace hypertrain::launch
