// Errors of the local control plane, shaped like Kubernetes `Status` objects.
//
// Every failure a handler can produce is an ApiError: an HTTP code, a machine
// reason (NotFound, AlreadyExists, Conflict, Invalid, Expired, ...), a message
// and optional field causes. ToStatus() renders the exact wire form of a
// metav1.Status so that clients (kubectl, client-go, our C++ client) can map it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubelocal {

using json = nlohmann::json;

struct FieldCause {
  std::string reason;   // FieldValueRequired, FieldValueInvalid, ...
  std::string field;    // dotted path, e.g. spec.replicas
  std::string message;  // e.g. "Required value" (the field is not repeated)
};

struct ApiError {
  int code = 500;
  std::string reason;
  std::string message;
  // StatusDetails (all optional).
  std::string name, group, kind;
  std::vector<FieldCause> causes;
  int retry_after_seconds = 0;

  json ToStatus() const;
};

// Constructors for the common Kubernetes errors. `resource` is the qualified
// resource as Kubernetes prints it (e.g. "pods" or "trainingjobs.example.com").
ApiError NotFound(const std::string& resource, const std::string& name);
ApiError AlreadyExists(const std::string& resource, const std::string& name);
ApiError Conflict(const std::string& resource, const std::string& name, const std::string& why);
ApiError BadRequest(const std::string& message);
ApiError Invalid(const std::string& kind_group, const std::string& name,
                 std::vector<FieldCause> causes);
ApiError Expired(const std::string& message);
ApiError Gone(const std::string& message);  // 410 with reason Gone (legacy)
ApiError Forbidden(const std::string& message);
ApiError Unauthorized();
ApiError MethodNotAllowed(const std::string& message);
ApiError UnsupportedMediaType(const std::string& message);
ApiError TooManyRequests(const std::string& message, int retry_after_seconds);
ApiError InternalError(const std::string& message);
ApiError RequestEntityTooLarge(const std::string& message);

// Minimal expected<T, ApiError> (C++20 has no std::expected).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

// Success-or-error for functions with no value.
using MaybeError = std::optional<ApiError>;

}  // namespace kubelocal
