#include "localcluster/apiserver/testing/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace kubelocal::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string TempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string d = std::string(base ? base : "/tmp") + "/" + prefix + "_XXXXXX";
  return mkdtemp(d.data());
}

std::string KubeLocalProcess::BinaryPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir && ws) return std::string(srcdir) + "/" + ws + "/localcluster/apiserver/kube-local";
  return "localcluster/apiserver/kube-local";
}

KubeLocalProcess::KubeLocalProcess(std::string data_dir, std::vector<std::string> extra_flags)
    : data_dir_(std::move(data_dir)), extra_(std::move(extra_flags)) {}

KubeLocalProcess::~KubeLocalProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool KubeLocalProcess::Start(int port) {
  const std::string port_file = data_dir_ + "/port";
  ::unlink(port_file.c_str());
  std::vector<std::string> args = {BinaryPath(),
                                   "--listen=127.0.0.1:" + std::to_string(port),
                                   "--data-dir=" + data_dir_,
                                   "--kubeconfig-out=" + data_dir_ + "/kubeconfig",
                                   "--port-file=" + port_file};
  args.insert(args.end(), extra_.begin(), extra_.end());
  std::string log = data_dir_ + "/server.log";
  pid_ = ::fork();
  if (pid_ == 0) {
    FILE* f = std::freopen(log.c_str(), "a", stdout);
    (void)f;
    ::dup2(::fileno(stdout), 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  if (pid_ < 0) return false;
  for (int i = 0; i < 200; ++i) {
    std::string p = Slurp(port_file);
    if (!p.empty()) {
      port_ = std::atoi(p.c_str());
      ca_pem_ = Slurp(data_dir_ + "/ca.crt");
      token_ = Slurp(data_dir_ + "/token");
      while (!token_.empty() && token_.back() == '\n') token_.pop_back();
      return WaitHealthy(10);
    }
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool KubeLocalProcess::WaitHealthy(int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  ClientConfig c = Client();
  c.timeout_seconds = 2;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Request(c, "GET", "/healthz").code == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int KubeLocalProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

ClientConfig KubeLocalProcess::Client() const {
  ClientConfig c;
  c.port = port_;
  c.ca_pem = ca_pem_;
  c.token = token_;
  return c;
}

}  // namespace kubelocal::testing
