// hypertrain-operator: reconciles TrainingJobs (hypertrain.dev/v1alpha1).
//
//   hypertrain-operator [--namespace=a,b] [--leader-elect=true]   (--flag value works too; --help, --version)
//     [--leader-election-namespace=NS] [--leader-election-id=NAME]
//     [--metrics-addr=:8080] [--log-level=info] [--log-format=text|json]
//     [--kubeconfig=PATH] [--workers=2]
//     [--kube-api-qps=100 --kube-api-burst=200]   (client-side API rate limit)
//     [--lease-duration-ms=15000 --renew-deadline-ms=10000 --retry-period-ms=2000]
//     [--fault-settle-ms=5000]
//     [--exclude-namespaces=kube-system,kube-public,kube-node-lease]  (all-namespaces mode)
//   hypertrain-operator --print-instance-types   (the instance table: name GPUs EFA RDMA, one a line)
//   hypertrain-operator --print-permissions   (group resource verb scope called|held [chart switch], one a line)
//
// Serves /metrics (Prometheus), /healthz and /readyz on --metrics-addr. With
// leader election only the Lease holder runs the controller (informers and
// workers: controller/manager.h); SIGTERM or SIGINT stops the workers,
// releases the Lease and exits 0. Logs go to stderr through core/log.h (text
// or one JSON object per line). Exit codes: 0 clean shutdown, 2 bad
// flags/config, 1 fatal. main only parses flags and assembles the parts.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/cli.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kube/cancel.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"
#include "operator/api/instance_types.h"
#include "operator/cmd/permissions.h"
#include "operator/controller/manager.h"
#include "operator/controller/metrics.h"

