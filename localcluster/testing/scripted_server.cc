#include "localcluster/testing/scripted_server.h"

#include <signal.h>

#include <stdexcept>

#include "localcluster/apiserver/http_server.h"

namespace kubelocal::testing {
namespace {

CertKey Must(StatusOr<CertKey> c, const char* what) {
  if (!c.ok()) throw std::runtime_error(std::string(what) + ": " + c.status().ToString());
  return *std::move(c);
}

}  // namespace

ScriptedServer::ScriptedServer(Handler handler, ScriptedServerOptions options) {
  signal(SIGPIPE, SIG_IGN);  // a write to a client that left must not end the test
  HttpServerOptions ho;
  ho.host = "127.0.0.1";
  ho.port = 0;
  if (options.server.cert_pem.empty()) {
    const CertKey ca = Must(MakeCA("scripted-server-ca"), "test CA");
    ho.server = Must(IssueServerCert(ca, {}, {"127.0.0.1"}), "server certificate");
    ca_pem_ = ca.cert_pem;
  } else {
    ho.server = options.server;
  }
  ho.ca_pem = options.client_ca_pem;
  ho.require_client_cert = !options.client_ca_pem.empty();
  server_ = std::make_unique<HttpServer>(
      [this, handler = std::move(handler)](const HttpRequest& r, ResponseSink& s) {
        requests_.fetch_add(1);
        handler(r, s);
      },
      ho);
  if (Status s = server_->Listen(); !s.ok()) throw std::runtime_error("scripted server: " + s.ToString());
  port_ = server_->port();
  server_->Serve();
}

ScriptedServer::~ScriptedServer() { Stop(); }

void ScriptedServer::Stop() { server_->Stop(); }

void Respond(ResponseSink& sink, int code, const std::string& body,
             const std::map<std::string, std::string>& headers) {
  sink.Send(code, "application/json", body, headers);
}

TestPki MakeTestPki() {
  TestPki p;
  p.ca = Must(MakeCA("kube-test-ca"), "test CA");
  p.server = Must(IssueServerCert(p.ca, {}, {"127.0.0.1"}), "server certificate");
  p.wrong_host = Must(IssueServerCert(p.ca, {"wrong.example.com"}, {}), "wrong-host certificate");
  p.client = Must(IssueClientCert(p.ca, "test-client", {}), "client certificate");
  p.other_ca = Must(MakeCA("other-ca"), "other CA");
  return p;
}

}  // namespace kubelocal::testing
