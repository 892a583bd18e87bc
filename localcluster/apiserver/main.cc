// kube-local: a small Kubernetes API server for end-to-end tests and for
// running the whole system on one machine. See docs/LOCAL_CONTROL_PLANE.md.
#include <dirent.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/base64.h"
#include "core/log.h"
#include "localcluster/apiserver/api_server.h"
#include "localcluster/apiserver/certs.h"
#include "localcluster/apiserver/http_server.h"
#include "localcluster/apiserver/store.h"

namespace kubelocal {
namespace {

using hypertrain::WriteFileAtomically;

struct Flags {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string data_dir;
  std::string kubeconfig_out;
  std::string port_file;
  std::string token;
  std::string client_cert_out;
  int bookmark_interval_ms = 10000;
  int history_limit = 10000;
  int gc_period_ms = 1000;
  std::string log_format = "text";
  std::string log_level;  // "" → info, or debug with --v >= 1
  int verbosity = 0;
};

constexpr char kUsage[] =
    "usage: kube-local [--listen HOST:PORT] [--data-dir DIR] [--kubeconfig-out FILE]\n"
    "                  [--port-file FILE] [--token TOKEN] [--client-cert-out DIR]\n"
    "                  [--bookmark-interval-ms N] [--history-limit N] [--gc-period-ms N]\n"
    "                  [--log-format text|json] [--log-level LEVEL] [--v N]\n";

bool ParseInt(const std::string& s, int* out) {
  try {
    size_t used = 0;
    *out = std::stoi(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

bool ParseFlags(int argc, char** argv, Flags* f, std::string* err) {
  const std::map<std::string, std::string*> text_flags = {
      {"--data-dir", &f->data_dir},       {"--kubeconfig-out", &f->kubeconfig_out},
      {"--port-file", &f->port_file},     {"--token", &f->token},
      {"--client-cert-out", &f->client_cert_out}, {"--log-format", &f->log_format},
      {"--log-level", &f->log_level}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a == "--help" || a == "-h") {
      *err = "";
      return false;
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      *err = "missing value for " + a;
      return false;
    }
    if (a == "--listen") {
      auto colon = v.rfind(':');
      if (colon == std::string::npos || !ParseInt(v.substr(colon + 1), &f->port) || f->port < 0 ||
          f->port > 65535) {
        *err = "--listen wants HOST:PORT, got \"" + v + "\"";
        return false;
      }
      f->host = v.substr(0, colon);
    } else if (auto text = text_flags.find(a); text != text_flags.end()) {
      *text->second = v;
    } else if (a == "--bookmark-interval-ms" || a == "--history-limit" || a == "--gc-period-ms" ||
               a == "--v") {
      int n;
      if (!ParseInt(v, &n) || n < 0) {
        *err = a + " wants a non-negative integer, got \"" + v + "\"";
        return false;
      }
      if (a == "--bookmark-interval-ms") f->bookmark_interval_ms = std::max(n, 10);
      if (a == "--history-limit") f->history_limit = std::max(n, 1);
      if (a == "--gc-period-ms") f->gc_period_ms = std::max(n, 10);
      if (a == "--v") f->verbosity = n;
    } else {
      *err = "unknown flag " + a;
      return false;
    }
  }
  return true;
}

std::string RandomToken() {
  unsigned char b[24];
  RAND_bytes(b, sizeof(b));
  std::string s;
  char buf[3];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    s += buf;
  }
  return s;
}

std::string Kubeconfig(const std::string& server, const std::string& ca_pem,
                       const std::string& token) {
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: kube-local\n"
         "  cluster:\n"
         "    server: " + server + "\n"
         "    certificate-authority-data: " + hypertrain::Base64Encode(ca_pem) + "\n"
         "users:\n"
         "- name: kube-local-admin\n"
         "  user:\n"
         "    token: " + token + "\n"
         "contexts:\n"
         "- name: kube-local\n"
         "  context:\n"
         "    cluster: kube-local\n"
         "    user: kube-local-admin\n"
         "    namespace: default\n"
         "current-context: kube-local\n";
}

// execv after a requested restart must not leak sockets or files.
void CloseOnExecAll() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (fd > 2) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  closedir(d);
}

// The bearer token: --token, else the one kept in the data directory, else a
// new one (kept there for the next start).
StatusOr<std::string> LoadOrCreateToken(const Flags& f) {
  std::string token = f.token;
  if (token.empty() && !f.data_dir.empty()) {
    if (auto t = hypertrain::ReadFileToString(f.data_dir + "/token"); t.ok()) token = *t;
    while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  }
  if (token.empty()) token = RandomToken();
  if (!f.data_dir.empty()) {
    if (Status e = WriteFileAtomically(f.data_dir + "/token", token + "\n", 0600); !e.ok()) return e;
  }
  return token;
}

// What clients need once the server listens: the kubeconfig, a client
// certificate with its CA, the port.
Status WriteClientFiles(const Flags& f, const ServingCerts& certs, const std::string& server,
                        const std::string& token, int port) {
  if (!f.kubeconfig_out.empty()) {
    if (Status e = WriteFileAtomically(f.kubeconfig_out, Kubeconfig(server, certs.ca.cert_pem, token), 0600);
        !e.ok()) {
      return e;
    }
  }
  if (!f.client_cert_out.empty()) {
    auto cc = IssueClientCert(certs.ca, "kube-local-client", {"system:masters"});
    if (!cc.ok() || !WriteFileAtomically(f.client_cert_out + "/client.crt", cc->cert_pem, 0644).ok() ||
        !WriteFileAtomically(f.client_cert_out + "/client.key", cc->key_pem, 0600).ok() ||
        !WriteFileAtomically(f.client_cert_out + "/ca.crt", certs.ca.cert_pem, 0644).ok()) {
      return hypertrain::IoError("cannot write a client certificate to " + f.client_cert_out);
    }
  }
  if (!f.port_file.empty()) return WriteFileAtomically(f.port_file, std::to_string(port) + "\n");
  return Status();
}

// A requested restart: the same binary and flags on the same address (the
// state directory carries the objects over). Returns only on failure.
int RestartInPlace(int argc, char** argv, const std::string& address, const sigset_t& sigs) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--listen") {
      ++i;
      continue;
    }
    if (a.rfind("--listen=", 0) == 0) continue;
    args.push_back(a);
  }
  args.push_back("--listen=" + address);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  CloseOnExecAll();
  pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  execv("/proc/self/exe", cargs.data());
  spdlog::error("restart failed: {}", std::strerror(errno));
  return 1;
}

