#pragma once
// Status / StatusOr: the one error type of hypertrain (runtime, operator,
// Kubernetes client and local control plane). Dependency-free on purpose.
//
// An error that crossed an HTTP API (the Kubernetes API server, or the local
// control plane answering one) also carries an ApiErrorDetail: the HTTP status,
// the API's machine-readable reason and Retry-After, so that callers can retry
// and tell cases apart (see kube/status.h for the client's predicates).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hypertrain {

// In the spirit of the absl/gRPC canonical codes (plus kExpired and kIo).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad config or input: never retried
  kNotFound,
  kFailedPrecondition,
  kDataLoss,     // corrupt or truncated file
  kUnavailable,  // peer or resource not reachable (yet): retryable
  kDeadlineExceeded,
  kInternal,
  kIo,
  kCancelled,          // the caller cancelled (shutdown)
  kUnknown,            // an error nobody classified
  kAlreadyExists,      // create of something that exists
  kAborted,            // concurrent modification (Kubernetes Conflict): re-read, retry
  kExpired,            // no longer available (Kubernetes 410 Gone/Expired: watch history)
  kPermissionDenied,   // authenticated, but not allowed (HTTP 403)
  kUnauthenticated,    // no valid credentials, or the peer's identity failed (HTTP 401, TLS)
  kResourceExhausted,  // throttled or out of quota (HTTP 429)
  kUnimplemented,      // not served (HTTP 405, 501)
};

const char* StatusCodeName(StatusCode code);
// The code an HTTP error status maps to (400 → kInvalidArgument, 409 →
// kAborted, 410 → kExpired, 429 → kResourceExhausted, 5xx → kUnavailable ...).
StatusCode StatusCodeForHttp(int http_status);

// What an HTTP API said about an error (shaped like Kubernetes' metav1.Status).
struct ApiErrorDetail {
  int http_status = 0;           // 0: no HTTP response was received
  std::string reason;            // "NotFound", "Conflict", "Expired", "Invalid", ...
  int retry_after_seconds = -1;  // Retry-After header or details.retryAfterSeconds; -1: none
  // metav1.StatusDetails (optional; the local control plane fills them).
  std::string name, group, kind;
  struct Cause {
    std::string reason;   // FieldValueRequired, FieldValueInvalid, ...
    std::string field;    // dotted path, e.g. spec.replicas
    std::string message;  // e.g. "Required value" (the field is not repeated)
  };
  std::vector<Cause> causes;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(StatusCode code, std::string message, ApiErrorDetail detail)
      : code_(code),
        message_(std::move(message)),
        api_(std::make_shared<const ApiErrorDetail>(std::move(detail))) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // Never contains credentials.
  const std::string& message() const { return message_; }
  // Null unless the error came from (or is answered through) an HTTP API.
  const ApiErrorDetail* api_detail() const { return api_.get(); }
  // The HTTP status of api_detail(), 0 when there is none.
  int http_status() const { return api_ ? api_->http_status : 0; }

  // The same error with a different message (e.g. "... (after 4 attempts)").
  Status WithMessage(std::string message) const;

  // "INVALID_ARGUMENT: model.hidden_size must be > 0"; an API error reads as the
  // API reported it: "NotFound (404): pods \"x\" not found".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::shared_ptr<const ApiErrorDetail> api_;  // shared: a Status stays cheap to copy
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
// A bad value at a field path: InvalidField("spec.nodes", "must be >= 1") reads
// "spec.nodes: must be >= 1" (just the message when the field is empty).
inline Status InvalidField(const std::string& field, const std::string& message) {
  return InvalidArgument(field.empty() ? message : field + ": " + message);
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Unknown(std::string m) { return {StatusCode::kUnknown, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Expired(std::string m) { return {StatusCode::kExpired, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

// A value or the Status that explains its absence.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace hypertrain

#define HT_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::hypertrain::Status ht_s_ = (expr);   \
    if (!ht_s_.ok()) return ht_s_;         \
  } while (0)

#define HT_CONCAT_INNER_(a, b) a##b
#define HT_CONCAT_(a, b) HT_CONCAT_INNER_(a, b)
#define HT_ASSIGN_OR_RETURN(lhs, expr) \
  HT_ASSIGN_OR_RETURN_IMPL_(HT_CONCAT_(ht_so_, __LINE__), lhs, expr)
#define HT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
