// The envtest harness against the real binaries: the API server serves v1.26.5
// with TLS verified and RBAC enforced, the controller manager runs (service
// account tokens, garbage collection), the API server restarts on its port.
// Skips, naming HYPERTRAIN_KUBE_BINARIES, where the binaries are missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/envtest/control_plane.h"

namespace hypertrain::envtest {
namespace {

using kube::Json;
using ::testing::HasSubstr;

constexpr char kWidgetCrd[] = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
)";

class ControlPlaneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto bins = FindBinaries();
    if (!bins.ok()) {
      skip_ = new std::string(bins.status().message());
      return;
    }
    Options o;
    o.work_dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/envtest";
    o.binaries = *bins;
    std::filesystem::create_directories(o.work_dir);
    o.crd_files = {o.work_dir + "/widgets.yaml"};
    std::ofstream(o.crd_files[0]) << kWidgetCrd;
    auto cp = ControlPlane::Start(o);
    if (!cp.ok()) {
      start_error_ = new std::string(cp.status().ToString());
      return;
    }
    cp_ = cp->release();
  }
  static void TearDownTestSuite() {
    delete cp_;
    cp_ = nullptr;
  }
  void SetUp() override {
    if (skip_ && !MaySkipWithoutBinaries()) FAIL() << "under CI: " << *skip_;
    if (skip_) GTEST_SKIP() << *skip_;
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
  }
  static std::shared_ptr<kube::RestClient> Client(const std::string& kubeconfig) {
    auto cfg = kube::LoadKubeconfig({kubeconfig});
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    cfg->max_retries = 0;
    auto c = kube::RestClient::Create(*cfg);
    EXPECT_TRUE(c.ok());
    return *c;
  }
  static bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return cond();
  }

  static inline ControlPlane* cp_ = nullptr;
  static inline std::string* skip_ = nullptr;
  static inline std::string* start_error_ = nullptr;
};

TEST_F(ControlPlaneTest, ServesTheUpstreamVersionOverVerifiedTls) {
  auto client = Client(cp_->kubeconfig());
  kube::Request r;
  r.path = "/version";
  auto v = client->SendJson(r);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)["gitVersion"], kKubeVersion);
  // A client that trusts another CA is refused at the TLS handshake.
  kube::Config other;
  other.server = cp_->server();
  other.ca_pem = "-----BEGIN CERTIFICATE-----\nnot a CA\n-----END CERTIFICATE-----\n";
  EXPECT_FALSE(kube::RestClient::Create(other).ok() && (*kube::RestClient::Create(other))->Send(r).ok());
}

TEST_F(ControlPlaneTest, RbacAppliesToServiceAccountTokens) {
  auto admin = Client(cp_->kubeconfig());
  kube::ResourceClient nss(admin, kube::resources::kNamespaces);
  ASSERT_TRUE(nss.Create({{"metadata", {{"name", "rbac"}}}}).ok());
  kube::ResourceClient sas(admin, kube::resources::kServiceAccounts, "rbac");
  ASSERT_TRUE(sas.Create({{"metadata", {{"name", "bot"}}}}).ok());
  kube::Request tr;
  tr.method = "POST";
  tr.path = "/api/v1/namespaces/rbac/serviceaccounts/bot/token";
  tr.body = Json{{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", Json::object()}}.dump();
  auto token = admin->SendJson(tr);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  const std::string sa_kubeconfig = std::string(std::getenv("TEST_TMPDIR")) + "/bot.kubeconfig";
  ASSERT_TRUE(cp_->WriteKubeconfig(sa_kubeconfig, (*token)["status"]["token"].get<std::string>()).ok());
  auto bot = Client(sa_kubeconfig);
  auto denied = kube::ResourceClient(bot, kube::resources::kPods, "rbac").List();
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), hypertrain::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("system:serviceaccount:rbac:bot"));
}

TEST_F(ControlPlaneTest, GarbageCollectorRemovesDependents) {
  auto admin = Client(cp_->kubeconfig());
  kube::ResourceClient cms(admin, kube::resources::kConfigMaps, "default");
  auto owner = cms.Create({{"metadata", {{"name", "owner"}}}});
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  Json dep = {{"metadata",
               {{"name", "dependent"},
                {"ownerReferences",
                 Json::array({{{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"name", "owner"},
                               {"uid", (*owner)["metadata"]["uid"]}}})}}}};
  ASSERT_TRUE(cms.Create(dep).ok());
  ASSERT_TRUE(cms.Delete("owner").ok());
  EXPECT_TRUE(WaitFor([&] { return !cms.Get("dependent").ok(); }, std::chrono::seconds(30)))
      << cp_->LogTails();
}

// Options::crd_files: the CRD is Established when Start returns, and the garbage
// collector already watches its kind (created later, it would learn of it only
// at its next discovery, up to 30 s on).
TEST_F(ControlPlaneTest, CrdsInstalledBeforeTheControllerManager) {
  auto admin = Client(cp_->kubeconfig());
  const kube::ResourceType widgets{"example.com", "v1", "widgets", "Widget", true};
  auto owner = kube::ResourceClient(admin, widgets, "default").Create(
      {{"apiVersion", "example.com/v1"}, {"kind", "Widget"}, {"metadata", {{"name", "w"}}}});
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  kube::ResourceClient cms(admin, kube::resources::kConfigMaps, "default");
  ASSERT_TRUE(cms.Create({{"metadata",
                           {{"name", "of-widget"},
                            {"ownerReferences",
                             Json::array({{{"apiVersion", "example.com/v1"},
                                           {"kind", "Widget"},
                                           {"name", "w"},
                                           {"uid", (*owner)["metadata"]["uid"]}}})}}}})
                  .ok());
  ASSERT_TRUE(kube::ResourceClient(admin, widgets, "default").Delete("w").ok());
  EXPECT_TRUE(WaitFor([&] { return !cms.Get("of-widget").ok(); }, std::chrono::seconds(10))) << cp_->LogTails();
}

TEST_F(ControlPlaneTest, ApiServerRestartsOnItsPortWithItsData) {
  auto admin = Client(cp_->kubeconfig());
  kube::ResourceClient cms(admin, kube::resources::kConfigMaps, "default");
  ASSERT_TRUE(cms.Create({{"metadata", {{"name", "survives"}}}, {"data", {{"k", "v"}}}}).ok());
  const std::string server = cp_->server();
  ASSERT_TRUE(cp_->RestartApiServer().ok()) << cp_->LogTails();
  EXPECT_EQ(cp_->server(), server);
  auto got = cms.Get("survives");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"]["k"], "v");
  EXPECT_EQ(cp_->Exited(), "");
}

TEST(FindBinariesTest, MissingBinariesNameTheVariable) {
  const char* old = std::getenv(kBinariesEnv);
  const std::string saved = old ? old : "";
  setenv(kBinariesEnv, "/nonexistent/kube", 1);
  auto b = FindBinaries();
  if (saved.empty()) unsetenv(kBinariesEnv); else setenv(kBinariesEnv, saved.c_str(), 1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(b.status().message(), HasSubstr(kBinariesEnv));
  EXPECT_THAT(b.status().message(), HasSubstr("/nonexistent/kube"));
  EXPECT_THAT(b.status().message(), HasSubstr("kube-apiserver"));
}

}  // namespace
}  // namespace hypertrain::envtest
