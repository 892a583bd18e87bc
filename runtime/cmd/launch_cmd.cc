// `hypertrain launch`: the launcher (runtime/launch) with its observers: the
// progress reporter (runtime/progress) on node 0 and the Prometheus endpoint
// on every node where a metrics port is set; this command's log flags are
// passed on to the ranks. Before ranks start it logs which NCCL net plugin
// NCCL will load, loudly when an EFA node has none.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "contract/env.h"
#include "core/env_lookup.h"
#include "runtime/cmd/commands.h"
#include "runtime/launch/env.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/nccl_net.h"
#include "runtime/progress/metrics_server.h"
#include "runtime/progress/progress_reporter.h"
#include "contract/exit_codes.h"

namespace hypertrain::cmd {
namespace {

// Tells every observer, in order.
class Observers : public launch::LaunchObserver {
 public:
  void Add(std::unique_ptr<launch::LaunchObserver> o) {
    if (o) list_.push_back(std::move(o));
  }
  bool empty() const { return list_.empty(); }
  void OnRanksStarted(int node_rank, const std::vector<pid_t>& pids) override {
    for (auto& o : list_) o->OnRanksStarted(node_rank, pids);
  }
  void OnRankExited(int local_rank, int global_rank, int code) override {
    for (auto& o : list_) o->OnRankExited(local_rank, global_rank, code);
  }
  void OnTick() override {
    for (auto& o : list_) o->OnTick();
  }
  void OnFinished(int exit_code) override {
    for (auto& o : list_) o->OnFinished(exit_code);
  }

 private:
  std::vector<std::unique_ptr<launch::LaunchObserver>> list_;
};

void LogNcclNetPreflight() {
  const launch::PreflightMessage m = launch::Describe(launch::CheckNcclNet(ProcessEnvironment()));
  if (m.warn) {
    spdlog::warn("{}", m.text);
  } else {
    spdlog::info("{}", m.text);
  }
}

int RunLaunch(launch::LaunchConfig config, const LogFlags& log) {
  config.subcommand_prefix = log.AsArgs();
  auto port = progress::ResolveMetricsPort(config.metrics_port, ProcessEnvironment()(contract::env::kMetricsPort));
  if (!port.ok()) {
    spdlog::error("hypertrain launch: {}", port.status().message());
    return contract::kExitConfigError;
  }
  LogNcclNetPreflight();
  // Threads started below (the metrics server's) must never take SIGTERM: a
  // signal delivered to one would kill the launcher with its default action
  // instead of reaching RunLauncher's sigtimedwait, which forwards it and
  // gives the ranks their grace budget. They keep the stop signals blocked;
  // this thread gets its mask back (the ranks inherit it from RunLauncher).
  sigset_t stop_signals, original_mask;
  sigemptyset(&stop_signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&stop_signals, s);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, &original_mask);
  Observers observers;
  if (*port > 0) {
    auto server = progress::StartMetricsServer(config, *port);
    if (server.ok()) {
      observers.Add(std::move(*server));
    } else if (config.metrics_port > 0) {
      // Asked for on the command line: a port that cannot be served is a config error.
      spdlog::error("hypertrain launch: {}", server.status().message());
      return contract::kExitConfigError;
    } else {
      // The operator's default ($HYPERTRAIN_METRICS_PORT): training goes on without it.
      spdlog::warn("no Prometheus endpoint: {} (set by {}; 0 turns it off)", server.status().message(),
                   contract::env::kMetricsPort);
    }
  }
  // Null when progress reporting does not apply (not node 0, no pod).
  observers.Add(progress::MaybeCreateReporter(config));
  ::pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
  return launch::RunLauncher(config, observers.empty() ? nullptr : &observers);
}

}  // namespace

Command AddLaunchCommand(CLI::App& hypertrain) {
  CLI::App* app = hypertrain.add_subcommand("launch", "Start one rank per GPU on this node");
  app->footer(
      "Everything after -- (or from the first argument that is not a launch flag) is the command,\n"
      "passed on as it is: hypertrain launch --nproc-per-node 8 -- train --config job.yaml.\n"
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, ... (contract/env.h) from the node's NNODES,\n"
      "NODE_RANK, MASTER_ADDR, MASTER_PORT; this command's --log-format/--log-level are passed on.\n"
      "SIGTERM is forwarded; the ranks get $HYPERTRAIN_TERMINATION_GRACE_S (at least --grace-period-s)\n"
      "to save. Exit: the first failing rank's code (docs/DISTRIBUTED.md).");
  auto config = std::make_shared<launch::LaunchConfig>();
  launch::AddLaunchFlags(*app, config.get());
  return {app, [config](const LogFlags& log) { return RunLaunch(*config, log); }};
}

}  // namespace hypertrain::cmd
