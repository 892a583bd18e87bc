// hypertrain-operator: reconciles TrainingJobs (hypertrain.dev/v1alpha1).
//
//   hypertrain-operator [--namespace=a,b] [--leader-elect=true]
//     [--leader-election-namespace=NS] [--leader-election-id=NAME]
//     [--metrics-addr=:8080] [--log-level=info] [--kubeconfig=PATH] [--workers=2]
//     [--kube-api-qps=50 --kube-api-burst=100]   (client-side API rate limit)
//     [--lease-duration-ms=15000 --renew-deadline-ms=10000 --retry-period-ms=2000]
//     [--fault-settle-ms=5000]
//
// Serves /metrics (Prometheus), /healthz and /readyz on --metrics-addr. With
// leader election only the Lease holder runs informers and workers; SIGTERM or
// SIGINT stops the workers, releases the Lease and exits 0. Logs are logfmt
// lines on stderr. Exit codes: 0 clean shutdown, 2 bad flags/config, 1 fatal.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "operator/api/training_job.h"
#include "operator/cmd/http_server.h"
#include "operator/cmd/metrics.h"
#include "operator/controller/reconciler.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"
#include "kube/workqueue.h"

namespace hypertrain::operatorcmd {
namespace {

using namespace std::chrono_literals;

enum Level { kTrace, kDebug, kInfo, kWarn, kError };
Level g_level = kInfo;
std::mutex g_log_mu;

void Log(Level lvl, const std::string& msg, const std::string& kv = "") {
  if (lvl < g_level) return;
  static const char* kNames[] = {"trace", "debug", "info", "warn", "error"};
  const auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string quoted;
  for (char c : msg) quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c == '\n' ? ' ' : c);
  std::lock_guard<std::mutex> l(g_log_mu);
  std::cerr << "ts=" << ts << " level=" << kNames[lvl] << " msg=\"" << quoted << "\"" << (kv.empty() ? "" : " " + kv)
            << std::endl;
}

struct Flags {
  std::vector<std::string> namespaces;  // empty: all
  bool leader_elect = true;
  std::string lease_namespace;
  std::string lease_name = "hypertrain-operator-leader";
  std::string metrics_addr = ":8080";
  std::string kubeconfig;
  int workers = 2;
  double kube_api_qps = 50;
  int kube_api_burst = 100;
  int lease_duration_ms = 15000, renew_deadline_ms = 10000, retry_period_ms = 2000;
  int fault_settle_ms = 5000;  // ReconcilerOptions::fault_settle_window; 0 disables it
};

bool ParseFlags(int argc, char** argv, Flags* f, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      *err = "flags are --name=value, got '" + a + "'";
      return false;
    }
    const std::string k = a.substr(2, eq - 2), v = a.substr(eq + 1);
    auto to_int = [&](int* out) {
      try {
        *out = std::stoi(v);
        return *out > 0;
      } catch (...) {
        return false;
      }
    };
    if (k == "namespace") {
      std::stringstream ss(v);
      for (std::string ns; std::getline(ss, ns, ',');) {
        if (!ns.empty()) f->namespaces.push_back(ns);
      }
    } else if (k == "leader-elect") {
      if (v != "true" && v != "false") return *err = "--leader-elect must be true or false", false;
      f->leader_elect = v == "true";
    } else if (k == "leader-election-namespace") {
      f->lease_namespace = v;
    } else if (k == "leader-election-id") {
      f->lease_name = v;
    } else if (k == "metrics-addr") {
      f->metrics_addr = v;
    } else if (k == "kubeconfig") {
      f->kubeconfig = v;
    } else if (k == "log-level") {
      static const std::map<std::string, Level> kLevels = {
          {"trace", kTrace}, {"debug", kDebug}, {"info", kInfo}, {"warn", kWarn}, {"error", kError}};
      auto it = kLevels.find(v);
      if (it == kLevels.end()) return *err = "--log-level must be trace, debug, info, warn or error", false;
      g_level = it->second;
    } else if (k == "kube-api-qps") {
      try {
        f->kube_api_qps = std::stod(v);
      } catch (...) {
        return *err = "--kube-api-qps must be a number (<= 0 disables the limiter)", false;
      }
    } else if (k == "kube-api-burst") {
      if (!to_int(&f->kube_api_burst)) return *err = "--kube-api-burst must be a positive integer", false;
    } else if (k == "workers") {
      if (!to_int(&f->workers)) return *err = "--workers must be a positive integer", false;
    } else if (k == "lease-duration-ms") {
      if (!to_int(&f->lease_duration_ms)) return *err = "--lease-duration-ms must be positive", false;
    } else if (k == "renew-deadline-ms") {
      if (!to_int(&f->renew_deadline_ms)) return *err = "--renew-deadline-ms must be positive", false;
    } else if (k == "fault-settle-ms") {
      try {
        size_t used = 0;
        f->fault_settle_ms = std::stoi(v, &used);
        if (used != v.size() || f->fault_settle_ms < 0) throw std::invalid_argument(v);
      } catch (...) {
        return *err = "--fault-settle-ms must be a non-negative integer (0 disables the settle window)", false;
      }
    } else if (k == "retry-period-ms") {
      if (!to_int(&f->retry_period_ms)) return *err = "--retry-period-ms must be positive", false;
    } else {
      *err = "unknown flag --" + k;
      return false;
    }
  }
  return true;
}

