#pragma once
// Graceful termination of a training process (docs/DISTRIBUTED.md
// "Termination"). Kubernetes stops a pod with SIGTERM and SIGKILLs it
// terminationGracePeriodSeconds later; the operator passes that budget as
// HYPERTRAIN_TERMINATION_GRACE_S and `hypertrain launch` forwards the signal.
//
//   first SIGTERM/SIGINT  -> requested(): the training loop finishes the
//                            current step, the ranks agree to stop after it
//                            (any rank asking is enough), save it when the
//                            save fits in SecondsLeft(), and the process
//                            exits 128 + signal (143 for SIGTERM)
//   second signal         -> the process exits at once with 128 + signal
//   a signal before TrainingStarted() -> exits at once with 128 + signal:
//                            start-up (rendezvous, loading a checkpoint) has no
//                            step to finish and nothing to save, and a rank
//                            waiting for a dead peer would otherwise hold its
//                            pod until the rendezvous deadline
//
// Signals are taken on a thread of their own (sigtimedwait): every thread
// started after HandleSignals keeps them blocked. Threads that predate it
// (OpenBLAS starts its pool when the library loads) do not, so a counting
// handler (SA_RESTART) catches a signal the kernel hands to one of them and
// the signal thread acts on it the same way: a plain `hypertrain train` stops
// gracefully exactly as a rank under `hypertrain launch` does.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "core/env_lookup.h"
#include "core/status.h"

namespace hypertrain::train {

// Kubernetes' default terminationGracePeriodSeconds (budget when unset).
inline constexpr double kDefaultTerminationGraceS = 30;

class Termination {
 public:
  explicit Termination(double grace_s = kDefaultTerminationGraceS);
  ~Termination();  // stops the signal thread (signals stay blocked)
  Termination(const Termination&) = delete;
  Termination& operator=(const Termination&) = delete;

  // The budget of HYPERTRAIN_TERMINATION_GRACE_S (contract/env.h), else the
  // default; InvalidArgument for a value that is not a number in [0, 86400].
  static StatusOr<double> GraceFromEnv(const EnvLookup& env);

  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every
  // thread it starts afterwards (call it before any other thread exists), and
  // starts the thread that takes them.
  Status HandleSignals();

  // What the first signal does (tests call it directly). Later calls only
  // count; the signal thread exits the process on the second.
  void Request(int sig);
  // The training loop starts: from now on the first signal is a graceful stop.
  void TrainingStarted() { training_.store(true); }
  bool requested() const { return signal_.load() != 0; }
  int signal() const { return signal_.load(); }
  double grace_s() const { return grace_s_; }
  // What is left of the grace budget since the first request (the budget
  // itself before one).
  double SecondsLeft() const;

 private:
  void Loop();

  const double grace_s_;
  std::atomic<int> signal_{0};
  std::atomic<int64_t> requested_at_ns_{0};  // steady clock
  std::atomic<bool> stop_{false};
  std::atomic<bool> training_{false};
  bool handlers_installed_ = false;
  int handled_count_ = 0;  // handler-caught signals the loop has taken (its thread only)
  std::thread thread_;
};

}  // namespace hypertrain::train
