// The reconciler against the real local control plane (reconciler_testing.h):
// creation, success, validation, suspend/resume, deadline and TTL, a restart
// in the middle of creating pods, CRD defaulting.
#include "operator/controller/reconciler_testing.h"

namespace hypertrain::controller {
namespace {

using testing::kConfig;
using testing::kNs;
using testing::ReconcilerTest;
using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

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
  // Issue 35, item 2: typos inside the core/v1 parts too (their schemas are structural).
  spec["podTemplate"] = {{"spec", {{"securityContxt", {{"runAsUser", 1000}}}, {"securityContext", {{"fsGroup", 1}}}}}};
  auto ok = create("v-ok", spec);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const Json& s = (*ok)["spec"];
  EXPECT_FALSE(s.contains("gpusPerNod"));
  EXPECT_FALSE(s["podTemplate"]["spec"].contains("securityContxt"));
  EXPECT_EQ(s["podTemplate"]["spec"]["securityContext"]["fsGroup"], 1);
  EXPECT_EQ(s["masterPort"], 29500);
  EXPECT_EQ(s["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(s["runPolicy"]["backoffLimit"], 3);
  EXPECT_EQ(s["runPolicy"]["cleanPodPolicy"], "Running");
  EXPECT_FALSE(s["faultPolicy"].contains("nonRetryableExitCodes"));
  EXPECT_EQ(s["faultPolicy"]["deepHealthCheck"], "Preferred");
  EXPECT_EQ(s["faultPolicy"]["nodeHealthLabel"], "sagemaker.amazonaws.com/node-health-status");
}

}  // namespace
}  // namespace hypertrain::controller
