#include "localcluster/apiserver/api_error.h"

namespace kubelocal {
namespace {

using hypertrain::ApiErrorDetail;
using hypertrain::StatusCode;

StatusCode CodeFor(int http, const std::string& reason) {
  if (reason == "AlreadyExists") return StatusCode::kAlreadyExists;
  StatusCode c = hypertrain::StatusCodeForHttp(http);
  return c == StatusCode::kOk ? StatusCode::kUnknown : c;
}

ApiErrorDetail Detail(int code, std::string reason) {
  ApiErrorDetail d;
  d.http_status = code;
  d.reason = std::move(reason);
  return d;
}

// "trainingjobs.example.com" -> kind "trainingjobs", group "example.com".
void SetResource(ApiErrorDetail& d, const std::string& resource, const std::string& name) {
  auto dot = resource.find('.');
  d.kind = dot == std::string::npos ? resource : resource.substr(0, dot);
  if (dot != std::string::npos) d.group = resource.substr(dot + 1);
  d.name = name;
}

Status Make(ApiErrorDetail d, std::string message) {
  StatusCode c = CodeFor(d.http_status, d.reason);
  return Status(c, std::move(message), std::move(d));
}

}  // namespace

Status MakeApiError(int code, std::string reason, std::string message, int retry_after_seconds) {
  ApiErrorDetail d = Detail(code, std::move(reason));
  d.retry_after_seconds = retry_after_seconds;
  return Make(std::move(d), std::move(message));
}

int HttpCode(const Status& s) { return s.api_detail() ? s.api_detail()->http_status : 500; }

std::string Reason(const Status& s) {
  return s.api_detail() ? s.api_detail()->reason : std::string("InternalError");
}

int RetryAfterSeconds(const Status& s) {
  return s.api_detail() && s.api_detail()->retry_after_seconds > 0
             ? s.api_detail()->retry_after_seconds
             : 0;
}

const std::vector<FieldCause>& Causes(const Status& s) {
  static const std::vector<FieldCause> kNone;
  return s.api_detail() ? s.api_detail()->causes : kNone;
}

json ToStatusJson(const Status& st) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"},      {"metadata", json::object()},
            {"status", "Failure"}, {"message", st.message()}, {"reason", Reason(st)},
            {"code", HttpCode(st)}};
  json details = json::object();
  if (const ApiErrorDetail* d = st.api_detail()) {
    if (!d->name.empty()) details["name"] = d->name;
    if (!d->group.empty()) details["group"] = d->group;
    if (!d->kind.empty()) details["kind"] = d->kind;
    if (!d->causes.empty()) {
      json cs = json::array();
      for (const auto& c : d->causes) {
        cs.push_back({{"reason", c.reason}, {"message", c.message}, {"field", c.field}});
      }
      details["causes"] = cs;
    }
  }
  if (int ra = RetryAfterSeconds(st); ra > 0) details["retryAfterSeconds"] = ra;
  if (!details.empty()) s["details"] = details;
  return s;
}

Status NotFound(const std::string& resource, const std::string& name) {
  ApiErrorDetail d = Detail(404, "NotFound");
  SetResource(d, resource, name);
  return Make(std::move(d), resource + " \"" + name + "\" not found");
}

Status AlreadyExists(const std::string& resource, const std::string& name) {
  ApiErrorDetail d = Detail(409, "AlreadyExists");
  SetResource(d, resource, name);
  return Make(std::move(d), resource + " \"" + name + "\" already exists");
}

Status Conflict(const std::string& resource, const std::string& name, const std::string& why) {
  ApiErrorDetail d = Detail(409, "Conflict");
  SetResource(d, resource, name);
  return Make(std::move(d),
              "Operation cannot be fulfilled on " + resource + " \"" + name + "\": " + why);
}

Status BadRequest(const std::string& message) { return MakeApiError(400, "BadRequest", message); }

Status Invalid(const std::string& kind_group, const std::string& name,
               std::vector<FieldCause> causes) {
  std::string msg = kind_group + " \"" + name + "\" is invalid: ";
  auto one = [](const FieldCause& c) {
    return c.field.empty() ? c.message : c.field + ": " + c.message;
  };
  if (causes.size() == 1) {
    msg += one(causes[0]);
  } else {
    msg += "[";
    for (size_t i = 0; i < causes.size(); ++i) {
      if (i) msg += ", ";
      msg += one(causes[i]);
    }
    msg += "]";
  }
  ApiErrorDetail d = Detail(422, "Invalid");
  SetResource(d, kind_group, name);
  d.causes = std::move(causes);
  return Make(std::move(d), std::move(msg));
}

Status Expired(const std::string& message) { return MakeApiError(410, "Expired", message); }
Status Gone(const std::string& message) { return MakeApiError(410, "Gone", message); }
Status Forbidden(const std::string& message, const std::string& kind, const std::string& name) {
  ApiErrorDetail d = Detail(403, "Forbidden");
  d.kind = kind;
  d.name = name;
  return Make(std::move(d), message);
}
Status Unauthorized() { return MakeApiError(401, "Unauthorized", "Unauthorized"); }
Status MethodNotAllowed(const std::string& message) {
  return MakeApiError(405, "MethodNotAllowed", message);
}
Status UnsupportedMediaType(const std::string& message) {
  return MakeApiError(415, "UnsupportedMediaType", message);
}
Status TooManyRequests(const std::string& message, int retry_after_seconds) {
  return MakeApiError(429, "TooManyRequests", message, retry_after_seconds);
}
Status InternalError(const std::string& message) {
  return MakeApiError(500, "InternalError", "Internal error occurred: " + message);
}
Status RequestEntityTooLarge(const std::string& message) {
  return MakeApiError(413, "RequestEntityTooLarge", message);
}

}  // namespace kubelocal
