#include "kube/rest_client.h"

// spdlog (fmt) before cpprest: cpprest defines a macro U that breaks fmt's headers.
#include <spdlog/spdlog.h>
// clang-format off
#include <cpprest/http_client.h>
#include <cpprest/uri_builder.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
// clang-format on

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <mutex>
#include <regex>
#include <thread>

#include "kube/credentials.h"
#include "kube/rate_limiter.h"

namespace kube {
namespace {

using web::http::http_request;
using web::http::http_response;
using web::http::client::http_client;
using web::http::client::http_client_config;

// Trust exactly the PEM bundle `ca` (replaces the default store).
void InstallCa(SSL_CTX* ctx, const std::string& ca) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(ca.data(), static_cast<int>(ca.size()));
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  BIO_free(bio);
  ERR_clear_error();
  SSL_CTX_set_cert_store(ctx, store);  // takes ownership
  if (added == 0) throw std::runtime_error("certificate-authority holds no PEM certificate");
}

void ConfigureSsl(const Config& c, boost::asio::ssl::context& ctx) {
  if (!c.ca_pem.empty()) InstallCa(ctx.native_handle(), c.ca_pem);
  if (!c.client_cert_pem.empty()) {
    ctx.use_certificate_chain(boost::asio::buffer(c.client_cert_pem));
    ctx.use_private_key(boost::asio::buffer(c.client_key_pem), boost::asio::ssl::context::pem);
  }
}

bool Contains(const std::string& s, const char* needle) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  return l.find(needle) != std::string::npos;
}

bool IdempotentVerb(const std::string& m) { return m != "POST"; }

struct Attempt {
  std::optional<Response> response;  // set when an HTTP response arrived
  std::optional<Status> error;       // set when no response (or stream failure)
  bool refused = false;              // nothing was sent
  bool retryable_transport = false;
  bool stream_started = false;  // body bytes may have been delivered: never retry
  int code = 0;                 // the HTTP status once headers arrived; 0 without a response
  std::chrono::steady_clock::duration latency{};  // until the headers (or the error)
};

int ParseRetryAfter(const std::map<std::string, std::string>& h) {
  auto it = h.find("retry-after");
  if (it == h.end()) return -1;
  try {
    size_t pos = 0;
    int v = std::stoi(it->second, &pos);
    return v >= 0 ? v : -1;
  } catch (...) {
    return -1;  // HTTP-date form is not supported; fall back to backoff
  }
}

// Hands a watch stream's bytes to on_data as they come, until the stream
// ends, on_data returns false (the connection is closed) or cancel fires.
void StreamBody(http_response& resp, CancelToken* cancel, const std::function<bool(std::string_view)>& on_data,
                pplx::cancellation_token_source& cts) {
  auto sb = resp.body().streambuf();
  std::vector<uint8_t> buf(64 * 1024);
  while (true) {
    if (cancel && cancel->cancelled()) break;
    size_t n = sb.getn(buf.data(), 1).get();  // waits for at least one byte
    if (n == 0) break;                        // normal end of stream
    size_t avail = sb.in_avail();
    if (avail > 0) n += sb.getn(buf.data() + 1, std::min(avail, buf.size() - 1)).get();
    if (!on_data(std::string_view(reinterpret_cast<char*>(buf.data()), n))) {
      cts.cancel();  // closes the connection
      break;
    }
  }
}

// A failed attempt's error: cancelled, timed out and unreachable are
// retryable transport failures; a TLS failure is not (it names what to check).
void ClassifyTransportError(const web::http::http_exception& e, const std::string& line,
                            std::chrono::milliseconds timeout, CancelToken* cancel, Attempt* a) {
  std::string what = e.what();
  auto ec = e.error_code();
  if (cancel && cancel->cancelled()) {
    a->error = hypertrain::Cancelled("request cancelled");
  } else if (ec == std::errc::timed_out || Contains(what, "timed out")) {
    a->error = hypertrain::DeadlineExceeded(line + ": timed out after " + std::to_string(timeout.count()) + " ms");
    a->retryable_transport = true;
  } else if (Contains(what, "ssl") || Contains(what, "certificate") || Contains(what, "handshake") ||
             Contains(ec.category().name(), "ssl")) {
    a->error = hypertrain::Unauthenticated(line + ": TLS error: " + what +
                                           " (check certificate-authority, server name and client certificate)");
  } else {
    a->refused = ec == std::errc::connection_refused || Contains(what, "refused");
    a->retryable_transport = true;
    a->error = hypertrain::Unavailable(line + ": " + what);
  }
}

}  // namespace

std::string RedactSecrets(std::string s) {
  static const std::regex kBearer(R"((Bearer|bearer)\s+[^\s,;"']+)");
  static const std::regex kTokenField(R"(("token"\s*:\s*")[^"]*("))");
  s = std::regex_replace(s, kBearer, "$1 <redacted>");
  s = std::regex_replace(s, kTokenField, "$1<redacted>$2");
  return s;
}

