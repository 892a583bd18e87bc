#include "runtime/train/termination.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "contract/env.h"
#include "contract/exit_codes.h"

namespace hypertrain::train {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&s, sig);
  return s;
}

// Threads that existed before HandleSignals (OpenBLAS starts its pool when
// the library loads, before main) do not block the stop signals, and the
// kernel delivers a process-directed signal to any thread that does not: with
// the default action that killed the process at once (exit 143, no save).
// So a handler is installed too: it only counts (lock-free atomics are
// async-signal-safe) and the signal thread takes it from there.
std::atomic<int> g_caught_signal{0};
std::atomic<int> g_caught_count{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void CountStopSignal(int sig) {
  g_caught_signal.store(sig);
  g_caught_count.fetch_add(1);
}

}  // namespace

Termination::Termination(double grace_s) : grace_s_(grace_s) {}

Termination::~Termination() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (handlers_installed_) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
  }
}

StatusOr<double> Termination::GraceFromEnv(const EnvLookup& env) {
  const char* v = env(contract::env::kTerminationGraceS);
  if (v == nullptr || *v == '\0') return kDefaultTerminationGraceS;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s >= 0) || s > 86400) {
    return InvalidArgument(std::string(contract::env::kTerminationGraceS) + "='" + v +
                           "' is not a number of seconds in [0, 86400]");
  }
  return s;
}

Status Termination::HandleSignals() {
  const sigset_t s = StopSignals();
  if (const int rc = ::pthread_sigmask(SIG_BLOCK, &s, nullptr); rc != 0) {
    return Internal(std::string("pthread_sigmask: ") + std::strerror(rc));
  }
  struct sigaction count {};
  count.sa_handler = CountStopSignal;
  count.sa_flags = SA_RESTART;
  sigfillset(&count.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    if (::sigaction(sig, &count, nullptr) != 0) return Internal(std::string("sigaction: ") + std::strerror(errno));
  }
  handlers_installed_ = true;
  handled_count_ = g_caught_count.load();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Termination::Request(int sig) {
  int expected = 0;
  if (signal_.compare_exchange_strong(expected, sig)) {
    requested_at_ns_.store(NowNs());
    spdlog::warn("received {} ({}): finishing the current step, then saving it if the save fits "
                 "in the {:.0f} s grace budget; a second signal exits at once",
                 sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a stop signal",
                 sig, grace_s_);
  }
}

double Termination::SecondsLeft() const {
  const int64_t at = requested_at_ns_.load();
  if (signal_.load() == 0 || at == 0) return grace_s_;
  return grace_s_ - static_cast<double>(NowNs() - at) / 1e9;
}

void Termination::Loop() {
  const sigset_t s = StopSignals();
  int count = 0;
  while (!stop_.load()) {
    timespec ts{0, 100 * 1000 * 1000};
    int sig = 0;
    if (g_caught_count.load() > handled_count_) {  // taken by the handler on another thread
      ++handled_count_;
      sig = g_caught_signal.load();
    } else {
      sig = ::sigtimedwait(&s, nullptr, &ts);
    }
    if (sig <= 0) continue;  // timeout or EINTR
    if (++count == 1 && !training_.load()) {
      spdlog::warn("received {} before training started: no step to finish and nothing to save; exiting "
                   "at once (exit {})",
                   sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a stop signal", contract::kExitSignalBase + sig);
      spdlog::default_logger()->flush();
      ::_exit(contract::kExitSignalBase + sig);
    }
    if (count == 1) {
      Request(sig);
      continue;
    }
    const int first = signal_.load() != 0 ? signal_.load() : sig;
    spdlog::error("received a second stop signal ({}): exiting at once (exit {}); an unfinished "
                  "checkpoint is discarded at the next start",
                  sig, contract::kExitSignalBase + first);
    spdlog::default_logger()->flush();
    ::_exit(contract::kExitSignalBase + first);
  }
}

}  // namespace hypertrain::train
