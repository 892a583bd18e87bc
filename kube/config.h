#pragma once
// Connection configuration: in-cluster service account or kubeconfig files.
//
// Contract:
//  - TLS verification is ON unless the kubeconfig says insecure-skip-tls-verify.
//  - When a CA is configured only that CA is trusted (system roots are not).
//  - Relative file paths in a kubeconfig resolve against that file's directory.
//  - KUBECONFIG is a ':'-separated list merged in order: for clusters, users and
//    contexts the first file that defines a name wins; the first current-context wins.
//  - Credentials are never printed: DebugString() redacts tokens and keys.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kube/status.h"

namespace kube {

// users[].user.exec (client.authentication.k8s.io/v1beta1 or v1).
struct ExecConfig {
  std::string api_version;
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  bool provide_cluster_info = false;
  std::chrono::milliseconds timeout{30000};  // a plugin taking longer is killed (by PID)
};

struct Config {
  std::string server;  // "https://host:port" (http:// allowed for tests)
  std::string ca_pem;  // PEM bundle; empty → system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // overrides the host name checked in the certificate
  std::string client_cert_pem;
  std::string client_key_pem;

  // Bearer token sources, in priority order: exec > token_file > token.
  std::string token;
  std::string token_file;  // re-read when it changes (service-account token rotation)
  std::optional<ExecConfig> exec;

  std::string namespace_name = "default";
  std::string user_agent = "hypertrain-kube/1.0";

  // Client behaviour.
  double qps = 50;  // <= 0 disables the client-side limiter
  int burst = 100;
  std::chrono::milliseconds request_timeout{30000};
  int max_retries = 5;  // retries after the first attempt for retryable failures
  std::chrono::milliseconds retry_base{100};
  std::chrono::milliseconds retry_max{5000};

  // Multi-line description with every secret replaced by "<redacted>".
  std::string DebugString() const;
};

// Parses one or more kubeconfig files (merged as described above).
// `context` empty → current-context.
StatusOr<Config> LoadKubeconfig(const std::vector<std::string>& paths,
                                const std::string& context = "");
// Parses kubeconfig YAML text (relative paths resolve against `base_dir`).
StatusOr<Config> LoadKubeconfigText(const std::string& yaml, const std::string& base_dir,
                                    const std::string& context = "");
// $KUBECONFIG (':'-separated) or ~/.kube/config.
StatusOr<Config> LoadKubeconfigFromEnv(const std::string& context = "");

// In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service-account directory
// (token, ca.crt, namespace).
StatusOr<Config> LoadInCluster(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// In-cluster when KUBERNETES_SERVICE_HOST is set, else kubeconfig from the environment.
StatusOr<Config> LoadDefault();

}  // namespace kube
