#pragma once
// kube::Error / kube::Result<T>: the error type of the Kubernetes client.
// Self-contained on purpose: the operator and the trainer's launcher both use
// this library and must not depend on runtime/.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

namespace kube {

enum class ErrorCode {
  kOk = 0,
  // Mapped from the API server's Status.reason (or HTTP status when absent).
  kBadRequest,        // 400
  kUnauthorized,      // 401
  kForbidden,         // 403
  kNotFound,          // 404
  kMethodNotAllowed,  // 405
  kAlreadyExists,     // 409 reason AlreadyExists
  kConflict,          // 409 (resourceVersion / uid precondition failed)
  kGone,              // 410 Expired / Gone (watch history or continue token too old)
  kInvalid,           // 422
  kTooManyRequests,   // 429 (after retries were exhausted)
  kServerError,       // 5xx (after retries were exhausted)
  kTimeout,           // 504 or client-side timeout
  // Client-side failures.
  kTransport,        // connection refused / reset / DNS
  kTls,              // TLS handshake or certificate verification failed
  kCancelled,        // the caller cancelled (shutdown)
  kConfig,           // bad kubeconfig / in-cluster environment
  kAuth,             // credential plugin or token file failed
  kBadResponse,      // unparseable body
  kInvalidArgument,  // bad input to a client call
  kUnknown,
};

const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kUnknown;
  std::string reason;            // Status.reason ("NotFound", "Conflict", ...) or a client-side tag
  std::string message;           // human-readable; never contains credentials
  int http_status = 0;           // 0 when no HTTP response was received
  int retry_after_seconds = -1;  // from Retry-After / Status.details.retryAfterSeconds

  // "NotFound (404): pods "x" not found".
  std::string ToString() const;
};

Error MakeError(ErrorCode code, std::string message);
// Builds an Error from an HTTP status and a response body that may hold a
// metav1.Status object (falls back to the raw body, truncated).
Error ErrorFromStatus(int http_status, const std::string& body);
// Builds an Error from a parsed Status object (also used for watch ERROR events).
Error ErrorFromStatusObject(int http_status, const nlohmann::json& status);
ErrorCode CodeForHttpStatus(int http_status, const std::string& reason);

// A value or the Error explaining its absence.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  std::optional<Error> error_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

using Json = nlohmann::json;

inline bool IsNotFound(const Error& e) { return e.code == ErrorCode::kNotFound; }
inline bool IsConflict(const Error& e) { return e.code == ErrorCode::kConflict; }
inline bool IsAlreadyExists(const Error& e) { return e.code == ErrorCode::kAlreadyExists; }
inline bool IsGone(const Error& e) { return e.code == ErrorCode::kGone; }

}  // namespace kube

#define KUBE_RETURN_IF_ERROR(expr)             \
  do {                                         \
    auto kube_r_ = (expr);                     \
    if (!kube_r_.ok()) return kube_r_.error(); \
  } while (0)