struct RestClient::Impl {
  Config config;
  Credentials creds;
  TokenBucket bucket;
  Backoff backoff;
  std::mutex mu;
  std::map<int64_t, std::shared_ptr<http_client>> clients;  // by timeout (ms)
  RequestObserver observer;
  std::atomic<int64_t> attempts{0}, retries{0};

  explicit Impl(Config c)
      : config(std::move(c)),
        creds(config),
        bucket(config.qps, config.burst),
        backoff(config.retry_base, config.retry_max) {}

  std::shared_ptr<http_client> ClientFor(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> l(mu);
    auto& c = clients[timeout.count()];
    if (!c) {
      http_client_config hc;
      hc.set_timeout(timeout);
      hc.set_validate_certificates(!config.insecure_skip_tls_verify);
      Config cfg = config;  // the callback outlives nothing but this client
      hc.set_ssl_context_callback(
          [cfg](boost::asio::ssl::context& ctx) { ConfigureSsl(cfg, ctx); });
      c = std::make_shared<http_client>(config.server, hc);
    }
    return c;
  }

  RequestObserver Observer() {
    std::lock_guard<std::mutex> l(mu);
    return observer;
  }

  // One debug line per attempt; formatted only when debug is on.
  void LogAttempt(const std::string& line) {
    if (spdlog::should_log(spdlog::level::debug)) spdlog::debug("{}", RedactSecrets(line));
  }

  Attempt Once(const Request& req, CancelToken* cancel,
               const std::function<bool(std::string_view)>* on_data);
  StatusOr<Response> Run(const Request& req, CancelToken* cancel,
                         const std::function<bool(std::string_view)>* on_data);
};

Attempt RestClient::Impl::Once(const Request& req, CancelToken* cancel,
                               const std::function<bool(std::string_view)>* on_data) {
  Attempt a;
  auto timeout = req.timeout.count() > 0 ? req.timeout : config.request_timeout;
  auto auth = creds.AuthorizationHeader();
  if (!auth.ok()) {
    a.error = auth.status();
    return a;
  }
  web::uri_builder ub(utility::conversions::to_string_t(req.path));
  for (const auto& [k, v] : req.query) ub.append_query(k, v, true);
  http_request hr(utility::conversions::to_string_t(req.method));
  hr.set_request_uri(ub.to_uri());
  hr.headers().add("Accept", "application/json");
  hr.headers().add("User-Agent", config.user_agent);
  if (!auth->empty()) hr.headers().add("Authorization", *auth);
  if (req.body) hr.set_body(*req.body, req.content_type);

  std::string line = req.method + " " + config.server + ub.to_string();
  pplx::cancellation_token_source cts;
  CancelRegistration reg(cancel, [cts]() mutable { cts.cancel(); });
  attempts.fetch_add(1);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    http_response resp = ClientFor(timeout)->request(hr, cts.get_token()).get();
    a.latency = std::chrono::steady_clock::now() - t0;
    Response r;
    r.status = resp.status_code();
    a.code = r.status;
    for (const auto& [k, v] : resp.headers()) {
      std::string lk = k;
      std::transform(lk.begin(), lk.end(), lk.begin(), ::tolower);
      r.headers[lk] = v;
    }
    LogAttempt(line + " -> " + std::to_string(r.status) +
               (auth->empty() ? "" : " [Authorization: " + *auth + "]"));
    if (on_data && r.status == 200) {
      a.stream_started = true;
      StreamBody(resp, cancel, *on_data, cts);
      if (cancel && cancel->cancelled()) {
        a.error = hypertrain::Cancelled("stream cancelled");
        return a;
      }
    } else {
      r.body = resp.extract_utf8string(true).get();
    }
    a.response = std::move(r);
  } catch (const web::http::http_exception& e) {
    ClassifyTransportError(e, line, timeout, cancel, &a);
    LogAttempt(line + " -> " + a.error->ToString());
  } catch (const pplx::task_canceled&) {
    a.error = hypertrain::Cancelled("request cancelled");
  } catch (const std::exception& e) {
    if (cancel && cancel->cancelled()) {
      a.error = hypertrain::Cancelled("request cancelled");
    } else {
      a.error = hypertrain::Unavailable(line + ": " + e.what());
      a.retryable_transport = true;
    }
  }
  if (a.code == 0) a.latency = std::chrono::steady_clock::now() - t0;
  return a;
}

