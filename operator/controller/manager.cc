#include "operator/controller/manager.h"

#include <malloc.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "kube/informer.h"
#include "kube/status.h"
#include "kube/workqueue.h"
#include "operator/api/training_job.h"
#include "operator/controller/cache_transforms.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::controller {
namespace {

using namespace std::chrono_literals;
using kube::Json;

// How often an idle worker looks at `stop`.
constexpr auto kWorkerPoll = 200ms;
// A pass this long built and sent many objects (a large gang's pods): what it
// freed goes back to the system (malloc_trim) instead of staying in the RSS.
constexpr auto kTrimAfterPass = 50ms;

// A node change that can turn a job's pod unhealthy or lost.
bool NodeHealthChanged(const Json& before, const Json& after) {
  auto labels = [](const Json& n) { return n["metadata"].value("labels", Json::object()); };
  auto conditions = [](const Json& n) {
    return n.value("status", Json::object()).value("conditions", Json::array());
  };
  // spec: cordons and taints, which elastic jobs size themselves by.
  auto spec = [](const Json& n) { return n.value("spec", Json::object()); };
  return labels(before) != labels(after) || conditions(before) != conditions(after) || spec(before) != spec(after);
}

std::string NamespaceName(const std::string& ns) { return ns.empty() ? "*" : ns; }

// Enqueues the job a derived object is named for (label hypertrain.dev/job-name)
// and its TrainingJob owners: an object whose controller reference was
// stripped still reaches its job.
kube::EventHandlers EnqueueJobHandlers(kube::WorkQueue* q) {
  kube::EventHandlers owners = kube::EnqueueOwnerHandlers(q, api::kKind);
  auto by_label = [q](const Json& o) {
    const Json meta = o.value("metadata", Json::object());
    const Json labels = meta.value("labels", Json::object());
    auto it = labels.find(api::kLabelJobName);
    if (it == labels.end() || !it->is_string()) return;
    const std::string ns = meta.value("namespace", "");
    q->Add(ns.empty() ? it->get<std::string>() : ns + "/" + it->get<std::string>());
  };
  kube::EventHandlers h;
  h.on_add = [owners, by_label](const Json& o) {
    owners.on_add(o);
    by_label(o);
  };
  h.on_update = [owners, by_label](const Json& before, const Json& after) {
    owners.on_update(before, after);
    by_label(before);
    by_label(after);
  };
  h.on_delete = [owners, by_label](const Json& o) {
    owners.on_delete(o);
    by_label(o);
  };
  return h;
}

// An informer of the operator's own objects of `type` in `ns` (those labelled
// hypertrain.dev/job-name), each trimmed by `transform` before it is cached.
std::unique_ptr<kube::Informer> OwnInformer(const std::shared_ptr<kube::RestClient>& client,
                                            const kube::ResourceType& type, const std::string& ns,
                                            kube::TransformFunc transform) {
  kube::ReflectorOptions o;
  o.label_selector = api::kLabelJobName;
  o.transform = std::move(transform);
  return std::make_unique<kube::Informer>(kube::ResourceClient(client, type, ns), std::move(o));
}

kube::ReflectorOptions NodeOptions() {
  kube::ReflectorOptions o;
  o.transform = TrimNode;
  return o;
}

}  // namespace

// One leadership term: the queue, the informers and their caches.
struct Manager::Term {
  // One namespace's informers and reconciler.
  struct Scope {
    std::unique_ptr<kube::Informer> jobs, pods, configmaps;
    // The other derived objects (labelled ones only, metadata only): Decide
    // uses nothing under a job's name that is not its own, Act creates nothing
    // they hold again.
    std::unique_ptr<kube::Informer> services, service_accounts, roles, role_bindings;
    std::unique_ptr<Reconciler> reconciler;
    std::vector<kube::Informer*> All() const {
      return {jobs.get(), pods.get(), configmaps.get(), services.get(), service_accounts.get(), roles.get(),
              role_bindings.get()};
    }
  };
  Term(const std::shared_ptr<kube::RestClient>& client, Metrics* metrics)
      : queue(QueueOptions(metrics)), nodes(kube::ResourceClient(client, kube::resources::kNodes), NodeOptions()) {}
  static kube::WorkQueueOptions QueueOptions(Metrics* metrics) {
    kube::WorkQueueOptions o;
    o.metrics = metrics ? metrics->workqueue() : nullptr;
    return o;
  }
  kube::WorkQueue queue;
  kube::Informer nodes;                 // cluster-scoped, read-only
  std::map<std::string, Scope> scopes;  // by namespace ("" for all)
};

