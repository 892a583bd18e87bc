#include "localcluster/envtest/control_plane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube/config.h"
#include "kube/rest_client.h"
#include "kube/status.h"
#include "localcluster/apiserver/certs.h"
#include "localcluster/apiserver/patch.h"

namespace hypertrain::envtest {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool Executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (!dir.empty() && Executable(dir + "/" + name)) return dir + "/" + name;
  }
  return "";
}

Status WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return IoError("create " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) return IoError("write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Tail(const std::string& path, int lines) {
  std::deque<std::string> keep;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    keep.push_back(l);
    if (static_cast<int>(keep.size()) > lines) keep.pop_front();
  }
  std::string out;
  for (const auto& l : keep) out += "    " + l + "\n";
  return out;
}

StatusOr<std::string> RandomHex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!in.read(raw.data(), static_cast<std::streamsize>(bytes))) return IoError("read /dev/urandom");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

// The PEM public key of a PEM private key (kube-apiserver verifies service
// account tokens with it).
StatusOr<std::string> PublicKeyPem(const std::string& private_pem) {
  BIO* in = BIO_new_mem_buf(private_pem.data(), static_cast<int>(private_pem.size()));
  EVP_PKEY* key = in ? PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr) : nullptr;
  BIO* out = BIO_new(BIO_s_mem());
  std::string pem;
  if (key && out && PEM_write_bio_PUBKEY(out, key) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(out, &data);
    pem.assign(data, static_cast<size_t>(n));
  }
  BIO_free(out);
  EVP_PKEY_free(key);
  BIO_free(in);
  if (pem.empty()) return Internal("cannot derive the service-account public key");
  return pem;
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  ::close(fd);
  return port;
}

std::string DefaultBinariesDir() {
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.cache/hypertrain/kube-" + kKubeVersion;
}

StatusOr<Binaries> FindBinaries() {
  const char* env = std::getenv(kBinariesEnv);
  const std::string dir = env && *env ? env : DefaultBinariesDir();
  Binaries b{dir + "/kube-apiserver", dir + "/kube-controller-manager", dir + "/kube-scheduler", ""};
  std::string missing;
  for (const std::string* p : {&b.apiserver, &b.controller_manager, &b.scheduler}) {
    if (!Executable(*p)) missing += (missing.empty() ? "" : ", ") + fs::path(*p).filename().string();
  }
  const char* etcd = std::getenv(kEtcdEnv);
  b.etcd = etcd && *etcd ? etcd : OnPath("etcd");
  if (!missing.empty()) {
    return NotFound(std::string("no Kubernetes control plane binaries (") + missing + ") in " + dir + ": set " +
                    kBinariesEnv + " to a directory with kube-apiserver, kube-controller-manager and kube-scheduler " +
                    kKubeVersion + " (tools/setup.sh unpacks ../shared/kube into " + DefaultBinariesDir() + ")");
  }
  if (!Executable(b.etcd)) {
    return NotFound(std::string("no etcd binary: install Debian's etcd-server (tools/setup.sh) or set ") + kEtcdEnv +
                    " (the control plane binaries are in " + dir + ", " + kBinariesEnv + ")");
  }
  return b;
}

bool MaySkipWithoutBinaries() {
  const char* ci = std::getenv("CI");
  return ci == nullptr || *ci == '\0';
}

std::vector<std::string> DefaultControllers() {
  return {"garbagecollector", "serviceaccount", "serviceaccount-token", "namespace",  "resourcequota",
          "root-ca-cert-publisher", "nodelifecycle", "deployment", "replicaset"};
}

ControlPlane::ControlPlane(Options options) : o_(std::move(options)) {}

ControlPlane::~ControlPlane() { Stop(); }

StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Start(Options options) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(std::move(options)));
  if (Status s = cp->Init(); !s.ok()) {
    cp->Stop();
    return s;
  }
  return cp;
}

StatusOr<std::shared_ptr<kube::RestClient>> ControlPlane::Client(const std::string& server, const std::string& token,
                                                                  std::chrono::milliseconds timeout,
                                                                  int max_retries) const {
  kube::Config c;
  c.server = server;
  if (server.rfind("https://", 0) == 0) c.ca_pem = ReadAll(ca_file_);
  c.token = token;
  c.qps = 0;
  c.max_retries = max_retries;
  c.request_timeout = timeout;
  return kube::RestClient::Create(c);
}

bool ControlPlane::Get(const std::string& server, const std::string& path, const std::string& token) const {
  auto client = Client(server, token, std::chrono::milliseconds(2000), /*max_retries=*/0);
  if (!client.ok()) return false;
  kube::Request r;
  r.path = path;
  return (*client)->Send(r).ok();
}

