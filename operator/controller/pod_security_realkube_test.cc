// Issue 35, item 8: the trainer pod the operator builds by default passes Pod
// Security `baseline` on the real kube-apiserver 1.26 (envtest; its PodSecurity
// admission), and `restricted` once the template says the image runs as
// non-root; what restricted refuses without that is named. Skips, naming
// HYPERTRAIN_KUBE_BINARIES, without the binaries (fails under CI).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/envtest/control_plane.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class PodSecurityRealKubeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto bins = envtest::FindBinaries();
    if (!bins.ok()) {
      skip_ = new std::string(bins.status().message());
      return;
    }
    envtest::Options o;
    o.work_dir = std::string(std::getenv("TEST_TMPDIR")) + "/envtest";
    o.binaries = *bins;
    o.controller_manager = false;  // admission only: pods are never scheduled
    o.scheduler = false;
    auto cp = envtest::ControlPlane::Start(o);
    if (!cp.ok()) {
      error_ = new std::string(cp.status().ToString());
      return;
    }
    cp_ = cp->release();
    auto cfg = kube::LoadKubeconfig({cp_->kubeconfig()});
    cfg->max_retries = 0;
    client_ = new std::shared_ptr<kube::RestClient>(*kube::RestClient::Create(*cfg));
  }
  static void TearDownTestSuite() {
    delete client_;
    delete cp_;
  }
  void SetUp() override {
    if (skip_ && !envtest::MaySkipWithoutBinaries()) FAIL() << "under CI: " << *skip_;
    if (skip_) GTEST_SKIP() << *skip_;
    ASSERT_EQ(error_, nullptr) << *error_;
  }

  // A namespace enforcing `level`, with the job's trainer ServiceAccount (the
  // ServiceAccount admission plugin refuses a pod naming a missing one).
  static void MakeNamespace(const std::string& ns, const std::string& level) {
    json obj = {{"metadata",
                 {{"name", ns},
                  {"labels", {{"pod-security.kubernetes.io/enforce", level},
                              {"pod-security.kubernetes.io/enforce-version", "v1.26"}}}}}};
    auto r = kube::ResourceClient(*client_, kube::resources::kNamespaces).Create(obj);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto sa = kube::ResourceClient(*client_, kube::resources::kServiceAccounts, ns)
                  .Create({{"metadata", {{"name", "llama-trainer"}}}});
    ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  }

  // The pod of rank 0 for `spec_json` in `ns`, as the operator builds it.
  static StatusOr<json> CreatePod(const std::string& ns, const json& spec_json) {
    api::ObjectMeta job;
    job.name = "llama";
    job.namespace_ = ns;
    job.uid = "5d1e0c1a-0000-4000-8000-000000000001";
    auto spec = api::ParseSpec(spec_json, job);
    if (!spec.ok()) return spec.status();
    auto pod = BuildPod(job, *spec, PodOptions{});
    if (!pod.ok()) return pod.status();
    (*pod)["metadata"].erase("ownerReferences");  // no TrainingJob type in this API server
    return kube::ResourceClient(*client_, kube::resources::kPods, ns).Create(*pod);
  }

  static json GpuSpec() {
    return {{"image", "hypertrain:1"},
            {"instanceType", "ml.p5.48xlarge"},  // 8 GPUs, 32 EFA devices, hugepages
            {"nodes", 2},
            {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\nmodel: {sharding_strategy: full_shard}\n"}}},
            {"volumes", {{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "fsx-claim"}}}}}},
            {"volumeMounts", {{{"name", "fsx"}, {"mountPath", "/fsx"}}}}};
  }
  static json CpuSpec() {
    return {{"image", "hypertrain:1"},
            {"gpusPerNode", 0},
            {"nprocPerNode", 2},
            {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\nmodel: {sharding_strategy: full_shard}\n"}}}};
  }

  static inline envtest::ControlPlane* cp_ = nullptr;
  static inline std::shared_ptr<kube::RestClient>* client_ = nullptr;
  static inline std::string* skip_ = nullptr;
  static inline std::string* error_ = nullptr;
};

TEST_F(PodSecurityRealKubeTest, BaselineAdmitsTheDefaultTrainerPod) {
  MakeNamespace("baseline-gpu", "baseline");
  auto gpu = CreatePod("baseline-gpu", GpuSpec());
  EXPECT_TRUE(gpu.ok()) << gpu.status().ToString();
  MakeNamespace("baseline-cpu", "baseline");
  auto cpu = CreatePod("baseline-cpu", CpuSpec());
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  // The namespace's level is what guards it: a template asking for the host's
  // network is refused there (the trust model, docs/OPERATOR.md).
  json host = CpuSpec();
  host["podTemplate"] = {{"spec", {{"hostNetwork", true}}}};
  MakeNamespace("baseline-host", "baseline");
  auto refused = CreatePod("baseline-host", host);
  ASSERT_FALSE(refused.ok()) << "baseline admitted hostNetwork";
  EXPECT_EQ(refused.status().http_status(), 403);
  EXPECT_THAT(refused.status().message(), HasSubstr("hostNetwork"));
}

TEST_F(PodSecurityRealKubeTest, RestrictedAdmitsItOnceTheImageRunsAsNonRoot) {
  // The operator cannot know whether spec.image runs as root: restricted names
  // runAsNonRoot and nothing else.
  MakeNamespace("restricted-default", "restricted");
  auto refused = CreatePod("restricted-default", GpuSpec());
  ASSERT_FALSE(refused.ok()) << "restricted admitted a pod that may run as root";
  EXPECT_THAT(refused.status().message(), HasSubstr("runAsNonRoot"));
  for (const char* other : {"allowPrivilegeEscalation", "capabilities", "seccompProfile", "restricted volume"}) {
    EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr(other))) << other;
  }
  // The project's trainer image runs as 1000 (images/trainer.Dockerfile).
  for (json spec : {GpuSpec(), CpuSpec()}) {
    spec["podTemplate"] = {{"spec", {{"securityContext", {{"runAsNonRoot", true}, {"runAsUser", 1000}}}}}};
    const std::string ns = std::string("restricted-") + (spec.contains("instanceType") ? "gpu" : "cpu");
    MakeNamespace(ns, "restricted");
    auto pod = CreatePod(ns, spec);
    ASSERT_TRUE(pod.ok()) << ns << ": " << pod.status().ToString();
    const json& sc = (*pod)["spec"]["containers"][0]["securityContext"];
    EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
    EXPECT_EQ(sc["capabilities"]["drop"], json({"ALL"}));
    EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
  }
}

}  // namespace
}  // namespace hypertrain::controller
