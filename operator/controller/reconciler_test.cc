// Reconciler against the real local control plane (//localcluster/apiserver:kube-local): the
// CRD is installed from crds/, informers feed the caches, and the test plays
// the kubelet by patching pod status. Time is a test clock.
#include "operator/controller/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "core/time.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "operator/controller/builders.h"
#include "kube/informer.h"
#include "kube/rest_client.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"

namespace hypertrain::controller {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kNs[] = "rt";
constexpr char kConfig[] = "trainer:\n  max_steps: 50\nmodel:\n  sharding_strategy: hybrid_shard\n";

const kube::ResourceType kCrdType{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
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

TEST_F(ReconcilerTest, CreatesRunsAndSucceeds) {
  CreateJob("ok", CpuSpec());
  Converge("ok");
  auto pods = JobPods("ok");
  ASSERT_EQ(pods.size(), 2u);
  EXPECT_EQ(kube::NameOf(pods[0]), "ok-node-0");
  EXPECT_EQ(pods[0]["metadata"]["labels"][api::kLabelRestartAttempt], "0");
  auto svc = kube::ResourceClient(*client_, kube::resources::kServices, kNs).Get("ok");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
  ASSERT_TRUE(kube::ResourceClient(*client_, kube::resources::kConfigMaps, kNs).Get("ok-config").ok());
  // The pods' own identity and the one object it may write exist before the pods.
  EXPECT_TRUE(kube::ResourceClient(*client_, kube::resources::kServiceAccounts, kNs).Get("ok-trainer").ok());
  EXPECT_TRUE(Progress().Get("ok-progress").ok());
  EXPECT_TRUE(kube::ResourceClient(*client_, kube::resources::kRoles, kNs).Get("ok-progress").ok());
  EXPECT_TRUE(kube::ResourceClient(*client_, kube::resources::kRoleBindings, kNs).Get("ok-progress").ok());
  EXPECT_EQ(pods[0]["spec"]["serviceAccountName"], "ok-trainer");
  Json st = Job("ok")["status"];
  EXPECT_EQ(st["state"], "Created");
  EXPECT_EQ(st["worldSize"], 4);
  EXPECT_EQ(st["startTime"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(counters_.jobs_created->With({kNs}).Value(), 1);

  // Idempotent: more passes (and a fresh reconciler, as after an operator restart) change nothing.
  auto before = ServerState("ok");
  Converge("ok", MakeReconciler().get());
  EXPECT_EQ(ServerState("ok"), before);

  SetAllPhases("ok", "Running");
  Converge("ok");
  EXPECT_EQ(Job("ok")["status"]["state"], "Running");
  EXPECT_EQ(Job("ok")["status"]["pods"]["active"], 2);

  ReportProgress("ok", R"({"step": 7, "loss": 3.25})");
  Converge("ok");
  Json progress = Job("ok")["status"]["progress"];
  EXPECT_EQ(progress["step"], 7);
  EXPECT_EQ(progress["maxSteps"], 50);
  EXPECT_EQ(progress["loss"], 3.25);

  SetAllPhases("ok", "Succeeded", 0);
  now_ += 10s;
  Converge("ok");
  st = Job("ok")["status"];
  EXPECT_EQ(st["state"], "Succeeded");
  EXPECT_EQ(st["completionTime"], "2027-01-15T08:00:10Z");
  EXPECT_EQ(Condition("ok", "Running"), "False");
  EXPECT_EQ(JobPods("ok").size(), 2u) << "cleanPodPolicy Running keeps finished pods";
  auto reasons = EventReasons("ok");
  for (const char* r : {"JobCreated", "PodsRunning", "AllPodsSucceeded"}) {
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), r), reasons.end()) << r;
  }
  EXPECT_EQ(counters_.jobs_succeeded->With({kNs}).Value(), 1);
}

TEST_F(ReconcilerTest, InvalidSpecFailsNamingTheFieldAndCreatesNothing) {
  Json spec = CpuSpec();
  spec["trainerConfig"]["inline"] = "trainer: {max_steps: 5}\nmodel: {shard_degree: 3}\n";
  CreateJob("bad", spec);
  Converge("bad");
  Json st = Job("bad")["status"];
  EXPECT_EQ(st["state"], "Failed");
  EXPECT_EQ(Condition("bad", "Failed", "reason"), "InvalidSpec");
  EXPECT_THAT(Condition("bad", "Failed", "message"), HasSubstr("spec.trainerConfig.inline: model.shard_degree"));
  EXPECT_TRUE(JobPods("bad").empty());
  EXPECT_FALSE(kube::ResourceClient(*client_, kube::resources::kServices, kNs).Get("bad").ok());
}

TEST_F(ReconcilerTest, GangRestartThenBudgetExhausted) {
  Json spec = CpuSpec();
  spec["runPolicy"] = {{"backoffLimit", 1}};
  CreateJob("gang", spec);
  Converge("gang");
  SetAllPhases("gang", "Running");
  Converge("gang");
  SetPhase("gang-node-1", "Failed", 137, "OOMKilled");
  Converge("gang");
  Json st = Job("gang")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["restartAttempt"], 1);
  EXPECT_EQ(st["state"], "Restarting");
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  auto pods = JobPods("gang");
  ASSERT_EQ(pods.size(), 2u) << "the whole gang is recreated";
  for (const Json& p : pods) EXPECT_EQ(p["metadata"]["labels"][api::kLabelRestartAttempt], "1");
  for (const Json& p : pods) {
    bool found = false;
    for (const Json& e : p["spec"]["containers"][0]["env"]) {
      if (e["name"] == "RESTART_ATTEMPT") found = e["value"] == "1";
    }
    EXPECT_TRUE(found);
  }
  SetAllPhases("gang", "Running");
  Converge("gang");
  EXPECT_EQ(Job("gang")["status"]["state"], "Running");
  SetPhase("gang-node-0", "Failed", 201, "collective timeout");
  Converge("gang");
  // Only a follow-on exit (no finishedAt) while node 1 runs: the settle window
  // counts from when the reconciler first saw it.
  EXPECT_EQ(Job("gang")["status"]["state"], "Running");
  now_ += ReconcilerOptions{}.fault_settle_window;
  Converge("gang");
  EXPECT_EQ(Condition("gang", "Failed", "reason"), "BackoffLimitExceeded");
  EXPECT_EQ(Job("gang")["status"]["restartCount"], 1);
  EXPECT_EQ(counters_.jobs_restarted->With({kNs}).Value(), 1);
}

