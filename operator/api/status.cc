#include "operator/api/status.h"

#include <algorithm>

#include "contract/pod.h"
#include "contract/progress.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;

template <typename T>
void PutOpt(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}
void PutStr(json& j, const char* key, const std::string& v) {
  if (!v.empty()) j[key] = v;
}

std::string GetStr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
template <typename T>
std::optional<T> GetNum(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<T>();
}

bool IsTrue(const TrainingJobStatus& s, std::string_view type) { return IsConditionTrue(s, type); }

// Sets one condition without the cross-condition rules.
bool SetOne(TrainingJobStatus* s, std::string_view type, bool value, std::string_view reason,
            std::string_view message, std::string_view now, int64_t generation) {
  const std::string status = value ? "True" : "False";
  for (Condition& c : s->conditions) {
    if (c.type != type) continue;
    Condition next = c;
    if (c.status != status) next.last_transition_time = std::string(now);
    next.status = status;
    next.reason = std::string(reason);
    next.message = std::string(message);
    next.observed_generation = generation;
    if (next == c) return false;
    c = std::move(next);
    return true;
  }
  // An absent condition is already "not True"; Estimated=False is recorded
  // anyway: its reason and message say why a dry run has no estimate.
  if (!value && type != kCondEstimated) return false;
  s->conditions.push_back(Condition{std::string(type), status, std::string(reason),
                                    std::string(message), std::string(now), generation});
  return true;
}

// Sets `type` False only when it is currently True (keeps its old reason otherwise).
bool Clear(TrainingJobStatus* s, std::string_view type, std::string_view reason, std::string_view message,
           std::string_view now, int64_t generation) {
  if (!IsTrue(*s, type)) return false;
  return SetOne(s, type, false, reason, message, now, generation);
}

}  // namespace

const std::vector<std::string>& ConditionTypes() {
  static const std::vector<std::string> k = {kCondCreated, kCondRunning,   kCondRestarting, kCondSucceeded,
                                             kCondFailed,  kCondSuspended, kCondEstimated};
  return k;
}

const std::vector<std::string>& ConditionReasons() {
  using namespace reason;  // NOLINT
  static const std::vector<std::string> k = {
      kJobCreated,        kPodsPending,         kPodsRunning,      kPodFailed,
      kPodLost,           kPodEvicted,          kNodeUnhealthy,    kHang,
      kJobRestarting,     kAllPodsSucceeded,    kBackoffLimitExceeded, kDeadlineExceeded,
      kNonRetryableExitCode, kInvalidSpec,      kJobSuspended,     kJobResumed,
      kJobSucceeded,      kJobFailed,           kUnschedulable,    kResized,
      kEstimateReady,     kEstimateUnavailable, kPodCreationFailed,
      kOwnershipConflict, kPreviousJobTerminating, kNamespaceExcluded};
  return k;
}

