#pragma once
// The launcher's one-line cause of a pod's failure, for Kubernetes: the kubelet
// reads the container's terminationMessagePath (/dev/termination-log) into the
// pod's status, where the operator takes it for the job's condition message.
// The operator's pods use terminationMessagePolicy FallbackToLogsOnError, so a
// failure the launcher does not explain shows the last lines of the pod's log
// instead (a trainer exiting 1/2/3/200/201 has logged why; a rank killed by a
// signal has not).
#include <string>

#include "core/env_lookup.h"

namespace hypertrain::launch {

inline constexpr char kTerminationLogEnv[] = "HYPERTRAIN_TERMINATION_LOG";
inline constexpr char kDefaultTerminationLog[] = "/dev/termination-log";

// Writes `line` (cut to 1024 bytes, one newline) to $HYPERTRAIN_TERMINATION_LOG
// (created if missing), else to /dev/termination-log only when that file exists
// (inside a Kubernetes container; never created elsewhere). Best effort: false
// when nothing was written. `env` is where the variable is read (tests: a map).
bool WriteTerminationMessage(const std::string& line,
                             const hypertrain::EnvLookup& env = ProcessEnvironment());

}  // namespace hypertrain::launch
