// hypertrain-operator: reconciles TrainingJobs (hypertrain.dev/v1alpha1).
//
//   hypertrain-operator [--namespace=a,b] [--leader-elect=true]
//     [--leader-election-namespace=NS] [--leader-election-id=NAME]
//     [--metrics-addr=:8080] [--log-level=info] [--log-format=text|json]
//     [--kubeconfig=PATH] [--workers=2]
//     [--kube-api-qps=50 --kube-api-burst=100]   (client-side API rate limit)
//     [--lease-duration-ms=15000 --renew-deadline-ms=10000 --retry-period-ms=2000]
//     [--fault-settle-ms=5000]
//   hypertrain-operator --print-instance-types   (the instance table: name GPUs EFA RDMA, one a line)
//
// Serves /metrics (Prometheus), /healthz and /readyz on --metrics-addr. With
// leader election only the Lease holder runs the controller (informers and
// workers: controller/manager.h); SIGTERM or SIGINT stops the workers,
// releases the Lease and exits 0. Logs go to stderr through core/log.h (text
// or one JSON object per line). Exit codes: 0 clean shutdown, 2 bad
// flags/config, 1 fatal. main only parses flags and assembles the parts.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/log.h"
#include "kube/cancel.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"
#include "operator/api/instance_types.h"
#include "operator/cmd/http_server.h"
#include "operator/controller/manager.h"
#include "operator/controller/metrics.h"

namespace hypertrain::operatorcmd {
namespace {

struct Flags {
  std::vector<std::string> namespaces;  // empty: all
  bool leader_elect = true;
  std::string lease_namespace;
  std::string lease_name = "hypertrain-operator-leader";
  std::string metrics_addr = ":8080";
  std::string kubeconfig;
  std::string log_level = "info";
  std::string log_format = "text";
  int workers = 2;
  double kube_api_qps = 50;
  int kube_api_burst = 100;
  int lease_duration_ms = 15000, renew_deadline_ms = 10000, retry_period_ms = 2000;
  int fault_settle_ms = 5000;  // ManagerOptions::fault_settle_window; 0 disables it
};

bool PositiveInt(const std::string& v, int* out) {
  try {
    *out = std::stoi(v);
    return *out > 0;
  } catch (...) {
    return false;
  }
}

bool NonNegativeInt(const std::string& v, int* out) {
  try {
    size_t used = 0;
    *out = std::stoi(v, &used);
    return used == v.size() && *out >= 0;
  } catch (...) {
    return false;
  }
}

// One --name=value flag; false with `err` naming the flag when it is bad.
bool ParseFlag(const std::string& k, const std::string& v, Flags* f, std::string* err) {
  auto fail = [&](const std::string& m) { return *err = m, false; };
  if (k == "namespace") {
    std::stringstream ss(v);
    for (std::string ns; std::getline(ss, ns, ',');) {
      if (!ns.empty()) f->namespaces.push_back(ns);
    }
  } else if (k == "leader-elect") {
    if (v != "true" && v != "false") return fail("--leader-elect must be true or false");
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
    if (auto l = log::ParseLevel(v); !l.ok()) return fail("--log-level: " + l.status().message());
    f->log_level = v;
  } else if (k == "log-format") {
    if (auto l = log::ParseFormat(v); !l.ok()) return fail("--log-format: " + l.status().message());
    f->log_format = v;
  } else if (k == "kube-api-qps") {
    try {
      f->kube_api_qps = std::stod(v);
    } catch (...) {
      return fail("--kube-api-qps must be a number (<= 0 disables the limiter)");
    }
  } else if (k == "kube-api-burst") {
    if (!PositiveInt(v, &f->kube_api_burst)) return fail("--kube-api-burst must be a positive integer");
  } else if (k == "workers") {
    if (!PositiveInt(v, &f->workers)) return fail("--workers must be a positive integer");
  } else if (k == "lease-duration-ms") {
    if (!PositiveInt(v, &f->lease_duration_ms)) return fail("--lease-duration-ms must be positive");
  } else if (k == "renew-deadline-ms") {
    if (!PositiveInt(v, &f->renew_deadline_ms)) return fail("--renew-deadline-ms must be positive");
  } else if (k == "retry-period-ms") {
    if (!PositiveInt(v, &f->retry_period_ms)) return fail("--retry-period-ms must be positive");
  } else if (k == "fault-settle-ms") {
    if (!NonNegativeInt(v, &f->fault_settle_ms)) {
      return fail("--fault-settle-ms must be a non-negative integer (0 disables the settle window)");
    }
  } else {
    return fail("unknown flag --" + k);
  }
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      *err = "flags are --name=value, got '" + a + "'";
      return false;
    }
    if (!ParseFlag(a.substr(2, eq - 2), a.substr(eq + 1), f, err)) return false;
  }
  return true;
}

