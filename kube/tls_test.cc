// TLS against a loopback server with certificates made by the OpenSSL API
// (kube-local's certs.h): trusted and unrelated CAs, a certificate for the
// wrong host, client certificates.
#include <gtest/gtest.h>

#include <iostream>

#include "kube/rest_client.h"
#include "localcluster/testing/scripted_server.h"

namespace kube {
namespace {

using kubelocal::HttpRequest;
using kubelocal::ResponseSink;
using kubelocal::testing::ScriptedServer;
using kubelocal::testing::ScriptedServerOptions;
using kubelocal::testing::TestPki;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new TestPki(kubelocal::testing::MakeTestPki()); }
  static void TearDownTestSuite() { delete pki_; }

  Config Cfg(const std::string& url, const std::string& ca_pem) {
    Config c;
    c.server = url;
    c.max_retries = 0;
    c.qps = 0;
    c.ca_pem = ca_pem;
    return c;
  }
  StatusOr<Response> Get(const Config& c) {
    auto client = RestClient::Create(c);
    if (!client.ok()) return client.status();
    Request q;
    q.path = "/version";
    return (*client)->Send(q);
  }
  static ScriptedServerOptions Serving(const kubelocal::CertKey& cert, std::string client_ca = "") {
    ScriptedServerOptions o;
    o.server = cert;
    o.client_ca_pem = std::move(client_ca);
    return o;
  }
  static inline TestPki* pki_ = nullptr;
};

void Ok(const HttpRequest&, ResponseSink& s) { kubelocal::testing::Respond(s, 200, R"({"gitVersion":"v1.30.0"})"); }

TEST_F(TlsTest, TrustedCaSucceeds) {
  ScriptedServer srv(Ok, Serving(pki_->server));
  auto r = Get(Cfg(srv.url(), pki_->ca.cert_pem));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsTest, WrongCaIsAClearTlsError) {
  ScriptedServer srv(Ok, Serving(pki_->server));
  auto r = Get(Cfg(srv.url(), pki_->other_ca.cert_pem));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  EXPECT_EQ(r.status().http_status(), 0);  // a TLS failure, not an HTTP 401
  EXPECT_NE(r.status().message().find("certificate-authority"), std::string::npos);
  std::cout << "wrong CA → " << r.status().ToString() << "\n";
  // No CA configured: the system roots do not know the test CA either.
  r = Get(Cfg(srv.url(), ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  EXPECT_EQ(r.status().http_status(), 0);  // a TLS failure, not an HTTP 401
}

TEST_F(TlsTest, HostNameIsVerified) {
  ScriptedServer srv(Ok, Serving(pki_->wrong_host));
  auto r = Get(Cfg(srv.url(), pki_->ca.cert_pem));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  EXPECT_EQ(r.status().http_status(), 0);  // a TLS failure, not an HTTP 401
}

TEST_F(TlsTest, InsecureSkipVerifyAcceptsAnyServer) {
  ScriptedServer srv(Ok, Serving(pki_->wrong_host));
  Config c = Cfg(srv.url(), "");
  c.insecure_skip_tls_verify = true;
  auto r = Get(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(TlsTest, ClientCertificateAuth) {
  ScriptedServer srv(Ok, Serving(pki_->server, pki_->ca.cert_pem));
  Config c = Cfg(srv.url(), pki_->ca.cert_pem);
  auto without = Get(c);
  ASSERT_FALSE(without.ok());  // the server demands a certificate
  c.client_cert_pem = pki_->client.cert_pem;
  c.client_key_pem = pki_->client.key_pem;
  auto with = Get(c);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  // A certificate from another CA is refused as well.
  const auto stranger = kubelocal::IssueClientCert(pki_->other_ca, "stranger", {});
  ASSERT_TRUE(stranger.ok());
  c.client_cert_pem = stranger->cert_pem;
  c.client_key_pem = stranger->key_pem;
  EXPECT_FALSE(Get(c).ok());
}

TEST_F(TlsTest, BadPemIsAConfigError) {
  Config c = Cfg("https://127.0.0.1:1", "");
  c.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  auto r = RestClient::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  c.ca_pem.clear();
  c.client_cert_pem = pki_->client.cert_pem;
  c.client_key_pem = "garbage";
  r = RestClient::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kube
