#include "operator/controller/reconciler.h"

#include <algorithm>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "contract/pod.h"
#include "core/time.h"
#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using kube::Json;

kube::DeleteOptions PreconditionUid(const std::string& uid) {
  kube::DeleteOptions o;
  o.precondition_uid = uid;
  return o;
}

// What a create action makes.
const kube::ResourceType& CreatedType(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kCreateService: return kube::resources::kServices;
    case Action::Kind::kCreateConfigMap: return kube::resources::kConfigMaps;
    case Action::Kind::kCreateServiceAccount: return kube::resources::kServiceAccounts;
    case Action::Kind::kCreateRole: return kube::resources::kRoles;
    case Action::Kind::kCreateRoleBinding: return kube::resources::kRoleBindings;
    default: return kube::resources::kPods;
  }
}

// The kind name of what a create or repair action touches.
const char* KindOf(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kCreateService: return "Service";
    case Action::Kind::kCreateConfigMap:
    case Action::Kind::kRepairConfigMap: return "ConfigMap";
    case Action::Kind::kCreateServiceAccount: return "ServiceAccount";
    case Action::Kind::kCreateRole: return "Role";
    case Action::Kind::kCreateRoleBinding: return "RoleBinding";
    default: return "Pod";
  }
}

// The most pod names a job can have: spec.nodes, or an elastic job's maxNodes.
int PodNamesOf(const Json& job) {
  const Json spec = job.value("spec", Json::object());
  auto num = [](const Json& obj, const char* key, int fallback) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_number_integer() ? it->get<int>() : fallback;
  };
  int n = num(spec, "nodes", 1);
  if (auto e = spec.find("elastic"); e != spec.end() && e->is_object()) n = std::max(n, num(*e, "maxNodes", n));
  return std::clamp(n, 0, 4096);
}

// The status as the cache holds it, normalised; null when unreadable.
Json CachedStatusJson(const Json& job) {
  auto parsed = api::ParseStatus(job.value("status", Json()));
  return parsed.ok() ? api::ToJson(*parsed) : Json();
}

// The PodGroup type (scheduler-plugins or Volcano) of a built PodGroup.
kube::ResourceType PodGroupType(const Json& pg) {
  const std::string api_version = pg.value("apiVersion", "");
  const auto slash = api_version.find('/');
  return kube::resources::Custom(api_version.substr(0, slash), api_version.substr(slash + 1), "podgroups", "PodGroup");
}

}  // namespace

kube::ResourceType TrainingJobType() {
  return kube::resources::Custom(api::kGroup, api::kVersion, api::kPlural, api::kKind);
}

ReconcilerCounters::ReconcilerCounters(metrics::Registry* r)
    : jobs_created(&r->AddCounter("hypertrain_jobs_created_total", "TrainingJobs whose pods were first created.",
                                  {"namespace"})),
      jobs_succeeded(&r->AddCounter("hypertrain_jobs_succeeded_total", "TrainingJobs that succeeded.", {"namespace"})),
      jobs_failed(&r->AddCounter("hypertrain_jobs_failed_total", "TrainingJobs that failed.", {"namespace"})),
      jobs_restarted(&r->AddCounter("hypertrain_jobs_restarted_total", "Gang restarts of TrainingJobs.", {"namespace"})),
      pods_created(&r->AddCounter("hypertrain_pods_created_total", "Trainer pods created.", {"namespace"})),
      api_errors(&r->AddCounter("hypertrain_api_errors_total",
                                "Kubernetes API calls of the reconciler that failed (after the client's retries).",
                                {"namespace"})) {}

Reconciler::Reconciler(ReconcilerOptions opts) : o_(std::move(opts)) {}

void Reconciler::Bump(ReconcilerCounters::Family* ReconcilerCounters::*counter, const std::string& ns) {
  if (o_.counters) (o_.counters->*counter)->With({ns}).Inc();
}

Status Reconciler::Count(const std::string& ns, Status e) {
  Bump(&ReconcilerCounters::api_errors, ns);
  return e;
}