TEST_F(ReconcilerTest, NonRetryableExitFailsAtOnceAndCleansRunningPods) {
  CreateJob("cfg", CpuSpec());
  Converge("cfg");
  SetAllPhases("cfg", "Running");
  Converge("cfg");
  SetPhase("cfg-node-0", "Failed", 2, "model.hidden_size: must be > 0");
  Converge("cfg");
  EXPECT_EQ(Condition("cfg", "Failed", "reason"), "NonRetryableExitCode");
  EXPECT_THAT(Condition("cfg", "Failed", "message"), HasSubstr("exited with code 2: model.hidden_size"));
  EXPECT_EQ(Job("cfg")["status"]["restartCount"], 0);
  auto pods = JobPods("cfg");
  ASSERT_EQ(pods.size(), 1u) << "the running pod is deleted (cleanPodPolicy Running)";
  EXPECT_EQ(kube::NameOf(pods[0]), "cfg-node-0");
}

TEST_F(ReconcilerTest, SuspendDeletesPodsAndResumeRecreatesThem) {
  CreateJob("sus", CpuSpec());
  Converge("sus");
  SetAllPhases("sus", "Running");
  Converge("sus");
  ASSERT_TRUE(Jobs().Patch("sus", {{"spec", {{"runPolicy", {{"suspend", true}}}}}}).ok());
  Converge("sus");
  EXPECT_EQ(Job("sus")["status"]["state"], "Suspended");
  EXPECT_TRUE(JobPods("sus").empty());
  EXPECT_EQ(Job("sus")["status"]["startTime"], "2027-01-15T08:00:00Z") << "status kept";
  ASSERT_TRUE(Jobs().Patch("sus", {{"spec", {{"runPolicy", {{"suspend", false}}}}}}).ok());
  Converge("sus");
  EXPECT_EQ(JobPods("sus").size(), 2u);
  EXPECT_EQ(Condition("sus", "Suspended"), "False");
  EXPECT_EQ(Condition("sus", "Suspended", "reason"), "JobResumed");
  auto reasons = EventReasons("sus");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "JobSuspended"), reasons.end());
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "JobResumed"), reasons.end());
}

