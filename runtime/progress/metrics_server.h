#pragma once
// The Prometheus endpoint of `hypertrain launch --metrics-port N` (else
// $HYPERTRAIN_METRICS_PORT, which the operator sets on every pod; 0 or unset:
// off): GET /metrics on every interface of the pod, serving the launcher's
// ranks and the trainer's step metrics (runtime/progress/trainer_metrics.h)
// plus process_* of the launcher. The chart's PodMonitor scrapes the trainer
// container's port named "metrics".
//
// The metrics file is the one the launched `train` command writes
// (<exp_dir>/metrics.jsonl, its config resolved as TrainPaths resolves it); a
// command that is not `train` gets only the launcher's series. The file is
// read on the launcher's tick (about once a second), never on a scrape.
#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/launch/launch.h"

namespace hypertrain::progress {

// Where the port comes from: the flag wins over the environment.
// Returns 0 (off) when neither names one; InvalidArgument for a value that is
// not a port number, naming where it came from.
StatusOr<int> ResolveMetricsPort(int flag_port, const char* env_value);

// Listens on `port` (0 picks a free one, for tests) and returns the observer
// that keeps the series current; Unavailable when the port is taken.
StatusOr<std::unique_ptr<launch::LaunchObserver>> StartMetricsServer(const launch::LaunchConfig& config, int port,
                                                                      int* bound_port = nullptr);

}  // namespace hypertrain::progress
