#pragma once
// What the operator binary's tests share: the operator as a child process
// (ended by PID), its HTTP endpoints and metrics, and the API server under
// test (kube-local, or the real kube-apiserver through envtest).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/envtest/control_plane.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"
#include "operator/api/yaml_json.h"

namespace hypertrain::operatorcmd {

inline constexpr char kNs[] = "op";

inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  int port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

// GET http://127.0.0.1:port/path → (status, body); status 0 when unreachable.
inline std::pair<int, std::string> HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return {0, ""};
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) resp.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (resp.size() < 12) return {0, ""};
  auto body = resp.find("\r\n\r\n");
  return {std::atoi(resp.c_str() + 9), body == std::string::npos ? "" : resp.substr(body + 4)};
}

// A client of the cluster behind `kubeconfig` (no client-side rate limit)
// after it created namespace kNs and the TrainingJob CRD from crds/ (unless
// already there); null
// (with the failure reported) when any of that failed.
inline std::shared_ptr<kube::RestClient> ClientWithJobCrd(const std::string& kubeconfig) {
  auto cfg = kube::LoadKubeconfig({kubeconfig});
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!cfg.ok()) return nullptr;
  cfg->qps = 0;
  auto client = kube::RestClient::Create(*cfg);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) return nullptr;
  const Status ns = kube::ResourceClient(*client, kube::resources::kNamespaces).Create({{"metadata", {{"name", kNs}}}}).status();
  EXPECT_TRUE(ns.ok()) << ns.ToString();
  auto crd = api::YamlFileToJson("crds/trainingjobs.hypertrain.dev.yaml");
  EXPECT_TRUE(crd.ok()) << crd.status().ToString();
  if (!ns.ok() || !crd.ok()) return nullptr;
  const kube::ResourceType crd_type{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                    "CustomResourceDefinition", false};
  Status installed = kube::ResourceClient(*client, crd_type).Create(*crd).status();
  if (kube::IsAlreadyExists(installed)) installed = Status::Ok();  // RealCluster installs it at start-up
  EXPECT_TRUE(installed.ok()) << installed.ToString();
  return installed.ok() ? *client : nullptr;
}

inline bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return cond();
}

// One scrape parsed: "name{a=\"x\",b=\"y\"}" (labels as exposed) -> value;
// every sample line must be well-formed and follow its family's # TYPE.
inline std::map<std::string, double> ParseExposition(const std::string& text) {
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  std::map<std::string, double> out;
  std::string family;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, kType)) {
      family = m[1];
    } else if (line.rfind("# HELP ", 0) == 0) {
      continue;
    } else if (std::regex_match(line, m, kSample)) {
      const std::string name = m[1];
      EXPECT_EQ(name.rfind(family, 0), 0u) << "sample without its # TYPE: " << line;
      out[name + std::string(m[2])] = std::stod(m[3]);
    } else {
      ADD_FAILURE() << "not exposition format: '" << line << "'";
    }
  }
  return out;
}

// The first sample of `name` whose labels contain every `labels` pair; NaN if none.
inline double Sample(const std::map<std::string, double>& samples, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  for (const auto& [key, v] : samples) {
    if (key != name && key.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const std::string& l : labels) all &= key.find(l) != std::string::npos;
    if (all) return v;
  }
  return std::nan("");
}

// One operator process, ended by PID.
class OperatorProcess {
 public:
  // `all_namespaces`: no --namespace flag (every namespace, less the excluded ones).
  OperatorProcess(const std::string& bin, const std::string& kubeconfig, const std::string& identity,
                  const std::string& log, std::vector<std::string> extra = {}, bool all_namespaces = false)
      : port_(FreePort()), log_(log) {
    std::vector<std::string> args = {bin,
                                     "--kubeconfig=" + kubeconfig,
                                     all_namespaces ? "" : std::string("--namespace=") + kNs,
                                     "--leader-elect=true",
                                     std::string("--leader-election-namespace=") + kNs,
                                     "--leader-election-id=e2e-leader",
                                     "--metrics-addr=127.0.0.1:" + std::to_string(port_),
                                     // both flag forms: --name=value above, --name value here
                                     "--lease-duration-ms", "2000",
                                     "--renew-deadline-ms", "1500",
                                     "--retry-period-ms", "200"};
    // debug unless `extra` sets a level (the operator takes each flag once).
    const bool level = std::any_of(extra.begin(), extra.end(),
                                   [](const std::string& a) { return a.rfind("--log-level", 0) == 0; });
    if (!level) args.push_back("--log-level=debug");
    args.insert(args.end(), extra.begin(), extra.end());
    args.erase(std::remove(args.begin(), args.end(), std::string()), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log.c_str(), "w");
      if (f) dup2(fileno(f), 2);
      setenv("POD_NAME", identity.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~OperatorProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and waits (bounded) for the exit status; -1 on timeout.
  int Signal(int sig, std::chrono::milliseconds wait) {
    kill(pid_, sig);
    auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  int port_;
  std::string log_;
  pid_t pid_ = -1;
};

// The API server under test: the project's kube-local, or the real
// kube-apiserver 1.26 (envtest; skipped where its binaries are missing).
class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual std::string kubeconfig() const = 0;
};

class LocalCluster : public Cluster {
 public:
  explicit LocalCluster(const std::string& dir)
      : kl_(kubelocal::testing::Runfile("localcluster/apiserver/kube-local"), dir) {}
  std::string Start() {
    auto r = kl_.Start();
    return r.ok() ? "" : r.ToString();
  }
  std::string kubeconfig() const override { return kl_.kubeconfig_path(); }

 private:
  kubelocal::testing::KubeLocal kl_;
};

class RealCluster : public Cluster {
 public:
  // "" when started; otherwise why not. `*skip` is set when the binaries are missing.
  std::string Start(const std::string& dir, bool* skip) {
    auto bins = envtest::FindBinaries();
    if (!bins.ok()) {
      *skip = true;
      return bins.status().message();
    }
    envtest::Options o;
    o.work_dir = dir + "/envtest";
    o.binaries = *bins;
    o.scheduler = false;  // pods stay unbound: nothing here runs them
    // Before the controller manager: its garbage collector handles TrainingJob
    // dependents at once instead of after its next 30 s discovery.
    o.crd_files = {"crds/trainingjobs.hypertrain.dev.yaml"};
    auto cp = envtest::ControlPlane::Start(o);
    if (!cp.ok()) return cp.status().ToString();
    cp_ = std::move(*cp);
    return "";
  }
  std::string kubeconfig() const override { return cp_->kubeconfig(); }

 private:
  std::unique_ptr<envtest::ControlPlane> cp_;
};

}  // namespace hypertrain::operatorcmd
