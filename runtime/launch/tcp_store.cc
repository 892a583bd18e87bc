#include "runtime/launch/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <thread>

#include "runtime/launch/socket_util.h"

namespace hypertrain::launch {

using net::Clock;

namespace {

enum Op : uint8_t { kHello = 1, kSet, kGet, kAdd, kCas, kCheck };
enum Reply : uint8_t { kOk = 0, kTimeout, kStale, kError };

std::string Ms(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", d.count() / 1000.0);
  return buf;
}

}  // namespace

std::string StoreIdentity::ToString() const {
  return "job '" + job_id + "' attempt " + std::to_string(attempt);
}

// ---------------------------------------------------------------- server

class TcpStoreServer::Impl {
 public:
  Impl(Fd listen_fd, int port, StoreIdentity id)
      : listen_(std::move(listen_fd)), port_(port), id_(std::move(id)) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~Impl() {
    stopping_ = true;
    cv_.notify_all();
    accept_thread_.join();
    std::lock_guard<std::mutex> l(conns_mu_);
    for (auto& c : conns_) ::shutdown(c.fd, SHUT_RDWR);  // wakes blocked reads
    for (auto& c : conns_) c.thread.join();
    for (auto& c : conns_) ::close(c.fd);
  }

  int port() const { return port_; }

 private:
  struct Conn {
    int fd;
    std::thread thread;
  };

  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> l(conns_mu_);
      conns_.push_back({fd, std::thread([this, fd] { Serve(fd); })});
    }
  }

  // One connection: a HELLO with our identity first, then requests until close.
  void Serve(int fd) {
    bool hello = false;
    while (!stopping_) {
      // Idle connections are fine; poll in slices so stop is noticed.
      auto body = net::RecvFrame(fd, Clock::now() + std::chrono::hours(24 * 365));
      if (!body.ok()) return;
      auto msg = net::DecodeMessage(*body);
      if (!msg.ok()) return;
      const auto& [op, args] = *msg;
      std::string reply;
      if (op == kHello) {
        if (args.size() == 2 && args[0] == id_.job_id && args[1] == std::to_string(id_.attempt)) {
          hello = true;
          reply = net::EncodeMessage(kOk, {});
        } else {
          reply = net::EncodeMessage(kStale, {id_.job_id, std::to_string(id_.attempt)});
        }
      } else if (!hello) {
        reply = net::EncodeMessage(kError, {"HELLO with a matching identity required first"});
      } else {
        try {
          reply = Handle(op, args);
        } catch (const std::exception& e) {  // malformed number from a client
          reply = net::EncodeMessage(kError, {std::string("bad request: ") + e.what()});
        }
      }
      if (!net::SendFrame(fd, reply, Clock::now() + std::chrono::seconds(30)).ok()) return;
    }
  }

  std::string Handle(uint8_t op, const std::vector<std::string>& a) {
    std::unique_lock<std::mutex> l(mu_);
    switch (op) {
      case kSet:
        if (a.size() != 2) break;
        data_[a[0]] = a[1];
        cv_.notify_all();
        return net::EncodeMessage(kOk, {});
      case kGet: {
        if (a.size() != 2) break;
        const auto deadline = Clock::now() + std::chrono::milliseconds(std::stoll(a[1]));
        const bool found = cv_.wait_until(l, deadline, [&] { return stopping_ || data_.count(a[0]); });
        if (!found || stopping_) return net::EncodeMessage(kTimeout, {});
        return net::EncodeMessage(kOk, {data_[a[0]]});
      }
      case kAdd: {
        if (a.size() != 2) break;
        int64_t v = 0;
        auto it = data_.find(a[0]);
        if (it != data_.end()) v = std::stoll(it->second);
        v += std::stoll(a[1]);
        data_[a[0]] = std::to_string(v);
        cv_.notify_all();
        return net::EncodeMessage(kOk, {std::to_string(v)});
      }
      case kCas: {
        if (a.size() != 3) break;
        auto it = data_.find(a[0]);
        const std::string cur = it == data_.end() ? "" : it->second;
        if (cur == a[1]) {
          data_[a[0]] = a[2];
          cv_.notify_all();
          return net::EncodeMessage(kOk, {a[2]});
        }
        return net::EncodeMessage(kOk, {cur});
      }
      case kCheck:
        if (a.size() != 1) break;
        return net::EncodeMessage(kOk, {data_.count(a[0]) ? "1" : "0"});
      default:
        return net::EncodeMessage(kError, {"unknown op " + std::to_string(op)});
    }
    return net::EncodeMessage(kError, {"bad arguments for op " + std::to_string(op)});
  }

  Fd listen_;
  int port_;
  StoreIdentity id_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex conns_mu_;
  std::vector<Conn> conns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port,
                                                                StoreIdentity identity) {
  int bound = 0;
  auto fd = net::Listen(host, port, &bound);
  if (!fd.ok()) {
    return Status(fd.status().code(), "rendezvous store: " + fd.status().message());
  }
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(std::make_unique<Impl>(std::move(*fd), bound, std::move(identity))));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() = default;
int TcpStoreServer::port() const { return impl_->port(); }

