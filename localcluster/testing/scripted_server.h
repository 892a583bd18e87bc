// Test helper: one small scripted HTTPS peer, for client unit tests that need
// what the real API server (kube-local, see kube_local.h) will not do on
// demand: a chosen status and body, a handler that stalls, an ERROR event
// that is not a 410, a stream that ends at once, a wrong certificate.
//
// It is kube-local's own HTTP server (http_server.h) with a test's handler in
// place of the API: requests arrive parsed as the API server sees them
// (HttpRequest) and answers go through the same ResponseSink.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "localcluster/apiserver/certs.h"
#include "localcluster/apiserver/http_types.h"

namespace kubelocal {
class HttpServer;
}

namespace kubelocal::testing {

using Handler = std::function<void(const HttpRequest&, ResponseSink&)>;

struct ScriptedServerOptions {
  // Serving certificate and key; empty: one for 127.0.0.1 signed by a fresh
  // CA (ScriptedServer::ca_pem()).
  CertKey server;
  // Non-empty: clients must present a certificate signed by this CA.
  std::string client_ca_pem;
};

class ScriptedServer {
 public:
  // Listens on a free port of 127.0.0.1; throws std::runtime_error if it cannot.
  explicit ScriptedServer(Handler handler, ScriptedServerOptions options = {});
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  // The CA of the generated serving certificate ("" when options.server was given).
  const std::string& ca_pem() const { return ca_pem_; }
  // Requests handled so far.
  int requests() const { return requests_.load(); }
  // Closes every connection and waits for the handlers (the destructor does it too).
  void Stop();

 private:
  std::atomic<int> requests_{0};
  std::string ca_pem_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

// One whole response with a JSON body (the usual answer of a handler).
void Respond(ResponseSink& sink, int code, const std::string& body,
             const std::map<std::string, std::string>& headers = {});

// Certificates for TLS tests, made with the OpenSSL API (certs.h).
struct TestPki {
  CertKey ca;          // signs the three below
  CertKey server;      // for 127.0.0.1
  CertKey wrong_host;  // for wrong.example.com only
  CertKey client;      // CN test-client
  CertKey other_ca;    // an unrelated CA
};
// Throws std::runtime_error if OpenSSL fails.
TestPki MakeTestPki();

}  // namespace kubelocal::testing
