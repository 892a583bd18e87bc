#pragma once
// Process exit codes of `hypertrain` (train, launch, ...). Shared by the
// trainer, the launcher and the operator's restart policy.
//
// Convention (compatible with Kubeflow's restartPolicy: ExitCode, which
// retries codes >= 128 and fails the job on 1..127):
//   0        success
//   1        internal error (a bug): not retried
//   2        configuration / command-line error: never retried
//   3        input data missing or corrupt: never retried
//   200      retryable fault (device error, peer lost, I/O hiccup): restart
//   201      collective timeout / hang detected by the watchdog: restart
//   128+sig  killed by a signal (e.g. 137 SIGKILL, 143 SIGTERM): restart
#include "core/status.h"

namespace hypertrain::train {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitConfigError = 2;
inline constexpr int kExitDataError = 3;
inline constexpr int kExitRetryable = 200;
inline constexpr int kExitCollectiveTimeout = 201;

inline bool IsRetryableExitCode(int code) { return code >= 128; }

// Maps a Status from the runtime to the exit code above.
inline int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitConfigError;
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss: return kExitDataError;
    case StatusCode::kDeadlineExceeded: return kExitCollectiveTimeout;
    case StatusCode::kUnavailable:
    case StatusCode::kIo: return kExitRetryable;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace hypertrain::train
