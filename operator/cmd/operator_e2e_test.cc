// The hypertrain-operator binary against the real local control plane: a job
// applied gets its pods; a dry run gets its estimate and no pod until started; /healthz, /readyz, /metrics answer; a standby takes
// over when the leader is SIGKILLed, without duplicating pods; neither POSTs an
// object its caches hold (no 409), a deleted Service is made again; SIGTERM
// exits 0 and releases the Lease; a 64-node job's pods are all created promptly.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "operator/controller/reconciler.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"
#include "localcluster/envtest/control_plane.h"
#include "operator/cmd/operator_testing.h"

namespace hypertrain::operatorcmd {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Bad flags exit 2 at once with a message naming the flag (before any API call).
TEST(OperatorFlagsTest, RejectsBadFlags) {
  const std::string op_bin = kubelocal::testing::Runfile("operator/cmd/hypertrain-operator");
  ASSERT_FALSE(op_bin.empty());
  const std::string dir = kubelocal::testing::MakeTempDir("operator-flags");
  for (const std::string& bad : {"--fault-settle-ms=-5", "--fault-settle-ms=2s", "--workers=0"}) {
    OperatorProcess op(op_bin, dir + "/no-kubeconfig", "flags", dir + "/op.log", {bad});
    EXPECT_EQ(op.Signal(0, 10s), 2) << bad;
    const std::string flag = bad.substr(0, bad.find('='));
    EXPECT_NE(op.Log().find(flag), std::string::npos) << bad << ": " << op.Log();
  }
}

// Runs `cmd` through the shell; (exit code, stdout and stderr).
std::pair<int, std::string> RunShell(const std::string& cmd, const std::string& out_file) {
  const int st = std::system((cmd + " >" + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, std::string(std::istreambuf_iterator<char>(in), {})};
}

TEST(OperatorCliTest, AnswersHelpAndVersion) {
  const std::string op_bin = kubelocal::testing::Runfile("operator/cmd/hypertrain-operator");
  const std::string dir = kubelocal::testing::MakeTempDir("operator-cli");
  for (const char* help : {"--help", "-h"}) {
    auto [rc, out] = RunShell(op_bin + " " + help, dir + "/help");
    EXPECT_EQ(rc, 0) << out;
    for (const char* flag : {"--namespace", "--leader-elect", "--metrics-addr", "--kube-api-qps", "--kube-api-burst",
                             "--workers", "--log-format", "--log-level", "--fault-settle-ms", "--version"}) {
      EXPECT_THAT(out, HasSubstr(flag)) << help;
    }
  }
  auto [rc, out] = RunShell(op_bin + " --version", dir + "/version");
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(std::regex_match(out, std::regex("hypertrain-operator [A-Za-z0-9._+-]+\n"))) << out;
  // Both forms parse; the missing kubeconfig is what stops it (still exit 2, a config error).
  for (const std::string& form : {"--workers 3 --log-format json", "--workers=3 --log-format=json"}) {
    auto [rc2, log] = RunShell(op_bin + " " + form + " --kubeconfig " + dir + "/missing", dir + "/form");
    EXPECT_EQ(rc2, 2) << form;
    EXPECT_THAT(log, HasSubstr("cannot load Kubernetes config")) << form << ": " << log;
  }
  auto [rc3, log3] = RunShell(op_bin + " --no-such-flag", dir + "/unknown");
  EXPECT_EQ(rc3, 2);
  EXPECT_THAT(log3, HasSubstr("--no-such-flag"));
  EXPECT_THAT(log3, HasSubstr("--help"));
}

class OperatorE2ETest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(ApiServers, OperatorE2ETest, ::testing::Values("KubeLocal", "RealKubeApiserver"),
                         [](const auto& info) { return info.param; });

TEST_P(OperatorE2ETest, LeadsReconcilesFailsOverAndShutsDown) {
  const std::string op_bin = kubelocal::testing::Runfile("operator/cmd/hypertrain-operator");
  ASSERT_FALSE(op_bin.empty());
  const std::string dir = kubelocal::testing::MakeTempDir("operator-e2e");
  std::unique_ptr<Cluster> cluster;
  if (GetParam() == "KubeLocal") {
    auto local = std::make_unique<LocalCluster>(dir);
    const std::string err = local->Start();
    ASSERT_EQ(err, "");
    cluster = std::move(local);
  } else {
    auto real = std::make_unique<RealCluster>();
    bool skip = false;
    const std::string err = real->Start(dir, &skip);
    if (skip && !envtest::MaySkipWithoutBinaries()) FAIL() << "under CI: " << err;
    if (skip) GTEST_SKIP() << err;
    ASSERT_EQ(err, "");
    cluster = std::move(real);
  }
  const std::string kubeconfig = cluster->kubeconfig();
  const std::shared_ptr<kube::RestClient> client = ClientWithJobCrd(kubeconfig);
  ASSERT_NE(client, nullptr);
  kube::ResourceClient jobs(client, controller::TrainingJobType(), kNs);
  kube::ResourceClient pods(client, kube::resources::kPods, kNs);
  kube::ResourceClient leases(client, kube::resources::kLeases, kNs);
  ASSERT_TRUE(WaitFor([&] { return jobs.List().ok(); }, 10s));

  auto create_job = [&](const std::string& name, int nodes) {
    Json job = {{"apiVersion", api::kApiVersion},
                {"kind", api::kKind},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"image", "hypertrain:test"},
                  {"nodes", nodes},
                  {"nprocPerNode", 1},
                  {"trainerConfig", {{"inline", "trainer: {max_steps: 5}\nmodel: {}\n"}}},
                  {"faultPolicy", {{"healthyNodeValues", Json::array()}}}}}};
    auto r = jobs.Create(job);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  auto pod_count = [&](const std::string& job) -> int {
    kube::ListOptions lo;
    lo.label_selector = std::string(api::kLabelJobName) + "=" + job;
    auto l = pods.ListAll(lo);
    return l.ok() ? static_cast<int>(l->items.size()) : -1;
  };
  auto holder = [&]() -> std::string {
    auto l = leases.Get("e2e-leader");
    return l.ok() ? (*l)["spec"].value("holderIdentity", "") : "";
  };

