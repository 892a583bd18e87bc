#include "runtime/launch/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "contract/env.h"
#include "core/cli.h"
#include "core/env_lookup.h"
#include "runtime/launch/env.h"
#include "runtime/launch/termination_log.h"
#include "contract/exit_codes.h"
#include "runtime/train/termination.h"

extern char** environ;

namespace hypertrain::launch {

namespace {

using Clock = std::chrono::steady_clock;


struct Rank {
  int local = 0;
  int global = 0;
  pid_t pid = -1;
  bool running = false;
  int code = 0;
};

// Environment for one rank: the launcher's, with the contract variables
// replaced (PET_* aliases get the same values so they never disagree).
std::vector<std::string> RankEnvironment(const NodeEnv& node, int nproc, int local) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) vars[std::string(*e, eq - *e)] = eq + 1;
  }
  namespace env = contract::env;
  auto set = [&](const char* k, const char* pet_alias, const std::string& v) {
    vars[k] = v;
    if (pet_alias) vars[pet_alias] = v;
  };
  set(env::kMasterAddr, env::kPetMasterAddr, node.master_addr);
  set(env::kMasterPort, env::kPetMasterPort, std::to_string(node.master_port));
  set(env::kNnodes, env::kPetNnodes, std::to_string(node.nnodes));
  set(env::kNodeRank, env::kPetNodeRank, std::to_string(node.node_rank));
  set(env::kNprocPerNode, env::kPetNprocPerNode, std::to_string(nproc));
  set(env::kWorldSize, nullptr, std::to_string(node.nnodes * nproc));
  set(env::kRank, nullptr, std::to_string(node.node_rank * nproc + local));
  set(env::kLocalRank, nullptr, std::to_string(local));
  set(env::kLocalWorldSize, nullptr, std::to_string(nproc));
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

int CodeFromWaitStatus(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return contract::kExitInternal;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const sigset_t& original_mask) {
  // Build everything before fork: the child only calls async-signal-safe functions.
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child.
  ::setpgid(0, 0);                       // its own group: the launcher signals the whole tree
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);    // backstop if the launcher dies
  if (::getppid() != parent) ::_exit(128 + SIGKILL);  // it died before prctl
  ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  ::execve(cargv[0], cargv.data(), cenv.data());
  const char msg[] = "hypertrain launch: exec failed\n";  // async-signal-safe: no logger in the child
  (void)!::write(2, msg, sizeof(msg) - 1);
  ::_exit(127);
}

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

void SignalGroups(const std::vector<Rank>& ranks, int sig) {
  for (const auto& r : ranks) {
    if (r.running && r.pid > 0) ::kill(-r.pid, sig);  // the rank's process group
  }
}

// The launched command: what parsing left in app.remaining().
Status TakeLaunchCommand(const CLI::App& app, LaunchConfig* c) {
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() != "--" && !rest.front().empty() && rest.front()[0] == '-') {
    return InvalidArgument("unknown launch flag '" + rest.front() + "'");
  }
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty()) return InvalidArgument("no command to launch (hypertrain launch [flags] -- train ...)");
  c->command = std::move(rest);
  return Status::Ok();
}

}  // namespace

void AddLaunchFlags(CLI::App& app, LaunchConfig* c) {
  app.add_option("--nproc-per-node,--nproc_per_node", c->nproc_per_node, "Ranks on this node")
      ->type_name("N")
      ->check(cli::IntRange(1, 4096))
      ->default_str("$NPROC_PER_NODE");
  app.add_option("--grace-period-s", c->grace_period_s,
                 "After a rank fails, how long the others get between SIGTERM and SIGKILL")
      ->type_name("S")
      ->check(cli::NumberRange(0, 3600));
  app.add_option("--metrics-port", c->metrics_port,
                 "Serve Prometheus metrics (the ranks, the trainer's step metrics) on port P; 0 turns it off")
      ->type_name("P")
      ->check(cli::IntRange(0, 65535))
      ->default_str("$HYPERTRAIN_METRICS_PORT, else off");
  // The launched command is never parsed here: the first positional ends
  // launch's flags (prefix_command) and everything from it on stays in
  // remaining(). "--" needs a positional that is still open to be kept there
  // too, so "command" is declared but rejects every value (it documents the
  // command in --help).
  app.prefix_command();
  app.validate_positionals();
  app.add_option("command", c->command,
                 "A hypertrain subcommand (train ...: this binary) or /path/to/program, with its arguments")
      ->type_name("<subcommand|/path/program> [args...]")
      ->check(CLI::Validator([](std::string&) { return std::string("taken as the command"); }, ""));
  app.parse_complete_callback([&app, c] {
    if (Status s = TakeLaunchCommand(app, c); !s.ok()) throw CLI::ValidationError(s.message());
  });
}

