#include "kube/testing/kube_local.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kube/testing/fake_server.h"

namespace kube::testing {

std::string Runfile(const std::string& rel) {
  for (const char* env : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* base = std::getenv(env);
    if (!base) continue;
    std::string p = std::string(base) + "/hypertrain/" + rel;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

KubeLocal::KubeLocal(std::string binary, std::string data_dir)
    : bin_(std::move(binary)), dir_(std::move(data_dir)) {}

KubeLocal::~KubeLocal() { Stop(); }

std::string KubeLocal::log() const { return ReadFile(dir_ + "/kube-local.log"); }

Status KubeLocal::Start() {
  if (pid_ > 0) return hypertrain::InvalidArgument("kube-local already running");
  mkdir((dir_ + "/client").c_str(), 0755);
  std::remove((dir_ + "/port").c_str());
  std::remove(kubeconfig_path().c_str());
  std::vector<std::string> args = {bin_,
                                   "--listen",
                                   "127.0.0.1:" + std::to_string(port_),
                                   "--data-dir",
                                   dir_ + "/data",
                                   "--kubeconfig-out",
                                   kubeconfig_path(),
                                   "--port-file",
                                   dir_ + "/port",
                                   "--client-cert-out",
                                   dir_ + "/client",
                                   "--bookmark-interval-ms",
                                   "200"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = dir_ + "/kube-local.log";
  pid_t pid = fork();
  if (pid < 0) return hypertrain::Unknown("fork failed");
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), starts_ == 0 ? "w" : "a");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  ++starts_;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return hypertrain::Unknown("kube-local exited at start:\n" + this->log());
    }
    std::string p = ReadFile(dir_ + "/port");
    if (!p.empty() && p.back() == '\n' && access(kubeconfig_path().c_str(), R_OK) == 0) {
      port_ = std::stoi(p);
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Stop();
  return hypertrain::DeadlineExceeded("kube-local did not start in 30 s:\n" + this->log());
}

void KubeLocal::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

Status KubeLocal::Restart() {
  Stop();
  // The port may linger briefly; retry the bind a few times.
  Status r;
  for (int i = 0; i < 20; ++i) {
    r = Start();
    if (r.ok()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return r;
}

StatusOr<Config> KubeLocal::LoadConfig() const { return LoadKubeconfig({kubeconfig_path()}); }

}  // namespace kube::testing
