#include "contract/progress.h"

#include <cmath>

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

}  // namespace

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
  return p;
}

}  // namespace hypertrain::contract
