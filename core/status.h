#pragma once
// Status / StatusOr: the error type at runtime module boundaries.
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hypertrain {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad config or input: never retried
  kNotFound,
  kFailedPrecondition,
  kDataLoss,        // corrupt or truncated file
  kUnavailable,     // peer or resource not reachable (yet): retryable
  kDeadlineExceeded,
  kInternal,
  kIo,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: model.hidden_size must be > 0".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
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
