#include "core/status.h"

namespace hypertrain {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kIo: return "IO_ERROR";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kExpired: return "EXPIRED";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
  }
  return "UNKNOWN";
}

StatusCode StatusCodeForHttp(int s) {
  switch (s) {
    case 400: return StatusCode::kInvalidArgument;
    case 401: return StatusCode::kUnauthenticated;
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 405: return StatusCode::kUnimplemented;
    case 409: return StatusCode::kAborted;
    case 410: return StatusCode::kExpired;
    case 422: return StatusCode::kInvalidArgument;
    case 429: return StatusCode::kResourceExhausted;
    case 500: return StatusCode::kInternal;
    case 501: return StatusCode::kUnimplemented;
    case 504: return StatusCode::kDeadlineExceeded;
    default: break;
  }
  if (s >= 500 && s < 600) return StatusCode::kUnavailable;
  if (s >= 200 && s < 300) return StatusCode::kOk;
  return StatusCode::kUnknown;
}

Status Status::WithMessage(std::string message) const {
  Status s = *this;
  s.message_ = std::move(message);
  return s;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  if (api_ && !api_->reason.empty()) {
    std::string s = api_->reason;
    if (api_->http_status != 0) s += " (" + std::to_string(api_->http_status) + ")";
    if (!message_.empty()) s += ": " + message_;
    return s;
  }
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace hypertrain