TEST_F(ReconcilerTest, DeadlineThenTtl) {
  Json spec = CpuSpec();
  spec["runPolicy"] = {{"activeDeadlineSeconds", 60}, {"ttlSecondsAfterFinished", 30}};
  CreateJob("dl", spec);
  Converge("dl");
  SetAllPhases("dl", "Running");
  now_ += 30s;
  Converge("dl");
  EXPECT_EQ(Job("dl")["status"]["state"], "Running");
  now_ += 31s;
  Converge("dl");
  EXPECT_EQ(Condition("dl", "Failed", "reason"), "DeadlineExceeded");
  EXPECT_TRUE(JobPods("dl").empty()) << "running pods are cleaned";
  now_ += 29s;
  Converge("dl");
  EXPECT_TRUE(Jobs().Get("dl").ok());
  now_ += 2s;
  WaitCaches("dl");
  ASSERT_TRUE(reconciler_->Reconcile(std::string(kNs) + "/dl").ok());
  auto gone = Jobs().Get("dl");
  EXPECT_TRUE(!gone.ok() || gone->at("metadata").contains("deletionTimestamp")) << "TTL deletes the job";
}

TEST_F(ReconcilerTest, RestartMidCreateMakesNoDuplicates) {
  CreateJob("crash", CpuSpec(3));
  // A previous operator created one pod and died before anything else.
  auto meta = api::ParseObjectMeta(Job("crash")["metadata"]);
  ASSERT_TRUE(meta.ok());
  auto spec = api::ParseSpec(Job("crash")["spec"], *meta);
  ASSERT_TRUE(spec.ok());
  auto pod = BuildPod(*meta, *spec, PodOptions{1, 0, {}});
  ASSERT_TRUE(Pods().Create(*pod).ok());
  // Two operators (a stale standby and the new leader) reconcile the same state.
  auto other = MakeReconciler();
  WaitCaches("crash");
  auto first = other->Reconcile(std::string(kNs) + "/crash");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // The second works from the same (now stale) cache: it may only requeue or
  // lose the status write with a 409; it must not create anything twice.
  auto second = reconciler_->Reconcile(std::string(kNs) + "/crash");
  EXPECT_TRUE(second.ok() || kube::IsConflict(second.status())) << second.status().ToString();
  Converge("crash");
  auto pods = JobPods("crash");
  ASSERT_EQ(pods.size(), 3u);
  EXPECT_EQ(kube::NameOf(pods[2]), "crash-node-2");
}

TEST_F(ReconcilerTest, RepeatOffenderNodeIsExcluded) {
  Json spec = CpuSpec(1);
  spec["runPolicy"] = {{"backoffLimit", 5}};
  spec["faultPolicy"] = {{"maxRepeatOffenders", 2}, {"healthyNodeValues", Json::array()}};
  CreateJob("rep", spec);
  for (int round = 0; round < 2; ++round) {
    Converge("rep");
    Bind("rep-node-0", "node-a");
    SetPhase("rep-node-0", "Failed", 200, "retryable");
    Converge("rep");
  }
  Json st = Job("rep")["status"];
  EXPECT_EQ(st["nodeFaults"]["node-a"], 2);
  EXPECT_EQ(st["excludedNodes"], Json({"node-a"}));
  EXPECT_EQ(st["lastFault"]["node"], "node-a");
  auto pods = JobPods("rep");
  ASSERT_EQ(pods.size(), 1u);
  const Json& expr = pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                         ["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "kubernetes.io/hostname");
  EXPECT_EQ(expr["operator"], "NotIn");
  EXPECT_EQ(expr["values"], Json({"node-a"}));
  auto reasons = EventReasons("rep");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "NodeFault"), reasons.end());
}