  auto a = std::make_unique<OperatorProcess>(op_bin, kubeconfig, "op-a", dir + "/op-a.log");
  ASSERT_TRUE(WaitFor([&] { return holder() == "op-a"; }, 10s)) << a->Log();
  auto b = std::make_unique<OperatorProcess>(op_bin, kubeconfig, "op-b", dir + "/op-b.log");

  create_job("first", 2);
  ASSERT_TRUE(WaitFor([&] { return pod_count("first") == 2; }, 10s)) << a->Log();
  ASSERT_TRUE(WaitFor([&] {
    auto j = jobs.Get("first");
    return j.ok() && (*j)["status"].value("state", "") == "Created";
  }, 10s));

  // A dry run: the estimate in status, no pod; turned off, the job starts.
  Json dry = {{"apiVersion", api::kApiVersion},
              {"kind", api::kKind},
              {"metadata", {{"name", "dry"}}},
              {"spec",
               {{"image", "hypertrain:test"},
                {"instanceType", "ml.p5.48xlarge"},
                {"estimateOnly", true},
                {"trainerConfig", {{"inline", "trainer: {max_steps: 100}\nmodel: {shape: 1b, train_batch_size: 4}\n"}}},
                {"faultPolicy", {{"healthyNodeValues", Json::array()}}}}}};
  ASSERT_TRUE(jobs.Create(dry).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto j = jobs.Get("dry");
    return j.ok() && j->contains("status") && (*j)["status"].is_object() &&
           (*j)["status"].value("state", "") == "Estimated";
  }, 10s)) << a->Log();
  {
    const Json est = (*jobs.Get("dry"))["status"]["estimate"];
    EXPECT_EQ(est.value("parameters", int64_t{0}), 1235814400) << est.dump();
    EXPECT_EQ(est.value("fits", false), true) << est.dump();
    EXPECT_THAT(est.value("message", ""), HasSubstr("fits")) << est.dump();
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(pod_count("dry"), 0) << "a dry run creates no pod";
  ASSERT_TRUE(jobs.Patch("dry", {{"spec", {{"estimateOnly", false}}}}).ok());
  ASSERT_TRUE(WaitFor([&] { return pod_count("dry") == 1; }, 10s)) << a->Log();
  // Created (and hypertrain_jobs_created_total) follows the pods the next pass observes.
  ASSERT_TRUE(WaitFor([&] {
    auto j = jobs.Get("dry");
    return j.ok() && (*j)["status"].value("state", "") == "Created";
  }, 10s)) << a->Log();

  EXPECT_EQ(HttpGet(a->port(), "/healthz").first, 200);
  ASSERT_TRUE(WaitFor([&] { return HttpGet(a->port(), "/readyz").first == 200; }, 5s));
  // The counters follow the status write that made the job Created: scrape
  // until they show both jobs (or 5 s), then check everything on that scrape.
  std::pair<int, std::string> m;
  WaitFor([&] {
    m = HttpGet(a->port(), "/metrics");
    return Sample(ParseExposition(m.second), "hypertrain_jobs_created_total", {"namespace=\"op\""}) == 2;
  }, 5s);
  EXPECT_EQ(m.first, 200);
  // The conventional names and labels (docs/OPERATOR.md, "Metrics").
  const auto s = ParseExposition(m.second);
  const std::string ctl = "controller=\"trainingjob\"", q = "name=\"trainingjob\"";
  EXPECT_GE(Sample(s, "controller_runtime_reconcile_total", {ctl, "result=\"success\""}), 1) << m.second;
  EXPECT_EQ(Sample(s, "controller_runtime_reconcile_total", {ctl, "result=\"error\""}), 0) << a->Log();
  EXPECT_EQ(Sample(s, "controller_runtime_reconcile_errors_total", {ctl}), 0) << a->Log();
  EXPECT_GE(Sample(s, "controller_runtime_reconcile_time_seconds_count", {ctl}), 1);
  EXPECT_GE(Sample(s, "controller_runtime_reconcile_time_seconds_bucket", {ctl, "le=\"+Inf\""}), 1);
  EXPECT_EQ(Sample(s, "controller_runtime_max_concurrent_reconciles", {ctl}), 2);
  EXPECT_FALSE(std::isnan(Sample(s, "controller_runtime_active_workers", {ctl})));
  EXPECT_FALSE(std::isnan(Sample(s, "workqueue_depth", {q})));
  EXPECT_GE(Sample(s, "workqueue_adds_total", {q}), 1);
  EXPECT_GE(Sample(s, "workqueue_queue_duration_seconds_count", {q}), 1);
  EXPECT_GE(Sample(s, "workqueue_work_duration_seconds_count", {q}), 1);
  EXPECT_FALSE(std::isnan(Sample(s, "workqueue_retries_total", {q})));
  EXPECT_GE(Sample(s, "rest_client_requests_total", {"code=\"200\"", "method=\"GET\"", "host=\"127.0.0.1:"}), 1);
  EXPECT_GE(Sample(s, "rest_client_requests_total", {"code=\"201\"", "method=\"POST\""}), 2) << "pods created";
  EXPECT_GE(Sample(s, "rest_client_request_duration_seconds_count", {"verb=\"PUT\""}), 1) << "status written";
  EXPECT_EQ(Sample(s, "leader_election_master_status", {"name=\"e2e-leader\""}), 1);
  EXPECT_EQ(Sample(s, "hypertrain_jobs_created_total", {"namespace=\"op\""}), 2);  // first, dry
  EXPECT_EQ(Sample(s, "hypertrain_pods_created_total", {"namespace=\"op\""}), 3);
  EXPECT_EQ(Sample(s, "hypertrain_jobs", {"namespace=\"op\""}), 2);
  EXPECT_GT(Sample(s, "process_cpu_seconds_total"), 0);
  EXPECT_GT(Sample(s, "process_resident_memory_bytes"), 0);
  EXPECT_GT(Sample(s, "process_start_time_seconds"), 0);
  EXPECT_GT(Sample(s, "process_open_fds"), 0);
  // Issue 35 item 7: nothing the caches hold is created again. Every pass
  // after the pods exist used to POST the Service, the ConfigMaps, the
  // ServiceAccount, Role and RoleBinding once more, each answered 409.
  EXPECT_TRUE(std::isnan(Sample(s, "rest_client_requests_total", {"code=\"409\"", "method=\"POST\""})))
      << m.second;
  EXPECT_EQ(HttpGet(a->port(), "/nope").first, 404);
  ASSERT_TRUE(WaitFor([&] { return HttpGet(b->port(), "/readyz").first == 200; }, 5s)) << "standby is ready";
  EXPECT_EQ(Sample(ParseExposition(HttpGet(b->port(), "/metrics").second), "leader_election_master_status",
                   {"name=\"e2e-leader\""}),
            0);

  // The leader dies without releasing the Lease: the standby takes over after it expires.
  EXPECT_EQ(a->Signal(SIGKILL, 5s), 128 + SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return holder() == "op-b"; }, 10s)) << b->Log();
  create_job("second", 3);
  ASSERT_TRUE(WaitFor([&] { return pod_count("second") == 3; }, 10s)) << b->Log();
  EXPECT_EQ(pod_count("first"), 2) << "no duplicates after the takeover";
  EXPECT_EQ(pod_count("dry"), 1) << "no duplicates after the takeover";
  // The caches only spare a create: a Service deleted is made again.
  kube::ResourceClient services(client, kube::resources::kServices, kNs);
  const auto service_uid = [&] {
    auto svc = services.Get("first");
    return svc.ok() ? kube::UidOf(*svc) : std::string();
  };
  const std::string old_service = service_uid();
  ASSERT_NE(old_service, "");
  ASSERT_TRUE(services.Delete("first").ok());
  ASSERT_TRUE(WaitFor([&] { return !service_uid().empty() && service_uid() != old_service; }, 10s)) << b->Log();

  // A 64-node job: apply to all pods created.
  const auto t0 = std::chrono::steady_clock::now();
  create_job("big", 64);
  ASSERT_TRUE(WaitFor([&] { return pod_count("big") == 64; }, 30s)) << b->Log();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("BENCH 64-node job: apply -> 64 pods created in %.3f s\n", secs);
  RecordProperty("big_job_pods_created_seconds", std::to_string(secs));

  // The new leader's caches held every job's objects from its first pass on.
  const std::string after_takeover = HttpGet(b->port(), "/metrics").second;
  EXPECT_TRUE(std::isnan(Sample(ParseExposition(after_takeover), "rest_client_requests_total",
                                {"code=\"409\"", "method=\"POST\""})))
      << after_takeover;

  // Graceful shutdown: exit 0 and the Lease is released.
  EXPECT_EQ(b->Signal(SIGTERM, 10s), 0) << b->Log();
  EXPECT_EQ(holder(), "");
  EXPECT_THAT(b->Log(), HasSubstr("became leader"));
}

}  // namespace
}  // namespace hypertrain::operatorcmd
