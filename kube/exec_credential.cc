#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/time.h"

extern char** environ;

namespace kube {

StatusOr<ExecCredential> ParseExecCredential(const std::string& text,
                                             const std::string& api_version) {
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object()) return hypertrain::Unauthenticated("exec plugin output is not a JSON object");
  if (j.value("kind", "") != "ExecCredential")
    return hypertrain::Unauthenticated("exec plugin output kind is not ExecCredential");
  if (!api_version.empty() && j.value("apiVersion", "") != api_version)
    return hypertrain::Unauthenticated("exec plugin returned apiVersion \"" +
                                       j.value("apiVersion", "") + "\", want \"" + api_version +
                                       "\"");
  auto st = j.find("status");
  if (st == j.end() || !st->is_object())
    return hypertrain::Unauthenticated("exec plugin output has no status");
  ExecCredential c;
  c.token = st->value("token", "");
  if (c.token.empty()) {
    if (st->contains("clientCertificateData"))
      return hypertrain::Unauthenticated(
          "exec plugin returned a client certificate; only tokens are supported");
    return hypertrain::Unauthenticated("exec plugin output has no status.token");
  }
  std::string exp = st->value("expirationTimestamp", "");
  if (!exp.empty()) {
    c.expiration = hypertrain::ParseRfc3339(exp);
    if (!c.expiration)
      return hypertrain::Unauthenticated("exec plugin expirationTimestamp \"" + exp +
                                         "\" is not RFC 3339");
  }
  return c;
}

StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec, const std::string& server) {
  Json info = {{"apiVersion", exec.api_version},
               {"kind", "ExecCredential"},
               {"spec", {{"interactive", false}}}};
  if (exec.provide_cluster_info && !server.empty()) info["spec"]["cluster"] = {{"server", server}};

  // Build argv/envp before fork (no allocation in the child).
  std::vector<std::string> args{exec.command};
  args.insert(args.end(), exec.args.begin(), exec.args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    bool overridden = kv.rfind("KUBERNETES_EXEC_INFO=", 0) == 0;
    for (const auto& [k, v] : exec.env) overridden |= kv.rfind(k + "=", 0) == 0;
    if (!overridden) env.push_back(kv);
  }
  for (const auto& [k, v] : exec.env) env.push_back(k + "=" + v);
  env.push_back("KUBERNETES_EXEC_INFO=" + info.dump());
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return hypertrain::Unauthenticated("pipe failed");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return hypertrain::Unauthenticated("pipe failed");
  }
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return hypertrain::Unauthenticated(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  std::string stdout_s, stderr_s;
  auto deadline = std::chrono::steady_clock::now() + exec.timeout;
  bool out_open = true, err_open = true, timed_out = false;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno == EINTR) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        std::string& dst = i == 0 ? stdout_s : stderr_s;
        if (dst.size() < (1 << 20)) dst.append(buf, r);
      }
    }
  }
  close(out[0]);
  close(err[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return hypertrain::Unauthenticated("exec plugin " + exec.command + " timed out after " +
                                       std::to_string(exec.timeout.count()) + " ms (killed)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                                        : "killed by signal " + std::to_string(WTERMSIG(status));
    if (stderr_s.size() > 300) stderr_s = stderr_s.substr(0, 300) + "...";
    return hypertrain::Unauthenticated("exec plugin " + exec.command + " " + why +
                                       (stderr_s.empty() ? "" : ": " + stderr_s));
  }
  return ParseExecCredential(stdout_s, exec.api_version);
}

}  // namespace kube
