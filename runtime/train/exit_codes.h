#pragma once
// The runtime's side of the exit-code contract (contract/exit_codes.h: the
// codes and how the operator retries each): which code a Status ends a
// `hypertrain` process with. The contract's constants are re-exported here so
// that runtime code keeps writing train::kExitConfigError.
#include "contract/exit_codes.h"
#include "core/status.h"

namespace hypertrain::train {

using contract::kExitCollectiveTimeout;
using contract::kExitConfigError;
using contract::kExitDataError;
using contract::kExitInternal;
using contract::kExitOk;
using contract::kExitRetryable;
using contract::kExitTerminated;

// Maps a Status from the runtime to its exit code.
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
    case StatusCode::kUnimplemented:
    case StatusCode::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace hypertrain::train
