#include "localcluster/apiserver/certs.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace kubelocal {
namespace {

X509* Parse(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  return c;
}

// Verifies `leaf` against `ca` with OpenSSL's chain verification.
bool Verifies(const std::string& ca, const std::string& leaf, const char* host, int purpose) {
  X509* cac = Parse(ca);
  X509* lc = Parse(leaf);
  X509_STORE* st = X509_STORE_new();
  X509_STORE_add_cert(st, cac);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, st, lc, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  if (host) {
    X509_VERIFY_PARAM* p = X509_STORE_CTX_get0_param(ctx);
    if (std::string(host).find('.') != std::string::npos && std::isdigit(host[0])) {
      X509_VERIFY_PARAM_set1_ip_asc(p, host);
    } else {
      X509_VERIFY_PARAM_set1_host(p, host, 0);
    }
  }
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(st);
  X509_free(cac);
  X509_free(lc);
  return ok;
}

TEST(Certs, ServerAndClientCertificatesChainToTheCa) {
  auto ca = MakeCA("test-ca");
  ASSERT_TRUE(ca.ok()) << ca.status().message();
  auto srv = IssueServerCert(*ca, {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  EXPECT_TRUE(Verifies(ca->cert_pem, srv->cert_pem, "127.0.0.1", X509_PURPOSE_SSL_SERVER));
  EXPECT_TRUE(Verifies(ca->cert_pem, srv->cert_pem, "localhost", X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(Verifies(ca->cert_pem, srv->cert_pem, "10.0.0.1", X509_PURPOSE_SSL_SERVER));
  auto cli = IssueClientCert(*ca, "alice", {"devs"});
  ASSERT_TRUE(cli.ok());
  EXPECT_EQ(*CertificateCommonName(cli->cert_pem), "alice");
  EXPECT_TRUE(Verifies(ca->cert_pem, cli->cert_pem, nullptr, X509_PURPOSE_SSL_CLIENT));
  auto other = MakeCA("other-ca");
  EXPECT_FALSE(Verifies(other->cert_pem, srv->cert_pem, "127.0.0.1", X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(IssueClientCert(*ca, "", {}).ok());
}

TEST(Certs, ServingCertsPersistInTheDataDir) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/certs_test";
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  auto a = LoadOrCreateServingCerts(dir);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = LoadOrCreateServingCerts(dir);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->ca.cert_pem, b->ca.cert_pem);
  EXPECT_EQ(a->server.key_pem, b->server.key_pem);
}

}  // namespace
}  // namespace kubelocal
