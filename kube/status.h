#pragma once
// The Kubernetes client's errors are hypertrain::Status (core/status.h). This
// header maps API server responses to Status and names the cases callers test:
//   404 / NotFound        → kNotFound            IsNotFound
//   409 AlreadyExists     → kAlreadyExists       IsAlreadyExists
//   409 Conflict          → kAborted             IsConflict (re-read, retry)
//   410 Expired / Gone    → kExpired             IsGone (relist)
//   400, 422 Invalid      → kInvalidArgument     IsInvalid (422 only)
//   401 → kUnauthenticated, 403 → kPermissionDenied, 429 → kResourceExhausted,
//   504 → kDeadlineExceeded, other 5xx → kUnavailable / kInternal (500).
// Every error built from a response carries an ApiErrorDetail (HTTP status,
// Status.reason, Retry-After). Client-side failures are plain codes: transport
// → kUnavailable, TLS and credentials → kUnauthenticated, timeout →
// kDeadlineExceeded, cancellation → kCancelled, bad kubeconfig or argument →
// kInvalidArgument, unparseable body → kInternal. Messages never hold credentials.
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace kube {

using hypertrain::Status;
using hypertrain::StatusCode;
using hypertrain::StatusOr;
using Json = nlohmann::json;

// From an HTTP status and a response body that may hold a metav1.Status object
// (falls back to the raw body, truncated).
Status ErrorFromStatus(int http_status, const std::string& body);
// From a parsed Status object (also used for watch ERROR events).
Status ErrorFromStatusObject(int http_status, const Json& status);
StatusCode CodeForHttpStatus(int http_status, const std::string& reason);

inline bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
inline bool IsConflict(const Status& s) { return s.code() == StatusCode::kAborted; }
inline bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }
inline bool IsGone(const Status& s) { return s.code() == StatusCode::kExpired; }
inline bool IsCancelled(const Status& s) { return s.code() == StatusCode::kCancelled; }
// 422: the server rejected the object (validation).
inline bool IsInvalid(const Status& s) { return s.http_status() == 422; }
// Status.reason of an API error ("" for a client-side failure).
inline std::string Reason(const Status& s) {
  return s.api_detail() ? s.api_detail()->reason : std::string();
}

}  // namespace kube