// Several pods of a gang failed before the operator looked: the fault is the
// root cause's, not the lowest rank's. A killed rank (137) outranks its peer
// that then lost a collective (200) even when the peer finished first; among
// follow-on exits the earliest finishedAt wins.
TEST_F(ReconcilerTest, GangFaultIsAttributedToTheRootCausePod) {
  Json spec = CpuSpec();
  spec["runPolicy"] = {{"backoffLimit", 5}};
  spec["faultPolicy"] = {{"maxRepeatOffenders", 1}, {"healthyNodeValues", Json::array()}};
  CreateJob("root", spec);
  Converge("root");
  Bind("root-node-0", "node-a");  // nodes the fake cluster does not list: no
  Bind("root-node-1", "node-b");  // Running phase, or the pods count as lost
  SetFailedAt("root-node-0", 200, "2026-11-22T07:13:08Z");
  SetFailedAt("root-node-1", 137, "2026-11-22T07:13:09Z");
  Converge("root");
  Json st = Job("root")["status"];
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["node"], "node-b");
  EXPECT_EQ(st["excludedNodes"], Json({"node-b"}));

  // Next attempt: both ranks exit 200; the one that finished first caused it.
  Converge("root");
  Bind("root-node-0", "node-c");
  Bind("root-node-1", "node-a");
  SetFailedAt("root-node-0", 200, "2026-11-22T07:14:02Z");
  SetFailedAt("root-node-1", 200, "2026-11-22T07:14:01Z");
  Converge("root");
  st = Job("root")["status"];
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["node"], "node-a");
  EXPECT_EQ(st["excludedNodes"], Json({"node-b", "node-a"}));
}

// The killed rank's own status arrives after its peer's follow-on exit (the
// race CI's faults_test hit): the reconciler waits instead of blaming the peer.
TEST_F(ReconcilerTest, FollowOnExitWaitsForTheRootCause) {
  StartTwoNodeJob("settle", 1);
  ASSERT_EQ(Job("settle")["status"]["state"], "Running");

  SetFailedAt("settle-node-0", 200, FormatRfc3339(now_));  // the peer noticed first
  WaitCaches("settle");
  auto r = reconciler_->Reconcile(std::string(kNs) + "/settle");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requeue_after.value_or(0ms), ReconcilerOptions{}.fault_settle_window) << "waiting must requeue";
  now_ += 1s;
  Converge("settle");
  Json st = Job("settle")["status"];
  EXPECT_EQ(st["state"], "Running");
  EXPECT_EQ(st.value("restartCount", 0), 0);
  EXPECT_FALSE(st.contains("lastFault"));
  EXPECT_EQ(st["pods"]["failed"], 1);
  EXPECT_EQ(JobPods("settle").size(), 2u) << "no pod is deleted while settling";

  SetFailedAt("settle-node-1", 137, FormatRfc3339(now_));  // the killed rank's status lands
  Converge("settle");
  st = Job("settle")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["node"], "settle-b");
  EXPECT_EQ(st["excludedNodes"], Json({"settle-b"}));
  EXPECT_FALSE(st["nodeFaults"].contains("settle-a")) << "the innocent peer's node is not counted";

  // Next attempt: a follow-on exit, then the running peer's node vanishes: a
  // root cause without an exit code, acted on at once (no waiting).
  Converge("settle");
  Bind("settle-node-0", "settle-a");
  Bind("settle-node-1", "settle-a");
  SetAllPhases("settle", "Running");
  Converge("settle");
  SetFailedAt("settle-node-1", 201, FormatRfc3339(now_));
  Converge("settle");
  EXPECT_EQ(Job("settle")["status"]["restartCount"], 1);
  ASSERT_TRUE(Nodes().Delete("settle-a").ok());
  Converge("settle");
  st = Job("settle")["status"];
  EXPECT_EQ(st["restartCount"], 2);
  EXPECT_EQ(Condition("settle", "Restarting", "reason"), "PodLost");
  EXPECT_EQ(st["lastFault"]["rank"], 0);
  ASSERT_TRUE(Nodes().Delete("settle-b").ok());
}

