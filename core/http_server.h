#pragma once
// A small HTTP server for /metrics and probes, on civetweb (Debian
// libcivetweb-dev): GET and HEAD on exact paths registered before Start;
// anything else is 404 (unknown path) or 405 (other methods). civetweb runs
// its own listener and worker threads, applies a request timeout and keeps
// connections alive for scrapers.
//
//   HttpServer http;
//   http.Handle("/metrics", [&] { return HttpResponse{200, kPrometheusText, registry.Render()}; });
//   if (Status s = http.Start(":8080"); !s.ok()) ...
#include <functional>
#include <map>
#include <string>

#include "core/status.h"

struct mg_context;
struct mg_connection;

namespace hypertrain {

// The content type of Prometheus' text exposition format.
inline constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;
  HttpServer() = default;
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Handlers run on civetweb's worker threads, possibly at once.
  void Handle(const std::string& path, Handler h) { handlers_[path] = std::move(h); }
  // `addr` is "host:port" or ":port" (all interfaces); port 0 picks a free
  // one. InvalidArgument for a malformed address, Unavailable when it
  // cannot listen (the port is taken).
  Status Start(const std::string& addr);
  int port() const { return port_; }
  void Stop();

 private:
  static int OnRequest(mg_connection* conn, void* self);
  std::map<std::string, Handler> handlers_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace hypertrain
