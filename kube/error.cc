#include "kube/error.h"

namespace kube {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "Ok";
    case ErrorCode::kBadRequest:
      return "BadRequest";
    case ErrorCode::kUnauthorized:
      return "Unauthorized";
    case ErrorCode::kForbidden:
      return "Forbidden";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kMethodNotAllowed:
      return "MethodNotAllowed";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kGone:
      return "Gone";
    case ErrorCode::kInvalid:
      return "Invalid";
    case ErrorCode::kTooManyRequests:
      return "TooManyRequests";
    case ErrorCode::kServerError:
      return "ServerError";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kTransport:
      return "Transport";
    case ErrorCode::kTls:
      return "TLS";
    case ErrorCode::kCancelled:
      return "Cancelled";
    case ErrorCode::kConfig:
      return "Config";
    case ErrorCode::kAuth:
      return "Auth";
    case ErrorCode::kBadResponse:
      return "BadResponse";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

std::string Error::ToString() const {
  std::string s = reason.empty() ? ErrorCodeName(code) : reason;
  if (http_status != 0) s += " (" + std::to_string(http_status) + ")";
  if (!message.empty()) s += ": " + message;
  return s;
}

Error MakeError(ErrorCode code, std::string message) {
  Error e;
  e.code = code;
  e.reason = ErrorCodeName(code);
  e.message = std::move(message);
  return e;
}

ErrorCode CodeForHttpStatus(int s, const std::string& reason) {
  if (reason == "AlreadyExists") return ErrorCode::kAlreadyExists;
  if (reason == "Conflict") return ErrorCode::kConflict;
  if (reason == "Expired" || reason == "Gone") return ErrorCode::kGone;
  if (reason == "NotFound") return ErrorCode::kNotFound;
  if (reason == "Invalid") return ErrorCode::kInvalid;
  switch (s) {
    case 400:
      return ErrorCode::kBadRequest;
    case 401:
      return ErrorCode::kUnauthorized;
    case 403:
      return ErrorCode::kForbidden;
    case 404:
      return ErrorCode::kNotFound;
    case 405:
      return ErrorCode::kMethodNotAllowed;
    case 409:
      return ErrorCode::kConflict;
    case 410:
      return ErrorCode::kGone;
    case 422:
      return ErrorCode::kInvalid;
    case 429:
      return ErrorCode::kTooManyRequests;
    case 504:
      return ErrorCode::kTimeout;
    default:
      break;
  }
  if (s >= 500) return ErrorCode::kServerError;
  return ErrorCode::kUnknown;
}

Error ErrorFromStatusObject(int http_status, const Json& st) {
  Error e;
  int code = http_status;
  if (st.is_object()) {
    if (st.contains("code") && st["code"].is_number_integer()) code = st["code"].get<int>();
    if (st.contains("reason") && st["reason"].is_string())
      e.reason = st["reason"].get<std::string>();
    if (st.contains("message") && st["message"].is_string())
      e.message = st["message"].get<std::string>();
    auto d = st.find("details");
    if (d != st.end() && d->is_object()) {
      auto ra = d->find("retryAfterSeconds");
      if (ra != d->end() && ra->is_number_integer()) e.retry_after_seconds = ra->get<int>();
    }
  }
  e.http_status = code;
  e.code = CodeForHttpStatus(code, e.reason);
  if (e.reason.empty()) e.reason = ErrorCodeName(e.code);
  return e;
}

Error ErrorFromStatus(int http_status, const std::string& body) {
  Json st = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (st.is_object() && st.value("kind", "") == "Status") {
    Error e = ErrorFromStatusObject(http_status, st);
    e.http_status = http_status;  // the transport status wins over Status.code
    e.code = CodeForHttpStatus(http_status, e.reason);
    return e;
  }
  Error e;
  e.http_status = http_status;
  e.code = CodeForHttpStatus(http_status, "");
  e.reason = ErrorCodeName(e.code);
  e.message = body.size() > 512 ? body.substr(0, 512) + "..." : body;
  return e;
}

}  // namespace kube
