// kube-envtest: runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on 127.0.0.1 until SIGTERM/SIGINT,
// for shell tests and the main job's --real mode. See control_plane.h.
//
//   kube-envtest --work-dir D [--kubeconfig-out F] [--ready-timeout-s 90]
//                [--no-controller-manager] [--no-scheduler] [--audit-log]
//                [--node-monitor-grace-period-s N] [--node-monitor-period-s N]
//   kube-envtest --check     exit 0 when the binaries are there, else 3 and why
//
// Writes the admin kubeconfig (D/kubeconfig, copied to F) and then D/ready;
// prints "ready <server>" on stdout. Exit codes: 0 stopped by a signal,
// 1 the control plane failed, 2 bad flags, 3 binaries missing (tests skip).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "localcluster/envtest/control_plane.h"

namespace {

constexpr char kUsage[] =
    "usage: kube-envtest --work-dir DIR [--kubeconfig-out FILE] [--ready-timeout-s N]\n"
    "                    [--no-controller-manager] [--no-scheduler] [--audit-log]\n"
    "                    [--node-monitor-grace-period-s N] [--node-monitor-period-s N]\n"
    "       kube-envtest --check\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace hypertrain::envtest;
  Options opts;
  std::string kubeconfig_out;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a == "--work-dir" || a == "--kubeconfig-out" || a == "--ready-timeout-s" ||
               a == "--node-monitor-grace-period-s" || a == "--node-monitor-period-s") {
      if (i + 1 >= argc) return std::cerr << "kube-envtest: " << a << " needs a value\n" << kUsage, 2;
      v = argv[++i];
    }
    if (a == "--work-dir") {
      opts.work_dir = v;
    } else if (a == "--kubeconfig-out") {
      kubeconfig_out = v;
    } else if (a == "--ready-timeout-s" || a == "--node-monitor-grace-period-s" || a == "--node-monitor-period-s") {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n <= 0) {
        return std::cerr << "kube-envtest: " << a << " must be a positive number of seconds, not '" << v << "'\n", 2;
      }
      if (a == "--ready-timeout-s") opts.ready_timeout = std::chrono::seconds(n);
      if (a == "--node-monitor-grace-period-s") opts.node_monitor_grace_period = std::chrono::seconds(n);
      if (a == "--node-monitor-period-s") opts.node_monitor_period = std::chrono::seconds(n);
    } else if (a == "--no-controller-manager") {
      opts.controller_manager = false;
    } else if (a == "--no-scheduler") {
      opts.scheduler = false;
    } else if (a == "--audit-log") {
      opts.audit_log = true;
    } else if (a == "--check") {
      check = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      return std::cerr << "kube-envtest: unknown flag " << a << "\n" << kUsage, 2;
    }
  }
  auto bins = FindBinaries();
  if (!bins.ok()) {
    std::cerr << "kube-envtest: " << bins.status().message() << "\n";
    return 3;
  }
  if (check) return 0;
  if (opts.work_dir.empty()) return std::cerr << "kube-envtest: --work-dir is required\n" << kUsage, 2;
  opts.binaries = *bins;

  // SIGTERM/SIGINT are taken synchronously once the control plane runs.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto cp = ControlPlane::Start(opts);
  if (!cp.ok()) {
    std::cerr << "kube-envtest: " << cp.status().message() << "\n";
    return 1;
  }
  if (!kubeconfig_out.empty()) {
    std::error_code ec;
    std::filesystem::copy_file((*cp)->kubeconfig(), kubeconfig_out + ".tmp",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (!ec) std::filesystem::rename(kubeconfig_out + ".tmp", kubeconfig_out, ec);
    if (ec) {
      std::cerr << "kube-envtest: cannot write " << kubeconfig_out << ": " << ec.message() << "\n";
      return 1;
    }
  }
  std::ofstream(opts.work_dir + "/ready") << (*cp)->server() << "\n";
  std::cout << "ready " << (*cp)->server() << std::endl;
  std::cerr << "kube-envtest: " << kKubeVersion << " control plane at " << (*cp)->server() << "; logs and kubeconfig in "
            << opts.work_dir << std::endl;
  // Until a signal; a component that dies ends the run (exit 1) with its log.
  for (;;) {
    timespec ts{1, 0};
    const int sig = sigtimedwait(&sigs, nullptr, &ts);
    if (sig > 0) {
      std::cerr << "kube-envtest: signal " << sig << ": stopping the control plane" << std::endl;
      (*cp)->Stop();
      return 0;
    }
    if (std::string dead = (*cp)->Exited(); !dead.empty()) {
      std::cerr << "kube-envtest: " << dead;
      (*cp)->Stop();
      return 1;
    }
  }
}
