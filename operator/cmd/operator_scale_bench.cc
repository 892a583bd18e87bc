// Benchmark, not a test (tag manual, never in CI): the operator binary at
// scale against kube-local, or the real kube-apiserver with
// BENCH_REAL_APISERVER=1. Per scenario it prints one BENCH line: the seconds
// until every pod of the scenario was created, the operator's RSS (idle, the
// highest sampled, VmHWM at the end, and after the caches settled) and the
// POSTs the API server answered 409 (rest_client_requests_total on /metrics).
// Run: tools/operator-scale-bench.sh (or bazel test
// //operator/cmd:operator_scale_bench --test_output=all --test_filter=...).
// Env: BENCH_KUBE_API_QPS / BENCH_KUBE_API_BURST override the operator's
// defaults (the chart's values), which the benchmark otherwise keeps.
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/testing/files.h"
#include "operator/api/training_job.h"
#include "operator/cmd/operator_testing.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::operatorcmd {
namespace {

using kube::Json;
using namespace std::chrono_literals;

// A /proc/<pid>/status field in KiB ("VmRSS", "VmHWM"); -1 when unreadable.
long ProcKb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  }
  return -1;
}

Json Job(const std::string& name, int nodes) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kKind},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"image", "hypertrain:test"},
            {"nodes", nodes},
            {"nprocPerNode", 1},
            {"trainerConfig", {{"inline", "trainer: {max_steps: 5}\nmodel: {}\n"}}}}}};
}

// Raw getenv in this file: knobs of a benchmark binary, not a component's configuration.
std::vector<std::string> OperatorFlags() {
  std::vector<std::string> flags = {"--log-level=info"};
  if (const char* qps = std::getenv("BENCH_KUBE_API_QPS")) flags.push_back(std::string("--kube-api-qps=") + qps);
  if (const char* b = std::getenv("BENCH_KUBE_API_BURST")) flags.push_back(std::string("--kube-api-burst=") + b);
  return flags;
}

// The cluster (kube-local, or envtest's kube-apiserver), a client, the operator.
class Bench {
 public:
  explicit Bench(const std::string& name) : dir_(kubelocal::testing::MakeTempDir(name)) {}

  // "" once everything runs; else why not (`*skip`: no kube-apiserver here).
  std::string Start(bool* skip) {
    if (std::getenv("BENCH_REAL_APISERVER") && std::string(std::getenv("BENCH_REAL_APISERVER")) == "1") {
      auto real = std::make_unique<RealCluster>();
      if (std::string e = real->Start(dir_, skip); !e.empty()) return e;
      cluster_ = std::move(real);
      where_ = "kube-apiserver 1.26";
    } else {
      auto local = std::make_unique<LocalCluster>(dir_);
      if (std::string e = local->Start(); !e.empty()) return e;
      cluster_ = std::move(local);
      where_ = "kube-local";
    }
    client_ = ClientWithJobCrd(cluster_->kubeconfig());
    if (!client_) return "no client";
    op_ = std::make_unique<OperatorProcess>(kubelocal::testing::Runfile("operator/cmd/hypertrain-operator"),
                                            cluster_->kubeconfig(), "op-bench", dir_ + "/op.log", OperatorFlags());
    if (!WaitFor([&] { return HttpGet(op_->port(), "/readyz").first == 200; }, 60s)) return "operator not ready";
    std::this_thread::sleep_for(1s);
    idle_kb_ = ProcKb(op_->pid(), "VmRSS");
    sampler_ = std::thread([this] {
      while (!stop_) {
        peak_kb_ = std::max(peak_kb_.load(), ProcKb(op_->pid(), "VmRSS"));
        std::this_thread::sleep_for(100ms);
      }
    });
    return "";
  }
  ~Bench() {
    stop_ = true;
    if (sampler_.joinable()) sampler_.join();
  }