// Informers, queue and workers for the watched namespaces, while leading.
class Controller {
 public:
  Controller(std::shared_ptr<kube::RestClient> client, const Flags& flags, OperatorMetrics* metrics,
             std::string identity)
      : client_(std::move(client)), flags_(flags), metrics_(metrics), identity_(std::move(identity)) {}

  bool synced() const { return synced_.load(); }

  // Runs until `stop` fires.
  void Run(kube::CancelToken* stop) {
    kube::WorkQueue queue;
    std::vector<std::string> nss = flags_.namespaces.empty() ? std::vector<std::string>{""} : flags_.namespaces;
    struct Scope {
      std::unique_ptr<kube::Informer> jobs, pods;
      std::unique_ptr<controller::Reconciler> reconciler;
    };
    std::map<std::string, Scope> scopes;
    // Node health (cluster-scoped, read-only): a change re-checks every job.
    kube::Informer nodes(kube::ResourceClient(client_, kube::resources::kNodes));
    kube::EventHandlers on_node;
    auto enqueue_all = [&scopes, &queue] {
      for (auto& [_, sc] : scopes) {
        for (const std::string& k : sc.jobs->store().Keys()) queue.Add(k);
      }
    };
    on_node.on_update = [enqueue_all](const kube::Json& before, const kube::Json& after) {
      if (before["metadata"].value("labels", kube::Json::object()) != after["metadata"].value("labels", kube::Json::object()) ||
          before.value("status", kube::Json::object()).value("conditions", kube::Json::array()) !=
              after.value("status", kube::Json::object()).value("conditions", kube::Json::array())) {
        enqueue_all();
      }
    };
    on_node.on_delete = [enqueue_all](const kube::Json&) { enqueue_all(); };
    nodes.SetErrorLogger([](const std::string& e) { Log(kWarn, "node watch error", "err=\"" + e + "\""); });
    nodes.Start();
    for (const std::string& ns : nss) {
      Scope s;
      s.jobs = std::make_unique<kube::Informer>(kube::ResourceClient(client_, controller::TrainingJobType(), ns));
      kube::ReflectorOptions pod_opts;
      pod_opts.label_selector = api::kLabelJobName;  // only the operator's pods
      s.pods = std::make_unique<kube::Informer>(kube::ResourceClient(client_, kube::resources::kPods, ns), pod_opts);
      s.jobs->AddEventHandlers(kube::EnqueueKeyHandlers(&queue));
      s.pods->AddEventHandlers(kube::EnqueueOwnerHandlers(&queue, api::kKind));
      for (auto* inf : {s.jobs.get(), s.pods.get()}) {
        inf->SetErrorLogger([ns](const std::string& e) { Log(kWarn, "watch error", "namespace=" + ns + " err=\"" + e + "\""); });
      }
      controller::ReconcilerOptions o;
      o.client = client_;
      o.jobs = &s.jobs->store();
      o.pods = &s.pods->store();
      o.nodes = &nodes.store();
      o.instance = identity_;
      o.fault_settle_window = std::chrono::milliseconds(flags_.fault_settle_ms);
      o.counters = &metrics_->counters;
      s.reconciler = std::make_unique<controller::Reconciler>(std::move(o));
      s.jobs->Start();
      s.pods->Start();
      scopes[ns] = std::move(s);
    }
    nodes.AddEventHandlers(on_node);  // after the scopes exist: the handler reads them
    while (!stop->cancelled() && !nodes.WaitForSync(1s)) Log(kInfo, "waiting for the node cache");
    for (auto& [ns, s] : scopes) {
      while (!stop->cancelled() && !(s.jobs->WaitForSync(1s) && s.pods->WaitForSync(1s))) {
        Log(kInfo, "waiting for caches", "namespace=" + (ns.empty() ? std::string("*") : ns));
      }
    }
    synced_ = true;
    Log(kInfo, "caches synced; reconciling", "workers=" + std::to_string(flags_.workers));
    std::vector<std::thread> workers;
    for (int w = 0; w < flags_.workers; ++w) {
      workers.emplace_back([&] {
        while (!stop->cancelled()) {
          auto key = queue.GetFor(200ms);
          metrics_->queue_depth = static_cast<int64_t>(queue.Len());
          if (!key) continue;
          const std::string ns = key->substr(0, key->find('/'));
          auto it = scopes.find(flags_.namespaces.empty() ? "" : ns);
          if (it == scopes.end()) {
            queue.Done(*key);
            continue;
          }
          const auto t0 = std::chrono::steady_clock::now();
          auto r = it->second.reconciler->Reconcile(*key);
          metrics_->reconcile_latency.Observe(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          if (r.ok()) {
            queue.Forget(*key);
            if (r->requeue_after) queue.AddAfter(*key, *r->requeue_after);
            Log(kDebug, "reconciled", "job=" + *key);
          } else {
            ++metrics_->reconcile_errors;
            Log(kWarn, "reconcile failed; retrying with backoff", "job=" + *key + " err=\"" + r.status().ToString() + "\"");
            queue.AddRateLimited(*key);
          }
          queue.Done(*key);
          int64_t n = 0;
          for (auto& [_, s] : scopes) n += static_cast<int64_t>(s.jobs->store().Size());
          metrics_->jobs_cached = n;
        }
      });
    }
    for (auto& w : workers) w.join();
    queue.ShutDown();
    nodes.Stop();
    for (auto& [_, s] : scopes) {
      s.jobs->Stop();
      s.pods->Stop();
    }
    synced_ = false;
    Log(kInfo, "controller stopped");
  }

 private:
  std::shared_ptr<kube::RestClient> client_;
  const Flags& flags_;
  OperatorMetrics* metrics_;
  std::string identity_;
  std::atomic<bool> synced_{false};
};

int Main(int argc, char** argv) {
  Flags flags;
  std::string err;
  if (!ParseFlags(argc, argv, &flags, &err)) {
    std::cerr << "hypertrain-operator: " << err << "\n";
    return 2;
  }
  // SIGTERM/SIGINT are handled by a thread (sigwait), so block them everywhere first.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto cfg = flags.kubeconfig.empty() ? kube::LoadDefault() : kube::LoadKubeconfig({flags.kubeconfig});
  if (!cfg.ok()) {
    Log(kError, "cannot load Kubernetes config", "err=\"" + cfg.status().ToString() + "\"");
    return 2;
  }
  cfg->qps = flags.kube_api_qps;
  cfg->burst = flags.kube_api_burst;
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) {
    Log(kError, "cannot create the API client", "err=\"" + client.status().ToString() + "\"");
    return 2;
  }
  const char* pod = std::getenv("POD_NAME");
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const std::string identity = pod ? pod : std::string(host) + "-" + std::to_string(getpid());
  if (flags.lease_namespace.empty()) {
    const char* pns = std::getenv("POD_NAMESPACE");
    flags.lease_namespace = pns ? pns : "default";
  }

