#include "core/http_server.h"

#include <civetweb.h>
#include <dlfcn.h>
#include <pthread.h>

#include <cstring>
#include <mutex>

// civetweb as Debian builds it starts every thread with a 100 KiB stack
// (pthread_attr_setstacksize(&attr, 102400)). glibc carves the static TLS of
// every library loaded at start out of each thread's stack and refuses
// (EINVAL) a stack smaller than that: `hypertrain`, which loads cuBLAS and
// OpenBLAS (about 190 KiB of static TLS), could not start a single civetweb
// thread. While HttpServer::Start runs mg_start2 (which creates all of
// civetweb's threads) on the calling thread, that thread's requests for smaller
// stacks get kCivetwebStack instead; every other call passes through unchanged.
namespace {
thread_local bool t_starting_civetweb = false;
constexpr size_t kCivetwebStack = size_t{2} << 20;
}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) noexcept {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static const Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (t_starting_civetweb && size < kCivetwebStack) size = kCivetwebStack;
  return next(attr, size);
}

namespace hypertrain {
namespace {

const char* Reason(int s) {
  switch (s) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

void Send(mg_connection* conn, const HttpResponse& r, bool head) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n\r\n",
            r.status, Reason(r.status), r.content_type.c_str(), r.body.size());
  if (!head) mg_write(conn, r.body.data(), r.body.size());
}

}  // namespace

HttpServer::~HttpServer() { Stop(); }

int HttpServer::OnRequest(mg_connection* conn, void* self) {
  auto* server = static_cast<HttpServer*>(self);
  const mg_request_info* req = mg_get_request_info(conn);
  const std::string method = req->request_method ? req->request_method : "";
  const std::string path = req->local_uri ? req->local_uri : "";
  HttpResponse resp;
  if (method != "GET" && method != "HEAD") {
    resp = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else if (auto it = server->handlers_.find(path); it != server->handlers_.end()) {
    try {
      resp = it->second();
    } catch (const std::exception& e) {
      resp = {500, "text/plain; charset=utf-8", std::string("handler failed: ") + e.what() + "\n"};
    }
  } else {
    resp = {404, "text/plain; charset=utf-8", "not found\n"};
  }
  Send(conn, resp, method == "HEAD");
  return resp.status;
}

Status HttpServer::Start(const std::string& addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size() ||
      addr.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return InvalidArgument("address must be host:port or :port, got '" + addr + "'");
  }
  std::string host = addr.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  // civetweb: "port" listens on every interface, "ip:port" on one.
  const std::string listen = (host.empty() || host == "0.0.0.0") ? addr.substr(colon + 1) : host + ":" + addr.substr(colon + 1);
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  const char* options[] = {"listening_ports", listen.c_str(), "num_threads", "4", "request_timeout_ms", "10000",
                           "enable_keep_alive", "yes", "keep_alive_timeout_ms", "30000", nullptr};
  mg_callbacks callbacks{};
  // civetweb logs errors itself to stderr only through this callback: keep it quiet, the error comes back below.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  mg_init_data init_data{&callbacks, this, options};
  char text[256] = {0};
  mg_error_data error{nullptr, text, sizeof(text)};
  t_starting_civetweb = true;
  ctx_ = mg_start2(&init_data, &error);
  t_starting_civetweb = false;
  if (ctx_ == nullptr) return Unavailable("cannot listen on " + addr + ": " + (text[0] ? text : "civetweb failed to start"));
  mg_set_request_handler(ctx_, "/", &HttpServer::OnRequest, this);
  mg_server_port ports[4];
  const int n = mg_get_server_ports(ctx_, 4, ports);
  port_ = n > 0 ? ports[0].port : 0;
  return Status();
}

void HttpServer::Stop() {
  if (ctx_ != nullptr) mg_stop(ctx_);
  ctx_ = nullptr;
}

}  // namespace hypertrain