FirstSeen Reconciler::FirstSeenOf(const std::vector<ObservedPod>& pods, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(seen_mu_);
  // Entries outlive their wait by far; anything older is of a finished attempt.
  const auto keep = now - 2 * o_.fault_settle_window - std::chrono::minutes(10);
  for (auto it = first_seen_.begin(); it != first_seen_.end();) {
    it = it->second < keep ? first_seen_.erase(it) : std::next(it);
  }
  FirstSeen out;
  for (const ObservedPod& p : pods) {
    if (auto it = first_seen_.find(p.uid); it != first_seen_.end()) out.emplace(p.uid, it->second);
  }
  return out;
}

void Reconciler::RememberFirstSeen(const std::vector<std::string>& uids, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(seen_mu_);
  for (const std::string& uid : uids) first_seen_.emplace(uid, now);
}

Observed Reconciler::Observe(const api::ObjectMeta& meta, const Json& job, Clock::time_point now) {
  Observed in;
  in.job = meta;
  auto status = api::ParseStatus(job.value("status", Json()));
  if (status.ok()) in.status = *status;
  if (auto pods = o_.pods->ByIndex(kube::kOwnerUidIndexName, meta.uid); pods.ok()) {
    for (const kube::ObjectPtr& p : *pods) in.pods.push_back(PodFromJson(*p));
  }
  if (o_.nodes) {
    in.nodes.emplace();
    for (const ObservedPod& p : in.pods) {
      if (p.node_name.empty() || in.nodes->count(p.node_name)) continue;
      if (kube::ObjectPtr n = o_.nodes->Get(p.node_name)) in.nodes->emplace(p.node_name, NodeFromJson(*n));
    }
    // Elastic jobs size themselves by the nodes that could host a pod.
    if (job.contains("spec") && job["spec"].contains("elastic")) {
      in.cluster_nodes.emplace();
      for (const kube::ObjectPtr& n : o_.nodes->List()) in.cluster_nodes->push_back(NodeFromJson(*n));
    }
  }
  in.first_seen = FirstSeenOf(in.pods, now);
  in.namespace_excluded = o_.excluded_namespaces.count(meta.namespace_) > 0;
  ObserveObjects(meta, job, &in);
  const std::string progress_name = ProgressConfigMapName(meta.name);
  const std::string key = meta.namespace_ + "/" + meta.name;
  kube::ObjectPtr cm = o_.configmaps ? o_.configmaps->Get(meta.namespace_ + "/" + progress_name) : nullptr;
  if (const auto known = KnownProgressOf(key); !cm && known && known->job_uid == meta.uid) {
    // Known but not cached: its labels were stripped (or it is gone). Read it back.
    kube::ListOptions by_name;
    by_name.field_selector = "metadata.name=" + progress_name;
    auto l = kube::ResourceClient(o_.client, kube::resources::kConfigMaps, meta.namespace_).List(by_name);
    if (l.ok() && !l->items.empty()) {
      cm = std::make_shared<const Json>(l->items[0]);
      ObservedObject o = ObjectFromJson(*cm);
      o.kind = "ConfigMap";
      in.objects[ObjectKey("ConfigMap", progress_name)] = std::move(o);
    } else if (l.ok()) {
      std::lock_guard<std::mutex> lock(progress_mu_);
      progress_.erase(key);
    }
  }
  auto seen = in.objects.find(ObjectKey("ConfigMap", progress_name));
  if (cm && seen != in.objects.end()) {
    const ObservedObject& o = seen->second;
    if (OwnershipOf(o, meta.name, meta.uid) == Ownership::kOurs) RememberProgress(key, meta.uid, o.uid);
    const auto known = KnownProgressOf(key);
    in.progress_known_ours = known && known->job_uid == meta.uid && known->cm_uid == o.uid;
    // Only the job's own ConfigMap reports its progress.
    if (in.progress_known_ours) {
      const Json annotations = (*cm)["metadata"].value("annotations", Json::object());
      if (auto it = annotations.find(contract::kAnnotationProgress); it != annotations.end() && it->is_string()) {
        in.progress = it->get<std::string>();
      }
    }
  }
  return in;
}