// ---------------------------------------------------------------- client

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host, int port,
                                                                  StoreIdentity identity,
                                                                  TcpStoreClientOptions options) {
  const std::string address = host + ":" + std::to_string(port);
  const auto deadline = Clock::now() + options.connect_deadline;
  auto backoff = options.initial_backoff;
  std::string last_error = "no attempt made";
  int attempts = 0;
  for (;;) {
    ++attempts;
    auto addrs = options.resolver ? options.resolver(host) : net::ResolveHost(host);
    if (!addrs.ok()) {
      last_error = addrs.status().message();
    } else {
      for (const auto& ip : *addrs) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        auto fd = net::ConnectNumeric(ip, port, std::max(std::chrono::milliseconds(100),
                                                         std::min(left, options.io_timeout)));
        if (!fd.ok()) {
          last_error = fd.status().message();
          continue;
        }
        const auto io_deadline = Clock::now() + options.io_timeout;
        Status s = net::SendFrame(
            fd->get(), net::EncodeMessage(kHello, {identity.job_id, std::to_string(identity.attempt)}),
            io_deadline);
        StatusOr<std::string> body = s.ok() ? net::RecvFrame(fd->get(), io_deadline) : StatusOr<std::string>(s);
        if (!body.ok()) {
          last_error = "handshake with " + ip + ": " + body.status().message();
          continue;
        }
        auto msg = net::DecodeMessage(*body);
        if (!msg.ok()) {
          last_error = "handshake with " + ip + ": " + msg.status().message();
          continue;
        }
        if (msg->first == kOk) {
          return std::unique_ptr<TcpStoreClient>(
              new TcpStoreClient(fd->release(), address, identity, options));
        }
        if (msg->first == kStale && msg->second.size() == 2) {
          last_error = "stale store at " + ip + " serves job '" + msg->second[0] + "' attempt " +
                       msg->second[1] + ", this rank belongs to " + identity.ToString();
        } else {
          last_error = "unexpected handshake reply from " + ip;
        }
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Unavailable("rendezvous store at " + address + " not reachable within the " +
                         Ms(options.connect_deadline) + " deadline after " + std::to_string(attempts) +
                         " attempts; last error: " + last_error);
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

TcpStoreClient::TcpStoreClient(int fd, std::string address, StoreIdentity id,
                               TcpStoreClientOptions opts)
    : fd_(fd),
      address_(std::move(address)),
      identity_(std::move(id)),
      options_(std::move(opts)),
      mu_(std::make_unique<std::mutex>()) {}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TcpStoreClient::Prefixed(const std::string& key) const {
  return identity_.job_id + "/" + std::to_string(identity_.attempt) + "/" + key;
}

StatusOr<std::vector<std::string>> TcpStoreClient::Call(uint8_t op,
                                                        const std::vector<std::string>& args,
                                                        std::chrono::milliseconds extra_wait) {
  std::lock_guard<std::mutex> l(*mu_);
  if (fd_ < 0) return Unavailable("connection to rendezvous store " + address_ + " was lost");
  const auto deadline = Clock::now() + options_.io_timeout + extra_wait;
  Status s = net::SendFrame(fd_, net::EncodeMessage(op, args), deadline);
  StatusOr<std::string> body = s.ok() ? net::RecvFrame(fd_, deadline) : StatusOr<std::string>(s);
  if (!body.ok()) {
    // The stream may hold a half-read reply: never reuse it.
    ::close(fd_);
    fd_ = -1;
    return Unavailable("rendezvous store " + address_ + ": " + body.status().message());
  }
  HT_ASSIGN_OR_RETURN(auto msg, net::DecodeMessage(*body));
  if (msg.first == kTimeout) return DeadlineExceeded("timeout");
  if (msg.first != kOk) {
    return Internal("rendezvous store " + address_ + ": " +
                    (msg.second.empty() ? std::string("error") : msg.second[0]));
  }
  return std::move(msg.second);
}

Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  return Call(kSet, {Prefixed(key), value}, {}).status();
}

StatusOr<std::string> TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout) {
  auto r = Call(kGet, {Prefixed(key), std::to_string(timeout.count())}, timeout);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kDeadlineExceeded) {
      return DeadlineExceeded("key '" + key + "' did not appear in rendezvous store " + address_ +
                              " within " + Ms(timeout));
    }
    return r.status();
  }
  if (r->size() != 1) return Internal("malformed GET reply");
  return (*r)[0];
}

StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  HT_ASSIGN_OR_RETURN(auto r, Call(kAdd, {Prefixed(key), std::to_string(delta)}, {}));
  if (r.size() != 1) return Internal("malformed ADD reply");
  return static_cast<int64_t>(std::stoll(r[0]));
}

StatusOr<std::string> TcpStoreClient::CompareSet(const std::string& key, const std::string& expected,
                                                 const std::string& desired) {
  HT_ASSIGN_OR_RETURN(auto r, Call(kCas, {Prefixed(key), expected, desired}, {}));
  if (r.size() != 1) return Internal("malformed CAS reply");
  return r[0];
}

StatusOr<bool> TcpStoreClient::Check(const std::string& key) {
  HT_ASSIGN_OR_RETURN(auto r, Call(kCheck, {Prefixed(key)}, {}));
  if (r.size() != 1) return Internal("malformed CHECK reply");
  return r[0] == "1";
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (const auto& k : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    HT_RETURN_IF_ERROR(Get(k, std::max(left, std::chrono::milliseconds(0))).status());
  }
  return Status::Ok();
}

Status TcpStoreClient::Barrier(const std::string& name, int n, std::chrono::milliseconds timeout) {
  HT_ASSIGN_OR_RETURN(int64_t arrived, Add("barrier/" + name + "/count", 1));
  if (arrived == n) HT_RETURN_IF_ERROR(Set("barrier/" + name + "/done", "1"));
  auto s = Get("barrier/" + name + "/done", timeout);
  if (!s.ok()) {
    return Status(s.status().code(), "barrier '" + name + "' (" + std::to_string(n) +
                                         " participants): " + s.status().message());
  }
  return Status::Ok();
}

}  // namespace hypertrain::launch
