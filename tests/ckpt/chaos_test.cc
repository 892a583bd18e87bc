// kill -9 chaos on a real 2x2 job: two "nodes" (two `hypertrain launch`
// supervisors with NNODES=2) of two ranks each, Gloo on loopback, HSDP
// (shard degree 2, 2 replicas), asynchronous checkpoints every 2 steps. A
// rank is killed with SIGKILL at random moments (some right while a
// checkpoint is being written), the whole job is restarted the way the
// operator restarts it (same command, RESTART_ATTEMPT+1, no resume flag),
// at least 20 times. Afterwards: every checkpoint on disk verifies (sizes,
// headers, crc32c) after every kill, and the final parameters and optimizer
// state equal an uninterrupted run's bit for bit.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/atomic_file.h"
#include "runtime/ckpt/store.h"
#include "runtime/launch/socket_util.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxSteps = 240;
constexpr int kMaxProgressPerAttempt = 10;  // steps: so 20 kills fit in one run
constexpr int kKills = 20;

std::string Tmp(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = fs::path(base ? base : "/tmp") / ("chaos_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string WriteConfig(const std::string& exp) {
  const std::string path = exp + "/job.yaml";
  std::ofstream(path) << "trainer: {backend: cpu, precision: fp32, max_steps: " << kMaxSteps
                      << ", log_every_n_steps: 20}\n"
                         "model:\n"
                         "  shape: tiny\n"
                         "  num_hidden_layers: 2\n"
                         "  hidden_size: 64\n"
                         "  intermediate_size: 128\n"
                         "  max_context_width: 16\n"
                         "  train_batch_size: 2\n"
                         "  sharding_strategy: hybrid_shard\n"
                         "  collective_timeout: 20\n"
                         "  optim: {lr: 3.0e-3, sched: {name: cosine, warmup_steps: 3}}\n"
                         "  data: {use_synthetic_data: true, prefetch_depth: 1}\n"
                         "exp_manager:\n"
                         "  exp_dir: "
                      << exp
                      << "\n"
                         "  every_n_train_steps: 2\n"
                         "  save_top_k: 2\n"
                         "  checkpoint: {coordinator_timeout_s: 30}\n";
  return path;
}

int FreePort() {
  int port = 0;
  auto fd = launch::net::Listen("127.0.0.1", 0, &port);
  return fd.ok() ? port : 0;
}

struct Job {
  std::vector<pid_t> launchers;  // node 0, node 1
};

Job StartJob(const std::string& exp, const std::string& config, int attempt) {
  const std::string bin = fs::absolute("runtime/cmd/hypertrain_cpu").string();
  const int port = FreePort();
  Job job;
  for (int node = 0; node < 2; ++node) {
    const std::string log = exp + "/node" + std::to_string(node) + ".log";
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("NNODES", "2", 1);
      ::setenv("NODE_RANK", std::to_string(node).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("RESTART_ATTEMPT", std::to_string(attempt).c_str(), 1);
      ::setenv("HYPERTRAIN_JOB_NAME", "chaos", 1);
      ::setenv("HT_GLOO_HOSTNAME", "127.0.0.1", 1);
      ::setenv("HT_RENDEZVOUS_TIMEOUT_S", "30", 1);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const char* argv[] = {"hypertrain", "launch", "--nproc-per-node", "2", "--grace-period-s", "2", "--",
                            "train",      "--config", config.c_str(), nullptr};
      ::execv(bin.c_str(), const_cast<char**>(argv));
      ::_exit(127);
    }
    job.launchers.push_back(pid);
  }
  return job;
}

// Live children of `parent` (the ranks of one launcher).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid) == 2 && ppid == parent && state != 'Z') {
      out.push_back(static_cast<pid_t>(std::stoi(name)));
    }
  }
  return out;
}

