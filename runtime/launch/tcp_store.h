#pragma once
// A small TCP key-value store for rendezvous. Rank 0 serves it at
// MASTER_ADDR:MASTER_PORT; every rank (rank 0 included) talks to it through a
// TcpStoreClient.
//
// Staleness: the server is created for one (job id, restart attempt). A client
// opens every connection with a HELLO naming the identity it expects; a server
// of another identity (an old attempt's master that is still shutting down, or
// another job on a reused address) answers STALE and the client keeps retrying
// until the deadline, then fails naming what it found. Keys are additionally
// prefixed with "<job>/<attempt>/" so nothing of an old attempt is ever read.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::launch {

struct StoreIdentity {
  std::string job_id = "default";
  int attempt = 0;
  std::string ToString() const;  // "job 'x' attempt 3"
};

class TcpStoreServer {
 public:
  // Binds host:port (port 0 picks a free port; see port()).
  static StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                         StoreIdentity identity);
  ~TcpStoreServer();  // stops: closes the listener and every connection, joins threads
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;

  class Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreClientOptions {
  // How long Connect keeps retrying name resolution, connect and STALE answers.
  std::chrono::milliseconds connect_deadline{std::chrono::seconds(300)};
  // Bound for one request/response (Get's own wait is added to it).
  std::chrono::milliseconds io_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds initial_backoff{std::chrono::milliseconds(50)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(2)};
  // Resolves host:port to addresses; tests inject failures. Empty: getaddrinfo.
  // Returns an error string on failure.
  std::function<StatusOr<std::vector<std::string>>(const std::string& host)> resolver;
};

class TcpStoreClient {
 public:
  // Retries resolution and connect with exponential backoff until
  // options.connect_deadline; the error names host:port and the deadline.
  static StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                           StoreIdentity identity,
                                                           TcpStoreClientOptions options = {});
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  Status Set(const std::string& key, const std::string& value);
  // Waits up to `timeout` for the key to exist.
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  // Atomically adds `delta` to an integer key (absent = 0); returns the new value.
  StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // Sets key to `desired` if its value is `expected` ("" matches an absent
  // key). Returns the value after the operation.
  StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                   const std::string& desired);
  StatusOr<bool> Check(const std::string& key);
  // Waits until all keys exist.
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // All `n` participants calling Barrier(name, n) return together; a name is
  // single-use (append a counter for repeated barriers).
  Status Barrier(const std::string& name, int n, std::chrono::milliseconds timeout);

  const std::string& address() const { return address_; }  // "host:port"

 private:
  TcpStoreClient(int fd, std::string address, StoreIdentity id, TcpStoreClientOptions opts);
  StatusOr<std::vector<std::string>> Call(uint8_t op, const std::vector<std::string>& args,
                                          std::chrono::milliseconds extra_wait);
  std::string Prefixed(const std::string& key) const;

  int fd_;
  std::string address_;
  StoreIdentity identity_;
  TcpStoreClientOptions options_;
  std::unique_ptr<std::mutex> mu_;
};

}  // namespace hypertrain::launch