const Condition* FindCondition(const TrainingJobStatus& status, std::string_view type) {
  for (const Condition& c : status.conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool IsConditionTrue(const TrainingJobStatus& status, std::string_view type) {
  const Condition* c = FindCondition(status, type);
  return c != nullptr && c->status == "True";
}

bool IsFinished(const TrainingJobStatus& status) {
  return IsTrue(status, kCondSucceeded) || IsTrue(status, kCondFailed);
}

std::string ComputeState(const TrainingJobStatus& s) {
  for (const char* t : {kCondFailed, kCondSucceeded, kCondSuspended, kCondRestarting, kCondRunning, kCondCreated}) {
    if (IsTrue(s, t)) return t;
  }
  if (FindCondition(s, kCondEstimated) != nullptr) return kCondEstimated;  // a dry run (ready or not)
  return kStatePending;
}

bool SetJobCondition(TrainingJobStatus* s, std::string_view type, bool value, std::string_view reason,
                     std::string_view message, std::string_view now, int64_t generation) {
  if (IsFinished(*s)) return false;  // terminal: Succeeded and Failed are sticky
  bool changed = SetOne(s, type, value, reason, message, now, generation);
  if (value) {
    if (type == kCondRunning) {
      changed |= Clear(s, kCondRestarting, reason, message, now, generation);
      changed |= Clear(s, kCondSuspended, reason::kJobResumed, message, now, generation);
    } else if (type == kCondRestarting || type == kCondSuspended) {
      changed |= Clear(s, kCondRunning, reason, message, now, generation);
      if (type == kCondSuspended) changed |= Clear(s, kCondRestarting, reason, message, now, generation);
    } else if (type == kCondSucceeded || type == kCondFailed) {
      changed |= Clear(s, kCondRunning, reason, message, now, generation);
      changed |= Clear(s, kCondRestarting, reason, message, now, generation);
    }
  }
  std::string state = ComputeState(*s);
  if (state != s->state) {
    s->state = state;
    changed = true;
  }
  return changed;
}

bool SetJobConditionFalse(TrainingJobStatus* s, std::string_view type, std::string_view reason,
                          std::string_view message, std::string_view now, int64_t generation) {
  if (IsFinished(*s)) return false;
  if (FindCondition(*s, type) == nullptr) {
    s->conditions.push_back(
        Condition{std::string(type), "False", std::string(reason), std::string(message), std::string(now), generation});
    s->state = ComputeState(*s);
    return true;
  }
  return SetJobCondition(s, type, false, reason, message, now, generation);
}

json ToJson(const TrainingJobStatus& s) {
  json j = json::object();
  PutStr(j, "state", s.state);
  j["observedGeneration"] = s.observed_generation;
  json conds = json::array();
  for (const Condition& c : s.conditions) {
    conds.push_back({{"type", c.type},
                     {"status", c.status},
                     {"reason", c.reason},
                     {"message", c.message},
                     {"lastTransitionTime", c.last_transition_time},
                     {"observedGeneration", c.observed_generation}});
  }
  j["conditions"] = conds;
  PutStr(j, "startTime", s.start_time);
  PutStr(j, "completionTime", s.completion_time);
  j["restartCount"] = s.restart_count;
  j["restartAttempt"] = s.restart_attempt;
  j["gpus"] = s.gpus;
  j["worldSize"] = s.world_size;
  if (s.current_nodes > 0) j["currentNodes"] = s.current_nodes;
  j["pods"] = {{"active", s.pods.active}, {"succeeded", s.pods.succeeded}, {"failed", s.pods.failed}};
  if (s.progress) {
    json p = json::object();
    PutOpt(p, "step", s.progress->step);
    PutOpt(p, "maxSteps", s.progress->max_steps);
    PutOpt(p, "loss", s.progress->loss);
    PutOpt(p, "tokensPerSecond", s.progress->tokens_per_second);
    PutOpt(p, "lastCheckpointStep", s.progress->last_checkpoint_step);
    PutStr(p, "updatedAt", s.progress->updated_at);
    j["progress"] = p;
  }
  if (s.last_fault) {
    json f = json::object();
    PutStr(f, "reason", s.last_fault->reason);
    PutStr(f, "message", s.last_fault->message);
    PutStr(f, "pod", s.last_fault->pod);
    PutStr(f, "node", s.last_fault->node);
    PutOpt(f, "rank", s.last_fault->rank);
    PutOpt(f, "exitCode", s.last_fault->exit_code);
    PutStr(f, "time", s.last_fault->time);
    PutStr(f, "finishedAt", s.last_fault->finished_at);
    j["lastFault"] = f;
  }
  PutOpt(j, "lastRecoverySeconds", s.last_recovery_seconds);
  PutOpt(j, "lastRecoveryAttempt", s.last_recovery_attempt);
  if (!s.excluded_nodes.empty()) j["excludedNodes"] = s.excluded_nodes;
  if (!s.node_faults.empty()) j["nodeFaults"] = s.node_faults;
  if (!s.scheduling.empty()) {
    json sc = json::object();
    PutStr(sc, "startTime", s.scheduling.start_time);
    if (s.scheduling.timeouts > 0) sc["timeouts"] = s.scheduling.timeouts;
    PutStr(sc, "retryTime", s.scheduling.retry_time);
    PutStr(sc, "message", s.scheduling.message);
    j["scheduling"] = sc;
  }
  if (!s.elastic.empty()) {
    json e = json::object();
    PutStr(e, "lastResizeTime", s.elastic.last_resize_time);
    json history = json::array();
    for (const SizeRecord& r : s.elastic.history) {
      json h = {{"nodes", r.nodes}};
      PutStr(h, "since", r.since);
      PutStr(h, "reason", r.reason);
      PutOpt(h, "fromStep", r.from_step);
      PutOpt(h, "toStep", r.to_step);
      history.push_back(h);
    }
    e["history"] = history;
    j["elastic"] = e;
  }
  if (!s.estimate.is_null()) j["estimate"] = s.estimate;
  return j;
}

StatusOr<TrainingJobStatus> ParseStatus(const json& j) {
  TrainingJobStatus s;
  if (j.is_null()) return s;
  if (!j.is_object()) return InvalidField("status", "must be an object");
  s.state = GetStr(j, "state");
  s.observed_generation = GetNum<int64_t>(j, "observedGeneration").value_or(0);
  if (auto it = j.find("conditions"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidField("status.conditions", "must be a list");
    for (const json& c : *it) {
      if (!c.is_object()) return InvalidField("status.conditions", "items must be objects");
      s.conditions.push_back(Condition{GetStr(c, "type"), GetStr(c, "status"), GetStr(c, "reason"),
                                       GetStr(c, "message"), GetStr(c, "lastTransitionTime"),
                                       GetNum<int64_t>(c, "observedGeneration").value_or(0)});
    }
  }
  s.start_time = GetStr(j, "startTime");
  s.completion_time = GetStr(j, "completionTime");
  s.restart_count = GetNum<int32_t>(j, "restartCount").value_or(0);
  s.restart_attempt = GetNum<int32_t>(j, "restartAttempt").value_or(0);
  s.gpus = GetNum<int32_t>(j, "gpus").value_or(0);
  s.world_size = GetNum<int32_t>(j, "worldSize").value_or(0);
  s.current_nodes = GetNum<int32_t>(j, "currentNodes").value_or(0);
  if (auto it = j.find("pods"); it != j.end() && it->is_object()) {
    s.pods.active = GetNum<int32_t>(*it, "active").value_or(0);
    s.pods.succeeded = GetNum<int32_t>(*it, "succeeded").value_or(0);
    s.pods.failed = GetNum<int32_t>(*it, "failed").value_or(0);
  }
  if (auto it = j.find("progress"); it != j.end() && it->is_object()) {
    Progress p;
    p.step = GetNum<int64_t>(*it, "step");
    p.max_steps = GetNum<int64_t>(*it, "maxSteps");
    p.loss = GetNum<double>(*it, "loss");
    p.tokens_per_second = GetNum<double>(*it, "tokensPerSecond");
    p.last_checkpoint_step = GetNum<int64_t>(*it, "lastCheckpointStep");
    p.updated_at = GetStr(*it, "updatedAt");
    s.progress = p;
  }
  if (auto it = j.find("lastFault"); it != j.end() && it->is_object()) {
    Fault f;
    f.reason = GetStr(*it, "reason");
    f.message = GetStr(*it, "message");
    f.pod = GetStr(*it, "pod");
    f.node = GetStr(*it, "node");
    f.rank = GetNum<int32_t>(*it, "rank");
    f.exit_code = GetNum<int32_t>(*it, "exitCode");
    f.time = GetStr(*it, "time");
    f.finished_at = GetStr(*it, "finishedAt");
    s.last_fault = f;
  }
  s.last_recovery_seconds = GetNum<double>(j, "lastRecoverySeconds");
  s.last_recovery_attempt = GetNum<int32_t>(j, "lastRecoveryAttempt");
  if (auto it = j.find("excludedNodes"); it != j.end() && it->is_array()) {
    for (const json& n : *it) {
      if (n.is_string()) s.excluded_nodes.push_back(n.get<std::string>());
    }
  }
  if (auto it = j.find("nodeFaults"); it != j.end() && it->is_object()) {
    for (auto n = it->begin(); n != it->end(); ++n) {
      if (n.value().is_number_integer()) s.node_faults[n.key()] = n.value().get<int32_t>();
    }
  }
  if (auto it = j.find("scheduling"); it != j.end() && it->is_object()) {
    s.scheduling.start_time = GetStr(*it, "startTime");
    s.scheduling.timeouts = GetNum<int32_t>(*it, "timeouts").value_or(0);
    s.scheduling.retry_time = GetStr(*it, "retryTime");
    s.scheduling.message = GetStr(*it, "message");
  }
  if (auto it = j.find("elastic"); it != j.end() && it->is_object()) {
    s.elastic.last_resize_time = GetStr(*it, "lastResizeTime");
    if (auto h = it->find("history"); h != it->end() && h->is_array()) {
      for (const json& r : *h) {
        if (!r.is_object()) continue;
        s.elastic.history.push_back(SizeRecord{GetNum<int32_t>(r, "nodes").value_or(0), GetStr(r, "since"),
                                               GetStr(r, "reason"), GetNum<int64_t>(r, "fromStep"),
                                               GetNum<int64_t>(r, "toStep")});
      }
    }
  }
  if (auto it = j.find("estimate"); it != j.end() && it->is_object()) s.estimate = *it;
  return s;
}

StatusOr<Progress> ParseProgressAnnotation(std::string_view value) {
  std::string error;
  std::optional<contract::Progress> decoded = contract::DecodeProgress(value, &error);
  if (!decoded) return InvalidField(std::string("metadata.annotations.") + contract::kAnnotationProgress, error);
  Progress p;
  p.step = decoded->step;
  p.max_steps = decoded->max_steps;
  p.loss = decoded->loss;
  p.tokens_per_second = decoded->tokens_per_second;
  p.last_checkpoint_step = decoded->last_checkpoint_step;
  p.updated_at = decoded->time;
  return p;
}

}  // namespace hypertrain::api