void Reconciler::ObserveObjects(const api::ObjectMeta& meta, const Json& job, Observed* in) {
  const std::string ns = meta.namespace_ + "/";
  auto look = [&](const kube::Store* store, const char* kind, const std::string& name) {
    if (!store) return;
    if (kube::ObjectPtr obj = store->Get(ns + name)) {
      ObservedObject o = ObjectFromJson(*obj);
      o.kind = kind;  // list items carry no kind
      in->objects[ObjectKey(kind, name)] = std::move(o);
    }
  };
  look(o_.services, "Service", ServiceName(meta.name));
  look(o_.configmaps, "ConfigMap", ConfigMapName(meta.name));
  look(o_.configmaps, "ConfigMap", ProgressConfigMapName(meta.name));
  look(o_.service_accounts, "ServiceAccount", TrainerServiceAccountName(meta.name));
  look(o_.roles, "Role", ProgressConfigMapName(meta.name));
  look(o_.role_bindings, "RoleBinding", ProgressConfigMapName(meta.name));
  // Pods under the job's names that it does not own (e.g. a deleted namesake's, terminating).
  const int n = PodNamesOf(job);
  for (int rank = 0; rank < n; ++rank) {
    const std::string name = PodName(meta.name, rank);
    kube::ObjectPtr pod = o_.pods->Get(ns + name);
    if (!pod) continue;
    ObservedObject o = ObjectFromJson(*pod);
    o.kind = "Pod";
    if (OwnershipOf(o, meta.name, meta.uid) != Ownership::kOurs) in->objects[ObjectKey("Pod", name)] = std::move(o);
  }
}

std::optional<Reconciler::KnownProgress> Reconciler::KnownProgressOf(const std::string& job_key) {
  std::lock_guard<std::mutex> lock(progress_mu_);
  auto it = progress_.find(job_key);
  if (it == progress_.end()) return std::nullopt;
  return it->second;
}

void Reconciler::RememberProgress(const std::string& job_key, const std::string& job_uid, const std::string& cm_uid) {
  if (job_uid.empty() || cm_uid.empty()) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  progress_[job_key] = KnownProgress{job_uid, cm_uid};
}

Status Reconciler::CheckExisting(const api::ObjectMeta& job_meta, const Action& a, const Status& conflict,
                                 std::optional<ObservedObject>* existing) {
  const std::string& ns = job_meta.namespace_;
  kube::ListOptions by_name;
  by_name.field_selector = "metadata.name=" + a.name;
  auto l = kube::ResourceClient(o_.client, CreatedType(a.kind), ns).List(by_name);
  if (!l.ok()) return l.status();
  if (l->items.empty()) return conflict;  // gone meanwhile: the queue retries
  ObservedObject o = ObjectFromJson(l->items[0]);
  o.kind = KindOf(a.kind);
  const std::string& job_name = job_meta.name;
  const std::string& job_uid = job_meta.uid;
  if (OwnershipOf(o, job_name, job_uid) == Ownership::kOurs) return Status::Ok();
  if (a.kind == Action::Kind::kCreateConfigMap && a.name == ProgressConfigMapName(job_name)) {
    // The trainer's token may have stripped it (labels too: then no cache holds it).
    const auto known = KnownProgressOf(ns + "/" + job_name);
    if (known && known->job_uid == job_uid && known->cm_uid == o.uid) {
      api::ObjectMeta job;
      job.name = job_name;
      job.namespace_ = ns;
      job.uid = job_uid;
      spdlog::warn("progress ConfigMap {}/{} lost the operator's metadata; restoring it", ns, a.name);
      return kube::ResourceClient(o_.client, kube::resources::kConfigMaps, ns)
          .Patch(a.name, ProgressRepairPatch(job))
          .status();
    }
  }
  *existing = std::move(o);
  return conflict;
}

