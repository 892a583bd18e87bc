// Transport-neutral request/response types between the HTTPS server and the
// API handlers, so handlers can be tested without sockets.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kubelocal {

struct HttpRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;    // decoded path without query
  std::map<std::string, std::string> query;    // decoded; last value wins
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string client_cert_user;  // CN of a verified client certificate, if any
  std::vector<std::string> client_cert_groups;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
  std::string Query(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? "" : it->second;
  }
  bool HasQuery(const std::string& name) const { return query.count(name) > 0; }
};

// Where a handler writes its answer: one whole response, or a chunked stream.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void Send(int code, const std::string& content_type, const std::string& body,
                    const std::map<std::string, std::string>& extra_headers = {}) = 0;
  // Starts a chunked 200 response; false if the client is gone.
  virtual bool StartStream(const std::string& content_type) = 0;
  virtual bool WriteChunk(const std::string& data) = 0;
  virtual void EndStream() = 0;
  // True once the peer has closed its side (checked between watch events).
  virtual bool PeerClosed() = 0;
};

// Splits "a=b&c=%20d" into a map (percent and '+' decoding).
std::map<std::string, std::string> ParseQuery(const std::string& query);
std::string PercentDecode(const std::string& s);

}  // namespace kubelocal
