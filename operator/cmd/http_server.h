// A minimal HTTP/1.1 server for /metrics, /healthz and /readyz: one accept
// thread, one short request per connection (GET only, bounded reads with a
// timeout), answered and closed. Not a general web server.
#ifndef HYPERTRAIN_OPERATOR_CMD_HTTP_SERVER_H_
#define HYPERTRAIN_OPERATOR_CMD_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace hypertrain::operatorcmd {

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

  void Handle(const std::string& path, Handler h) { handlers_[path] = std::move(h); }
  // `addr` is "host:port" or ":port" (all interfaces); port 0 picks one.
  // Returns false with `error` set when it cannot listen.
  bool Start(const std::string& addr, std::string* error);
  int port() const { return port_; }
  void Stop();

 private:
  void Loop();
  void Serve(int fd);
  std::map<std::string, Handler> handlers_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hypertrain::operatorcmd

#endif  // HYPERTRAIN_OPERATOR_CMD_HTTP_SERVER_H_
