// Certificates for the local control plane, made with the OpenSSL 3 API.
//
// A self-signed CA (EC P-256, 10 years), a server certificate signed by it with
// SANs 127.0.0.1 and localhost (plus any given), and client certificates whose
// subject carries the Kubernetes user (CN) and groups (O).
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

struct CertKey {
  std::string cert_pem;
  std::string key_pem;
};

StatusOr<CertKey> MakeCA(const std::string& common_name);
StatusOr<CertKey> IssueServerCert(const CertKey& ca, const std::vector<std::string>& dns_names,
                                  const std::vector<std::string>& ips);
StatusOr<CertKey> IssueClientCert(const CertKey& ca, const std::string& user,
                                  const std::vector<std::string>& groups);

// Loads ca/server certs from `dir` or creates and stores them (mode 0600 keys).
struct ServingCerts {
  CertKey ca;
  CertKey server;
};
StatusOr<ServingCerts> LoadOrCreateServingCerts(const std::string& dir);

// Subject CN of a PEM certificate (for tests and logging).
StatusOr<std::string> CertificateCommonName(const std::string& cert_pem);

}  // namespace kubelocal