bool ParseLaunchArgs(int argc, char** argv, LaunchConfig* c, std::string* error) {
  CLI::App app("launch", "launch");
  AddLaunchFlags(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *error = e.what();
    return false;
  }
  return true;
}

namespace {

// What the ranks run with: the node's rendezvous, the local world size, the
// grace budget a signal gives them, and the command line.
struct LaunchPlan {
  NodeEnv node;
  int nproc = 0;
  double signal_grace_s = 0;
  std::vector<std::string> argv;
};

// Reads the node's environment and resolves the command: 0 when the plan is
// ready, else the exit code (the error logged).
int PrepareLaunch(const LaunchConfig& config, LaunchPlan* plan) {
  auto node = ParseNodeEnv(ProcessEnvironment());
  if (!node.ok()) {
    spdlog::error("{}", node.status().message().c_str());
    return contract::kExitConfigError;
  }
  // On SIGTERM the ranks get the pod's whole grace budget to finish their step
  // and save (the kubelet's SIGKILL ends everything at its end anyway).
  auto budget = train::Termination::GraceFromEnv(ProcessEnvironment());
  if (!budget.ok()) {
    spdlog::error("{}", budget.status().message());
    return contract::kExitConfigError;
  }
  plan->signal_grace_s = std::max(config.grace_period_s, *budget);
  auto local_world = LocalWorldSize(*node, config.nproc_per_node);
  if (!local_world.ok()) {
    spdlog::error("{}", local_world.status().message());
    return contract::kExitConfigError;
  }
  plan->nproc = *local_world;
  if (node->nproc_per_node != 0 && node->nproc_per_node != plan->nproc) {
    spdlog::warn("--nproc-per-node {} overrides NPROC_PER_NODE={}", plan->nproc, node->nproc_per_node);
  }
  plan->node = *node;

  std::vector<std::string>& argv = plan->argv;
  argv = config.command;
  if (argv[0].find('/') == std::string::npos) {
    // A hypertrain subcommand: run this very binary.
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
      spdlog::error("cannot find this binary (/proc/self/exe): {}", std::strerror(errno));
      return contract::kExitInternal;
    }
    argv.insert(argv.begin(), config.subcommand_prefix.begin(), config.subcommand_prefix.end());
    argv.insert(argv.begin(), std::string(self, n));
  } else if (::access(argv[0].c_str(), X_OK) != 0) {
    spdlog::error("cannot execute '{}': {}", argv[0].c_str(), std::strerror(errno));
    return contract::kExitConfigError;
  }
  return contract::kExitOk;
}

// Starts one process per local rank. A fork that fails kills the ones
// started, restores the signal mask and gives the exit code (0 on success).
int StartRanks(const LaunchPlan& plan, const sigset_t& original, std::vector<Rank>* ranks_out,
               std::vector<pid_t>* pids) {
  const int nproc = plan.nproc;
  const NodeEnv* node = &plan.node;
  const std::vector<std::string>& argv = plan.argv;
  std::vector<Rank>& ranks = *ranks_out;
  ranks.resize(nproc);
  for (int l = 0; l < nproc; ++l) {
    Rank& r = ranks[l];
    r.local = l;
    r.global = node->node_rank * nproc + l;
    r.pid = Spawn(argv, RankEnvironment(*node, nproc, l), original);
    if (r.pid < 0) {
      spdlog::error("fork failed for local rank {}: {}", l, std::strerror(errno));
      SignalGroups(ranks, SIGKILL);
      for (auto& x : ranks)
        if (x.running) ::waitpid(x.pid, nullptr, 0);
      ::sigprocmask(SIG_SETMASK, &original, nullptr);
      return contract::kExitRetryable;
    }
    r.running = true;
    pids->push_back(r.pid);
  }
  return contract::kExitOk;
}

// The supervision loop's state: ranks still running, the first failure and
// its cause, the stop in progress.
struct Supervision {
  const LaunchConfig& config;
  const LaunchPlan& plan;
  std::vector<Rank>& ranks;
  LaunchObserver* observer;
  const std::string host = HostName();
  int running = 0;
  int exit_code = 0;          // first failure (0 while none)
  std::string cause;          // its one-line explanation when the logs have none
  bool stopping = false;
  Clock::time_point kill_at{};
  bool killed = false;
  int signals = 0;