Status Reconciler::ReleaseProgress(const std::string& ns, const std::string& name) {
  const std::string job_key = ns + "/" + name;
  const std::string cm_name = ProgressConfigMapName(name);
  const auto known = KnownProgressOf(job_key);
  kube::ObjectPtr cached = o_.configmaps ? o_.configmaps->Get(ns + "/" + cm_name) : nullptr;
  if (!cached && !known) return Status::Ok();
  Json cm;
  if (cached) {
    cm = *cached;
  } else {  // labels stripped too: no cache holds it
    kube::ListOptions by_name;
    by_name.field_selector = "metadata.name=" + cm_name;
    auto l = kube::ResourceClient(o_.client, kube::resources::kConfigMaps, ns).List(by_name);
    if (!l.ok()) return l.status();
    if (l->items.empty()) {
      std::lock_guard<std::mutex> lock(progress_mu_);
      progress_.erase(job_key);
      return Status::Ok();
    }
    cm = l->items[0];
  }
  const ObservedObject o = ObjectFromJson(cm);
  api::ObjectMeta job;
  job.name = name;
  job.namespace_ = ns;
  // Its owner: the job its controller reference names (the namesake gone from
  // the cache), else the one the reconciler knows it was made for.
  if (o.controller_kind == api::kKind && o.controller_name == name) {
    job.uid = o.controller_uid;
  } else if (known && known->cm_uid == o.uid) {
    job.uid = known->job_uid;
  } else {
    return Status::Ok();  // not the operator's
  }
  if (o.controller_uid == job.uid && o.finalizers.empty() && o.job_label == name) return Status::Ok();
  spdlog::warn("progress ConfigMap {}/{} of deleted TrainingJob {} lost the operator's metadata; restoring it so "
               "that the garbage collector removes it", ns, cm_name, name);
  Status s = kube::ResourceClient(o_.client, kube::resources::kConfigMaps, ns)
                 .Patch(cm_name, ProgressRepairPatch(job))
                 .status();
  return kube::IsNotFound(s) ? Status::Ok() : s;
}

StatusOr<bool> Reconciler::CacheIsCurrent(const kube::ResourceClient& jobs, const Json& job) {
  auto fresh = jobs.Get(kube::NameOf(job));
  if (!fresh.ok()) return Count(kube::NamespaceOf(job), fresh.status());
  return kube::ResourceVersionOf(*fresh) == kube::ResourceVersionOf(job);
}

StatusOr<bool> Reconciler::WriteStatus(const kube::ResourceClient& jobs, Json* job,
                                       const api::TrainingJobStatus& before, const api::TrainingJobStatus& next) {
  const Json next_json = api::ToJson(next);
  if (next_json == CachedStatusJson(*job)) return false;
  Json obj = *job;  // carries the cached resourceVersion: a stale cache gets 409
  obj["status"] = next_json;
  const std::string ns = kube::NamespaceOf(*job);
  auto r = jobs.UpdateStatus(obj);
  if (!r.ok()) return Count(ns, r.status());
  *job = std::move(*r);  // its resourceVersion for a second write in this pass
  auto became = [&](const char* t) { return api::IsConditionTrue(next, t) && !api::IsConditionTrue(before, t); };
  if (became(api::kCondSucceeded)) Bump(&ReconcilerCounters::jobs_succeeded, ns);
  if (became(api::kCondFailed)) Bump(&ReconcilerCounters::jobs_failed, ns);
  if (next.restart_count > before.restart_count) Bump(&ReconcilerCounters::jobs_restarted, ns);
  if (became(api::kCondCreated)) Bump(&ReconcilerCounters::jobs_created, ns);
  return true;
}

// How long a create this reconciler made stands in for the cache's copy.
constexpr std::chrono::seconds kExpectCreated{10};
// This worker's pass skipped a create the cache has not shown yet.
thread_local bool t_awaited = false;

static const kube::Store* CacheFor(const ReconcilerOptions& o, Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kCreateService: return o.services;
    case Action::Kind::kCreateConfigMap: return o.configmaps;
    case Action::Kind::kCreateServiceAccount: return o.service_accounts;
    case Action::Kind::kCreateRole: return o.roles;
    case Action::Kind::kCreateRoleBinding: return o.role_bindings;
    case Action::Kind::kCreatePod: return o.pods;
    default: return nullptr;
  }
}

// "ns/name kind": the entries of one namespace are adjacent (SettleExpectations).
static std::string ExpectKey(const std::string& ns, Action::Kind kind, const std::string& name) {
  return ns + "/" + name + " " + std::to_string(static_cast<int>(kind));
}
static std::string ExpectKey(const std::string& ns, const Action& a) { return ExpectKey(ns, a.kind, a.name); }