namespace hypertrain::operatorcmd {
namespace {

struct Flags {
  std::vector<std::string> namespaces;  // empty: all
  std::string leader_elect_text = "true";
  bool leader_elect() const { return leader_elect_text == "true"; }
  std::string lease_namespace;
  std::string lease_name = "hypertrain-operator-leader";
  std::string metrics_addr = ":8080";
  std::string kubeconfig;
  std::string log_level = "info";
  std::string log_format = "text";
  int workers = 2;
  double kube_api_qps = 100;
  int kube_api_burst = 200;
  int lease_duration_ms = 15000, renew_deadline_ms = 10000, retry_period_ms = 2000;
  int fault_settle_ms = 5000;  // ManagerOptions::fault_settle_window; 0 disables it
  // Empty unless --exclude-namespaces is given: ManagerOptions' default then.
  std::vector<std::string> excluded_namespaces;
};

// Declares every flag on `app`, bound to `f`. Names and meanings are those
// of the chart's deployment template; values are checked here, so a bad one
// exits 2 before anything starts.
void DeclareFlags(CLI::App& app, Flags* f) {
  app.description(
      "Reconciles TrainingJobs (hypertrain.dev/v1alpha1). Serves /metrics, /healthz and /readyz on --metrics-addr.\n"
      "Exit codes: 0 clean shutdown, 1 fatal (e.g. the leader Lease was lost), 2 bad flags or config.");
  app.option_defaults()->always_capture_default();
  app.add_option("--namespace", f->namespaces,
                 "Namespaces to watch, comma-separated or repeated (default: every namespace)")
      ->delimiter(',')
      ->type_name("NS[,NS...]");
  app.add_option("--leader-elect", f->leader_elect_text, "Run the controller only while holding the leader Lease")
      ->check(cli::kTrueFalse);
  app.add_option("--leader-election-namespace", f->lease_namespace,
                 "Namespace of the leader Lease (default: $POD_NAMESPACE, else default)");
  app.add_option("--leader-election-id", f->lease_name, "Name of the leader Lease");
  app.add_option("--metrics-addr", f->metrics_addr, "host:port or :port for /metrics, /healthz and /readyz");
  app.add_option("--kubeconfig", f->kubeconfig, "kubeconfig file (default: in-cluster, then $KUBECONFIG, ~/.kube/config)");
  app.add_option("--log-level", f->log_level, "trace, debug, info, warn, error, critical or off")
      ->check(cli::kLogLevel);
  app.add_option("--log-format", f->log_format, "text or json (one object per line)")->check(cli::kLogFormat);
  app.add_option("--workers", f->workers, "Concurrent reconciles")->check(cli::kPositive);
  app.add_option("--kube-api-qps", f->kube_api_qps, "Client-side API rate limit (<= 0 disables the limiter)");
  app.add_option("--kube-api-burst", f->kube_api_burst, "Client-side API burst")->check(cli::kPositive);
  app.add_option("--lease-duration-ms", f->lease_duration_ms, "Leader Lease duration")->check(cli::kPositive);
  app.add_option("--renew-deadline-ms", f->renew_deadline_ms, "Leader renew deadline")->check(cli::kPositive);
  app.add_option("--retry-period-ms", f->retry_period_ms, "Leader election retry period")->check(cli::kPositive);
  app.add_option("--fault-settle-ms", f->fault_settle_ms,
                 "How long a follow-on pod exit waits for the root cause's status (0 disables the wait)")
      ->check(cli::kNonNegative);
  app.add_option("--exclude-namespaces", f->excluded_namespaces,
                 "With every namespace watched: namespaces whose TrainingJobs are ignored "
                 "(default kube-system,kube-public,kube-node-lease)")
      ->delimiter(',')
      ->type_name("NS[,NS...]")
      ->capture_default_str();
  cli::AddVersionFlag(app);
}

// POD_NAME in a pod, else host-pid.
std::string Identity() {
  // Raw getenv: the operator pod's own identity (downward API), not trainer configuration.
  if (const char* pod = std::getenv("POD_NAME")) return pod;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

void ServeProbes(HttpServer* http, const Flags& flags, const controller::Manager& manager,
                 const controller::Metrics& metrics, const metrics::Registry& registry) {
  http->Handle("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; });
  http->Handle("/readyz", [&] {
    // A standby replica is ready: it only waits for the Lease.
    const bool ready = manager.synced() || (flags.leader_elect() && !metrics.leading());
    return ready ? HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}
                 : HttpResponse{503, "text/plain; charset=utf-8", "caches not synced\n"};
  });
  http->Handle("/metrics", [&] { return HttpResponse{200, kPrometheusText, registry.Render()}; });
}

// "https://10.0.0.1:443/" -> "10.0.0.1:443": the host label of rest_client_* series.
std::string HostOf(const std::string& server) {
  std::string h = server.substr(server.find("://") == std::string::npos ? 0 : server.find("://") + 3);
  return h.substr(0, h.find('/'));
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
    metrics->SetLeader(lc.lease_name, true);
    spdlog::info("became leader (lease {}/{})", lc.lease_namespace, lc.lease_name);
    manager->Run(stop);
  };
  cb.on_stopped_leading = [&] {
    metrics->SetLeader(lc.lease_name, false);
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

// What the operator calls on the API server (the chart grants exactly this);
// a sixth column names the chart value an entry depends on.
void PrintPermissions() {
  for (const Permission& p : OperatorPermissions()) {
    const char* scope = p.scope == PermissionScope::kCluster            ? "cluster"
                        : p.scope == PermissionScope::kReleaseNamespace ? "release-namespace"
                                                                        : "watched-namespaces";
    for (const std::string& v : p.verbs) {
      const bool held = std::find(p.held_not_called.begin(), p.held_not_called.end(), v) != p.held_not_called.end();
      std::cout << (p.group.empty() ? "core" : p.group) << " " << p.resource << " " << v << " " << scope << " "
                << (held ? "held" : "called") << (p.chart_switch.empty() ? "" : " " + p.chart_switch) << "\n";
    }
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app("hypertrain-operator", "hypertrain-operator");
  DeclareFlags(app, &flags);
  bool print_instance_types = false;
  app.add_flag("--print-instance-types", print_instance_types,
               "Print the instance table (name, GPUs, EFA devices, GPUDirect RDMA, GPU model; one a line) and exit");
  bool print_permissions = false;
  app.add_flag("--print-permissions", print_permissions,
               "Print the API permissions the operator's code uses (group resource verb scope called|held "
               "[chart value]; one a line) and exit");
  if (std::optional<int> rc = cli::Parse(app, argc, argv)) return *rc;
  if (print_instance_types) {
    PrintInstanceTypes();
    return 0;
  }
  if (print_permissions) {
    PrintPermissions();
    return 0;
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
    // Raw getenv: the operator pod's namespace (downward API).
    const char* pns = std::getenv("POD_NAMESPACE");
    flags.lease_namespace = pns ? pns : "default";
  }

  metrics::Registry registry;
  metrics::AddProcessMetrics(&registry);
  controller::Metrics metrics(&registry);
  metrics.ObserveRestClient(client->get(), HostOf(cfg->server));
  if (flags.leader_elect()) metrics.SetLeader(flags.lease_name, false);
  controller::ManagerOptions mo{*client, flags.namespaces, flags.workers, identity,
                                std::chrono::milliseconds(flags.fault_settle_ms), &metrics};
  if (!flags.excluded_namespaces.empty()) {
    mo.excluded_namespaces = {flags.excluded_namespaces.begin(), flags.excluded_namespaces.end()};
  }
  controller::Manager manager(std::move(mo));
  registry.OnScrape([&] { metrics.SetJobs(manager.JobsByNamespace()); });
  HttpServer http;
  ServeProbes(&http, flags, manager, metrics, registry);
  if (Status s = http.Start(flags.metrics_addr); !s.ok()) {
    spdlog::error("cannot serve metrics: {}", s.ToString());
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
  if (flags.leader_elect()) {
    rc = RunAsLeader(*client, flags, identity, &manager, &metrics, &cancel);
  } else {
    manager.Run(&cancel);
  }
  http.Stop();
  spdlog::info("exited with code {}", rc);
  return rc;
}

}  // namespace
}  // namespace hypertrain::operatorcmd

int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own arena (up to 8 per core);
  // the informer, worker and create threads would each keep freed pages of
  // their own. Two arenas keep the operator's RSS near what it holds.
  mallopt(M_ARENA_MAX, 2);
  return hypertrain::operatorcmd::Main(argc, argv);
}
