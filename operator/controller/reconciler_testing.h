// The fixture of the reconciler's tests against the real local control plane
// (//localcluster/apiserver:kube-local): the CRD is installed from crds/,
// informers feed the caches, and the test plays the kubelet by patching pod
// status. Time is a test clock. Included by reconciler_test.cc (lifecycle)
// and reconciler_faults_test.cc (faults), one test binary.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "core/time.h"
#include "kube/informer.h"
#include "kube/rest_client.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "operator/controller/builders.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::controller::testing {

using kube::Json;
using namespace std::chrono_literals;

inline constexpr char kNs[] = "rt";
inline constexpr char kConfig[] = "trainer:\n  max_steps: 50\nmodel:\n  sharding_strategy: hybrid_shard\n";

inline const kube::ResourceType kCrdType{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                         "CustomResourceDefinition", false};

class ReconcilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string bin = kubelocal::testing::Runfile("localcluster/apiserver/kube-local");
    ASSERT_FALSE(bin.empty()) << "kube-local binary not in runfiles";
    kl_ = new kubelocal::testing::KubeLocal(bin, kubelocal::testing::MakeTempDir("reconciler"));
    auto started = kl_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    auto cfg = kl_->LoadConfig();
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    cfg->qps = 0;
    cfg->retry_base = 20ms;
    cfg->retry_max = 200ms;
    client_ = new std::shared_ptr<kube::RestClient>(*kube::RestClient::Create(*cfg));
    kube::ResourceClient ns(*client_, kube::resources::kNamespaces);
    ASSERT_TRUE(ns.Create({{"metadata", {{"name", kNs}}}}).ok());
    auto crd = api::YamlFileToJson("crds/trainingjobs.hypertrain.dev.yaml");
    ASSERT_TRUE(crd.ok()) << crd.status().ToString();
    auto installed = kube::ResourceClient(*client_, kCrdType).Create(*crd);
    ASSERT_TRUE(installed.ok()) << installed.status().ToString();
    kube::ResourceClient jobs(*client_, TrainingJobType(), kNs);
    for (int i = 0; i < 100 && !jobs.List().ok(); ++i) std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(jobs.List().ok()) << "the TrainingJob API is not served";
  }
  static void TearDownTestSuite() {
    delete client_;
    delete kl_;
  }

  void SetUp() override {
    job_informer_ = std::make_unique<kube::Informer>(Jobs());
    pod_informer_ = std::make_unique<kube::Informer>(Pods());
    node_informer_ = std::make_unique<kube::Informer>(Nodes());
    cm_informer_ = std::make_unique<kube::Informer>(kube::ResourceClient(*client_, kube::resources::kConfigMaps, kNs));
    cm_informer_->Start();
    job_informer_->Start();
    pod_informer_->Start();
    node_informer_->Start();
    ASSERT_TRUE(job_informer_->WaitForSync(10s));
    ASSERT_TRUE(pod_informer_->WaitForSync(10s));
    ASSERT_TRUE(node_informer_->WaitForSync(10s));
    ASSERT_TRUE(cm_informer_->WaitForSync(10s));
    reconciler_ = MakeReconciler();
  }
  void TearDown() override {
    job_informer_->Stop();
    pod_informer_->Stop();
    node_informer_->Stop();
    cm_informer_->Stop();
  }

  // Options over the fixture's server, informers and clock.
  ReconcilerOptions TestOptions() {
    ReconcilerOptions o;
    o.client = *client_;
    o.jobs = &job_informer_->store();
    o.pods = &pod_informer_->store();
    o.nodes = &node_informer_->store();
    o.configmaps = &cm_informer_->store();
    o.now = [this] { return now_; };
    o.instance = "test-operator";
    o.counters = &counters_;
    return o;
  }
  std::unique_ptr<Reconciler> MakeReconciler() { return std::make_unique<Reconciler>(TestOptions()); }

  kube::ResourceClient Jobs() const { return kube::ResourceClient(*client_, TrainingJobType(), kNs); }
  kube::ResourceClient Pods() const { return kube::ResourceClient(*client_, kube::resources::kPods, kNs); }
  kube::ResourceClient Progress() const { return kube::ResourceClient(*client_, kube::resources::kConfigMaps, kNs); }
  // Writes the launcher's report on <job>-progress and waits until the cache holds it.
  void ReportProgress(const std::string& job, const std::string& report) {
    ASSERT_TRUE(Progress().Patch(job + "-progress", {{"metadata", {{"annotations", {{api::kAnnotationProgress, report}}}}}}).ok());
    for (int i = 0; i < 200; ++i) {
      kube::ObjectPtr cm = cm_informer_->store().Get(std::string(kNs) + "/" + job + "-progress");
      if (cm && (*cm)["metadata"].value("annotations", Json::object()).value(api::kAnnotationProgress, "") == report) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "the ConfigMap cache never saw the progress report of " << job;
  }
  kube::ResourceClient Nodes() const { return kube::ResourceClient(*client_, kube::resources::kNodes); }
  void CreateNode(const std::string& name, const std::string& health) {
    auto r = Nodes().Create({{"metadata", {{"name", name}, {"labels", {{api::kHyperPodHealthLabel, health}}}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SetNodeReady(name, true, "2027-01-15T08:00:00Z");
  }
  void SetNodeReady(const std::string& name, bool ready, const std::string& since) {
    auto r = Nodes().PatchStatus(
        name, {{"status", {{"conditions", Json::array({{{"type", "Ready"},
                                                         {"status", ready ? "True" : "False"},
                                                         {"lastTransitionTime", since}}})}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  Json CpuSpec(int nodes = 2) const {
    return {{"image", "hypertrain:test"},
            {"nodes", nodes},
            {"nprocPerNode", 2},
            {"trainerConfig", {{"inline", kConfig}}},
            {"faultPolicy", {{"healthyNodeValues", Json::array()}}}};
  }
  void CreateJob(const std::string& name, const Json& spec) {
    auto r = Jobs().Create({{"apiVersion", api::kApiVersion},
                            {"kind", api::kKind},
                            {"metadata", {{"name", name}, {"namespace", kNs}}},
                            {"spec", spec}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // name → resourceVersion of the job and its pods, on the server.
  std::map<std::string, std::string> ServerState(const std::string& job) const {
    std::map<std::string, std::string> out;
    if (auto j = Jobs().Get(job); j.ok()) out["job"] = kube::ResourceVersionOf(*j);
    if (auto nodes = Nodes().ListAll(); nodes.ok()) {
      for (const Json& n : nodes->items) out["node/" + kube::NameOf(n)] = kube::ResourceVersionOf(n);
    }
    kube::ListOptions lo;
    lo.label_selector = std::string(api::kLabelJobName) + "=" + job;
    if (auto pods = Pods().ListAll(lo); pods.ok()) {
      for (const Json& p : pods->items) out[kube::NameOf(p)] = kube::ResourceVersionOf(p);
    }
    return out;
  }
  std::map<std::string, std::string> CacheState(const std::string& job) const {
    std::map<std::string, std::string> out;
    if (auto j = job_informer_->store().Get(std::string(kNs) + "/" + job)) out["job"] = kube::ResourceVersionOf(*j);
    for (const auto& n : node_informer_->store().List()) out["node/" + kube::NameOf(*n)] = kube::ResourceVersionOf(*n);
    for (const auto& p : pod_informer_->store().List()) {
      const Json labels = (*p)["metadata"].value("labels", Json::object());
      if (labels.value(api::kLabelJobName, "") == job) out[kube::NameOf(*p)] = kube::ResourceVersionOf(*p);
    }
    return out;
  }
  void WaitCaches(const std::string& job) {
    for (int i = 0; i < 200; ++i) {
      if (ServerState(job) == CacheState(job)) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "caches did not catch up for " << job;
  }
  // Reconciles until a pass changes nothing on the server (bounded).
  void Converge(const std::string& job, Reconciler* r = nullptr) {
    r = r ? r : reconciler_.get();
    for (int i = 0; i < 20; ++i) {
      WaitCaches(job);
      auto before = ServerState(job);
      auto res = r->Reconcile(std::string(kNs) + "/" + job);
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      FinalizeDeletions(job);
      if (ServerState(job) == before) return;
    }
    FAIL() << "no convergence for " << job;
  }

  Json Job(const std::string& name) const {
    auto j = Jobs().Get(name);
    EXPECT_TRUE(j.ok());
    return j.ok() ? *j : Json();
  }
  std::vector<Json> JobPods(const std::string& job) const {
    kube::ListOptions lo;
    lo.label_selector = std::string(api::kLabelJobName) + "=" + job;
    auto pods = Pods().ListAll(lo);
    EXPECT_TRUE(pods.ok());
    std::vector<Json> out;
    if (pods.ok()) {
      for (const Json& p : pods->items) out.push_back(p);
    }
    std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) { return kube::NameOf(a) < kube::NameOf(b); });
    return out;
  }
  std::string Condition(const std::string& job, const std::string& type, const char* field = "status") const {
    for (const Json& c : Job(job)["status"].value("conditions", Json::array())) {
      if (c["type"] == type) return c[field];
    }
    return "";
  }
  // The kubelet's part: pod phase and the trainer container's exit code.
  void SetPhase(const std::string& pod, const std::string& phase, std::optional<int> exit_code = std::nullopt,
                const std::string& message = "") {
    Json status = {{"phase", phase}};
    if (exit_code) {
      status["containerStatuses"] = Json::array(
          {{{"name", "trainer"},
            {"state", {{"terminated", {{"exitCode", *exit_code}, {"message", message}, {"reason", "Error"}}}}}}});
    }
    auto r = Pods().PatchStatus(pod, {{"status", status}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // A failed trainer container with its termination time (RFC 3339).
  void SetFailedAt(const std::string& pod, int exit_code, const std::string& finished_at) {
    Json status = {{"phase", "Failed"}};
    const Json terminated = {{"exitCode", exit_code}, {"reason", "Error"}, {"finishedAt", finished_at}};
    status["containerStatuses"] =
        Json::array({{{"name", "trainer"}, {"state", {{"terminated", terminated}}}}});
    auto r = Pods().PatchStatus(pod, {{"status", status}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void SetAllPhases(const std::string& job, const std::string& phase, std::optional<int> code = std::nullopt) {
    for (const Json& p : JobPods(job)) SetPhase(kube::NameOf(p), phase, code);
  }
  // A running two-pod job `name` on nodes `name`-a and `name`-b (pods
  // `name`-node-0 and -1), backoff limit 5.
  void StartTwoNodeJob(const std::string& name, int max_repeat_offenders) {
    CreateNode(name + "-a", "Schedulable");
    CreateNode(name + "-b", "Schedulable");
    Json spec = CpuSpec();
    spec["runPolicy"] = {{"backoffLimit", 5}};
    spec["faultPolicy"] = {{"maxRepeatOffenders", max_repeat_offenders}, {"healthyNodeValues", Json::array()}};
    CreateJob(name, spec);
    Converge(name);
    Bind(name + "-node-0", name + "-a");
    Bind(name + "-node-1", name + "-b");
    SetAllPhases(name, "Running");
    Converge(name);
  }
  void Bind(const std::string& pod, const std::string& node) {
    kube::Request r;
    r.method = "POST";
    r.path = "/api/v1/namespaces/" + std::string(kNs) + "/pods/" + pod + "/binding";
    r.body = Json{{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", pod}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}}
                 .dump();
    auto res = (*client_)->SendJson(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
  }
  // The kubelet confirms graceful deletions at once.
  void FinalizeDeletions(const std::string& job) {
    for (const Json& p : JobPods(job)) {
      if (!p["metadata"].contains("deletionTimestamp")) continue;
      kube::DeleteOptions o;
      o.grace_period_seconds = 0;
      auto r = Pods().Delete(kube::NameOf(p), o);
      ASSERT_TRUE(r.ok() || kube::IsNotFound(r.status())) << r.status().ToString();
    }
  }
  std::vector<std::string> EventReasons(const std::string& job) const {
    std::vector<std::string> out;
    auto evs = kube::ResourceClient(*client_, kube::resources::kEvents, kNs).ListAll();
    EXPECT_TRUE(evs.ok());
    if (evs.ok()) {
      for (const Json& e : evs->items) {
        if (e["involvedObject"].value("name", "") == job) out.push_back(e.value("reason", ""));
      }
    }
    return out;
  }

  static inline kubelocal::testing::KubeLocal* kl_ = nullptr;
  static inline std::shared_ptr<kube::RestClient>* client_ = nullptr;
  std::unique_ptr<kube::Informer> job_informer_, pod_informer_, node_informer_, cm_informer_;
  std::unique_ptr<Reconciler> reconciler_;
  metrics::Registry registry_;
  ReconcilerCounters counters_{&registry_};
  std::chrono::system_clock::time_point now_ = std::chrono::system_clock::from_time_t(1'800'000'000);
};

}  // namespace hypertrain::controller::testing
