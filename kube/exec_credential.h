#pragma once
// Runs a client.authentication.k8s.io exec credential plugin (the mechanism
// behind `aws eks get-token`) and parses its ExecCredential output.
#include <chrono>
#include <optional>
#include <string>

#include "kube/config.h"
#include "kube/status.h"

namespace kube {

struct ExecCredential {
  std::string token;
  // Absent → the token is cached until a 401 invalidates it.
  std::optional<std::chrono::system_clock::time_point> expiration;
};

// Spawns exec.command (PATH lookup) with exec.args; environment = this
// process's plus exec.env plus KUBERNETES_EXEC_INFO. stdin is /dev/null.
// A plugin exceeding exec.timeout is killed by PID. The plugin's stderr is
// passed through truncated in error messages; its stdout (the token) never is.
StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec, const std::string& server = "");

// Parses an ExecCredential JSON document (checks kind/apiVersion).
StatusOr<ExecCredential> ParseExecCredential(const std::string& json,
                                             const std::string& api_version);

}  // namespace kube