Manager::Manager(ManagerOptions opts) : o_(std::move(opts)) {}

void Manager::StartInformers(Term& t) {
  t.nodes.Start();
  const std::vector<std::string> nss = o_.namespaces.empty() ? std::vector<std::string>{""} : o_.namespaces;
  for (const std::string& ns : nss) {
    Term::Scope s;
    s.jobs = std::make_unique<kube::Informer>(kube::ResourceClient(o_.client, TrainingJobType(), ns));
    s.pods = OwnInformer(o_.client, kube::resources::kPods, ns, TrimPod);
    s.configmaps = OwnInformer(o_.client, kube::resources::kConfigMaps, ns, kube::StripManagedFields);
    s.services = OwnInformer(o_.client, kube::resources::kServices, ns, KeepMetadataOnly);
    s.service_accounts = OwnInformer(o_.client, kube::resources::kServiceAccounts, ns, KeepMetadataOnly);
    s.roles = OwnInformer(o_.client, kube::resources::kRoles, ns, KeepMetadataOnly);
    s.role_bindings = OwnInformer(o_.client, kube::resources::kRoleBindings, ns, KeepMetadataOnly);
    s.jobs->AddEventHandlers(kube::EnqueueKeyHandlers(&t.queue));
    s.pods->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    s.configmaps->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    // Every event: a deletion makes them again, a foreign namesake fails the job.
    for (kube::Informer* i : {s.services.get(), s.service_accounts.get(), s.roles.get(), s.role_bindings.get()}) {
      i->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    }
    ReconcilerOptions ro;
    ro.client = o_.client;
    ro.jobs = &s.jobs->store();
    ro.pods = &s.pods->store();
    ro.nodes = &t.nodes.store();
    ro.configmaps = &s.configmaps->store();
    ro.services = &s.services->store();
    ro.service_accounts = &s.service_accounts->store();
    ro.roles = &s.roles->store();
    ro.role_bindings = &s.role_bindings->store();
    if (o_.namespaces.empty()) ro.excluded_namespaces = o_.excluded_namespaces;
    ro.instance = o_.identity;
    ro.fault_settle_window = o_.fault_settle_window;
    ro.max_parallel_creates = o_.max_parallel_creates;
    ro.expect_creates = true;
    ro.counters = o_.metrics ? &o_.metrics->counters : nullptr;
    s.reconciler = std::make_unique<Reconciler>(std::move(ro));
    for (kube::Informer* i : s.All()) i->Start();
    t.scopes[ns] = std::move(s);
  }
  // After the scopes exist: the handler reads them. A node change re-checks every job.
  auto enqueue_all = [&t] {
    for (auto& [_, s] : t.scopes) {
      for (const std::string& key : s.jobs->store().Keys()) t.queue.Add(key);
    }
  };
  kube::EventHandlers on_node;
  on_node.on_update = [enqueue_all](const Json& before, const Json& after) {
    if (NodeHealthChanged(before, after)) enqueue_all();
  };
  on_node.on_delete = [enqueue_all](const Json&) { enqueue_all(); };
  on_node.on_add = [enqueue_all](const Json&) { enqueue_all(); };  // capacity for elastic jobs
  t.nodes.AddEventHandlers(on_node);
}