  void Create(const std::string& name, int nodes) {
    const Status s = kube::ResourceClient(client_, controller::TrainingJobType(), kNs).Create(Job(name, nodes)).status();
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
  }
  // A counter of the operator's /metrics (0 when absent).
  double Metric(const std::string& name, const std::vector<std::string>& labels) const {
    const auto [code, body] = HttpGet(op_->port(), "/metrics");
    if (code != 200) return 0;
    const double v = Sample(ParseExposition(body), name, labels);
    return std::isnan(v) ? 0 : v;
  }
  double PodsCreated() const { return Metric("hypertrain_pods_created_total", {}); }
  // Waits (bounded) until the operator reports `pods` created; seconds since `t0`, -1 on timeout.
  double WaitForPods(int pods, std::chrono::steady_clock::time_point t0, std::chrono::seconds limit) const {
    if (!WaitFor([&] { return PodsCreated() >= pods; }, limit)) return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Pods in the namespace (one paged LIST, as kubectl counts them).
  size_t PodsListed() const {
    kube::ListOptions lo;
    lo.limit = 500;
    auto l = kube::ResourceClient(client_, kube::resources::kPods, kNs).ListAll(lo);
    return l.ok() ? l->items.size() : 0;
  }
  // After the last pod: the passes that follow (Created, status writes) settle.
  void Report(const std::string& scenario, double secs, int pods) {
    std::this_thread::sleep_for(5s);
    const long settled = ProcKb(op_->pid(), "VmRSS");
    const long hwm = ProcKb(op_->pid(), "VmHWM");
    const double conflicts = Metric("rest_client_requests_total", {"code=\"409\"", "method=\"POST\""});
    const double posts = Metric("rest_client_requests_total", {"code=\"201\"", "method=\"POST\""});
    std::printf(
        "BENCH %s on %s: %d pods created in %.2f s; operator RSS idle %.1f MiB, peak sampled %.1f MiB, "
        "VmHWM %.1f MiB, settled %.1f MiB; POSTs answered 201: %.0f, 409: %.0f\n",
        scenario.c_str(), where_.c_str(), pods, secs, idle_kb_ / 1024.0, peak_kb_ / 1024.0, hwm / 1024.0,
        settled / 1024.0, posts, conflicts);
    std::fflush(stdout);
    EXPECT_EQ(PodsListed(), static_cast<size_t>(pods));
  }
  std::string Log() const { return op_ ? op_->Log() : ""; }

 private:
  std::string dir_;
  std::string where_;
  std::unique_ptr<Cluster> cluster_;
  std::shared_ptr<kube::RestClient> client_;
  std::unique_ptr<OperatorProcess> op_;
  long idle_kb_ = 0;
  std::atomic<long> peak_kb_{0};
  std::atomic<bool> stop_{false};
  std::thread sampler_;
};

#define START_OR_SKIP(b)                           \
  do {                                             \
    bool skip = false;                             \
    const std::string e = (b).Start(&skip);        \
    if (skip) GTEST_SKIP() << e;                   \
    ASSERT_EQ(e, "") << (b).Log();                 \
  } while (0)

// Issue 35 item 7: one 2048-node job.
TEST(OperatorScaleBench, OneJobOf2048Nodes) {
  Bench b("op-bench-2048");
  START_OR_SKIP(b);
  const auto t0 = std::chrono::steady_clock::now();
  b.Create("big", 2048);
  const double secs = b.WaitForPods(2048, t0, 300s);
  ASSERT_GE(secs, 0) << b.Log();
  b.Report("one 2048-node job", secs, 2048);
}

// Issue 35 item 7: 100 jobs of 8 nodes created back to back, then two of 2048.
TEST(OperatorScaleBench, HundredJobsOf8ThenTwoOf2048) {
  Bench b("op-bench-mixed");
  START_OR_SKIP(b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) b.Create("j" + std::to_string(i), 8);
  const double secs = b.WaitForPods(800, t0, 300s);
  ASSERT_GE(secs, 0) << b.Log();
  b.Report("100 jobs x 8 nodes", secs, 800);
  const auto t1 = std::chrono::steady_clock::now();
  b.Create("big0", 2048);
  b.Create("big1", 2048);
  const double big = b.WaitForPods(800 + 2 * 2048, t1, 600s);
  ASSERT_GE(big, 0) << b.Log();
  b.Report("100 x 8 nodes + 2 x 2048 nodes", big, 800 + 2 * 2048);
}

// Operator memory with 500 one-node TrainingJobs.
TEST(OperatorScaleBench, FiveHundredJobs) {
  Bench b("op-bench-500");
  START_OR_SKIP(b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) b.Create("j" + std::to_string(i), 1);
  const double secs = b.WaitForPods(500, t0, 300s);
  ASSERT_GE(secs, 0) << b.Log();
  b.Report("500 one-node jobs", secs, 500);
}

}  // namespace
}  // namespace hypertrain::operatorcmd
