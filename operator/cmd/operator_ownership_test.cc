// The operator at the trust boundary (issue 35, items 1, 5, 6), on kube-local
// and on the real kube-apiserver 1.26 (envtest; skipped where its binaries are
// missing), the operator watching every namespace:
//  - it adopts nothing: a Role or ConfigMap made in advance under a job's
//    names, or a labelled Service controlled by something else, stops the job
//    with Created=False/OwnershipConflict and a Warning naming the object;
//    nothing is bound to or mounted from it, no pod is made; once the object is
//    gone the job starts;
//  - a job created again under the name of one whose pod still terminates is
//    Pending/PreviousJobTerminating, then starts once the pod is gone;
//  - a job in kube-system is Pending/NamespaceExcluded with a Warning;
//  - the trainer's token (a TokenRequest of the job's ServiceAccount on the
//    real server) strips its progress ConfigMap's ownerReferences and labels
//    and adds a finalizer: the operator restores them, and after the job's
//    deletion, and the namespace's, the ConfigMap is gone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "kube/status.h"
#include "localcluster/envtest/control_plane.h"
#include "localcluster/testing/files.h"
#include "operator/api/training_job.h"
#include "operator/cmd/operator_testing.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::operatorcmd {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class OperatorOwnershipTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    op_bin_ = kubelocal::testing::Runfile("operator/cmd/hypertrain-operator");
    ASSERT_FALSE(op_bin_.empty());
    dir_ = kubelocal::testing::MakeTempDir("operator-ownership");
    if (GetParam() == "KubeLocal") {
      auto local = std::make_unique<LocalCluster>(dir_);
      ASSERT_EQ(local->Start(), "");
      cluster_ = std::move(local);
    } else {
      auto real = std::make_unique<RealCluster>();
      bool skip = false;
      const std::string err = real->Start(dir_, &skip);
      if (skip && !envtest::MaySkipWithoutBinaries()) FAIL() << "under CI: " << err;
      if (skip) GTEST_SKIP() << err;
      ASSERT_EQ(err, "");
      cluster_ = std::move(real);
    }
    client_ = ClientWithJobCrd(cluster_->kubeconfig());
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(WaitFor([&] { return Jobs().List().ok(); }, 10s));
    op_ = std::make_unique<OperatorProcess>(op_bin_, cluster_->kubeconfig(), "op-ownership", dir_ + "/op.log",
                                            std::vector<std::string>{}, /*all_namespaces=*/true);
  }

  kube::ResourceClient Jobs(const std::string& ns = kNs) const {
    return kube::ResourceClient(client_, controller::TrainingJobType(), ns);
  }
  kube::ResourceClient Of(const kube::ResourceType& t, const std::string& ns = kNs) const {
    return kube::ResourceClient(client_, t, ns);
  }
  void CreateJob(const std::string& name, const std::string& ns = kNs) {
    Json spec = {{"image", "hypertrain:test"},
                 {"nodes", 1},
                 {"nprocPerNode", 1},
                 {"trainerConfig", {{"inline", "trainer: {max_steps: 5}\nmodel: {}\n"}}},
                 {"faultPolicy", {{"healthyNodeValues", Json::array()}}}};
    auto r = Jobs(ns).Create(
        {{"apiVersion", api::kApiVersion}, {"kind", api::kKind}, {"metadata", {{"name", name}}}, {"spec", spec}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Json JobStatus(const std::string& job, const std::string& ns = kNs) const {
    auto j = Jobs(ns).Get(job);
    return j.ok() ? j->value("status", Json::object()) : Json::object();
  }
  Json Condition(const std::string& job, const std::string& type, const std::string& ns = kNs) const {
    for (const Json& c : JobStatus(job, ns).value("conditions", Json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return Json::object();
  }
  bool Warning(const std::string& job, const std::string& reason, const std::string& needle,
               const std::string& ns = kNs) const {
    auto l = Of(kube::resources::kEvents, ns).ListAll();
    if (!l.ok()) return false;
    for (const Json& e : l->items) {
      if (e["involvedObject"].value("name", "") == job && e.value("type", "") == "Warning" &&
          e.value("reason", "") == reason && e.value("message", "").find(needle) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  int PodCount(const std::string& job, const std::string& ns = kNs) const {
    kube::ListOptions lo;
    lo.label_selector = std::string(api::kLabelJobName) + "=" + job;
    auto l = Of(kube::resources::kPods, ns).ListAll(lo);
    return l.ok() ? static_cast<int>(l->items.size()) : -1;
  }
  bool Gone(const kube::ResourceType& t, const std::string& name, const std::string& ns = kNs) const {
    return kube::IsNotFound(Of(t, ns).Get(name).status());
  }
  std::string ControllerUid(const kube::ResourceType& t, const std::string& name) const {
    auto o = Of(t).Get(name);
    if (!o.ok()) return "";
    for (const Json& r : (*o)["metadata"].value("ownerReferences", Json::array())) {
      if (r.value("controller", false)) return r.value("uid", "");
    }
    return "";
  }
  std::string JobUid(const std::string& name) const {
    auto j = Jobs().Get(name);
    return j.ok() ? kube::UidOf(*j) : "";
  }
  // The client the job's pods hold: on the real server a TokenRequest token of
  // the trainer's ServiceAccount (so RBAC decides what it may do); kube-local
  // has no RBAC, so there the admin's client stands in.
  std::shared_ptr<kube::RestClient> TrainerClient(const std::string& ns, const std::string& sa) {
    if (GetParam() == "KubeLocal") return client_;
    kube::Request req;
    req.method = "POST";
    req.path = "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token";
    req.body = Json{{"apiVersion", "authentication.k8s.io/v1"},
                    {"kind", "TokenRequest"},
                    {"spec", {{"expirationSeconds", 600}}}}
                   .dump();
    auto tr = client_->SendJson(req);
    EXPECT_TRUE(tr.ok()) << tr.status().ToString();
    if (!tr.ok()) return nullptr;
    auto cfg = kube::LoadKubeconfig({cluster_->kubeconfig()});
    EXPECT_TRUE(cfg.ok());
    if (!cfg.ok()) return nullptr;
    cfg->client_cert_pem.clear();
    cfg->client_key_pem.clear();
    cfg->token = (*tr)["status"].value("token", "");
    cfg->qps = 0;
    auto c = kube::RestClient::Create(*cfg);
    return c.ok() ? *c : nullptr;
  }
  // What a hostile trainer does to its progress ConfigMap.
  void Tamper(const std::shared_ptr<kube::RestClient>& trainer, const std::string& ns, const std::string& cm) {
    ASSERT_NE(trainer, nullptr);
    const Json patch = {{"metadata", {{"finalizers", {"example.com/hold"}}, {"ownerReferences", nullptr},
                                      {"labels", nullptr}}}};
    auto r = kube::ResourceClient(trainer, kube::resources::kConfigMaps, ns).Patch(cm, patch);
    ASSERT_TRUE(r.ok()) << "the trainer's token may patch its progress ConfigMap: " << r.status().ToString();
    EXPECT_EQ((*r)["metadata"].value("finalizers", Json::array()).size(), 1u);
  }
  bool Intact(const std::string& ns, const std::string& cm, const std::string& job_uid) const {
    auto o = Of(kube::resources::kConfigMaps, ns).Get(cm);
    if (!o.ok()) return false;
    const Json& m = (*o)["metadata"];
    const Json refs = m.value("ownerReferences", Json::array());
    return m.value("finalizers", Json::array()).empty() && refs.size() == 1 && refs[0].value("uid", "") == job_uid &&
           refs[0].value("controller", false) && m.value("labels", Json::object()).contains(api::kLabelJobName);
  }

  std::string op_bin_, dir_;
  std::unique_ptr<Cluster> cluster_;
  std::shared_ptr<kube::RestClient> client_;
  std::unique_ptr<OperatorProcess> op_;
};

INSTANTIATE_TEST_SUITE_P(ApiServers, OperatorOwnershipTest, ::testing::Values("KubeLocal", "RealKubeApiserver"),
                         [](const auto& info) { return info.param; });

TEST_P(OperatorOwnershipTest, AdoptsNothingItDidNotCreate) {
  // A Role made in advance under job ops's progress Role name, allowing pod create/delete.
  ASSERT_TRUE(Of(kube::resources::kRoles)
                  .Create({{"metadata", {{"name", "ops-progress"}}},
                           {"rules", Json::array({{{"apiGroups", {""}},
                                                   {"resources", {"pods"}},
                                                   {"verbs", {"create", "delete"}}}})}})
                  .ok());
  // A ConfigMap made in advance under job web's config name.
  ASSERT_TRUE(Of(kube::resources::kConfigMaps)
                  .Create({{"metadata", {{"name", "web-config"}}}, {"data", {{"config.yaml", "evil: true\n"}}}})
                  .ok());
  // A Service under job lab's name, labelled like the operator's (so the cache
  // holds it: no create is sent) but controlled by something else (an owner
  // that exists: the garbage collector would delete one whose owner does not).
  auto owner = Of(kube::resources::kConfigMaps).Create({{"metadata", {{"name", "lab-owner"}}}});
  ASSERT_TRUE(owner.ok());
  ASSERT_TRUE(Of(kube::resources::kServices)
                  .Create({{"metadata",
                            {{"name", "lab"},
                             {"labels", {{api::kLabelJobName, "lab"}}},
                             {"ownerReferences",
                              Json::array({{{"apiVersion", "v1"},
                                            {"kind", "ConfigMap"},
                                            {"name", "lab-owner"},
                                            {"uid", kube::UidOf(*owner)},
                                            {"controller", true}}})}}},
                           {"spec", {{"clusterIP", "None"}, {"ports", Json::array({{{"port", 29500}}})}}}})
                  .ok());
  CreateJob("ops");
  CreateJob("web");
  CreateJob("lab");
  for (const auto& [job, object] : std::vector<std::pair<std::string, std::string>>{
           {"ops", "Role ops-progress (no controller ownerReference)"},
           {"web", "ConfigMap web-config (no controller ownerReference)"},
           {"lab", "Service lab (controlled by ConfigMap lab-owner, uid " + kube::UidOf(*owner) + ")"}}) {
    ASSERT_TRUE(WaitFor([&] { return Condition(job, "Created").value("reason", "") == "OwnershipConflict"; }, 30s))
        << job << ": " << JobStatus(job).dump() << op_->Log();
    const Json c = Condition(job, "Created");
    EXPECT_EQ(c.value("status", ""), "False") << job;
    EXPECT_THAT(c.value("message", ""), HasSubstr(object)) << job;
    EXPECT_THAT(c.value("message", ""), HasSubstr("not controlled by this TrainingJob (uid " + JobUid(job) + ")"));
    EXPECT_EQ(JobStatus(job).value("state", ""), "Pending") << job;
    EXPECT_TRUE(WaitFor([&] { return Warning(job, "OwnershipConflict", object); }, 10s)) << job;
    EXPECT_EQ(PodCount(job), 0) << job;
  }
  // Nothing was bound to the foreign Role; the foreign objects are untouched.
  EXPECT_TRUE(Gone(kube::resources::kRoleBindings, "ops-progress"));
  EXPECT_EQ(ControllerUid(kube::resources::kRoles, "ops-progress"), "");
  EXPECT_EQ(ControllerUid(kube::resources::kConfigMaps, "web-config"), "");
  EXPECT_EQ((*Of(kube::resources::kConfigMaps).Get("web-config"))["data"].value("config.yaml", ""), "evil: true\n");
  // The foreign Role deleted: the retry makes the job's own, binds it and creates the pod.
  ASSERT_TRUE(Of(kube::resources::kRoles).Delete("ops-progress").ok());
  EXPECT_TRUE(WaitFor([&] { return PodCount("ops") == 1; }, 60s)) << JobStatus("ops").dump() << op_->Log();
  EXPECT_EQ(ControllerUid(kube::resources::kRoles, "ops-progress"), JobUid("ops"));
  EXPECT_EQ(ControllerUid(kube::resources::kRoleBindings, "ops-progress"), JobUid("ops"));
  EXPECT_TRUE(WaitFor([&] { return Condition("ops", "Created").value("status", "") == "True"; }, 10s));
  EXPECT_EQ(PodCount("web"), 0);
}

TEST_P(OperatorOwnershipTest, StateIsNeverBlank) {
  // A job created again while its namesake's pod still terminates (a finalizer holds it).
  CreateJob("again");
  ASSERT_TRUE(WaitFor([&] { return PodCount("again") == 1; }, 30s)) << op_->Log();
  ASSERT_TRUE(Of(kube::resources::kPods).Patch("again-node-0", {{"metadata", {{"finalizers", {"example.com/hold"}}}}}).ok());
  const std::string old_uid = JobUid("again");
  ASSERT_TRUE(Jobs().Delete("again").ok());
  ASSERT_TRUE(WaitFor([&] { return Gone(controller::TrainingJobType(), "again"); }, 30s));
  ASSERT_TRUE(WaitFor([&] {
    auto p = Of(kube::resources::kPods).Get("again-node-0");
    return p.ok() && (*p)["metadata"].contains("deletionTimestamp");
  }, 60s)) << "the garbage collector did not delete the old pod";
  CreateJob("again");
  // The message names the first leftover it finds: until the garbage collector
  // has removed the old job's other objects (its Role, ...) that may be one of them;
  // then only the held pod is left.
  const std::string held_pod = "Pod again-node-0 (controlled by TrainingJob again, uid " + old_uid + ")";
  ASSERT_TRUE(WaitFor([&] {
    const Json c = Condition("again", "Created");
    return c.value("reason", "") == "PreviousJobTerminating" && c.value("message", "").find(held_pod) != std::string::npos;
  }, 30s)) << JobStatus("again").dump() << op_->Log();
  EXPECT_EQ(JobStatus("again").value("state", ""), "Pending");
  // The old pod released: the new job's pod is made.
  ASSERT_TRUE(Of(kube::resources::kPods).Patch("again-node-0", {{"metadata", {{"finalizers", nullptr}}}}).ok());
  EXPECT_TRUE(WaitFor([&] { return ControllerUid(kube::resources::kPods, "again-node-0") == JobUid("again"); }, 30s))
      << op_->Log();
  EXPECT_TRUE(WaitFor([&] { return Condition("again", "Created").value("status", "") == "True"; }, 10s));

  // A job in an excluded namespace: a condition and a Warning there, nothing made.
  CreateJob("sys", "kube-system");
  ASSERT_TRUE(WaitFor([&] { return Condition("sys", "Created", "kube-system").value("reason", "") == "NamespaceExcluded"; },
                      30s))
      << JobStatus("sys", "kube-system").dump() << op_->Log();
  EXPECT_EQ(JobStatus("sys", "kube-system").value("state", ""), "Pending");
  EXPECT_TRUE(WaitFor([&] { return Warning("sys", "NamespaceExcluded", "--exclude-namespaces", "kube-system"); }, 10s));
  EXPECT_EQ(PodCount("sys", "kube-system"), 0);
  EXPECT_TRUE(Gone(kube::resources::kServiceAccounts, "sys-trainer", "kube-system"));
}

TEST_P(OperatorOwnershipTest, ProgressConfigMapNeverOutlivesItsJob) {
  CreateJob("prog");
  ASSERT_TRUE(WaitFor([&] { return PodCount("prog") == 1; }, 30s)) << op_->Log();
  const std::string uid = JobUid("prog");
  ASSERT_TRUE(Intact(kNs, "prog-progress", uid));
  std::shared_ptr<kube::RestClient> trainer = TrainerClient(kNs, "prog-trainer");
  // The operator gives it its metadata back.
  Tamper(trainer, kNs, "prog-progress");
  EXPECT_TRUE(WaitFor([&] { return Intact(kNs, "prog-progress", uid); }, 30s))
      << Of(kube::resources::kConfigMaps).Get("prog-progress")->dump() << op_->Log();
  // Tampered again and the job deleted at once: still gone with the job.
  Tamper(trainer, kNs, "prog-progress");
  ASSERT_TRUE(Jobs().Delete("prog").ok());
  EXPECT_TRUE(WaitFor([&] { return Gone(kube::resources::kConfigMaps, "prog-progress"); }, 60s))
      << Of(kube::resources::kConfigMaps).Get("prog-progress")->dump() << op_->Log();

  // The namespace of a tampered job is deleted: nothing holds it.
  ASSERT_TRUE(Of(kube::resources::kNamespaces, "").Create({{"metadata", {{"name", "team"}}}}).ok());
  CreateJob("tj", "team");
  ASSERT_TRUE(WaitFor([&] { return PodCount("tj", "team") == 1; }, 30s)) << op_->Log();
  Tamper(TrainerClient("team", "tj-trainer"), "team", "tj-progress");
  ASSERT_TRUE(Of(kube::resources::kNamespaces, "").Delete("team").ok());
  EXPECT_TRUE(WaitFor([&] { return Gone(kube::resources::kNamespaces, "team", ""); }, 90s))
      << Of(kube::resources::kConfigMaps, "team").Get("tj-progress")->dump() << op_->Log();
}

}  // namespace
}  // namespace hypertrain::operatorcmd