bool Manager::WaitForCaches(Term& t, kube::CancelToken* stop) {
  while (!stop->cancelled() && !t.nodes.WaitForSync(1s)) spdlog::info("waiting for the node cache");
  for (auto& [ns, s] : t.scopes) {
    const auto all_synced = [&s] {
      for (kube::Informer* i : s.All()) {
        if (!i->WaitForSync(1s)) return false;
      }
      return true;
    };
    while (!stop->cancelled() && !all_synced()) {
      spdlog::info("waiting for the caches of namespace {}", NamespaceName(ns));
    }
  }
  return !stop->cancelled();
}

void Manager::ReconcileKey(Term& t, const std::string& key) {
  const std::string ns = key.substr(0, key.find('/'));
  auto it = t.scopes.find(o_.namespaces.empty() ? "" : ns);
  if (it == t.scopes.end()) return;
  if (o_.namespaces.empty() && o_.excluded_namespaces.count(ns) && FirstWarning(key)) {
    // The reconciler says so on the job (condition, Warning) and creates nothing.
    spdlog::warn("ignoring TrainingJob {} in an excluded namespace (--exclude-namespaces)", key);
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (o_.metrics) o_.metrics->WorkerActive(true);
  StatusOr<ReconcileResult> r = it->second.reconciler->Reconcile(key);
  // A 409 Conflict is a stale read racing another writer (a user's patch, the
  // node agent): not a failure; the next pass reads the newer object.
  const bool conflict = !r.ok() && kube::IsConflict(r.status());
  if (o_.metrics) {
    o_.metrics->WorkerActive(false);
    o_.metrics->ObserveReconcile(conflict ? "requeue"
                                 : !r.ok() ? "error"
                                 : r->requeue_after ? "requeue_after" : "success",
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (std::chrono::steady_clock::now() - t0 >= kTrimAfterPass) malloc_trim(0);
  if (conflict) {
    spdlog::debug("reconcile of {} raced another writer; requeued: {}", key, r.status().ToString());
    t.queue.AddRateLimited(key);
  } else if (r.ok()) {
    t.queue.Forget(key);
    if (r->requeue_after) t.queue.AddAfter(key, *r->requeue_after);
    spdlog::debug("reconciled {}", key);
  } else {
    spdlog::warn("reconcile of {} failed; retrying with backoff: {}", key, r.status().ToString());
    t.queue.AddRateLimited(key);
  }
}

void Manager::Work(Term& t, kube::CancelToken* stop) {
  while (!stop->cancelled()) {
    auto key = t.queue.GetFor(kWorkerPoll);
    if (!key) continue;
    ReconcileKey(t, *key);
    t.queue.Done(*key);
  }
}

std::map<std::string, int> Manager::JobsByNamespace() const {
  std::lock_guard<std::mutex> l(term_mu_);
  std::map<std::string, int> n;
  if (term_ == nullptr) return n;
  for (auto& [_, s] : term_->scopes) {
    for (const std::string& key : s.jobs->store().Keys()) ++n[key.substr(0, key.find('/'))];
  }
  return n;
}

bool Manager::FirstWarning(const std::string& key) {
  std::lock_guard<std::mutex> l(warned_mu_);
  return warned_.insert(key).second;
}

void Manager::Run(kube::CancelToken* stop) {
  Term t(o_.client, o_.metrics);
  if (o_.metrics) o_.metrics->SetWorkers(o_.workers);
  StartInformers(t);
  if (WaitForCaches(t, stop)) {
    {
      std::lock_guard<std::mutex> l(term_mu_);
      term_ = &t;
    }
    synced_ = true;
    spdlog::info("caches synced; reconciling with {} workers", o_.workers);
    std::vector<std::thread> workers;
    for (int w = 0; w < o_.workers; ++w) workers.emplace_back([&] { Work(t, stop); });
    for (auto& w : workers) w.join();
  }
  {
    std::lock_guard<std::mutex> l(term_mu_);
    term_ = nullptr;
  }
  t.queue.ShutDown();
  t.nodes.Stop();
  for (auto& [_, s] : t.scopes) {
    for (kube::Informer* i : s.All()) i->Stop();
  }
  synced_ = false;
  spdlog::info("controller stopped");
}

}  // namespace hypertrain::controller
