#pragma once
// `hypertrain launch`: the per-pod (per-node) process supervisor.
//
//   hypertrain launch [--nproc-per-node N] [--grace-period-s S] -- train --config c.yaml
//   hypertrain launch --nproc-per-node 2 -- /path/to/program args...
//
// Starts N local ranks (a first word without '/' is a hypertrain subcommand
// and runs this same binary; a path runs that program), each in its own
// process group with PR_SET_PDEATHSIG(SIGKILL) as an orphan backstop and the
// env of contract/env.h: RANK = NODE_RANK*N + LOCAL_RANK, WORLD_SIZE =
// NNODES*N, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NNODES, NPROC_PER_NODE,
// MASTER_ADDR, MASTER_PORT (and the same PET_* values). N is --nproc-per-node,
// else NPROC_PER_NODE; a pod WORLD_SIZE other than NNODES*N is a config error.
//
// Supervision: SIGTERM/SIGINT/SIGHUP to the launcher are forwarded to every
// rank's process group, which then has the pod's grace budget
// (HYPERTRAIN_TERMINATION_GRACE_S, at least --grace-period-s) to finish its
// step and save before SIGKILL; a second signal SIGKILLs the ranks at once
// (docs/DISTRIBUTED.md "Termination"). When a rank exits non-zero or is killed, the others
// get SIGTERM, then SIGKILL after the grace period; the launcher exits with
// the FIRST failure's code (a signal s maps to 128+s; see
// contract/exit_codes.h), or 128+sig when it was itself told to stop.
// It exits 0 only when every rank exited 0.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <sys/types.h>
#include <vector>

#include "core/status.h"

namespace hypertrain::launch {

// Hook for whoever watches the node (issue 8: on node 0 the operator's
// progress reporter publishes a pod annotation). Called on the launcher's
// single thread; must not block for long.
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual void OnRanksStarted(int /*node_rank*/, const std::vector<pid_t>& /*pids*/) {}
  // code: exit status, or 128+signal.
  virtual void OnRankExited(int /*local_rank*/, int /*global_rank*/, int /*code*/) {}
  // Called about once a second while ranks run.
  virtual void OnTick() {}
  virtual void OnFinished(int /*exit_code*/) {}
};

struct LaunchConfig {
  int nproc_per_node = 0;
  double grace_period_s = 30;
  std::vector<std::string> command;  // after "--"
  // Put before a hypertrain subcommand's name in each rank's argv (the
  // launcher's own log flags, so the ranks log alike).
  std::vector<std::string> subcommand_prefix;
  // --metrics-port: -1 when not given ($HYPERTRAIN_METRICS_PORT then decides,
  // runtime/progress/metrics_server.h); 0 turns the endpoint off.
  int metrics_port = -1;
};

// Declares launch's flags on `app` (`hypertrain launch`, a CLI11 subcommand)
// bound to `config`: --nproc-per-node (also --nproc_per_node, torchrun's
// spelling), --grace-period-s, --metrics-port. The command to launch starts at
// the first argument that is not a launch flag or its value, or after "--"; it
// and everything after it are passed on unparsed (config->command). An
// unknown launch flag (named) or no command is a parse error (exit 2).
void AddLaunchFlags(CLI::App& app, LaunchConfig* config);

// Both, for argv = {"launch", flags..., [--], command...} (the pod's command
// line in tests); errors are config errors.
bool ParseLaunchArgs(int argc, char** argv, LaunchConfig* config, std::string* error);

// Runs the launcher; returns the process exit code. `observer` (may be null)
// is told about ranks starting and exiting (runtime/cmd passes the progress
// reporter on node 0).
int RunLauncher(const LaunchConfig& config, LaunchObserver* observer = nullptr);

}  // namespace hypertrain::launch
