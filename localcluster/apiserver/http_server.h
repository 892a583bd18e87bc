// HTTPS/1.1 server (Boost.Beast + OpenSSL) for the API: one thread per
// connection, keep-alive, chunked streaming for watches, optional client
// certificates verified against the cluster CA (their CN/O become the user).
// Every request is logged at debug level (method, target, status, duration;
// never headers or bodies).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/certs.h"
#include "localcluster/apiserver/http_types.h"

namespace kubelocal {

class ApiServer;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: pick a free port
  CertKey server;
  std::string ca_pem;  // verifies client certificates
  bool require_client_cert = false;  // with ca_pem: refuse clients without one (else tokens work too)
  int idle_timeout_seconds = 300;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, ResponseSink&)>;
  HttpServer(Handler handler, HttpServerOptions options);
  ~HttpServer();
  // Binds and listens (port() is valid afterwards); Serve() starts accepting.
  Status Listen();
  void Serve();
  int port() const { return port_; }
  // Stops accepting, shuts down every open connection and waits for them.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace kubelocal
