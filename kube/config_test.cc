#include "kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kube/exec_credential.h"
#include "core/atomic_file.h"
#include "core/time.h"
#include "localcluster/testing/files.h"

namespace kube {
namespace {

using kubelocal::testing::MakeTempDir;

void WriteFile(const std::string& path, const std::string& data) {
  ASSERT_TRUE(hypertrain::WriteFileAtomically(path, data).ok());
}

// base64("PEM-CA") = UEVNLUNB
TEST(ConfigTest, KubeconfigSingleFile) {
  std::string dir = MakeTempDir("kc");
  WriteFile(dir + "/client.crt", "CERT");
  WriteFile(dir + "/client.key", "KEY");
  WriteFile(dir + "/config", R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: UEVNLUNB
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
users:
- name: u1
  user:
    client-certificate: client.crt
    client-key: client.key
    token: abc
)");
  auto c = LoadKubeconfig({dir + "/config"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "PEM-CA");
  EXPECT_EQ(c->namespace_name, "team-a");
  EXPECT_EQ(c->client_cert_pem, "CERT");  // relative to the kubeconfig's directory
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->token, "abc");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->DebugString().find("abc"), std::string::npos);
}

TEST(ConfigTest, KubeconfigListMergedInOrder) {
  std::string dir = MakeTempDir("kc");
  WriteFile(dir + "/a", R"(current-context: ctx-a
clusters:
- name: shared
  cluster: {server: "https://first:1", insecure-skip-tls-verify: true}
users:
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, prod]
      env: [{name: AWS_PROFILE, value: p1}]
)");
  WriteFile(dir + "/b", R"(current-context: ctx-b
clusters:
- name: shared
  cluster: {server: "https://second:2"}
contexts:
- name: ctx-a
  context: {cluster: shared, user: eks}
- name: ctx-b
  context: {cluster: shared}
)");
  setenv("KUBECONFIG", (dir + "/a:" + dir + "/missing:" + dir + "/b").c_str(), 1);
  auto c = LoadKubeconfigFromEnv();
  unsetenv("KUBECONFIG");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://first:1");  // first definition of "shared" wins
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->namespace_name, "default");
  ASSERT_TRUE(c->exec.has_value());
  EXPECT_EQ(c->exec->command, "aws");
  EXPECT_EQ(c->exec->args.size(), 4u);
  EXPECT_EQ(c->exec->env[0].first, "AWS_PROFILE");
  auto b = LoadKubeconfig({dir + "/a", dir + "/b"}, "ctx-b");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->exec.has_value());
}

TEST(ConfigTest, KubeconfigErrorsAreClear) {
  auto missing_ctx = LoadKubeconfigText("current-context: nope\n", "/tmp");
  ASSERT_FALSE(missing_ctx.ok());
  EXPECT_EQ(missing_ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing_ctx.status().message().find("\"nope\" not found"), std::string::npos);
  auto bad_b64 = LoadKubeconfigText(R"(current-context: x
contexts: [{name: x, context: {cluster: c}}]
clusters: [{name: c, cluster: {server: "https://h", certificate-authority-data: "!!!"}}]
)",
                                    "/tmp");
  ASSERT_FALSE(bad_b64.ok());
  EXPECT_NE(bad_b64.status().message().find("base64"), std::string::npos);
  auto bad_exec = LoadKubeconfigText(R"(current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}}}]
)",
                                     "/tmp");
  ASSERT_FALSE(bad_exec.ok());
  EXPECT_NE(bad_exec.status().message().find("v1alpha1"), std::string::npos);
  auto bad_yaml = LoadKubeconfigText("clusters: [", "/tmp");
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_NE(bad_yaml.status().message().find("invalid YAML"), std::string::npos);
  auto no_file = LoadKubeconfig({"/nonexistent/kubeconfig"});
  ASSERT_FALSE(no_file.ok());
}

TEST(ConfigTest, InCluster) {
  std::string dir = MakeTempDir("sa");
  WriteFile(dir + "/token", "sa-token\n");
  WriteFile(dir + "/ca.crt", "CA");
  WriteFile(dir + "/namespace", "training\n");
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_FALSE(LoadInCluster(dir).ok());
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto c = LoadInCluster(dir);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(c->token_file, dir + "/token");
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->namespace_name, "training");
}

TEST(ExecCredentialTest, ParsesAndValidates) {
  auto ok = ParseExecCredential(
      R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1",
    "status":{"token":"k8s-aws-v1.abc","expirationTimestamp":"2030-01-02T03:04:05Z"}})",
      "client.authentication.k8s.io/v1beta1");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->token, "k8s-aws-v1.abc");
  ASSERT_TRUE(ok->expiration.has_value());
  EXPECT_EQ(hypertrain::FormatRfc3339(*ok->expiration), "2030-01-02T03:04:05Z");
  EXPECT_FALSE(ParseExecCredential("{}", "").ok());
  EXPECT_FALSE(ParseExecCredential(R"({"kind":"ExecCredential","status":{}})", "").ok());
  auto off = ParseExecCredential(
      R"({"kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2030-01-02T05:04:05.123+02:00"}})",
      "");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(hypertrain::FormatRfc3339(*off->expiration, hypertrain::TimePrecision::kMillis),
            "2030-01-02T03:04:05.123Z");
  auto bad = ParseExecCredential(
      R"({"kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"yesterday"}})", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not RFC 3339"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace kube
