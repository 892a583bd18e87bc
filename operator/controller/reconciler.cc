#include "operator/controller/reconciler.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using kube::Json;
using Clock = std::chrono::system_clock;

std::string Label(const Json& obj, const char* key) {
  const Json* labels = obj.contains("metadata") ? &obj["metadata"] : nullptr;
  if (!labels || !labels->contains("labels") || !(*labels)["labels"].contains(key)) return "";
  const Json& v = (*labels)["labels"][key];
  return v.is_string() ? v.get<std::string>() : "";
}

int IntLabel(const Json& obj, const char* key) {
  const std::string v = Label(obj, key);
  if (v.empty() || v.size() > 9 || !std::all_of(v.begin(), v.end(), ::isdigit)) return -1;
  return std::stoi(v);
}

std::string Phase(const Json& pod) {
  if (!pod.contains("status") || !pod["status"].is_object()) return "Pending";
  return pod["status"].value("phase", "Pending");
}

bool Terminated(const Json& pod) {
  const std::string p = Phase(pod);
  return p == "Succeeded" || p == "Failed";
}

bool Deleting(const Json& pod) { return pod["metadata"].contains("deletionTimestamp"); }

struct PodFault {
  std::string reason = api::reason::kPodFailed;
  std::string message;
  std::optional<int> exit_code;
  std::string finished_at;  // the container's RFC 3339 finishedAt, "" if unknown
};

// When several pods of a gang have failed, which one caused it: when one rank
// dies, its peers fail their next collective and exit 200 (peer lost) or 201
// (collective timeout), often within the same second. So any other exit (a
// signal, an error of its own, an eviction) ranks first, then 201, then 200;
// within a class the earliest finishedAt (RFC 3339 strings of one format
// compare in time order), then the lowest rank (the map's order).
int FollowOnClass(const PodFault& f) {
  if (f.exit_code == 200) return 2;
  if (f.exit_code == 201) return 1;
  return 0;
}
bool CausedBefore(const PodFault& a, const PodFault& b) {
  if (FollowOnClass(a) != FollowOnClass(b)) return FollowOnClass(a) < FollowOnClass(b);
  if (a.finished_at.empty() || b.finished_at.empty()) return false;
  return a.finished_at < b.finished_at;
}

// What the kubelet reported about a failed pod: the trainer container's exit
// code and termination message, or the pod's own reason (eviction).
PodFault FaultOf(const Json& pod) {
  PodFault f;
  const Json status = pod.value("status", Json::object());
  if (status.value("reason", "") == "Evicted") {
    f.reason = api::reason::kPodEvicted;
    f.message = status.value("message", "evicted");
    return f;
  }
  for (const Json& cs : status.value("containerStatuses", Json::array())) {
    if (cs.value("name", "") != kContainerName) continue;
    const Json term = cs.value("state", Json::object()).value("terminated", Json::object());
    if (term.contains("exitCode") && term["exitCode"].is_number_integer()) f.exit_code = term["exitCode"].get<int>();
    f.message = term.value("message", term.value("reason", ""));
    f.finished_at = term.value("finishedAt", "");
  }
  if (f.message.empty()) f.message = status.value("message", status.value("reason", ""));
  return f;
}

kube::DeleteOptions PreconditionUid(const Json& obj) {
  kube::DeleteOptions o;
  o.precondition_uid = kube::UidOf(obj);
  return o;
}

}  // namespace

kube::ResourceType TrainingJobType() {
  return kube::resources::Custom(api::kGroup, api::kVersion, api::kPlural, api::kKind);
}