// No root cause shows up: once the window since the follow-on exit's
// finishedAt has passed, the follow-on pod is blamed, as without the window.
// The window is read from the pod's status, so a fresh reconciler (an operator
// restart) honours it as well; a window of 0 turns the wait off.
TEST_F(ReconcilerTest, SettleWindowExpiresThenTheFollowOnPodIsBlamed) {
  StartTwoNodeJob("expire", 0);
  const auto window = ReconcilerOptions{}.fault_settle_window;
  SetFailedAt("expire-node-1", 200, FormatRfc3339(now_ - 1s));
  Converge("expire", MakeReconciler().get());
  EXPECT_EQ(Job("expire")["status"].value("restartCount", 0), 0);
  WaitCaches("expire");
  now_ += window - 2s;
  auto fresh = MakeReconciler();
  auto r = fresh->Reconcile(std::string(kNs) + "/expire");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requeue_after.value_or(0ms), 1000ms) << "the rest of the window since finishedAt";
  EXPECT_EQ(Job("expire")["status"].value("restartCount", 0), 0);
  now_ += 1s;
  Converge("expire", MakeReconciler().get());
  Json st = Job("expire")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 200);
  EXPECT_EQ(st["lastFault"]["node"], "expire-b");

  // Window 0: the follow-on exit is acted on at once.
  Converge("expire");
  Bind("expire-node-0", "expire-a");
  Bind("expire-node-1", "expire-b");
  SetAllPhases("expire", "Running");
  Converge("expire");
  SetFailedAt("expire-node-0", 201, FormatRfc3339(now_));
  ReconcilerOptions o = TestOptions();
  o.fault_settle_window = 0ms;
  Reconciler no_wait(std::move(o));
  Converge("expire", &no_wait);
  st = Job("expire")["status"];
  EXPECT_EQ(st["restartCount"], 2);
  EXPECT_EQ(st["lastFault"]["rank"], 0);
  EXPECT_EQ(st["lastFault"]["exitCode"], 201);
  ASSERT_TRUE(Nodes().Delete("expire-a").ok());
  ASSERT_TRUE(Nodes().Delete("expire-b").ok());
}