void Reconciler::SettleExpectations(const std::string& ns) {
  // An expectation ends once the cache shows the object: were it kept until
  // the next create of that name, a pod deleted within kExpectCreated of its
  // creation (a gang restart, a scheduling timeout) would not be made again.
  std::lock_guard<std::mutex> lock(expect_mu_);
  const std::string prefix = ns + "/";
  for (auto it = expected_.lower_bound(prefix); it != expected_.end() && it->first.rfind(prefix, 0) == 0;) {
    const size_t space = it->first.rfind(' ');
    const auto kind = static_cast<Action::Kind>(std::stoi(it->first.substr(space + 1)));
    const kube::Store* cache = CacheFor(o_, kind);
    const bool held = cache != nullptr && cache->Get(it->first.substr(0, space)) != nullptr;
    if (held || std::chrono::steady_clock::now() - it->second >= kExpectCreated) {
      it = expected_.erase(it);
    } else {
      ++it;
    }
  }
}

void Reconciler::ForgetExpectation(const std::string& ns, Action::Kind kind, const std::string& name) {
  std::lock_guard<std::mutex> lock(expect_mu_);
  expected_.erase(ExpectKey(ns, kind, name));
}

bool Reconciler::Cached(const std::string& ns, const Action& a, bool* awaited) {
  const kube::Store* cache = CacheFor(o_, a.kind);
  if (cache == nullptr) return false;
  const bool held = cache->Get(ns + "/" + a.name) != nullptr;
  std::lock_guard<std::mutex> lock(expect_mu_);
  auto it = expected_.find(ExpectKey(ns, a));
  if (it == expected_.end()) return held;
  if (held || std::chrono::steady_clock::now() - it->second >= kExpectCreated) {
    expected_.erase(it);
    return held;
  }
  if (awaited) *awaited = true;
  return true;
}

void Reconciler::ExpectCreated(const std::string& ns, const Action& a) {
  if (!o_.expect_creates || CacheFor(o_, a.kind) == nullptr) return;
  std::lock_guard<std::mutex> lock(expect_mu_);
  expected_[ExpectKey(ns, a)] = std::chrono::steady_clock::now();
}

Status Reconciler::CreatePods(const api::ObjectMeta& job, const api::TrainingJobSpec* spec,
                              const std::vector<Action>& actions, size_t begin, size_t end, size_t* failed,
                              std::optional<ObservedObject>* existing) {
  const std::string& ns = job.namespace_;
  const kube::ResourceClient pods(o_.client, kube::resources::kPods, ns);
  size_t batch = 1;
  for (size_t i = begin; i < end;) {
    std::vector<size_t> todo;
    for (; i < end && todo.size() < batch; ++i) {
      bool awaited = false;
      if (!Cached(ns, actions[i], &awaited)) todo.push_back(i);
      if (awaited) t_awaited = true;
    }
    std::vector<Json> objects(todo.size());
    for (size_t k = 0; k < todo.size(); ++k) {
      StatusOr<Json> pod = spec == nullptr ? Internal("no spec to build pods from")
                                           : PodToCreate(job, *spec, actions[todo[k]]);
      if (!pod.ok()) {  // Decide checked the options: a bug
        *failed = todo[k];
        return Internal("pod " + actions[todo[k]].name + " not built: " + pod.status().message());
      }
      objects[k] = std::move(*pod);
    }
    std::vector<std::optional<StatusOr<Json>>> made(todo.size());
    std::vector<std::thread> threads;
    for (size_t k = 1; k < todo.size(); ++k) {
      threads.emplace_back([&, k] { made[k] = pods.Create(objects[k]); });
    }
    if (!todo.empty()) made[0] = pods.Create(objects[0]);
    for (std::thread& t : threads) t.join();
    objects.clear();
    // A 409 (a cache that lags) is taken only for a pod of this job's.
    size_t refused = todo.size();
    Status refusal;
    for (size_t k = 0; k < todo.size() && refused == todo.size(); ++k) {
      if (made[k]->ok()) continue;
      refusal = made[k]->status();
      if (kube::IsAlreadyExists(refusal)) refusal = CheckExisting(job, actions[todo[k]], refusal, existing);
      if (!refusal.ok()) refused = k;
    }
    for (size_t k = 0; k < todo.size(); ++k) {
      if (!made[k]->ok()) continue;
      if (k < refused) {
        ExpectCreated(ns, actions[todo[k]]);
        Bump(&ReconcilerCounters::pods_created, ns);
      } else if (Status undo = pods.Delete(actions[todo[k]].name, PreconditionUid(kube::UidOf(**made[k]))).status();
                 !undo.ok() && !kube::IsNotFound(undo)) {
        spdlog::warn("pod {}/{} made past a refused create not deleted: {}", ns, actions[todo[k]].name,
                     undo.ToString());
      }
    }
    if (refused < todo.size()) {
      *failed = todo[refused];
      return Count(ns, refusal);
    }
    batch = std::min(2 * batch, static_cast<size_t>(std::max(1, o_.max_parallel_creates)));
  }
  return Status::Ok();
}

