#include "operator/controller/recovery.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/time.h"

namespace hypertrain::controller {
namespace {

std::string Secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

}  // namespace

std::optional<RecoveryMeasure> MeasureRecovery(const api::TrainingJobStatus& status,
                                               const contract::Progress& report) {
  const int32_t attempt = status.restart_attempt;
  if (attempt <= 0 || !status.last_fault || !report.recovery || !report.attempt || *report.attempt != attempt ||
      status.last_recovery_attempt == attempt) {
    return std::nullopt;
  }
  const api::Fault& fault = *status.last_fault;
  const contract::Recovery& r = *report.recovery;
  auto start = ParseRfc3339(fault.finished_at);
  if (!start) start = ParseRfc3339(fault.time);
  const auto end = ParseRfc3339(r.first_step_time);
  if (!start || !end || *end < *start) return std::nullopt;
  const auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  RecoveryMeasure m;
  m.seconds = std::round(secs(*end - *start) * 1000) / 1000;
  m.message = "recovered in " + Secs(m.seconds) + " from the fault" +
              (fault.pod.empty() ? std::string() : " of pod " + fault.pod) + " to step " +
              std::to_string(report.step) + " (resumed from step " + std::to_string(r.resumed_from_step) + "):";
  std::string phases;
  auto add = [&phases](const std::string& what, double s) {
    phases += (phases.empty() ? " " : ", ") + what + " " + Secs(s);
  };
  const auto launcher = ParseRfc3339(r.launcher_start);
  if (launcher && *launcher >= *start && *launcher <= *end) {
    add("launcher exit and gang restart", secs(*launcher - *start));
    if (r.trainer_seconds) add("trainer start", std::max(0.0, secs(*end - *launcher) - *r.trainer_seconds));
  }
  double known = 0;
  if (r.rendezvous_seconds) {
    add("rendezvous", *r.rendezvous_seconds);
    known += *r.rendezvous_seconds;
  }
  if (r.checkpoint_load_seconds) {
    char rate[48] = "";
    if (r.checkpoint_load_gbps) std::snprintf(rate, sizeof(rate), " (%.2f GB/s per rank)", *r.checkpoint_load_gbps);
    add("checkpoint load", *r.checkpoint_load_seconds);
    phases += rate;
    known += *r.checkpoint_load_seconds;
  }
  if (r.first_step_seconds) known += *r.first_step_seconds;
  if (r.trainer_seconds) add("other start-up", std::max(0.0, *r.trainer_seconds - known));
  if (r.first_step_seconds) add("first step", *r.first_step_seconds);
  m.message += phases.empty() ? " no phases reported" : phases;
  return m;
}

}  // namespace hypertrain::controller
