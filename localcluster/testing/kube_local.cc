#include "localcluster/testing/kube_local.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/atomic_file.h"
#include "kube/rest_client.h"
#include "localcluster/testing/files.h"

namespace kubelocal::testing {
namespace {

using hypertrain::Status;
using hypertrain::StatusOr;

std::string ReadOrEmpty(const std::string& path) {
  auto s = hypertrain::ReadFileToString(path);
  return s.ok() ? *s : "";
}

// Exit code of a reaped child: its status, or 128 + the signal that ended it.
int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

std::string KubeLocal::DefaultBinary() { return Runfile("localcluster/apiserver/kube-local"); }

KubeLocal::KubeLocal(std::string binary, std::string dir, std::vector<std::string> extra_flags)
    : bin_(std::move(binary)), dir_(std::move(dir)), extra_(std::move(extra_flags)) {}

KubeLocal::~KubeLocal() { Stop(); }

std::string KubeLocal::log() const { return ReadOrEmpty(dir_ + "/kube-local.log"); }

std::string KubeLocal::token() const {
  std::string t = ReadOrEmpty(data_dir() + "/token");
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string KubeLocal::ca_pem() const { return ReadOrEmpty(data_dir() + "/ca.crt"); }

Status KubeLocal::Start(int port) {
  if (pid_ > 0) return hypertrain::FailedPrecondition("kube-local already running (pid " + std::to_string(pid_) + ")");
  if (bin_.empty()) return hypertrain::NotFound("no kube-local binary (is //localcluster/apiserver:kube-local in data?)");
  if (port >= 0) port_ = port;
  HT_RETURN_IF_ERROR(hypertrain::MakeDirs(client_cert_dir()));
  std::remove((dir_ + "/port").c_str());
  std::remove(kubeconfig_path().c_str());
  std::vector<std::string> args = {bin_,
                                   "--listen=127.0.0.1:" + std::to_string(port_),
                                   "--data-dir=" + data_dir(),
                                   "--kubeconfig-out=" + kubeconfig_path(),
                                   "--port-file=" + dir_ + "/port",
                                   "--client-cert-out=" + client_cert_dir(),
                                   "--bookmark-interval-ms=200"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = dir_ + "/kube-local.log";
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (starts_ == 0 ? O_TRUNC : O_APPEND), 0644);
  const pid_t pid = ::fork();
  if (pid < 0) return hypertrain::Unknown("fork failed");
  if (pid == 0) {
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  pid_ = pid;
  ++starts_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return hypertrain::Unknown("kube-local exited at start (code " + std::to_string(ExitCode(status)) + "):\n" + log());
    }
    // The port file is written last, once the server accepts requests.
    const std::string p = ReadOrEmpty(dir_ + "/port");
    if (!p.empty() && p.back() == '\n') {
      port_ = std::stoi(p);
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Stop();
  return hypertrain::DeadlineExceeded("kube-local did not start in 30 s:\n" + log());
}

int KubeLocal::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return ExitCode(status);
}

Status KubeLocal::Restart() {
  Stop();
  Status r;
  for (int i = 0; i < 20; ++i) {  // the port may linger briefly
    r = Start();
    if (r.ok()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return r;
}

StatusOr<kube::Config> KubeLocal::LoadConfig() const { return kube::LoadKubeconfig({kubeconfig_path()}); }

Status KubeLocal::WaitHealthy(std::chrono::milliseconds timeout) {
  auto cfg = LoadConfig();
  if (!cfg.ok()) return cfg.status();
  cfg->max_retries = 0;
  cfg->request_timeout = std::chrono::seconds(1);
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) return client.status();
  kube::Request healthz;
  healthz.path = "/healthz";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = (*client)->Send(healthz);
    if (r.ok()) return Status::Ok();
    last = r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return hypertrain::DeadlineExceeded("kube-local not healthy after " + std::to_string(timeout.count()) +
                                      " ms: " + last.ToString());
}

namespace {
StatusOr<kube::Json> AdminRequest(const KubeLocal& kl, kube::Request r) {
  auto cfg = kl.LoadConfig();
  if (!cfg.ok()) return cfg.status();
  cfg->max_retries = 0;
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) return client.status();
  return (*client)->SendJson(r);
}
}  // namespace

StatusOr<kube::Json> KubeLocal::Admin(const std::string& what,
                                      std::vector<std::pair<std::string, std::string>> query) const {
  kube::Request r;
  r.method = "POST";
  r.path = "/_local/" + what;
  r.query = std::move(query);
  return AdminRequest(*this, std::move(r));
}

StatusOr<kube::Json> KubeLocal::State() const {
  kube::Request r;
  r.path = "/_local/state";
  return AdminRequest(*this, std::move(r));
}

}  // namespace kubelocal::testing
