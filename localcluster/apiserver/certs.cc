#include "localcluster/apiserver/certs.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "core/atomic_file.h"

namespace kubelocal {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using PKey = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

std::string OpenSslError(const std::string& what) {
  char buf[256];
  unsigned long e = ERR_get_error();
  ERR_error_string_n(e, buf, sizeof(buf));
  return what + ": " + (e ? buf : "unknown OpenSSL error");
}

std::string BioString(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

StatusOr<PKey> NewKey() {
  PKey k(EVP_EC_gen("P-256"));
  if (!k) return InternalError(OpenSslError("EVP_EC_gen"));
  return k;
}

StatusOr<PKey> ParseKey(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PKey k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
  if (!k) return InternalError(OpenSslError("parse private key"));
  return k;
}

StatusOr<Cert> ParseCert(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert c(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  if (!c) return InternalError(OpenSslError("parse certificate"));
  return c;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return InternalError(OpenSslError("add extension " + value));
  }
  return Status();
}

struct Spec {
  std::string cn;
  std::vector<std::string> orgs;
  bool is_ca = false;
  std::string ext_key_usage;  // serverAuth / clientAuth
  std::string san;            // "DNS:a,IP:1.2.3.4"
  long days = 3650;
};

StatusOr<CertKey> Issue(const Spec& spec, X509* ca_cert, EVP_PKEY* ca_key) {
  auto key = NewKey();
  if (!key.ok()) return key.status();
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7F;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), spec.days * 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : spec.orgs) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.cn.c_str()), -1, -1, 0);
  X509* issuer = ca_cert ? ca_cert : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer));
  X509_set_pubkey(cert.get(), key->get());
  if (spec.is_ca) {
    if (Status e = AddExt(cert.get(), issuer, NID_basic_constraints, "critical,CA:TRUE"); !e.ok())
      return e;
    if (Status e = AddExt(cert.get(), issuer, NID_key_usage,
                          "critical,keyCertSign,cRLSign,digitalSignature");
        !e.ok())
      return e;
    if (Status e = AddExt(cert.get(), issuer, NID_subject_key_identifier, "hash"); !e.ok())
      return e;
  } else {
    if (Status e = AddExt(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE"); !e.ok())
      return e;
    if (Status e =
            AddExt(cert.get(), issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
        !e.ok())
      return e;
    if (Status e = AddExt(cert.get(), issuer, NID_ext_key_usage, spec.ext_key_usage); !e.ok())
      return e;
    if (Status e = AddExt(cert.get(), issuer, NID_authority_key_identifier, "keyid:always");
        !e.ok())
      return e;
    if (!spec.san.empty()) {
      if (Status e = AddExt(cert.get(), issuer, NID_subject_alt_name, spec.san); !e.ok()) return e;
    }
  }
  if (X509_sign(cert.get(), ca_key ? ca_key : key->get(), EVP_sha256()) == 0) {
    return InternalError(OpenSslError("X509_sign"));
  }
  Bio cb(BIO_new(BIO_s_mem()));
  Bio kb(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(cb.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(kb.get(), key->get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return InternalError(OpenSslError("PEM write"));
  }
  return CertKey{BioString(cb.get()), BioString(kb.get())};
}

StatusOr<CertKey> IssueWithCa(const CertKey& ca, const Spec& spec) {
  auto cert = ParseCert(ca.cert_pem);
  if (!cert.ok()) return cert.status();
  auto key = ParseKey(ca.key_pem);
  if (!key.ok()) return key.status();
  return Issue(spec, cert->get(), key->get());
}

}  // namespace

StatusOr<CertKey> MakeCA(const std::string& common_name) {
  Spec s;
  s.cn = common_name;
  s.is_ca = true;
  return Issue(s, nullptr, nullptr);
}

StatusOr<CertKey> IssueServerCert(const CertKey& ca, const std::vector<std::string>& dns_names,
                                  const std::vector<std::string>& ips) {
  Spec s;
  s.cn = "kube-apiserver";
  s.ext_key_usage = "serverAuth";
  for (const auto& d : dns_names) s.san += (s.san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : ips) s.san += (s.san.empty() ? "" : ",") + std::string("IP:") + ip;
  return IssueWithCa(ca, s);
}

StatusOr<CertKey> IssueClientCert(const CertKey& ca, const std::string& user,
                                  const std::vector<std::string>& groups) {
  if (user.empty()) return BadRequest("client certificate needs a user name");
  Spec s;
  s.cn = user;
  s.orgs = groups;
  s.ext_key_usage = "clientAuth";
  s.days = 365;
  return IssueWithCa(ca, s);
}

StatusOr<ServingCerts> LoadOrCreateServingCerts(const std::string& dir) {
  ServingCerts sc;
  using hypertrain::ReadFileToString;
  auto ca_crt = ReadFileToString(dir + "/ca.crt");
  auto ca_key = ReadFileToString(dir + "/ca.key");
  auto srv_crt = ReadFileToString(dir + "/server.crt");
  auto srv_key = ReadFileToString(dir + "/server.key");
  if (!dir.empty() && ca_crt.ok() && ca_key.ok() && srv_crt.ok() && srv_key.ok()) {
    sc.ca = {*ca_crt, *ca_key};
    sc.server = {*srv_crt, *srv_key};
    return sc;
  }
  auto ca = MakeCA("kube-local-ca");
  if (!ca.ok()) return ca.status();
  auto srv = IssueServerCert(*ca, {"localhost", "kubernetes", "kubernetes.default"},
                             {"127.0.0.1", "::1"});
  if (!srv.ok()) return srv.status();
  sc.ca = *ca;
  sc.server = *srv;
  if (!dir.empty()) {
    using hypertrain::WriteFileAtomically;
    if (Status e = WriteFileAtomically(dir + "/ca.key", ca->key_pem, 0600); !e.ok()) return e;
    if (Status e = WriteFileAtomically(dir + "/ca.crt", ca->cert_pem, 0644); !e.ok()) return e;
    if (Status e = WriteFileAtomically(dir + "/server.key", srv->key_pem, 0600); !e.ok()) return e;
    if (Status e = WriteFileAtomically(dir + "/server.crt", srv->cert_pem, 0644); !e.ok()) return e;
  }
  return sc;
}

StatusOr<std::string> CertificateCommonName(const std::string& cert_pem) {
  auto cert = ParseCert(cert_pem);
  if (!cert.ok()) return cert.status();
  char buf[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()), NID_commonName, buf, sizeof(buf));
  return std::string(buf);
}

}  // namespace kubelocal
