// Process exit codes of `hypertrain` (train, launch, ...) and how the operator
// treats each when a TrainingJob pod ends with it.
//
//   code     meaning                                            retry class
//   0        success                                            kSuccess
//   1        internal error (a bug)                             kNotByDefault
//   2        configuration / command-line / environment error   kNever
//   3        input data missing or corrupt                      kNotByDefault
//   200      retryable fault (device error, peer lost, I/O)     kRetry
//   201      collective timeout / hang seen by the watchdog     kRetry
//   128+sig  killed by a signal (137 SIGKILL, 143 SIGTERM)      kRetry
//   other    not produced by hypertrain (user commands)         kRetry
//
// faultPolicy.nonRetryableExitCodes defaults to the kNever and kNotByDefault
// codes; a user may drop 1 or 3 from it, never 2 (a config error fails the
// same way on every attempt). Every other code restarts the gang while
// runPolicy.backoffLimit lasts.
#ifndef HYPERTRAIN_CONTRACT_EXIT_CODES_H_
#define HYPERTRAIN_CONTRACT_EXIT_CODES_H_

#include <array>

namespace hypertrain::contract {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitConfigError = 2;
inline constexpr int kExitDataError = 3;
inline constexpr int kExitRetryable = 200;
inline constexpr int kExitCollectiveTimeout = 201;
// A process killed by signal s exits 128 + s (shells, the launcher).
inline constexpr int kExitSignalBase = 128;

enum class RetryClass {
  kSuccess,       // the pod succeeded
  kNever,         // fails the job whatever faultPolicy says
  kNotByDefault,  // fails the job unless removed from nonRetryableExitCodes
  kRetry,         // restarts the gang (within runPolicy.backoffLimit)
};

constexpr RetryClass RetryClassOf(int code) {
  switch (code) {
    case kExitOk:
      return RetryClass::kSuccess;
    case kExitConfigError:
      return RetryClass::kNever;
    case kExitInternal:
    case kExitDataError:
      return RetryClass::kNotByDefault;
    default:
      return RetryClass::kRetry;
  }
}

// The default of faultPolicy.nonRetryableExitCodes, ascending.
inline constexpr std::array<int, 3> kDefaultNonRetryableExitCodes = {kExitInternal, kExitConfigError,
                                                                     kExitDataError};

}  // namespace hypertrain::contract

#endif  // HYPERTRAIN_CONTRACT_EXIT_CODES_H_
