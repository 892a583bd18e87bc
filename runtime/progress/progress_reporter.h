#pragma once
// Progress reporting from `hypertrain launch` on node 0 to the Kubernetes API:
// the progress annotation (contract/pod.h, format contract/progress.h) on the
// job's progress ConfigMap ($HYPERTRAIN_PROGRESS_CONFIGMAP), which the operator
// copies to TrainingJob status.progress and uses for hang detection. The pods'
// ServiceAccount may patch that ConfigMap and nothing else (issue 19).
//
// Source of progress: the metrics JSONL rank 0 already writes
// (<exp_dir>/metrics.jsonl; only lines appended after the launcher started
// count) and the complete checkpoints in the checkpoint dir (step-<N>/manifest.json).
// Optional: active only on node rank 0 with HYPERTRAIN_PROGRESS_CONFIGMAP and
// HYPERTRAIN_NAMESPACE (or POD_NAMESPACE) set (contract/env.h), and a Kubernetes
// config (in-cluster, or $KUBECONFIG, e.g. written by the local node agent).
// Publishing happens on a background thread, at most every
// HYPERTRAIN_PROGRESS_INTERVAL_S seconds (default 10), so the launcher's
// supervision loop never waits on the network.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/progress.h"
#include "runtime/config/config.h"
#include "runtime/launch/launch.h"

namespace hypertrain::progress {

using contract::Progress;

// Reads complete lines appended to a JSONL file since the last call.
class JsonlTail {
 public:
  // `from_end`: skip what the file holds now (earlier attempts' lines).
  JsonlTail(std::string path, bool from_end);
  // Applies each new metrics line (step, loss, tokens_per_s) to `p`; true if any.
  bool Poll(Progress* p);
  // Calls `each` with every new complete line that is a JSON object with an
  // integer "step"; true if any.
  bool PollRecords(const std::function<void(const nlohmann::json&)>& each);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  long offset_ = 0;
  std::string partial_;
};

// The trainer's recovery report (<exp_dir>/recovery.json, written after the
// first step after a resume) when it is this launcher's: its first step is
// not before `launcher_start` (RFC 3339), which it then carries; nullopt when
// absent, malformed or an earlier attempt's.
std::optional<contract::Recovery> ReadRecovery(const std::string& path, const std::string& launcher_start);

// Highest N of <dir>/step-N holding a manifest.json; nullopt if none.
std::optional<int64_t> LatestCheckpointStep(const std::string& checkpoint_dir);

// Where the trainer of `command` (["train", "--config", F, "--set", "k=v"...])
// writes, its config resolved as the trainer resolves it (--config, else
// $HYPERTRAIN_CONFIG; $HYPERTRAIN_CHECKPOINT_DIR; see config::ResolveRunConfig)
// with `env`: fills metrics path, checkpoint dir and max steps. False if
// `command` is not a train command with a loadable config.
bool TrainPaths(const std::vector<std::string>& command, const config::EnvLookup& env, std::string* metrics_path,
                std::string* checkpoint_dir, int64_t* max_steps);

// The ConfigMap node 0's launcher annotates, from HYPERTRAIN_NAMESPACE (else
// POD_NAMESPACE) and HYPERTRAIN_PROGRESS_CONFIGMAP; nullopt on other nodes
// (NODE_RANK != 0) or when the env names no ConfigMap.
struct ProgressTarget {
  std::string namespace_;
  std::string configmap;
};
std::optional<ProgressTarget> ReportingTarget(const config::EnvLookup& env);

// The observer for `hypertrain launch` (runtime/cmd), or nullptr when progress
// reporting does not apply.
std::unique_ptr<launch::LaunchObserver> MaybeCreateReporter(const launch::LaunchConfig& config);

}  // namespace hypertrain::progress