// Waits for both launchers. When one exits non-zero the other gets SIGTERM,
// as the operator tears down the whole job to restart it (a survivor may
// otherwise wait for its dead peer until its own timeouts fire). After
// `limit` whatever is left is killed (ranks first, by PID) and reported as
// 999. Returns the launchers' exit codes (128+sig when signalled).
std::vector<int> WaitJob(Job& job, milliseconds limit) {
  std::vector<int> codes(job.launchers.size(), -1);
  const auto end = Clock::now() + limit;
  size_t left = job.launchers.size();
  bool tearing_down = false;
  while (left > 0) {
    for (size_t i = 0; i < job.launchers.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      if (::waitpid(job.launchers[i], &st, WNOHANG) == job.launchers[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
        if (codes[i] != 0 && !tearing_down) {
          tearing_down = true;
          for (size_t j = 0; j < job.launchers.size(); ++j) {
            if (codes[j] == -1) ::kill(job.launchers[j], SIGTERM);
          }
        }
      }
    }
    if (left == 0) break;
    if (Clock::now() > end) {
      for (size_t i = 0; i < job.launchers.size(); ++i) {
        if (codes[i] != -1) continue;
        for (pid_t c : ChildrenOf(job.launchers[i])) ::kill(c, SIGKILL);
        ::kill(job.launchers[i], SIGKILL);
        ::waitpid(job.launchers[i], nullptr, 0);
        codes[i] = 999;  // had to be killed: a hang
      }
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return codes;
}

// A save of this attempt is being written (temporaries of killed attempts
// linger until the new rank 0 removes them, so match the attempt suffix).
bool SaveInProgress(const std::string& ckdir, int attempt) {
  const std::string suffix = ".tmp-" + std::to_string(attempt);
  std::error_code ec;
  for (fs::directory_iterator it(ckdir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind(".step-", 0) == 0 && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

void ExpectAllCheckpointsVerify(const std::string& ckdir, const std::string& when) {
  for (const auto& [step, path] : ListCheckpoints(ckdir)) {
    auto m = VerifyCheckpoint(path, /*full_checksums=*/true);
    EXPECT_TRUE(m.ok()) << when << ": corrupt checkpoint " << path << ": " << m.status().ToString();
  }
}

std::string Tail(const std::string& path) {
  auto s = ReadFileToString(path);
  if (!s.ok()) return "";
  return s->size() > 3000 ? s->substr(s->size() - 3000) : *s;
}

TEST(ChaosTest, TwentyKillsDuringStepsAndSavesEndBitIdentical) {
  // Reference: an uninterrupted 2x2 run.
  const std::string ref = Tmp("ref");
  {
    Job job = StartJob(ref, WriteConfig(ref), 0);
    auto codes = WaitJob(job, milliseconds(90000));
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << Tail(ref + "/node0.log") << Tail(ref + "/node1.log");
  }
  const std::string ref_ck = ref + "/checkpoints/step-" + std::to_string(kMaxSteps);
  ASSERT_TRUE(VerifyCheckpoint(ref_ck, true).ok());

  const std::string exp = Tmp("run");
  const std::string config = WriteConfig(exp);
  const std::string ckdir = exp + "/checkpoints";
  std::mt19937 rng(20261122);
  int kills = 0, during_save = 0, attempt = 0;
  while (kills < kKills) {
    ASSERT_LT(attempt, 3 * kKills) << "too many attempts without a kill";
    Job job = StartJob(exp, config, attempt);
    // Kill moment: 0 = while a save is in progress; 1 = after a random
    // delay; 2 = a random few steps after the resume point, plus a few ms
    // (mid-step). Every mode also caps the progress of one attempt.
    const int mode = attempt % 3;
    const auto all = ListCheckpoints(ckdir);
    const int64_t start_step = all.empty() ? 0 : all.back().first;
    const int64_t cap = start_step + (mode == 2 ? std::uniform_int_distribution<int>(2, 8)(rng) : kMaxProgressPerAttempt);
    const auto t0 = Clock::now();
    const auto delay = milliseconds(std::uniform_int_distribution<int>(100, 1200)(rng));
    bool saving = false;
    while (Clock::now() - t0 < milliseconds(20000)) {
      saving = SaveInProgress(ckdir, attempt);
      if (mode == 0 && saving) break;
      if (mode == 1 && Clock::now() - t0 >= delay) break;
      const auto now = ListCheckpoints(ckdir);
      if (!now.empty() && now.back().first >= cap) {
        std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, 60)(rng)));
        saving = SaveInProgress(ckdir, attempt);
        break;
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
    std::vector<pid_t> ranks;
    for (int tries = 0; ranks.size() < 4 && tries < 500; ++tries) {  // all 4 ranks started
      ranks.clear();
      for (pid_t l : job.launchers) {
        for (pid_t c : ChildrenOf(l)) ranks.push_back(c);
      }
      if (ranks.size() < 4) std::this_thread::sleep_for(milliseconds(2));
    }
    bool killed = false;
    if (!ranks.empty()) {
      const pid_t victim = ranks[std::uniform_int_distribution<size_t>(0, ranks.size() - 1)(rng)];
      killed = ::kill(victim, SIGKILL) == 0;
    }
    // A hang is a wait past every deadline: a kill that lands while the
    // survivors are still in rendezvous leaves them waiting for the dead peer
    // until HT_RENDEZVOUS_TIMEOUT_S (30 s) ends it, so allow that plus margin.
    auto codes = WaitJob(job, milliseconds(45000));
    ++attempt;
    if (killed) {
      ++kills;
      if (saving) ++during_save;
      for (int c : codes) EXPECT_NE(c, 999) << "job hung after kill " << kills << Tail(exp + "/node0.log");
    }
    ExpectAllCheckpointsVerify(ckdir, "after attempt " + std::to_string(attempt));
    if (codes == std::vector<int>{0, 0}) break;  // finished before a kill landed
  }
  std::fprintf(stderr, "chaos: %d kills (%d while a save was in progress) in %d attempts\n", kills, during_save,
               attempt);
  EXPECT_GE(kills, kKills);
  EXPECT_GE(during_save, 3);

  // Final attempt: restarts with no flag and runs to the end.
  Job job = StartJob(exp, config, attempt);
  auto codes = WaitJob(job, milliseconds(90000));
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << Tail(exp + "/node0.log") << Tail(exp + "/node1.log");
  ExpectAllCheckpointsVerify(ckdir, "at the end");
  const std::string run_ck = ckdir + "/step-" + std::to_string(kMaxSteps);
  auto a = VerifyCheckpoint(ref_ck, true);
  auto b = VerifyCheckpoint(run_ck, true);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->world.world_size, 4);
  EXPECT_EQ(b->world.shard_degree, 2);
  ASSERT_EQ(a->files.size(), b->files.size());
  for (const auto& f : a->files) {
    EXPECT_EQ(*ReadFileToString(ref_ck + "/" + f.name), *ReadFileToString(run_ck + "/" + f.name))
        << f.name << " differs: parameters/optimizer state not bit-identical";
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(a->ranks[r].sampler, b->ranks[r].sampler);
  EXPECT_EQ(a->trainer_state, b->trainer_state);
  EXPECT_EQ(a->tokens_seen, b->tokens_seen);
}

}  // namespace
}  // namespace hypertrain::ckpt