StatusOr<Response> RestClient::Impl::Run(const Request& req, CancelToken* cancel,
                                         const std::function<bool(std::string_view)>* on_data) {
  bool auth_retried = false;
  for (int attempt = 0;; ++attempt) {
    if (cancel && cancel->cancelled()) return hypertrain::Cancelled("request cancelled");
    {
      std::atomic<bool> never{false};
      while (!bucket.Acquire(&never,
                             std::chrono::steady_clock::now() + std::chrono::milliseconds(50))) {
        if (cancel && cancel->cancelled()) return hypertrain::Cancelled("request cancelled");
      }
    }
    Attempt a = Once(req, cancel, on_data);
    if (RequestObserver f = Observer(); f && !(a.code == 0 && a.error && IsCancelled(*a.error))) {
      f(RequestRecord{req.method, a.code, std::chrono::duration<double>(a.latency).count()});
    }
    Status err;
    bool retry = false;
    int retry_after = -1;
    if (a.response) {
      const Response& r = *a.response;
      if (r.status >= 200 && r.status < 300) return std::move(*a.response);
      err = ErrorFromStatus(r.status, r.body);
      hypertrain::ApiErrorDetail detail = *err.api_detail();
      retry_after = ParseRetryAfter(r.headers);
      if (retry_after < 0) retry_after = detail.retry_after_seconds;
      detail.retry_after_seconds = retry_after;
      err = Status(err.code(), err.message(), std::move(detail));
      if (r.status == 401 && !auth_retried && creds.OnUnauthorized()) {
        auth_retried = true;
        --attempt;  // a credential refresh does not consume the retry budget
        retries.fetch_add(1);
        continue;
      }
      if (r.status == 429 || r.status == 503) {
        retry = true;
      } else if (r.status >= 500 && r.status != 501) {
        retry = IdempotentVerb(req.method);
      }
    } else {
      err = *a.error;
      if (err.code() == StatusCode::kCancelled) return err;
      // A stream that broke after it started is the caller's to resume.
      retry =
          !a.stream_started && a.retryable_transport && (IdempotentVerb(req.method) || a.refused);
    }
    if (!retry || attempt >= config.max_retries) {
      if (attempt > 0)
        return err.WithMessage(err.message() + " (after " + std::to_string(attempt + 1) +
                               " attempts)");
      return err;
    }
    auto delay = backoff.Delay(attempt);
    if (retry_after >= 0)
      delay = std::max<std::chrono::milliseconds>(delay,
                                                  std::chrono::seconds(std::min(retry_after, 60)));
    retries.fetch_add(1);
    spdlog::warn("{} {}{}: {}; retry {}/{} in {} ms", req.method, config.server, req.path,
                 RedactSecrets(err.ToString()), attempt + 1, config.max_retries, delay.count());
    if (cancel) {
      if (!cancel->SleepFor(delay)) return hypertrain::Cancelled("request cancelled");
    } else {
      std::this_thread::sleep_for(delay);
    }
  }
}

RestClient::RestClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RestClient::~RestClient() = default;

StatusOr<std::shared_ptr<RestClient>> RestClient::Create(Config config) {
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0)
    return hypertrain::InvalidArgument("server \"" + config.server + "\" is not an http(s) URL");
  if (!config.tls_server_name.empty())
    return hypertrain::InvalidArgument("tls-server-name is not supported by this client");
  try {
    web::uri u(utility::conversions::to_string_t(config.server));
    if (u.host().empty()) throw std::runtime_error("no host");
  } catch (const std::exception& e) {
    return hypertrain::InvalidArgument("server \"" + config.server + "\" is not a valid URL");
  }
  // Fail early, with a clear message, on unusable TLS material.
  try {
    boost::asio::ssl::context ctx(boost::asio::ssl::context::sslv23);
    ConfigureSsl(config, ctx);
  } catch (const std::exception& e) {
    return hypertrain::InvalidArgument(std::string("invalid TLS material in config: ") + e.what());
  }
  return std::shared_ptr<RestClient>(new RestClient(std::make_unique<Impl>(std::move(config))));
}

StatusOr<Response> RestClient::Send(const Request& req, CancelToken* cancel) {
  return impl_->Run(req, cancel, nullptr);
}

StatusOr<Json> RestClient::SendJson(const Request& req, CancelToken* cancel) {
  auto r = Send(req, cancel);
  if (!r.ok()) return r.status();
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded())
    return hypertrain::Internal(req.method + " " + req.path + ": response is not JSON");
  return j;
}

Status RestClient::Stream(const Request& req, const std::function<bool(std::string_view)>& on_data,
                          CancelToken* cancel) {
  auto r = impl_->Run(req, cancel, &on_data);
  if (!r.ok()) return r.status();
  return {};
}

const Config& RestClient::config() const { return impl_->config; }
void RestClient::SetRequestObserver(RequestObserver observer) {
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->observer = std::move(observer);
}
int64_t RestClient::attempts() const { return impl_->attempts.load(); }
int64_t RestClient::retries() const { return impl_->retries.load(); }
int RestClient::exec_runs() const { return impl_->creds.exec_runs(); }

}  // namespace kube
