#include "contract/progress.h"

#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

namespace hypertrain::contract {
namespace {

using nlohmann::json;

std::optional<int64_t> Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::optional<double> Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

json EncodeStartup(const StartupReport& s) {
  json phases = json::array();
  for (const StartupReport::Phase& p : s.phases) {
    if (std::isfinite(p.seconds)) phases.push_back({{"name", p.name}, {"seconds", p.seconds}});
  }
  return {{"timeToFirstStepSeconds", s.time_to_first_step_seconds}, {"phases", std::move(phases)}};
}

// A malformed start-up section is dropped, not an error: it is informative.
std::optional<StartupReport> DecodeStartup(const json& j) {
  auto it = j.find("startup");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  std::optional<double> total = Number(*it, "timeToFirstStepSeconds");
  if (!total) return std::nullopt;
  StartupReport s;
  s.time_to_first_step_seconds = *total;
  auto phases = it->find("phases");
  if (phases != it->end() && phases->is_array()) {
    for (const json& p : *phases) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
      std::optional<double> seconds = Number(p, "seconds");
      if (seconds) s.phases.push_back({p["name"].get<std::string>(), *seconds});
    }
  }
  return s;
}

json RecoveryJson(const Recovery& r) {
  json j = {{"resumedFromStep", r.resumed_from_step}, {"firstStepTime", r.first_step_time}};
  if (!r.launcher_start.empty()) j["launcherStart"] = r.launcher_start;
  const std::pair<const char*, const std::optional<double>*> numbers[] = {
      {"rendezvousSeconds", &r.rendezvous_seconds},   {"checkpointLoadSeconds", &r.checkpoint_load_seconds},
      {"checkpointLoadGBps", &r.checkpoint_load_gbps}, {"firstStepSeconds", &r.first_step_seconds},
      {"trainerSeconds", &r.trainer_seconds}};
  for (const auto& [key, v] : numbers) {
    if (*v && std::isfinite(**v)) j[key] = **v;
  }
  return j;
}

std::optional<Recovery> RecoveryFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const std::optional<int64_t> from = Int(j, "resumedFromStep");
  auto t = j.find("firstStepTime");
  if (!from || *from < 0 || t == j.end() || !t->is_string() || t->get<std::string>().empty()) return std::nullopt;
  Recovery r;
  r.resumed_from_step = *from;
  r.first_step_time = t->get<std::string>();
  if (auto l = j.find("launcherStart"); l != j.end() && l->is_string()) r.launcher_start = l->get<std::string>();
  r.rendezvous_seconds = Number(j, "rendezvousSeconds");
  r.checkpoint_load_seconds = Number(j, "checkpointLoadSeconds");
  r.checkpoint_load_gbps = Number(j, "checkpointLoadGBps");
  r.first_step_seconds = Number(j, "firstStepSeconds");
  r.trainer_seconds = Number(j, "trainerSeconds");
  return r;
}

}  // namespace

std::string EncodeRecovery(const Recovery& r) { return RecoveryJson(r).dump(); }

std::optional<Recovery> DecodeRecovery(std::string_view value) {
  return RecoveryFromJson(json::parse(value, nullptr, /*allow_exceptions=*/false));
}

std::string EncodeProgress(const Progress& p) {
  json j = {{"step", p.step}};
  if (p.max_steps) j["maxSteps"] = *p.max_steps;
  // JSON has no NaN or infinity (a diverged loss): leave the field out.
  if (p.loss && std::isfinite(*p.loss)) j["loss"] = *p.loss;
  if (p.tokens_per_second && std::isfinite(*p.tokens_per_second)) j["tokensPerSecond"] = *p.tokens_per_second;
  if (p.last_checkpoint_step) j["lastCheckpointStep"] = *p.last_checkpoint_step;
  if (!p.time.empty()) j["time"] = p.time;
  if (p.attempt) j["attempt"] = *p.attempt;
  if (p.startup && std::isfinite(p.startup->time_to_first_step_seconds)) {
    j["startup"] = EncodeStartup(*p.startup);
  }
  if (p.recovery) j["recovery"] = RecoveryJson(*p.recovery);
  return j.dump();
}

std::optional<Progress> DecodeProgress(std::string_view value, std::string* error) {
  json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "not a JSON object";
    return std::nullopt;
  }
  Progress p;
  std::optional<int64_t> step = Int(j, "step");
  if (!step || *step < 0) {
    *error = "step must be a non-negative integer";
    return std::nullopt;
  }
  p.step = *step;
  p.max_steps = Int(j, "maxSteps");
  p.loss = Number(j, "loss");
  p.tokens_per_second = Number(j, "tokensPerSecond");
  p.last_checkpoint_step = Int(j, "lastCheckpointStep");
  if (auto it = j.find("time"); it != j.end() && it->is_string()) p.time = it->get<std::string>();
  p.attempt = Int(j, "attempt");
  p.startup = DecodeStartup(j);
  if (auto r = j.find("recovery"); r != j.end()) p.recovery = RecoveryFromJson(*r);
  return p;
}

}  // namespace hypertrain::contract
