#pragma once
// Process exit codes of `hypertrain` (train, launch, ...) and how the operator
// treats each when a TrainingJob pod ends with it. The default policy is
// Kubeflow's (PyTorchJob restartPolicy ExitCode): a process that exits with a
// code of its own (1-127) failed for a reason a restart does not cure; one
// killed by a signal (128+) or reporting a transient fault (the trainer's 200
// and 201, both above 128) is worth a gang restart.
//
//   code     meaning                                            retry class
//   0        success                                            kSuccess
//   1        internal error (a bug)                             kNotByDefault
//   2        configuration / command-line / environment error   kNever
//   3        input data missing or corrupt                      kNotByDefault
//   4-127    not produced by hypertrain: a user command's own   kNotByDefault
//            error (126 not executable, 127 command not found)
//   200      retryable fault (device error, peer lost, I/O)     kRetry
//   201      collective timeout / hang seen by the watchdog     kRetry
//   143      stopped on SIGTERM (130 on SIGINT), or because a   kRetry
//            peer rank was: the ranks finished the step together
//            and saved it when the save fit in the grace budget
//            (docs/DISTRIBUTED.md "Termination")
//   128+sig  killed by a signal (137 SIGKILL)                   kRetry
//   other    128-255 not listed above                           kRetry
//
// faultPolicy.retryableExitCodes turns kNotByDefault codes into restarts and
// faultPolicy.nonRetryableExitCodes turns kRetry codes into failures (e.g. 137
// when an OOM kill is not worth another attempt); neither can make 2 retry (a
// config error fails the same way on every attempt). Every retried code
// restarts the gang while runPolicy.backoffLimit lasts.

namespace hypertrain::contract {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitConfigError = 2;
inline constexpr int kExitDataError = 3;
inline constexpr int kExitRetryable = 200;
inline constexpr int kExitCollectiveTimeout = 201;
// A process killed by signal s exits 128 + s (shells, the launcher).
inline constexpr int kExitSignalBase = 128;
// A graceful stop on SIGTERM (the trainer, the launcher): 128 + SIGTERM.
inline constexpr int kExitTerminated = kExitSignalBase + 15;

enum class RetryClass {
  kSuccess,       // the pod succeeded
  kNever,         // fails the job whatever faultPolicy says
  kNotByDefault,  // fails the job unless listed in retryableExitCodes
  kRetry,         // restarts the gang unless listed in nonRetryableExitCodes
};

constexpr RetryClass RetryClassOf(int code) {
  if (code == kExitOk) return RetryClass::kSuccess;
  if (code == kExitConfigError) return RetryClass::kNever;
  if (code > 0 && code < kExitSignalBase) return RetryClass::kNotByDefault;
  return RetryClass::kRetry;  // 128-255 (and anything a runtime reports outside 0-255)
}

// Whether a pod that exited with `code` restarts the gang, given the user's
// overrides (faultPolicy.retryableExitCodes / nonRetryableExitCodes). `Set` is
// any container with count().
template <typename Set>
bool IsRetryable(int code, const Set& retryable, const Set& non_retryable) {
  switch (RetryClassOf(code)) {
    case RetryClass::kSuccess:
    case RetryClass::kNever:
      return false;
    case RetryClass::kNotByDefault:
      return retryable.count(code) > 0;
    case RetryClass::kRetry:
      return non_retryable.count(code) == 0;
  }
  return false;
}

}  // namespace hypertrain::contract
