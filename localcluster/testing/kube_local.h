// Test helper: runs kube-local (//localcluster/apiserver:kube-local, a real
// process serving HTTPS on 127.0.0.1) and restarts it on the same port. The
// one fixture for every test that needs a Kubernetes API server.
//
// Files under `dir`: data/ (--data-dir: CA, token, durable state), kubeconfig,
// port, client/ (a client certificate) and kube-local.log (its stdout and
// stderr, appended across restarts).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "kube/config.h"
#include "kube/status.h"

namespace kubelocal::testing {

class KubeLocal {
 public:
  // kube-local in this test's runfiles ("" if it is not a data dependency).
  static std::string DefaultBinary();

  // Does not start it. `extra_flags` follow the fixture's own
  // (--bookmark-interval-ms=200), so they win.
  KubeLocal(std::string binary, std::string dir, std::vector<std::string> extra_flags = {});
  ~KubeLocal();  // Stop()
  KubeLocal(const KubeLocal&) = delete;
  KubeLocal& operator=(const KubeLocal&) = delete;

  // Starts the process on `port` (-1: the port of the previous start, a free
  // one the first time) and waits (30 s) until it serves. Errors carry its log.
  hypertrain::Status Start(int port = -1);
  // SIGTERM by PID, SIGKILL after 10 s. The exit code (128 + signal when a
  // signal ended it), -1 when it was not running.
  int Stop();
  // Stop, then Start on the same port (retried while the port is still held).
  hypertrain::Status Restart();
  // Until /healthz answers (after POST /_local/restart re-execs it in place).
  hypertrain::Status WaitHealthy(std::chrono::milliseconds timeout);

  // POST /_local/<what> with `query` (fault injection, compaction ...).
  hypertrain::StatusOr<kube::Json> Admin(const std::string& what,
                                         std::vector<std::pair<std::string, std::string>> query = {}) const;
  // GET /_local/state: resourceVersion, compactedResourceVersion, watchers, faults.
  hypertrain::StatusOr<kube::Json> State() const;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  std::string data_dir() const { return dir_ + "/data"; }
  std::string kubeconfig_path() const { return dir_ + "/kubeconfig"; }
  std::string client_cert_dir() const { return dir_ + "/client"; }
  std::string log() const;
  // The bearer token and the CA certificate the server uses.
  std::string token() const;
  std::string ca_pem() const;
  hypertrain::StatusOr<kube::Config> LoadConfig() const;

 private:
  std::string bin_, dir_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
  int port_ = 0;
  int starts_ = 0;
};

}  // namespace kubelocal::testing