  // After the first failure: SIGTERM to the rest, SIGKILL after the grace period.
  void BeginStop(const char* why) {
    if (stopping) return;
    stopping = true;
    kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(config.grace_period_s));
    spdlog::info("stopping {} remaining rank(s) ({}): SIGTERM, SIGKILL after {:.1f}s", running, why,
        config.grace_period_s);
    SignalGroups(ranks, SIGTERM);
  }

  // SIGTERM, SIGINT or SIGHUP: forwarded to the ranks; a second one kills them.
  void OnSignal(int sig) {
    if (++signals > 1) {
      // A second signal: stop now, whatever the ranks are doing.
      spdlog::warn("received signal {} again: SIGKILL to {} rank(s)", sig, running);
      SignalGroups(ranks, SIGKILL);
      killed = true;
    } else {
      spdlog::info("received signal {}; forwarding to the ranks (they finish the step and save "
                   "when it fits; SIGKILL after {:.0f} s, or on a second signal)",
                   sig, plan.signal_grace_s);
      if (exit_code == 0) {
        exit_code = 128 + sig;
        cause = "the launcher received signal " + std::to_string(sig) + " (" + strsignal(sig) +
                ") and stopped the ranks";
      }
      SignalGroups(ranks, sig);
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(plan.signal_grace_s));
      if (!stopping || deadline > kill_at) kill_at = deadline;
      stopping = true;
    }
  }

  // Reaps every exited rank (SIGCHLD may coalesce).
  void Reap() {
    for (auto& r : ranks) {
      if (!r.running) continue;
      int st = 0;
      const pid_t w = ::waitpid(r.pid, &st, WNOHANG);
      if (w != r.pid) continue;
      r.running = false;
      r.code = CodeFromWaitStatus(st);
      --running;
      // Leftovers of the rank's group (its own children) go with it.
      ::kill(-r.pid, SIGKILL);
      if (observer) observer->OnRankExited(r.local, r.global, r.code);
      // Who it was, as the other nodes' ranks name their peers: rank, node, host.
      const std::string who = fmt::format("rank {} (node {}, host {}, local rank {}, pid {})", r.global,
                                          plan.node.node_rank, host, r.local, r.pid);
      if (r.code == 0) {
        spdlog::info("{} finished", who);
        continue;
      }
      if (WIFSIGNALED(st)) {
        spdlog::warn("{} exited with signal {} ({}) -> code {}", who, WTERMSIG(st), strsignal(WTERMSIG(st)), r.code);
        // A killed rank logged nothing about it: the pod's termination message says it.
        if (exit_code == 0) {
          cause = "rank " + std::to_string(r.global) + " (local rank " + std::to_string(r.local) +
                  ") was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
        }
      } else {
        spdlog::warn("{} exited with code {}", who, r.code);
      }
      if (exit_code == 0) {
        exit_code = r.code;
        BeginStop("first failure");
      }
    }
  }
};

}  // namespace

int RunLauncher(const LaunchConfig& config, LaunchObserver* observer) {
  LaunchPlan plan;
  if (int code = PrepareLaunch(config, &plan); code != contract::kExitOk) return code;
  const int nproc = plan.nproc;

  // Signals are taken synchronously (sigtimedwait) on this single thread.
  sigset_t handled, original;
  sigemptyset(&handled);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&handled, s);
  ::sigprocmask(SIG_BLOCK, &handled, &original);

  std::vector<Rank> ranks;
  std::vector<pid_t> pids;
  if (int code = StartRanks(plan, original, &ranks, &pids); code != contract::kExitOk) return code;
  spdlog::info("node {}/{}: started {} ranks (global {}..{}) of world {}: {}", plan.node.node_rank,
      plan.node.nnodes, nproc, ranks.front().global, ranks.back().global, plan.node.nnodes * nproc,
      config.command[0].c_str());
  if (observer) observer->OnRanksStarted(plan.node.node_rank, pids);

  Supervision sup{config, plan, ranks, observer};
  sup.running = nproc;
  auto last_tick = Clock::now();
  while (sup.running > 0) {
    timespec ts{0, 100 * 1000 * 1000};
    siginfo_t info;
    const int sig = ::sigtimedwait(&handled, &info, &ts);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) sup.OnSignal(sig);
    sup.Reap();
    if (sup.stopping && !sup.killed && sup.running > 0 && Clock::now() >= sup.kill_at) {
      spdlog::warn("grace period over: SIGKILL to {} rank(s)", sup.running);
      SignalGroups(ranks, SIGKILL);
      sup.killed = true;
    }
    if (observer && Clock::now() - last_tick >= std::chrono::seconds(1)) {
      last_tick = Clock::now();
      observer->OnTick();
    }
  }
  ::sigprocmask(SIG_SETMASK, &original, nullptr);
  spdlog::info("all ranks exited; exit code {}", sup.exit_code);
  if (!sup.cause.empty()) WriteTerminationMessage(sup.cause);
  if (observer) observer->OnFinished(sup.exit_code);
  return sup.exit_code;
}

}  // namespace hypertrain::launch