  OperatorMetrics metrics;
  Controller controller(*client, flags, &metrics, identity);
  HttpServer http;
  http.Handle("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; });
  http.Handle("/readyz", [&] {
    // A standby replica is ready: it only waits for the Lease.
    const bool ready = controller.synced() || (flags.leader_elect && metrics.is_leader == 0);
    return ready ? HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}
                 : HttpResponse{503, "text/plain; charset=utf-8", "caches not synced\n"};
  });
  http.Handle("/metrics", [&] { return HttpResponse{200, "text/plain; version=0.0.4", metrics.Render()}; });
  if (!http.Start(flags.metrics_addr, &err)) {
    Log(kError, "cannot serve metrics", "err=\"" + err + "\"");
    return 2;
  }
  Log(kInfo, "started", "identity=" + identity + " metrics_port=" + std::to_string(http.port()) +
                            " namespaces=" + (flags.namespaces.empty() ? std::string("*") : std::to_string(flags.namespaces.size())));

  kube::CancelToken cancel;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    Log(kInfo, "shutting down", "signal=" + std::to_string(sig));
    cancel.Cancel();
  });
  signals.detach();

  int rc = 0;
  if (flags.leader_elect) {
    kube::LeaderElectionConfig lc;
    lc.lease_namespace = flags.lease_namespace;
    lc.lease_name = flags.lease_name;
    lc.identity = identity;
    lc.lease_duration = std::chrono::milliseconds(flags.lease_duration_ms);
    lc.renew_deadline = std::chrono::milliseconds(flags.renew_deadline_ms);
    lc.retry_period = std::chrono::milliseconds(flags.retry_period_ms);
    kube::LeaderCallbacks cb;
    cb.on_started_leading = [&](kube::CancelToken* stop) {
      metrics.is_leader = 1;
      Log(kInfo, "became leader", "lease=" + lc.lease_namespace + "/" + lc.lease_name);
      controller.Run(stop);
    };
    cb.on_stopped_leading = [&] {
      metrics.is_leader = 0;
      Log(kInfo, "stopped leading");
    };
    cb.on_new_leader = [](const std::string& who) { Log(kInfo, "leader observed", "holder=" + who); };
    auto elector = kube::LeaderElector::Create(*client, lc, cb);
    if (!elector.ok()) {
      Log(kError, "leader election setup failed", "err=\"" + elector.status().ToString() + "\"");
      return 2;
    }
    (*elector)->Run(&cancel);
    // Lost the lease without being asked to stop: exit non-zero so the pod restarts clean.
    if (!cancel.cancelled()) rc = 1;
  } else {
    metrics.is_leader = 1;
    controller.Run(&cancel);
  }
  http.Stop();
  Log(kInfo, "exited", "code=" + std::to_string(rc));
  return rc;
}

}  // namespace
}  // namespace hypertrain::operatorcmd

int main(int argc, char** argv) { return hypertrain::operatorcmd::Main(argc, argv); }
