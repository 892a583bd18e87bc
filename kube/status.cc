#include "kube/status.h"

namespace kube {
namespace {

// Status.reason when the server sent none (the names the client always used).
const char* DefaultReason(int s) {
  switch (s) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 504:
      return "Timeout";
    default:
      break;
  }
  return s >= 500 ? "ServerError" : "Unknown";
}

}  // namespace

StatusCode CodeForHttpStatus(int s, const std::string& reason) {
  if (reason == "AlreadyExists") return StatusCode::kAlreadyExists;
  if (reason == "Conflict") return StatusCode::kAborted;
  if (reason == "Expired" || reason == "Gone") return StatusCode::kExpired;
  if (reason == "NotFound") return StatusCode::kNotFound;
  if (reason == "Invalid") return StatusCode::kInvalidArgument;
  StatusCode c = hypertrain::StatusCodeForHttp(s);
  return c == StatusCode::kOk ? StatusCode::kUnknown : c;
}

Status ErrorFromStatusObject(int http_status, const Json& st) {
  hypertrain::ApiErrorDetail d;
  std::string message;
  int code = http_status;
  if (st.is_object()) {
    if (st.contains("code") && st["code"].is_number_integer()) code = st["code"].get<int>();
    if (st.contains("reason") && st["reason"].is_string())
      d.reason = st["reason"].get<std::string>();
    if (st.contains("message") && st["message"].is_string())
      message = st["message"].get<std::string>();
    auto det = st.find("details");
    if (det != st.end() && det->is_object()) {
      auto ra = det->find("retryAfterSeconds");
      if (ra != det->end() && ra->is_number_integer()) d.retry_after_seconds = ra->get<int>();
    }
  }
  d.http_status = code;
  if (d.reason.empty()) d.reason = DefaultReason(code);
  StatusCode c = CodeForHttpStatus(code, d.reason);
  return Status(c, std::move(message), std::move(d));
}

Status ErrorFromStatus(int http_status, const std::string& body) {
  Json st = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (st.is_object() && st.value("kind", "") == "Status") {
    Status e = ErrorFromStatusObject(http_status, st);
    // The transport status wins over Status.code.
    hypertrain::ApiErrorDetail d = *e.api_detail();
    d.http_status = http_status;
    StatusCode c = CodeForHttpStatus(http_status, d.reason);
    return Status(c, e.message(), std::move(d));
  }
  hypertrain::ApiErrorDetail d;
  d.http_status = http_status;
  d.reason = DefaultReason(http_status);
  return Status(CodeForHttpStatus(http_status, ""),
                body.size() > 512 ? body.substr(0, 512) + "..." : body, std::move(d));
}

}  // namespace kube