Status ControlPlane::StartChild(Child* c) {
  std::vector<char*> argv;
  for (auto& a : c->argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(c->log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return IoError("open " + c->log + ": " + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // the parent died before prctl
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    if (::chdir(dir_.c_str()) != 0) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    dprintf(2, "envtest: exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  ::close(log_fd);
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  c->pid = pid;
  return Status::Ok();
}

void ControlPlane::StopChild(Child* c) {
  if (c->pid <= 0) return;
  ::kill(c->pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int st = 0;
  while (::waitpid(c->pid, &st, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(c->pid, SIGKILL);
      ::waitpid(c->pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c->pid = -1;
}

Status ControlPlane::WaitReady(const std::string& what, Child* c, const std::function<bool()>& ready) {
  const auto deadline = Clock::now() + o_.ready_timeout;
  while (Clock::now() < deadline) {
    int st = 0;
    if (c && c->pid > 0 && ::waitpid(c->pid, &st, WNOHANG) == c->pid) {
      c->pid = -1;
      return Unavailable(c->name + " exited (" +
                         (WIFEXITED(st) ? "code " + std::to_string(WEXITSTATUS(st))
                                        : "signal " + std::to_string(WTERMSIG(st))) +
                         ") while waiting for " + what + "; last lines of " + c->log + ":\n" + Tail(c->log, 25));
    }
    if (ready()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return DeadlineExceeded("timed out after " + std::to_string(o_.ready_timeout.count()) + " s waiting for " + what +
                          (c ? "; last lines of " + c->log + ":\n" + Tail(c->log, 25) : ""));
}

Status ControlPlane::StartEtcd() {
  for (int attempt = 0;; ++attempt) {
    etcd_port_ = FreeLoopbackPort();
    etcd_peer_port_ = FreeLoopbackPort();
    const std::string client = "http://127.0.0.1:" + std::to_string(etcd_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(etcd_peer_port_);
    auto c = std::make_unique<Child>();
    c->name = "etcd";
    c->log = dir_ + "/etcd.log";
    c->argv = {o_.binaries.etcd,
               "--name=default",
               "--data-dir=" + dir_ + "/etcd",
               "--listen-client-urls=" + client,
               "--advertise-client-urls=" + client,
               "--listen-peer-urls=" + peer,
               "--initial-advertise-peer-urls=" + peer,
               "--initial-cluster=default=" + peer,
               "--listen-metrics-urls=",
               "--quota-backend-bytes=1073741824"};
    HT_RETURN_IF_ERROR(StartChild(c.get()));
    Child* raw = c.get();
    children_.push_back(std::move(c));
    Status s = WaitReady("etcd /health on " + client, raw, [&] { return Get(client, "/health", ""); });
    if (s.ok() || attempt >= 2 || raw->pid > 0) return s;  // retry only when it exited (a port taken)
    children_.pop_back();
  }
}

Status ControlPlane::StartApiServer() {
  const bool same_port = apiserver_port_ != 0;
  for (int attempt = 0;; ++attempt) {
    if (!same_port) apiserver_port_ = FreeLoopbackPort();
    server_ = "https://127.0.0.1:" + std::to_string(apiserver_port_);
    auto c = std::make_unique<Child>();
    c->name = "kube-apiserver";
    c->log = dir_ + "/kube-apiserver.log";
    c->argv = {o_.binaries.apiserver,
               "--etcd-servers=http://127.0.0.1:" + std::to_string(etcd_port_),
               "--bind-address=127.0.0.1",
               "--advertise-address=127.0.0.1",
               "--secure-port=" + std::to_string(apiserver_port_),
               "--tls-cert-file=" + dir_ + "/pki/apiserver.crt",
               "--tls-private-key-file=" + dir_ + "/pki/apiserver.key",
               "--client-ca-file=" + ca_file_,
               "--token-auth-file=" + dir_ + "/pki/tokens.csv",
               "--authorization-mode=RBAC",
               "--service-account-key-file=" + dir_ + "/pki/sa.pub",
               "--service-account-signing-key-file=" + dir_ + "/pki/sa.key",
               "--service-account-issuer=https://kubernetes.default.svc",
               "--api-audiences=https://kubernetes.default.svc",
               "--service-cluster-ip-range=10.96.0.0/16",
               "--allow-privileged=true",
               "--endpoint-reconciler-type=none",
               "--profiling=false"};
    if (o_.audit_log) {
      c->argv.push_back("--audit-policy-file=" + dir_ + "/audit-policy.yaml");
      c->argv.push_back("--audit-log-path=" + dir_ + "/audit.log");
      c->argv.push_back("--audit-log-format=json");
    }
    for (const auto& f : o_.extra_apiserver_flags) c->argv.push_back(f);
    HT_RETURN_IF_ERROR(StartChild(c.get()));
    Child* raw = c.get();
    children_.push_back(std::move(c));
    Status s = WaitReady("kube-apiserver /readyz on " + server_, raw,
                         [&] { return Get(server_, "/readyz", admin_token_); });
    if (s.ok() || attempt >= 2 || raw->pid > 0) return s;
    children_.pop_back();
    if (same_port) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the old socket lingers
  }
}

Status ControlPlane::Init() {
  if (o_.work_dir.empty()) return InvalidArgument("envtest: Options::work_dir is empty");
  std::error_code ec;
  fs::create_directories(o_.work_dir + "/pki", ec);
  if (ec) return IoError("create " + o_.work_dir + "/pki: " + ec.message());
  dir_ = fs::absolute(o_.work_dir).string();
  ca_file_ = dir_ + "/pki/ca.crt";
  kubeconfig_ = dir_ + "/kubeconfig";

  auto err = [](const std::string& what, const auto& r) { return Internal(what + ": " + r.status().message()); };
  auto ca = kubelocal::MakeCA("hypertrain-envtest-ca");
  if (!ca.ok()) return err("CA", ca);
  auto serving = kubelocal::IssueServerCert(*ca, {"localhost", "kubernetes", "kubernetes.default.svc"}, {"127.0.0.1"});
  if (!serving.ok()) return err("serving certificate", serving);
  auto sa = kubelocal::MakeCA("service-account-signer");
  if (!sa.ok()) return err("service-account key", sa);
  HT_ASSIGN_OR_RETURN(admin_token_, RandomHex(24));
  HT_RETURN_IF_ERROR(WriteFile(ca_file_, ca->cert_pem, 0644));
  HT_RETURN_IF_ERROR(WriteFile(dir_ + "/pki/apiserver.crt", serving->cert_pem, 0644));
  HT_RETURN_IF_ERROR(WriteFile(dir_ + "/pki/apiserver.key", serving->key_pem, 0600));
  HT_RETURN_IF_ERROR(WriteFile(dir_ + "/pki/sa.key", sa->key_pem, 0600));
  HT_ASSIGN_OR_RETURN(const std::string sa_pub, PublicKeyPem(sa->key_pem));
  HT_RETURN_IF_ERROR(WriteFile(dir_ + "/pki/sa.pub", sa_pub, 0644));
  HT_RETURN_IF_ERROR(WriteFile(dir_ + "/pki/tokens.csv", admin_token_ + ",admin,admin,\"system:masters\"\n", 0600));

  if (o_.audit_log) {
    HT_RETURN_IF_ERROR(WriteFile(dir_ + "/audit-policy.yaml",
                                 "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                                 "rules:\n- level: None\n  users: [admin]\n- level: Metadata\n",
                                 0644));
  }
  HT_RETURN_IF_ERROR(StartEtcd());
  HT_RETURN_IF_ERROR(StartApiServer());
  HT_RETURN_IF_ERROR(WriteKubeconfig(kubeconfig_, admin_token_));
  HT_RETURN_IF_ERROR(InstallCrds());

  if (o_.controller_manager) {
    auto c = std::make_unique<Child>();
    c->name = "kube-controller-manager";
    c->log = dir_ + "/kube-controller-manager.log";
    std::string controllers;
    for (const auto& n : o_.controllers) controllers += (controllers.empty() ? "" : ",") + n;
    c->argv = {o_.binaries.controller_manager,
               "--kubeconfig=" + kubeconfig_,
               "--controllers=" + controllers,
               "--service-account-private-key-file=" + dir_ + "/pki/sa.key",
               "--root-ca-file=" + ca_file_,
               "--leader-elect=false",
               "--bind-address=127.0.0.1",
               "--secure-port=0",
               "--profiling=false"};
    if (o_.node_monitor_grace_period) {
      c->argv.push_back("--node-monitor-grace-period=" + std::to_string(o_.node_monitor_grace_period->count()) + "s");
    }
    if (o_.node_monitor_period) {
      c->argv.push_back("--node-monitor-period=" + std::to_string(o_.node_monitor_period->count()) + "s");
    }
    HT_RETURN_IF_ERROR(StartChild(c.get()));
    children_.push_back(std::move(c));
  }
  if (o_.scheduler) {
    auto c = std::make_unique<Child>();
    c->name = "kube-scheduler";
    c->log = dir_ + "/kube-scheduler.log";
    c->argv = {o_.binaries.scheduler, "--kubeconfig=" + kubeconfig_, "--leader-elect=false",
               "--bind-address=127.0.0.1", "--secure-port=0", "--profiling=false"};
    HT_RETURN_IF_ERROR(StartChild(c.get()));
    children_.push_back(std::move(c));
  }
  if (o_.controller_manager) {
    Child* cm = nullptr;
    for (auto& c : children_) {
      if (c->name == "kube-controller-manager") cm = c.get();
    }
    HT_RETURN_IF_ERROR(WaitReady("the controller manager's ServiceAccount default/default and ConfigMap "
                                 "default/kube-root-ca.crt",
                                 cm, [&] {
                                   return Get(server_, "/api/v1/namespaces/default/serviceaccounts/default",
                                              admin_token_) &&
                                          Get(server_, "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
                                              admin_token_);
                                 }));
  }
  if (std::string dead = Exited(); !dead.empty()) return Unavailable(dead);
  return Status::Ok();
}

Status ControlPlane::InstallCrds() {
  if (o_.crd_files.empty()) return Status::Ok();
  HT_ASSIGN_OR_RETURN(std::shared_ptr<kube::RestClient> client,
                      Client(server_, admin_token_, std::chrono::milliseconds(10000), kube::Config{}.max_retries));
  const std::string crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  std::vector<std::string> names;
  for (const std::string& file : o_.crd_files) {
    const std::string text = ReadAll(file);
    if (text.empty()) return NotFound("envtest: CRD file " + file + " is missing or empty");
    auto crd = kubelocal::YamlToJson(text);
    if (!crd.ok()) return InvalidArgument("envtest: CRD file " + file + ": " + crd.status().message());
    const std::string name = crd->value("metadata", kube::Json::object()).value("name", "");
    if (crd->value("kind", "") != "CustomResourceDefinition" || name.empty()) {
      return InvalidArgument("envtest: " + file + " is not a CustomResourceDefinition with a name");
    }
    kube::Request r;
    r.method = "POST";
    r.path = crds;
    r.body = crd->dump();
    auto created = client->SendJson(r);
    if (!created.ok()) return Internal("envtest: create CRD " + name + " from " + file + ": " + created.status().ToString());
    names.push_back(name);
  }
  for (const std::string& name : names) {
    HT_RETURN_IF_ERROR(WaitReady("CRD " + name + " to be Established", nullptr, [&] {
      kube::Request r;
      r.path = crds + "/" + name;
      auto crd = client->SendJson(r);
      if (!crd.ok()) return false;
      for (const kube::Json& c : crd->value("status", kube::Json::object()).value("conditions", kube::Json::array())) {
        if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
      }
      return false;
    }));
  }
  return Status::Ok();
}

Status ControlPlane::RestartApiServer() {
  auto it = std::find_if(children_.begin(), children_.end(), [](const auto& c) { return c->name == "kube-apiserver"; });
  if (it == children_.end()) return FailedPrecondition("kube-apiserver is not running");
  StopChild(it->get());
  children_.erase(it);
  // The restarted server goes last: Stop() ends it first, before the components using it.
  return StartApiServer();
}

std::string ControlPlane::Exited() {
  for (auto& c : children_) {
    int st = 0;
    if (c->pid > 0 && ::waitpid(c->pid, &st, WNOHANG) == c->pid) {
      c->pid = -1;
      return c->name + " exited; last lines of " + c->log + ":\n" + Tail(c->log, 25);
    }
  }
  return "";
}

void ControlPlane::Stop() {
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) StopChild(it->get());
}

Status ControlPlane::WriteKubeconfig(const std::string& path, const std::string& token) const {
  std::ostringstream y;
  y << "apiVersion: v1\nkind: Config\n"
    << "clusters:\n- name: envtest\n  cluster:\n    server: " << server_ << "\n    certificate-authority: " << ca_file_
    << "\n"
    << "users:\n- name: user\n  user:\n    token: " << token << "\n"
    << "contexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: user\n    namespace: default\n"
    << "current-context: envtest\n";
  return WriteFile(path, y.str(), 0600);
}

std::string ControlPlane::LogTails(int lines) const {
  std::string out;
  for (const auto& c : children_) out += "== " + c->log + "\n" + Tail(c->log, lines);
  return out;
}

}  // namespace hypertrain::envtest
