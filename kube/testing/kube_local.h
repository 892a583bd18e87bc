#pragma once
// Test helper: runs the //localcluster/apiserver:kube-local binary (a real process on
// 127.0.0.1) with a data directory, and restarts it on the same port.
#include <sys/types.h>

#include <string>

#include "kube/config.h"
#include "kube/status.h"

namespace kube::testing {

class KubeLocal {
 public:
  // `binary`: path of kube-local (from runfiles). Does not start it.
  KubeLocal(std::string binary, std::string data_dir);
  ~KubeLocal();
  // Starts the process (port 0 the first time, the same port afterwards) and
  // waits (bounded) for its kubeconfig. Returns an error with its log on failure.
  Status Start();
  // SIGTERM by PID, then SIGKILL after 10 s; waits for exit.
  void Stop();
  Status Restart();

  int port() const { return port_; }
  std::string kubeconfig_path() const { return dir_ + "/kubeconfig"; }
  std::string client_cert_dir() const { return dir_ + "/client"; }
  StatusOr<Config> LoadConfig() const;
  std::string log() const;

 private:
  std::string bin_, dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int starts_ = 0;
};

// Path of a runfile of the hypertrain workspace ("" if not found).
std::string Runfile(const std::string& workspace_relative);

}  // namespace kube::testing