std::string FormatTime(Clock::time_point t) {
  std::time_t secs = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<Clock::time_point> ParseTime(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  return Clock::from_time_t(timegm(&tm));
}

struct Reconciler::Ctx {
  std::string ns, name;
  kube::ObjectPtr job;
  Json job_obj;  // latest server copy (after our status write)
  api::ObjectMeta meta;
  api::TrainingJobSpec spec;
  api::TrainingJobStatus old_status, status;
  std::vector<kube::ObjectPtr> pods;
  Clock::time_point now;
  std::string now_str;
  std::vector<std::pair<EventType, std::pair<std::string, std::string>>> extra_events;
  kube::ResourceClient jobs, pod_client;
};

Reconciler::Reconciler(ReconcilerOptions opts) : o_(std::move(opts)) {}

std::string Reconciler::Now() const { return FormatTime(o_.now()); }

Status Reconciler::Count(Status e) {
  if (o_.counters) ++o_.counters->api_errors;
  return e;
}

Clock::time_point Reconciler::FirstSeen(const std::string& uid, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(seen_mu_);
  // Entries outlive their wait by far; anything older is of a finished attempt.
  const auto keep = now - 2 * o_.fault_settle_window - std::chrono::minutes(10);
  for (auto it = first_seen_.begin(); it != first_seen_.end();) {
    it = it->second < keep ? first_seen_.erase(it) : std::next(it);
  }
  return first_seen_.emplace(uid, now).first->second;
}

StatusOr<ReconcileResult> Reconciler::Reconcile(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return InvalidArgument("bad key " + key);
  kube::ObjectPtr job = o_.jobs->Get(key);
  if (!job) return ReconcileResult{};  // deleted: owner references let the GC remove the rest
  Ctx c{key.substr(0, slash),
        key.substr(slash + 1),
        job,
        *job,
        {},
        {},
        {},
        {},
        {},
        o_.now(),
        "",
        {},
        kube::ResourceClient(o_.client, TrainingJobType(), key.substr(0, slash)),
        kube::ResourceClient(o_.client, kube::resources::kPods, key.substr(0, slash))};
  c.now_str = FormatTime(c.now);
  return ReconcileJob(c);
}

void Reconciler::Emit(Ctx& c) {
  kube::ResourceClient events(o_.client, kube::resources::kEvents, c.ns);
  auto send = [&](EventType type, const std::string& reason, const std::string& message) {
    auto r = events.Create(BuildEvent(c.meta, type, reason, message, c.now_str, o_.instance));
    if (!r.ok() && !kube::IsAlreadyExists(r.status())) {
      (void)Count(r.status());  // counted; events are best effort
      o_.log("event " + reason + " for " + c.ns + "/" + c.name + " not recorded: " + r.status().ToString());
    }
  };
  // One event per condition that changed status: the transition's reason and message.
  for (const api::Condition& cond : c.status.conditions) {
    const api::Condition* before = api::FindCondition(c.old_status, cond.type);
    const bool became_true = cond.status == "True" && (!before || before->status != "True");
    const bool resumed = cond.type == api::kCondSuspended && cond.status == "False" && before && before->status == "True";
    if (!became_true && !resumed) continue;
    const bool warn = cond.type == api::kCondFailed || cond.type == api::kCondRestarting;
    send(warn ? EventType::kWarning : EventType::kNormal, cond.reason, cond.message);
  }
  for (const auto& [type, rm] : c.extra_events) send(type, rm.first, rm.second);
  c.extra_events.clear();
}

StatusOr<bool> Reconciler::WriteStatus(Ctx& c) {
  auto parsed_old = api::ParseStatus(c.job_obj.value("status", Json()));
  const Json current = parsed_old.ok() ? api::ToJson(*parsed_old) : Json();
  const Json next = api::ToJson(c.status);
  if (next == current) return false;
  Json obj = c.job_obj;
  obj["status"] = next;
  auto r = c.jobs.UpdateStatus(obj);
  if (!r.ok()) return Count(r.status());
  c.job_obj = *r;
  if (o_.counters) {
    auto became = [&](const char* t) { return api::IsConditionTrue(c.status, t) && !api::IsConditionTrue(c.old_status, t); };
    if (became(api::kCondSucceeded)) ++o_.counters->jobs_succeeded;
    if (became(api::kCondFailed)) ++o_.counters->jobs_failed;
    if (c.status.restart_count > c.old_status.restart_count) ++o_.counters->jobs_restarted;
    if (became(api::kCondCreated)) ++o_.counters->jobs_created;
  }
  Emit(c);
  c.old_status = c.status;
  return true;
}

Status Reconciler::DeletePods(Ctx& c, const std::function<bool(const Json&)>& which) {
  for (const kube::ObjectPtr& p : c.pods) {
    if (Deleting(*p) || !which(*p)) continue;
    auto r = c.pod_client.Delete(kube::NameOf(*p), PreconditionUid(*p));
    if (!r.ok() && !kube::IsNotFound(r.status()) && !kube::IsConflict(r.status())) return Count(r.status());
  }
  return {};
}

Status Reconciler::EnsureObject(const kube::ResourceClient& client, const Json& obj) {
  auto r = client.Create(obj);
  if (!r.ok() && !kube::IsAlreadyExists(r.status())) return Count(r.status());
  return {};
}

StatusOr<ReconcileResult> Reconciler::ReconcileJob(Ctx& c) {
  ReconcileResult result;
  auto meta = api::ParseObjectMeta(c.job_obj.value("metadata", Json()));
  if (!meta.ok()) {
    o_.log("skipping " + c.ns + "/" + c.name + ": " + meta.status().message());
    return result;
  }
  c.meta = *meta;
  if (c.meta.deletion_timestamp) return result;
  auto status = api::ParseStatus(c.job_obj.value("status", Json()));
  c.status = status.ok() ? *status : api::TrainingJobStatus{};
  c.old_status = c.status;
  if (auto pods = o_.pods->ByIndex(kube::kOwnerUidIndexName, c.meta.uid); pods.ok()) c.pods = *pods;

  auto spec = api::ParseSpec(c.job_obj.value("spec", Json()), c.meta);
  c.status.observed_generation = c.meta.generation;
  if (!spec.ok()) {
    // Nothing is created for an invalid spec; the reason names the field.
    api::SetJobCondition(&c.status, api::kCondFailed, true, api::reason::kInvalidSpec, spec.status().message(),
                         c.now_str, c.meta.generation);
    if (c.status.completion_time.empty()) c.status.completion_time = c.now_str;
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    return result;
  }
  c.spec = *spec;
  const api::TrainingJobSpec& s = c.spec;
  c.status.gpus = static_cast<int32_t>(s.TotalGpus());
  c.status.world_size = static_cast<int32_t>(s.WorldSize());
  auto keep_running = [](const Json& p) { return !Terminated(p); };
  auto clean_pods = [&](Ctx& cx) -> Status {
    switch (s.run_policy.clean_pod_policy) {
      case api::CleanPodPolicy::kNone:
        return {};
      case api::CleanPodPolicy::kAll:
        return DeletePods(cx, [](const Json&) { return true; });
      case api::CleanPodPolicy::kRunning:
        break;
    }
    return DeletePods(cx, keep_running);
  };
  auto finish = [&](const char* type, const char* reason, const std::string& message) {
    api::SetJobCondition(&c.status, type, true, reason, message, c.now_str, c.meta.generation);
    if (c.status.completion_time.empty()) c.status.completion_time = c.now_str;
  };

  // Finished: clean up, then TTL.
  if (api::IsFinished(c.status)) {
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    if (auto d = clean_pods(c); !d.ok()) return d;
    if (s.run_policy.ttl_seconds_after_finished) {
      auto done = ParseTime(c.status.completion_time).value_or(c.now);
      auto expiry = done + std::chrono::seconds(*s.run_policy.ttl_seconds_after_finished);
      if (c.now >= expiry) {
        kube::DeleteOptions o = PreconditionUid(c.job_obj);
        o.propagation_policy = "Background";
        auto r = c.jobs.Delete(c.name, o);
        if (!r.ok() && !kube::IsNotFound(r.status())) return Count(r.status());
      } else {
        result.requeue_after = std::chrono::duration_cast<std::chrono::milliseconds>(expiry - c.now);
      }
    }
    return result;
  }

  // Deadline, counted from the first start.
  if (s.run_policy.active_deadline_seconds && !c.status.start_time.empty()) {
    auto start = ParseTime(c.status.start_time).value_or(c.now);
    auto deadline = start + std::chrono::seconds(*s.run_policy.active_deadline_seconds);
    if (c.now >= deadline) {
      finish(api::kCondFailed, api::reason::kDeadlineExceeded,
             "the job ran past activeDeadlineSeconds=" + std::to_string(*s.run_policy.active_deadline_seconds));
      if (auto w = WriteStatus(c); !w.ok()) return w.status();
      if (auto d = clean_pods(c); !d.ok()) return d;
      return result;
    }
    result.requeue_after = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - c.now);
  }

  // Suspend: pods go, status stays.
  if (s.run_policy.suspend) {
    api::SetJobCondition(&c.status, api::kCondSuspended, true, api::reason::kJobSuspended,
                         "the job is suspended: its pods are deleted", c.now_str, c.meta.generation);
    c.status.pods = {};
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    if (auto d = DeletePods(c, [](const Json&) { return true; }); !d.ok()) return d;
    return result;
  }
  if (api::IsConditionTrue(c.status, api::kCondSuspended)) {
    api::SetJobCondition(&c.status, api::kCondSuspended, false, api::reason::kJobResumed,
                         "the job is resumed: its pods are recreated", c.now_str, c.meta.generation);
  }

  // Pods of older attempts must be gone before the next attempt starts.
  const int attempt = c.status.restart_attempt;
  std::map<int, kube::ObjectPtr> current;
  bool stale = false;
  for (const kube::ObjectPtr& p : c.pods) {
    const int rank = IntLabel(*p, api::kLabelNodeRank);
    if (IntLabel(*p, api::kLabelRestartAttempt) != attempt || rank < 0 || rank >= s.nodes) {
      stale = true;
    } else if (!current.count(rank)) {
      current[rank] = p;
    }
  }
  api::PodCounts counts;
  for (const auto& [rank, p] : current) {
    const std::string phase = Phase(*p);
    if (phase == "Succeeded") {
      ++counts.succeeded;
    } else if (phase == "Failed") {
      ++counts.failed;
    } else {
      ++counts.active;
    }
  }
  c.status.pods = counts;
  if (stale) {
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    if (auto d = DeletePods(c, [&](const Json& p) {
          const int rank = IntLabel(p, api::kLabelNodeRank);
          return IntLabel(p, api::kLabelRestartAttempt) != attempt || rank < 0 || rank >= s.nodes;
        });
        !d.ok()) {
      return d;
    }
    result.requeue_after = std::chrono::milliseconds(1000);
    return result;
  }

  // A fault: fail the job or restart the whole gang (one budget for every fault path).
  auto handle_fault = [&](const std::string& reason, const std::string& what, const std::string& pod_name,
                          const std::string& node, std::optional<int32_t> rank,
                          std::optional<int> exit_code) -> StatusOr<ReconcileResult> {
    c.status.last_fault = api::Fault{reason, what, pod_name, node, rank, exit_code, c.now_str};
    if (!node.empty()) {
      const int n = ++c.status.node_faults[node];
      const int limit = s.fault_policy.max_repeat_offenders;
      auto& ex = c.status.excluded_nodes;
      if (limit > 0 && n >= limit && std::find(ex.begin(), ex.end(), node) == ex.end()) {
        ex.push_back(node);
        c.extra_events.push_back({EventType::kWarning, {"NodeFault", "node " + node + " caused " + std::to_string(n) +
                                                                         " faults; excluded from later attempts"}});
      }
    }
    const auto& codes = s.fault_policy.non_retryable_exit_codes;
    if (exit_code && std::find(codes.begin(), codes.end(), *exit_code) != codes.end()) {
      finish(api::kCondFailed, api::reason::kNonRetryableExitCode, what);
    } else if (c.status.restart_count >= s.run_policy.backoff_limit) {
      finish(api::kCondFailed, api::reason::kBackoffLimitExceeded,
             "restart budget backoffLimit=" + std::to_string(s.run_policy.backoff_limit) + " exhausted; last fault: " + what);
    } else {
      ++c.status.restart_count;
      ++c.status.restart_attempt;
      const std::string msg = "gang restart " + std::to_string(c.status.restart_attempt) + " after " + what;
      if (api::IsConditionTrue(c.status, api::kCondRestarting)) {
        // Already Restarting (no condition transition): still one event per restart.
        c.extra_events.push_back({EventType::kWarning, {reason, msg}});
      }
      api::SetJobCondition(&c.status, api::kCondRestarting, true, reason, msg, c.now_str, c.meta.generation);
    }
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    auto d = api::IsFinished(c.status) ? clean_pods(c) : DeletePods(c, [](const Json&) { return true; });
    if (!d.ok()) return d;
    return result;
  };
  // Node health: a running pod's node lost its health label, vanished, or has
  // been NotReady for podPendingOrLostGraceSeconds. Returns the fault's outcome
  // when there is one; else requeues for the end of a NotReady grace.
  auto node_fault = [&]() -> std::optional<StatusOr<ReconcileResult>> {
    if (!o_.nodes) return std::nullopt;
    const auto& fp = s.fault_policy;
    for (const auto& [rank, p] : current) {
      if (Terminated(*p) || Deleting(*p)) continue;
      const std::string node = p->value("spec", Json::object()).value("nodeName", "");
      if (node.empty()) continue;
      const std::string pod_name = kube::NameOf(*p);
      const std::string who = "pod " + pod_name + " (node rank " + std::to_string(rank) + ", node " + node + ")";
      kube::ObjectPtr n = o_.nodes->Get(node);
      if (!n) {
        return handle_fault(api::reason::kPodLost, who + ": the node is gone", pod_name, node, rank, std::nullopt);
      }
      if (!fp.healthy_node_values.empty()) {
        const std::string health = Label(*n, fp.node_health_label.c_str());
        if (std::find(fp.healthy_node_values.begin(), fp.healthy_node_values.end(), health) ==
            fp.healthy_node_values.end()) {
          return handle_fault(api::reason::kNodeUnhealthy,
                              who + ": node label " + fp.node_health_label + "=" + (health.empty() ? "<none>" : health),
                              pod_name, node, rank, std::nullopt);
        }
      }
      for (const Json& cond : n->value("status", Json::object()).value("conditions", Json::array())) {
        if (cond.value("type", "") != "Ready" || cond.value("status", "") == "True") continue;
        const auto since = ParseTime(cond.value("lastTransitionTime", "")).value_or(c.now);
        const auto lost_at = since + std::chrono::seconds(fp.pod_pending_or_lost_grace_seconds);
        if (c.now >= lost_at) {
          return handle_fault(api::reason::kPodLost,
                              who + ": node NotReady for podPendingOrLostGraceSeconds=" +
                                  std::to_string(fp.pod_pending_or_lost_grace_seconds),
                              pod_name, node, rank, std::nullopt);
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(lost_at - c.now);
        if (!result.requeue_after || left < *result.requeue_after) result.requeue_after = left;
      }
    }
    return std::nullopt;
  };

  const Json* culprit = nullptr;
  int culprit_rank = -1;
  PodFault f;
  for (const auto& [rank, p] : current) {
    if (Phase(*p) != "Failed") continue;
    PodFault candidate = FaultOf(*p);
    if (culprit == nullptr || CausedBefore(candidate, f)) {
      culprit = p.get(), culprit_rank = rank, f = std::move(candidate);
    }
  }
  // Settle: every failed pod so far exited 200/201 (the culprit would rank an
  // other exit first), i.e. it saw a peer fail. While other pods still run, the
  // peer that caused it may not have reported yet (its kubelet is slower, or it
  // is on another node): blaming the follow-on pod would restart for the wrong
  // reason and count (maybe exclude) an innocent node. So wait, bounded by
  // fault_settle_window from the earliest such exit; each pod event and the
  // requeue re-run this level-triggered check.
  if (culprit != nullptr && FollowOnClass(f) != 0 && o_.fault_settle_window.count() > 0) {
    bool peers_running = false;
    for (const auto& [rank, p] : current) peers_running |= !Terminated(*p);
    std::optional<Clock::time_point> first;
    for (const auto& [rank, p] : current) {
      if (!peers_running || Phase(*p) != "Failed") continue;
      // finishedAt survives an operator restart; the time first seen covers a
      // missing finishedAt and bounds one from a node clock that runs ahead.
      Clock::time_point t = FirstSeen(kube::UidOf(*p), c.now);
      if (auto fin = ParseTime(FaultOf(*p).finished_at); fin && *fin < t) t = *fin;
      if (!first || t < *first) first = t;
    }
    if (first && c.now < *first + o_.fault_settle_window) {
      // A running peer's node fault is a root cause that will not show as an exit.
      if (auto nf = node_fault()) return *nf;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*first + o_.fault_settle_window - c.now);
      if (!result.requeue_after || left < *result.requeue_after) result.requeue_after = left;
      o_.log("job " + c.ns + "/" + c.name + ": pod " + kube::NameOf(*culprit) + " exited " +
             std::to_string(*f.exit_code) + " (a peer's failure); waiting " + std::to_string(left.count()) +
             " ms for the root cause's status before restarting");
      if (auto w = WriteStatus(c); !w.ok()) return w.status();
      return result;
    }
  }
  if (culprit != nullptr) {
    const Json* p = culprit;
    const int rank = culprit_rank;
    const std::string pod_name = kube::NameOf(*p);
    const std::string node = p->value("spec", Json::object()).value("nodeName", "");
    std::string what = "pod " + pod_name + " (node rank " + std::to_string(rank) + (node.empty() ? "" : ", node " + node) + ")";
    what += f.exit_code ? " exited with code " + std::to_string(*f.exit_code) : " failed";
    if (!f.message.empty()) what += ": " + f.message;
    return handle_fault(f.reason, what, pod_name, node, rank, f.exit_code);
  }

  if (auto nf = node_fault()) return *nf;

  // Success: every node's pod exited 0.
  if (static_cast<int>(current.size()) == s.nodes && counts.succeeded == s.nodes) {
    finish(api::kCondSucceeded, api::reason::kAllPodsSucceeded,
           "all " + std::to_string(s.nodes) + " pods exited 0");
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    if (auto d = clean_pods(c); !d.ok()) return d;
    if (s.run_policy.ttl_seconds_after_finished) {
      result.requeue_after = std::chrono::seconds(*s.run_policy.ttl_seconds_after_finished);
    }
    return result;
  }

  // Create what is missing.
  kube::ResourceClient services(o_.client, kube::resources::kServices, c.ns);
  if (auto e = EnsureObject(services, BuildService(c.meta, s)); !e.ok()) return e;
  if (s.trainer_config.inline_yaml) {
    kube::ResourceClient cms(o_.client, kube::resources::kConfigMaps, c.ns);
    if (auto e = EnsureObject(cms, *BuildConfigMap(c.meta, s)); !e.ok()) return e;
  }
  std::vector<int> missing;
  for (int r = 0; r < s.nodes; ++r) {
    if (!current.count(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    // Never act on a stale cache: the attempt number must be the server's.
    auto fresh = c.jobs.Get(c.name);
    if (!fresh.ok()) return Count(fresh.status());
    if (kube::ResourceVersionOf(*fresh) != kube::ResourceVersionOf(*c.job)) {
      result.requeue_after = std::chrono::milliseconds(100);
      return result;
    }
    if (!api::IsConditionTrue(c.status, api::kCondCreated)) {
      api::SetJobCondition(&c.status, api::kCondCreated, true, api::reason::kJobCreated,
                           "created the headless Service and " + std::to_string(s.nodes) + " pods", c.now_str,
                           c.meta.generation);
    }
    if (c.status.start_time.empty()) c.status.start_time = c.now_str;
    c.status.pods.active += static_cast<int32_t>(missing.size());
    if (auto w = WriteStatus(c); !w.ok()) return w.status();
    for (int r : missing) {
      auto pod = BuildPod(c.meta, s, PodOptions{r, attempt, c.status.excluded_nodes});
      if (!pod.ok()) return pod.status();
      auto created = c.pod_client.Create(*pod);
      if (!created.ok() && !kube::IsAlreadyExists(created.status())) return Count(created.status());
      if (created.ok() && o_.counters) ++o_.counters->pods_created;
    }
    return result;
  }

  // Running once every pod runs.
  bool all_running = true;
  for (const auto& [rank, p] : current) all_running &= Phase(*p) == "Running";
  if (all_running) {
    api::SetJobCondition(&c.status, api::kCondRunning, true, api::reason::kPodsRunning,
                         "all " + std::to_string(s.nodes) + " pods are running", c.now_str, c.meta.generation);
  }
  // Progress from node 0's annotation.
  if (auto it = current.find(0); it != current.end()) {
    const Json annotations = (*it->second)["metadata"].value("annotations", Json::object());
    if (annotations.contains(api::kAnnotationProgress) && annotations[api::kAnnotationProgress].is_string()) {
      auto p = api::ParseProgressAnnotation(annotations[api::kAnnotationProgress].get<std::string>());
      if (p.ok()) {
        api::Progress next = *p;
        if (!next.max_steps && s.trainer_config.summary) next.max_steps = s.trainer_config.summary->max_steps;
        if (next.updated_at.empty()) {
          const bool same = c.status.progress && c.status.progress->step == next.step;
          next.updated_at = same ? c.status.progress->updated_at : c.now_str;
        }
        c.status.progress = next;
      }
    }
  }
  // Hang detection: the step must advance within hangTimeoutSeconds (after a
  // start-up allowance of startupTimeoutSeconds from Running to the first report).
  const api::Condition* running = api::FindCondition(c.status, api::kCondRunning);
  if (all_running && s.fault_policy.hang_timeout_seconds > 0 && running && running->status == "True") {
    const auto since = ParseTime(running->last_transition_time).value_or(c.now);
    std::optional<Clock::time_point> reported;
    if (c.status.progress && c.status.progress->step) reported = ParseTime(c.status.progress->updated_at);
    Clock::time_point deadline;
    std::string what;
    if (reported && *reported >= since) {
      deadline = *reported + std::chrono::seconds(s.fault_policy.hang_timeout_seconds);
      what = "no step progress for hangTimeoutSeconds=" + std::to_string(s.fault_policy.hang_timeout_seconds) +
             " (last step " + std::to_string(*c.status.progress->step) + ")";
    } else {
      deadline = since + std::chrono::seconds(std::max(s.fault_policy.startup_timeout_seconds,
                                                       s.fault_policy.hang_timeout_seconds));
      what = "no progress report within startupTimeoutSeconds=" +
             std::to_string(std::max(s.fault_policy.startup_timeout_seconds, s.fault_policy.hang_timeout_seconds)) +
             " of all pods running";
    }
    if (c.now >= deadline) {
      return handle_fault(api::reason::kHang, what, PodName(c.name, 0), "", std::nullopt, std::nullopt);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - c.now);
    if (!result.requeue_after || left < *result.requeue_after) result.requeue_after = left;
  }
  if (auto w = WriteStatus(c); !w.ok()) return w.status();
  return result;
}

}  // namespace hypertrain::controller
