#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/fd.h"
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

namespace {

using hypertrain::Fd;

// The plugin's environment: ours, with exec.env and KUBERNETES_EXEC_INFO
// (what it is asked for) set over it.
std::vector<std::string> PluginEnv(const ExecConfig& exec, const std::string& server) {
  Json info = {{"apiVersion", exec.api_version}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}};
  if (exec.provide_cluster_info && !server.empty()) info["spec"]["cluster"] = {{"server", server}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    bool overridden = kv.rfind("KUBERNETES_EXEC_INFO=", 0) == 0;
    for (const auto& [k, v] : exec.env) overridden |= kv.rfind(k + "=", 0) == 0;
    if (!overridden) env.push_back(kv);
  }
  for (const auto& [k, v] : exec.env) env.push_back(k + "=" + v);
  env.push_back("KUBERNETES_EXEC_INFO=" + info.dump());
  return env;
}

// Reads both pipes until they close or the deadline passes (each kept up to
// 1 MiB); false on timeout.
bool ReadOutputs(const Fd& out, const Fd& err, std::chrono::steady_clock::time_point deadline,
                 std::string* stdout_s, std::string* stderr_s) {
  bool open[2] = {true, true};
  std::string* dst[2] = {stdout_s, stderr_s};
  while (open[0] || open[1]) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{open[0] ? out.get() : -1, POLLIN, 0}, {open[1] ? err.get() : -1, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno == EINTR) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r <= 0) {
        open[i] = false;
      } else if (dst[i]->size() < (1 << 20)) {
        dst[i]->append(buf, r);
      }
    }
  }
  return true;
}

// A pipe whose ends close with their owners.
hypertrain::Status MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return hypertrain::Unauthenticated("pipe failed");
  *read_end = Fd(fds[0]);
  *write_end = Fd(fds[1]);
  return hypertrain::Status::Ok();
}

}  // namespace

StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec, const std::string& server) {
  // Build argv/envp before fork (no allocation in the child).
  std::vector<std::string> args{exec.command};
  args.insert(args.end(), exec.args.begin(), exec.args.end());
  std::vector<std::string> env = PluginEnv(exec, server);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  Fd out_r, out_w, err_r, err_w;
  if (auto s = MakePipe(&out_r, &out_w); !s.ok()) return s;
  if (auto s = MakePipe(&err_r, &err_w); !s.ok()) return s;
  pid_t pid = fork();
  if (pid < 0) return hypertrain::Unauthenticated(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out_w.get(), 1);
    dup2(err_w.get(), 2);
    execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  out_w.reset();
  err_w.reset();
  std::string stdout_s, stderr_s;
  const bool timed_out =
      !ReadOutputs(out_r, err_r, std::chrono::steady_clock::now() + exec.timeout, &stdout_s, &stderr_s);
  out_r.reset();
  err_r.reset();
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
