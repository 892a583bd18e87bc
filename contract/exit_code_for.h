#pragma once
// The exit code a `hypertrain` process ends with for a Status (core/status.h):
// the runtime's side of the exit-code contract (exit_codes.h: the codes and
// how the operator retries each). A library of its own, apart from the std-only
// exit_codes, because it needs core's Status.
#include "contract/exit_codes.h"
#include "core/status.h"

namespace hypertrain::contract {

// Maps a Status from the runtime to its exit code. Every StatusCode has its
// case (a new one fails the build here, not silently exits 1):
//   config (2):     bad input, or a refusal no restart cures (permissions,
//                   credentials)
//   data (3):       input data missing or corrupt
//   retryable (200): transient faults (peer or I/O, throttling, a conflict or
//                   expired watch the next attempt re-reads)
//   timeout (201):  a collective or wait past its deadline
//   terminated (143): cancelled by shutdown (SIGTERM)
//   internal (1):   everything that means a bug or a state the code did not
//                   expect
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
inline int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated: return kExitConfigError;
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss: return kExitDataError;
    case StatusCode::kDeadlineExceeded: return kExitCollectiveTimeout;
    case StatusCode::kUnavailable:
    case StatusCode::kIo:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAborted:
    case StatusCode::kExpired: return kExitRetryable;
    case StatusCode::kCancelled: return kExitTerminated;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented:
    case StatusCode::kAlreadyExists:
    case StatusCode::kUnknown:
    case StatusCode::kInternal: return kExitInternal;
  }
  return kExitInternal;  // a value outside the enum
}
#pragma GCC diagnostic pop

}  // namespace hypertrain::contract
