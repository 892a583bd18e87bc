#pragma once
// A real Kubernetes control plane for tests, in the style of controller-runtime's
// envtest: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// (upstream binaries, ../shared/kube) as child processes on 127.0.0.1.
//
// Contract:
//  - Everything lives under Options::work_dir: generated certificates (a CA, the
//    API server's serving certificate, the service-account signing key), the
//    static token file (one admin token in group system:masters), etcd's data,
//    one log per component and `kubeconfig` (admin; CA verified, no insecure TLS).
//  - Ports are picked free on 127.0.0.1; a bind race is retried with new ports.
//  - Start() returns once /readyz answers 200 and, with the controller manager,
//    the `default` ServiceAccount and the kube-root-ca.crt ConfigMap exist in
//    namespace default; on a deadline it fails with a message naming what it
//    waited for and the tail of that component's log.
//  - Children are ended by PID (SIGTERM, SIGKILL after a grace) in reverse start
//    order; each also gets PR_SET_PDEATHSIG(SIGKILL), so a test killed by its
//    runner leaves nothing behind.
//  - The binaries come from $HYPERTRAIN_KUBE_BINARIES, else from the cache
//    tools/setup.sh unpacks ../shared/kube into; etcd from $HYPERTRAIN_ETCD or PATH.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/rest_client.h"

namespace hypertrain::envtest {

inline constexpr char kBinariesEnv[] = "HYPERTRAIN_KUBE_BINARIES";
inline constexpr char kEtcdEnv[] = "HYPERTRAIN_ETCD";
inline constexpr char kKubeVersion[] = "v1.26.5";

struct Binaries {
  std::string apiserver, controller_manager, scheduler, etcd;
};

// The default cache directory: $HOME/.cache/hypertrain/kube-v1.26.5.
std::string DefaultBinariesDir();

// Finds the four binaries. NotFound with a message that names
// HYPERTRAIN_KUBE_BINARIES (and what is missing) when they are not there: tests
// print it when they skip.
StatusOr<Binaries> FindBinaries();

// Whether a test may skip when FindBinaries fails: not under CI ($CI set),
// where tools/setup.sh must have unpacked them (../shared/kube is there).
bool MaySkipWithoutBinaries();

// Controllers of kube-controller-manager: garbage collection, service accounts
// and their tokens, namespace deletion, resource quota, the root CA ConfigMap,
// node lifecycle (removes the not-ready taint of a Ready node) and Deployments
// (the operator's chart runs as a Deployment).
std::vector<std::string> DefaultControllers();

struct Options {
  std::string work_dir;  // created if missing
  Binaries binaries;
  bool controller_manager = true;
  bool scheduler = true;
  std::vector<std::string> controllers = DefaultControllers();
  std::chrono::seconds ready_timeout{90};
  std::vector<std::string> extra_apiserver_flags;
  // The node lifecycle controller's --node-monitor-grace-period and
  // --node-monitor-period (defaults 40 s and 5 s): tests that stop a kubelet
  // see its Node turn NotReady (Unknown) sooner.
  std::optional<std::chrono::seconds> node_monitor_grace_period;
  std::optional<std::chrono::seconds> node_monitor_period;
  // Audit log (work_dir/audit.log, JSON lines, level Metadata) of every request
  // but the admin's: what ServiceAccounts (an operator, a trainer) really call.
  bool audit_log = false;
  // CustomResourceDefinitions (YAML or JSON files) created, and Established,
  // before the controller manager starts: its garbage collector then watches
  // their kinds from the start. Created later, a kind's dependents wait up to
  // 30 s for the collector's next resource discovery.
  std::vector<std::string> crd_files;
};

class ControlPlane {
 public:
  static StatusOr<std::unique_ptr<ControlPlane>> Start(Options options);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Ends every component by PID, newest first. Idempotent.
  void Stop();
  // Stops kube-apiserver and starts it again on the same port (etcd keeps the
  // data); returns once /readyz answers 200.
  Status RestartApiServer();

  // "" while every component runs, else which one exited and its log's tail.
  std::string Exited();

  // Admin kubeconfig (work_dir/kubeconfig).
  const std::string& kubeconfig() const { return kubeconfig_; }
  // "https://127.0.0.1:<port>".
  const std::string& server() const { return server_; }
  const std::string& ca_file() const { return ca_file_; }
  const std::string& admin_token() const { return admin_token_; }
  // Writes a kubeconfig for this server that authenticates with `token`.
  Status WriteKubeconfig(const std::string& path, const std::string& token) const;
  // The last `lines` lines of every component's log, for failure messages.
  std::string LogTails(int lines = 20) const;

 private:
  struct Child {
    std::string name;
    std::string log;
    std::vector<std::string> argv;
    pid_t pid = -1;
  };
  explicit ControlPlane(Options options);
  Status Init();
  Status InstallCrds();
  Status StartEtcd();
  Status StartApiServer();
  Status StartChild(Child* c);
  void StopChild(Child* c);
  Status WaitReady(const std::string& what, Child* c, const std::function<bool()>& ready);
  // A client of `server` (no client-side rate limit; an https server verified
  // against this control plane's CA).
  StatusOr<std::shared_ptr<kube::RestClient>> Client(const std::string& server, const std::string& token,
                                                     std::chrono::milliseconds timeout, int max_retries) const;
  bool Get(const std::string& server, const std::string& path, const std::string& token) const;

  Options o_;
  std::string dir_, kubeconfig_, server_, ca_file_, admin_token_;
  int etcd_port_ = 0, etcd_peer_port_ = 0, apiserver_port_ = 0;
  std::vector<std::unique_ptr<Child>> children_;  // in start order
};

// A free TCP port on 127.0.0.1 (bound and released; callers retry on a race).
int FreeLoopbackPort();

}  // namespace hypertrain::envtest
