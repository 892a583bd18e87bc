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

}  // namespace

Termination::Termination(double grace_s) : grace_s_(grace_s) {}

Termination::~Termination() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

StatusOr<double> Termination::GraceFromEnv(const launch::EnvLookup& env) {
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
    const int sig = ::sigtimedwait(&s, nullptr, &ts);
    if (sig <= 0) continue;  // timeout or EINTR
    if (++count == 1) {
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