// Flags and logging; 0 to go on, else the exit code (2 for bad flags, 0 for --help).
int Configure(int argc, char** argv, Flags* f) {
  std::string err;
  if (!ParseFlags(argc, argv, f, &err)) {
    if (!err.empty()) std::cerr << "kube-local: " << err << "\n";
    (err.empty() ? std::cout : std::cerr) << kUsage;
    return err.empty() ? -1 : 2;
  }
  const std::string level = !f->log_level.empty() ? f->log_level : f->verbosity > 0 ? "debug" : "info";
  if (Status e = hypertrain::log::Init(f->log_format, level, {{"component", "kube-local"}}); !e.ok()) {
    std::cerr << "kube-local: " << e.message() << "\n" << kUsage;
    return 2;
  }
  return 0;
}

int Run(int argc, char** argv) {
  Flags f;
  if (int rc = Configure(argc, argv, &f); rc != 0) return rc < 0 ? 0 : rc;
  // Signals are taken synchronously by the main thread only.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto fail = [](const std::string& what, const Status& e) {
    spdlog::error("{}{}", what, e.message());
    return 1;
  };
  if (!f.data_dir.empty()) {
    if (Status e = hypertrain::MakeDirs(f.data_dir, 0700); !e.ok()) return fail("", e);
  }
  auto certs = LoadOrCreateServingCerts(f.data_dir);
  if (!certs.ok()) return fail("certificates: ", certs.status());
  auto token = LoadOrCreateToken(f);
  if (!token.ok()) return fail("", token.status());
  StoreOptions so;
  so.data_dir = f.data_dir.empty() ? "" : f.data_dir + "/state";
  so.history_limit = static_cast<size_t>(f.history_limit);
  auto store = Store::Open(so);
  if (!store.ok()) return fail("state: ", store.status());

  std::atomic<bool> restart{false};
  ApiServerOptions ao;
  ao.token = *token;
  ao.bookmark_interval = std::chrono::milliseconds(f.bookmark_interval_ms);
  ao.gc_period = std::chrono::milliseconds(f.gc_period_ms);
  ao.ca = certs->ca;
  std::unique_ptr<ApiServer> api;

  HttpServerOptions ho;
  ho.host = f.host;
  ho.port = f.port;
  ho.server = certs->server;
  ho.ca_pem = certs->ca.cert_pem;
  // `api` is created once the port is known, before any request is accepted.
  HttpServer http([&api](const HttpRequest& r, ResponseSink& s) { api->Handle(r, s); }, ho);
  if (Status e = http.Listen(); !e.ok()) return fail("", e);
  const std::string address = f.host + ":" + std::to_string(http.port());
  const std::string server = "https://" + address;
  ao.server_address = address;
  api = std::make_unique<ApiServer>(store->get(), ao);
  api->SetRestartHook([&restart] { restart = true; });
  if (Status e = api->Start(); !e.ok()) return fail("", e);
  http.Serve();
  if (Status e = WriteClientFiles(f, *certs, server, *token, http.port()); !e.ok()) return fail("", e);
  spdlog::info("serving on {} (resourceVersion {})", server, (*store)->CurrentRV());

  timespec tick{0, 200 * 1000 * 1000};
  while (!restart) {
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) break;
  }
  spdlog::info("{}", restart ? "restarting" : "shutting down");
  api->Stop();
  http.Stop();
  return restart ? RestartInPlace(argc, argv, address, sigs) : 0;
}

}  // namespace
}  // namespace kubelocal

int main(int argc, char** argv) { return kubelocal::Run(argc, argv); }