Status Reconciler::Act(const api::ObjectMeta& job, const api::TrainingJobSpec* spec,
                       const std::vector<Action>& actions, size_t* failed, std::optional<ObservedObject>* existing) {
  const std::string& ns = job.namespace_;
  kube::ResourceClient pods(o_.client, kube::resources::kPods, ns);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    *failed = i;
    if (a.kind == Action::Kind::kCreatePod) {
      size_t end = i;
      while (end < actions.size() && actions[end].kind == Action::Kind::kCreatePod) ++end;
      HT_RETURN_IF_ERROR(CreatePods(job, spec, actions, i, end, failed, existing));
      i = end - 1;
      continue;
    }
    switch (a.kind) {
      case Action::Kind::kCreatePodGroup: {
        auto r = kube::ResourceClient(o_.client, PodGroupType(a.object), ns).Create(a.object);
        if (!r.ok() && !kube::IsAlreadyExists(r.status())) {
          if (kube::IsNotFound(r.status())) {
            // Still a 404 of the API server: the job reports it (DecideActFailure).
            return Count(ns, r.status().WithMessage(a.object.value("apiVersion", "") +
                                                    " PodGroup is not served: install the gang scheduler that "
                                                    "spec.scheduling.gang.provider names (" +
                                                    r.status().message() + ")"));
          }
          return Count(ns, r.status());
        }
        break;
      }
      case Action::Kind::kCreateService:
      case Action::Kind::kCreateConfigMap:
      case Action::Kind::kCreateServiceAccount:
      case Action::Kind::kCreateRole:
      case Action::Kind::kCreateRoleBinding:
      case Action::Kind::kCreatePod: {  // pods: CreatePods above
        bool awaited = false;
        const bool cached = Cached(ns, a, &awaited);
        if (awaited) t_awaited = true;
        if (cached) break;  // the server holds it: a POST would only be answered 409
        auto r = kube::ResourceClient(o_.client, CreatedType(a.kind), ns).Create(a.object);
        if (kube::IsAlreadyExists(r.status())) {
          // Used only when it is the job's (a cache not caught up yet).
          Status s = CheckExisting(job, a, r.status(), existing);
          if (!s.ok()) return Count(ns, s);
          break;
        }
        if (!r.ok()) return Count(ns, r.status());
        ExpectCreated(ns, a);
        if (a.kind == Action::Kind::kCreatePod) Bump(&ReconcilerCounters::pods_created, ns);
        if (a.kind == Action::Kind::kCreateConfigMap && a.name == ProgressConfigMapName(job.name)) {
          RememberProgress(ns + "/" + job.name, job.uid, kube::UidOf(*r));
        }
        break;
      }
      case Action::Kind::kRepairConfigMap: {
        Status s = kube::ResourceClient(o_.client, kube::resources::kConfigMaps, ns).Patch(a.name, a.object).status();
        if (!s.ok() && !kube::IsNotFound(s)) return Count(ns, s);
        break;
      }
      case Action::Kind::kPatchPod: {
        Status s = pods.Patch(a.name, a.object).status();
        if (!s.ok() && !kube::IsNotFound(s)) return Count(ns, s);
        break;
      }
      case Action::Kind::kDeletePod: {
        ForgetExpectation(ns, Action::Kind::kCreatePod, a.name);
        kube::DeleteOptions o = PreconditionUid(a.uid);
        if (a.force) o.grace_period_seconds = 0;
        Status s = pods.Delete(a.name, o).status();
        if (!s.ok() && !kube::IsNotFound(s) && !kube::IsConflict(s)) return Count(ns, s);
        break;
      }
      case Action::Kind::kDeleteJob: {
        kube::DeleteOptions o = PreconditionUid(a.uid);
        o.propagation_policy = "Background";
        Status s = kube::ResourceClient(o_.client, TrainingJobType(), ns).Delete(a.name, o).status();
        if (!s.ok() && !kube::IsNotFound(s)) return Count(ns, s);
        break;
      }
    }
  }
  return Status::Ok();
}