// POD_NAME in a pod, else host-pid.
std::string Identity() {
  if (const char* pod = std::getenv("POD_NAME")) return pod;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

void ServeProbes(HttpServer* http, const Flags& flags, const controller::Manager& manager,
                 const controller::Metrics& metrics) {
  http->Handle("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; });
  http->Handle("/readyz", [&] {
    // A standby replica is ready: it only waits for the Lease.
    const bool ready = manager.synced() || (flags.leader_elect && metrics.is_leader == 0);
    return ready ? HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}
                 : HttpResponse{503, "text/plain; charset=utf-8", "caches not synced\n"};
  });
  http->Handle("/metrics", [&] { return HttpResponse{200, "text/plain; version=0.0.4", metrics.Render()}; });
}

// Runs the manager while this replica holds the Lease. Returns the exit code:
// 0 after a requested stop, 1 when the Lease was lost, 2 when election cannot start.
int RunAsLeader(const std::shared_ptr<kube::RestClient>& client, const Flags& flags, const std::string& identity,
                controller::Manager* manager, controller::Metrics* metrics, kube::CancelToken* cancel) {
  kube::LeaderElectionConfig lc;
  lc.lease_namespace = flags.lease_namespace;
  lc.lease_name = flags.lease_name;
  lc.identity = identity;
  lc.lease_duration = std::chrono::milliseconds(flags.lease_duration_ms);
  lc.renew_deadline = std::chrono::milliseconds(flags.renew_deadline_ms);
  lc.retry_period = std::chrono::milliseconds(flags.retry_period_ms);
  kube::LeaderCallbacks cb;
  cb.on_started_leading = [&](kube::CancelToken* stop) {
    metrics->is_leader = 1;
    spdlog::info("became leader (lease {}/{})", lc.lease_namespace, lc.lease_name);
    manager->Run(stop);
  };
  cb.on_stopped_leading = [&] {
    metrics->is_leader = 0;
    spdlog::info("stopped leading");
  };
  cb.on_new_leader = [](const std::string& who) { spdlog::info("leader observed: {}", who); };
  auto elector = kube::LeaderElector::Create(client, lc, cb);
  if (!elector.ok()) {
    spdlog::error("leader election setup failed: {}", elector.status().ToString());
    return 2;
  }
  (*elector)->Run(cancel);
  // Lost the lease without being asked to stop: exit non-zero so the pod restarts clean.
  return cancel->cancelled() ? 0 : 1;
}

// The instance-type table the operator defaults pods from (tab-separated).
void PrintInstanceTypes() {
  for (const api::InstanceType& t : api::KnownInstanceTypes()) {
    std::cout << t.name << "\t" << t.gpus << "\t" << t.efa_devices << "\t" << (t.gpudirect_rdma ? 1 : 0) << "\t"
              << t.gpu_model << "\n";
  }
}

int Main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--print-instance-types") {
    PrintInstanceTypes();
    return 0;
  }
  Flags flags;
  std::string err;
  if (!ParseFlags(argc, argv, &flags, &err)) {
    std::cerr << "hypertrain-operator: " << err << "\n";
    return 2;
  }
  (void)log::Init(flags.log_format, flags.log_level);  // both were validated above
  // SIGTERM/SIGINT are handled by a thread (sigwait), so block them everywhere first.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto cfg = flags.kubeconfig.empty() ? kube::LoadDefault() : kube::LoadKubeconfig({flags.kubeconfig});
  if (!cfg.ok()) {
    spdlog::error("cannot load Kubernetes config: {}", cfg.status().ToString());
    return 2;
  }
  cfg->qps = flags.kube_api_qps;
  cfg->burst = flags.kube_api_burst;
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) {
    spdlog::error("cannot create the API client: {}", client.status().ToString());
    return 2;
  }
  const std::string identity = Identity();
  if (flags.lease_namespace.empty()) {
    const char* pns = std::getenv("POD_NAMESPACE");
    flags.lease_namespace = pns ? pns : "default";
  }

  controller::Metrics metrics;
  controller::Manager manager(controller::ManagerOptions{*client, flags.namespaces, flags.workers, identity,
                                                         std::chrono::milliseconds(flags.fault_settle_ms), &metrics});
  HttpServer http;
  ServeProbes(&http, flags, manager, metrics);
  if (!http.Start(flags.metrics_addr, &err)) {
    spdlog::error("cannot serve metrics: {}", err);
    return 2;
  }
  spdlog::info("started: identity {}, metrics port {}, namespaces {}", identity, http.port(),
               flags.namespaces.empty() ? std::string("*") : std::to_string(flags.namespaces.size()));

  kube::CancelToken cancel;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    spdlog::info("shutting down on signal {}", sig);
    cancel.Cancel();
  });
  signals.detach();

  int rc = 0;
  if (flags.leader_elect) {
    rc = RunAsLeader(*client, flags, identity, &manager, &metrics, &cancel);
  } else {
    metrics.is_leader = 1;
    manager.Run(&cancel);
  }
  http.Stop();
  spdlog::info("exited with code {}", rc);
  return rc;
}

}  // namespace
}  // namespace hypertrain::operatorcmd

int main(int argc, char** argv) { return hypertrain::operatorcmd::Main(argc, argv); }