TEST_F(ReconcilerTest, ControlPlaneValidatesAndDefaultsThroughTheCrd) {
  auto create = [&](const std::string& name, const Json& spec) {
    return Jobs().Create({{"apiVersion", api::kApiVersion},
                          {"kind", api::kKind},
                          {"metadata", {{"name", name}, {"namespace", kNs}}},
                          {"spec", spec}});
  };
  Json spec = CpuSpec();
  spec["nodes"] = 0;
  auto bad = create("v-nodes", spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(kube::IsInvalid(bad.status())) << bad.status().ToString();
  EXPECT_THAT(bad.status().message(), HasSubstr("spec.nodes"));
  spec = CpuSpec();
  spec["runPolicy"] = {{"cleanPodPolicy", "Sometimes"}};
  auto bad2 = create("v-policy", spec);
  ASSERT_FALSE(bad2.ok());
  EXPECT_THAT(bad2.status().message(), HasSubstr("spec.runPolicy.cleanPodPolicy"));
  spec = CpuSpec();
  spec.erase("image");
  EXPECT_FALSE(create("v-image", spec).ok());

  spec = CpuSpec();
  spec["gpusPerNod"] = 8;  // a typo: pruned, as by kube-apiserver
  auto ok = create("v-ok", spec);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const Json& s = (*ok)["spec"];
  EXPECT_FALSE(s.contains("gpusPerNod"));
  EXPECT_EQ(s["masterPort"], 29500);
  EXPECT_EQ(s["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(s["runPolicy"]["backoffLimit"], 3);
  EXPECT_EQ(s["runPolicy"]["cleanPodPolicy"], "Running");
  EXPECT_FALSE(s["faultPolicy"].contains("nonRetryableExitCodes"));
  EXPECT_EQ(s["faultPolicy"]["deepHealthCheck"], "Preferred");
  EXPECT_EQ(s["faultPolicy"]["nodeHealthLabel"], "sagemaker.amazonaws.com/node-health-status");
}


TEST_F(ReconcilerTest, HangWithoutStepProgressRestartsTheGang) {
  Json spec = CpuSpec();
  spec["faultPolicy"] = {{"hangTimeoutSeconds", 600}, {"startupTimeoutSeconds", 900}, {"healthyNodeValues", Json::array()}};
  CreateJob("hang", spec);
  Converge("hang");
  SetAllPhases("hang", "Running");
  Converge("hang");
  ASSERT_EQ(Job("hang")["status"]["state"], "Running");
  // Progress within the start-up allowance, then the step stops advancing.
  now_ += 800s;
  ReportProgress("hang", R"({"step": 3})");
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
  now_ += 599s;
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
  now_ += 2s;
  Converge("hang");
  Json st = Job("hang")["status"];
  EXPECT_EQ(st["state"], "Restarting");
  EXPECT_EQ(Condition("hang", "Restarting", "reason"), "Hang");
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_THAT(st["lastFault"]["message"].get<std::string>(), HasSubstr("no step progress"));
  auto pods = JobPods("hang");
  ASSERT_EQ(pods.size(), 2u);
  for (const Json& p : pods) EXPECT_EQ(p["metadata"]["labels"][api::kLabelRestartAttempt], "1");
  // The new attempt gets the start-up allowance again, not the stale progress time.
  SetAllPhases("hang", "Running");
  now_ += 10s;
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
}


TEST_F(ReconcilerTest, UnhealthyOrLostNodeRestartsTheGang) {
  CreateNode("hp-1", "Schedulable");
  CreateNode("hp-2", "Schedulable");
  Json spec = CpuSpec();
  spec["faultPolicy"] = {{"podPendingOrLostGraceSeconds", 120}, {"maxRepeatOffenders", 0}};
  CreateJob("health", spec);
  Converge("health");
  Bind("health-node-0", "hp-1");
  Bind("health-node-1", "hp-2");
  SetAllPhases("health", "Running");
  Converge("health");
  ASSERT_EQ(Job("health")["status"]["state"], "Running");
  // The node pods require the health label.
  const Json expr = JobPods("health")[0]["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], api::kHyperPodHealthLabel);

  ASSERT_TRUE(Nodes().Patch("hp-2", {{"metadata", {{"labels", {{api::kHyperPodHealthLabel, "UnschedulablePendingReplacement"}}}}}}).ok());
  Converge("health");
  Json st = Job("health")["status"];
  EXPECT_EQ(Condition("health", "Restarting", "reason"), "NodeUnhealthy");
  EXPECT_EQ(st["lastFault"]["node"], "hp-2");
  EXPECT_THAT(st["lastFault"]["message"].get<std::string>(), HasSubstr("UnschedulablePendingReplacement"));
  EXPECT_EQ(st["restartAttempt"], 1);

  // Next attempt: node hp-1 goes NotReady; the pod counts as lost only after the grace.
  Bind("health-node-0", "hp-1");
  Bind("health-node-1", "hp-1");
  SetAllPhases("health", "Running");
  Converge("health");
  SetNodeReady("hp-1", false, FormatRfc3339(now_));
  now_ += 60s;
  Converge("health");
  EXPECT_EQ(Job("health")["status"]["state"], "Running");
  now_ += 61s;
  Converge("health");
  EXPECT_EQ(Condition("health", "Restarting", "reason"), "PodLost");
  EXPECT_EQ(Job("health")["status"]["restartAttempt"], 2);
  ASSERT_TRUE(Nodes().Delete("hp-1").ok());
  ASSERT_TRUE(Nodes().Delete("hp-2").ok());
}

}  // namespace
}  // namespace hypertrain::controller