void Reconciler::Emit(const api::ObjectMeta& meta, const std::vector<Event>& events, const std::string& now) {
  kube::ResourceClient client(o_.client, kube::resources::kEvents, meta.namespace_);
  for (const Event& e : events) {
    auto r = client.Create(BuildEvent(meta, e.type, e.reason, e.message, now, o_.instance));
    if (r.ok() || kube::IsAlreadyExists(r.status())) continue;
    Count(meta.namespace_, r.status());
    spdlog::warn("event {} for {}/{} not recorded: {}", e.reason, meta.namespace_, meta.name, r.status().ToString());
  }
}

StatusOr<ReconcileResult> Reconciler::Reconcile(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) return InvalidArgument("bad key " + key);
  kube::ObjectPtr job = o_.jobs->Get(key);
  if (!job) {  // deleted: owner references let the GC remove the rest
    HT_RETURN_IF_ERROR(ReleaseProgress(key.substr(0, slash), key.substr(slash + 1)));
    return ReconcileResult{};
  }
  auto meta = api::ParseObjectMeta(job->value("metadata", Json()));
  if (!meta.ok()) {
    spdlog::warn("skipping {}: {}", key, meta.status().message());
    return ReconcileResult{};
  }
  const Clock::time_point now = o_.now();
  SettleExpectations(meta->namespace_);
  const Observed in = Observe(*meta, *job, now);
  auto spec = api::ParseSpec(job->value("spec", Json()), *meta);
  HT_ASSIGN_OR_RETURN(const Plan plan, Decide(in, spec, now, DecideOptions{o_.fault_settle_window}));
  RememberFirstSeen(plan.first_seen, now);
  for (const std::string& line : plan.log) spdlog::warn("{}", line);

  kube::ResourceClient jobs(o_.client, TrainingJobType(), meta->namespace_);
  if (plan.needs_current_cache) {
    // Never create pods from a stale cache: the attempt number must be the server's.
    HT_ASSIGN_OR_RETURN(const bool current, CacheIsCurrent(jobs, *job));
    if (!current) return ReconcileResult{kStaleCacheRequeue};
  }
  bool written = false;
  Json server_job = *job;
  if (plan.status) {
    HT_ASSIGN_OR_RETURN(written, WriteStatus(jobs, &server_job, in.status, *plan.status));
  }
  size_t failed = 0;
  std::optional<ObservedObject> existing;
  t_awaited = false;
  const api::TrainingJobSpec* parsed = spec.ok() ? &*spec : nullptr;
  const Status acted = Act(*meta, parsed, plan.actions, &failed, &existing);
  if (written) Emit(*meta, plan.events, FormatRfc3339(now));
  if (acted.ok()) {
    // A create skipped for an object the cache has not shown yet: look again
    // once the expectation lapses, should its watch event never come.
    if (!t_awaited) return ReconcileResult{plan.requeue_after};
    return ReconcileResult{std::min(plan.requeue_after.value_or(kExpectCreated), std::chrono::milliseconds(kExpectCreated))};
  }
  // A refusal of the API server is the job's to report (status, rollback, event).
  const std::optional<Plan> recovery =
      DecideActFailure(in, plan, failed, acted, now, existing ? &*existing : nullptr);
  if (!recovery) return acted;
  spdlog::warn("{}: the API server refused to {}: {}", key, Describe(plan.actions[failed]), acted.ToString());
  HT_ASSIGN_OR_RETURN(const bool rewritten,
                      WriteStatus(jobs, &server_job, plan.status ? *plan.status : in.status, *recovery->status));
  size_t rollback_failed = 0;
  const Status rolled_back = Act(*meta, parsed, recovery->actions, &rollback_failed, &existing);
  if (rewritten) Emit(*meta, recovery->events, FormatRfc3339(now));
  if (!rolled_back.ok()) return rolled_back;
  return ReconcileResult{recovery->requeue_after};
}

}  // namespace hypertrain::controller
