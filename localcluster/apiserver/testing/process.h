// Test-only helper that runs the real kube-local binary as a child process.
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/testing/https_client.h"

namespace kubelocal::testing {

class KubeLocalProcess {
 public:
  // data_dir is created if needed; extra flags are appended.
  KubeLocalProcess(std::string data_dir, std::vector<std::string> extra_flags = {});
  ~KubeLocalProcess();
  // Starts the binary (on `port`, 0 = any) and waits until /healthz answers.
  bool Start(int port = 0);
  // SIGTERM and wait; returns the exit status (or -1).
  int Stop();
  bool WaitHealthy(int seconds);
  int port() const { return port_; }
  int pid() const { return pid_; }
  ClientConfig Client() const;  // token auth, CA from the data dir
  const std::string& data_dir() const { return data_dir_; }
  std::string kubeconfig() const { return data_dir_ + "/kubeconfig"; }

  static std::string BinaryPath();

 private:
  std::string data_dir_;
  std::vector<std::string> extra_;
  int pid_ = -1;
  int port_ = 0;
  std::string ca_pem_, token_;
};

std::string TempDir(const std::string& prefix);

}  // namespace kubelocal::testing
