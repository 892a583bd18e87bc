#include "operator/controller/manager.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "kube/informer.h"
#include "kube/status.h"
#include "kube/workqueue.h"
#include "operator/api/training_job.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::controller {
namespace {

using namespace std::chrono_literals;
using kube::Json;

// How often an idle worker looks at `stop`.
constexpr auto kWorkerPoll = 200ms;

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

}  // namespace

// One leadership term: the queue, the informers and their caches.
struct Manager::Term {
  // One namespace's informers and reconciler.
  struct Scope {
    std::unique_ptr<kube::Informer> jobs, pods, configmaps;
    // The other derived objects (labelled ones only): nothing the caches hold
    // is created again, nothing under a job's name is used that is not its own.
    std::vector<std::unique_ptr<kube::Informer>> derived;
    std::unique_ptr<Reconciler> reconciler;
  };
  Term(const std::shared_ptr<kube::RestClient>& client, Metrics* metrics)
      : queue(QueueOptions(metrics)), nodes(kube::ResourceClient(client, kube::resources::kNodes)) {}
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
    kube::ReflectorOptions only_ours;
    only_ours.label_selector = api::kLabelJobName;
    s.pods = std::make_unique<kube::Informer>(kube::ResourceClient(o_.client, kube::resources::kPods, ns), only_ours);
    s.configmaps =
        std::make_unique<kube::Informer>(kube::ResourceClient(o_.client, kube::resources::kConfigMaps, ns), only_ours);
    s.jobs->AddEventHandlers(kube::EnqueueKeyHandlers(&t.queue));
    s.pods->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    s.configmaps->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    for (const kube::ResourceType* type : {&kube::resources::kServices, &kube::resources::kServiceAccounts,
                                           &kube::resources::kRoles, &kube::resources::kRoleBindings}) {
      s.derived.push_back(std::make_unique<kube::Informer>(kube::ResourceClient(o_.client, *type, ns), only_ours));
      s.derived.back()->AddEventHandlers(EnqueueJobHandlers(&t.queue));
    }
    ReconcilerOptions ro;
    ro.client = o_.client;
    ro.jobs = &s.jobs->store();
    ro.pods = &s.pods->store();
    ro.nodes = &t.nodes.store();
    ro.configmaps = &s.configmaps->store();
    ro.services = &s.derived[0]->store();
    ro.serviceaccounts = &s.derived[1]->store();
    ro.roles = &s.derived[2]->store();
    ro.rolebindings = &s.derived[3]->store();
    if (o_.namespaces.empty()) ro.excluded_namespaces = o_.excluded_namespaces;
    ro.instance = o_.identity;
    ro.fault_settle_window = o_.fault_settle_window;
    ro.counters = o_.metrics ? &o_.metrics->counters : nullptr;
    s.reconciler = std::make_unique<Reconciler>(std::move(ro));
    s.jobs->Start();
    s.pods->Start();
    s.configmaps->Start();
    for (auto& d : s.derived) d->Start();
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
    while (!stop->cancelled() &&
           !(s.jobs->WaitForSync(1s) && s.pods->WaitForSync(1s) && s.configmaps->WaitForSync(1s) &&
             std::all_of(s.derived.begin(), s.derived.end(), [](auto& d) { return d->WaitForSync(1s); }))) {
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
    s.jobs->Stop();
    s.pods->Stop();
    s.configmaps->Stop();
    for (auto& d : s.derived) d->Stop();
  }
  synced_ = false;
  spdlog::info("controller stopped");
}

}  // namespace hypertrain::controller
