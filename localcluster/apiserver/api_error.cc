#include "localcluster/apiserver/api_error.h"

namespace kubelocal {
namespace {

ApiError Make(int code, std::string reason, std::string message) {
  ApiError e;
  e.code = code;
  e.reason = std::move(reason);
  e.message = std::move(message);
  return e;
}

// "trainingjobs.example.com" -> kind "trainingjobs", group "example.com".
void SetResource(ApiError& e, const std::string& resource, const std::string& name) {
  auto dot = resource.find('.');
  e.kind = dot == std::string::npos ? resource : resource.substr(0, dot);
  if (dot != std::string::npos) e.group = resource.substr(dot + 1);
  e.name = name;
}

}  // namespace

json ApiError::ToStatus() const {
  json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message", message},
            {"reason", reason},
            {"code", code}};
  json details = json::object();
  if (!name.empty()) details["name"] = name;
  if (!group.empty()) details["group"] = group;
  if (!kind.empty()) details["kind"] = kind;
  if (!causes.empty()) {
    json cs = json::array();
    for (const auto& c : causes) {
      cs.push_back({{"reason", c.reason}, {"message", c.message}, {"field", c.field}});
    }
    details["causes"] = cs;
  }
  if (retry_after_seconds > 0) details["retryAfterSeconds"] = retry_after_seconds;
  if (!details.empty()) s["details"] = details;
  return s;
}

ApiError NotFound(const std::string& resource, const std::string& name) {
  ApiError e = Make(404, "NotFound", resource + " \"" + name + "\" not found");
  SetResource(e, resource, name);
  return e;
}

ApiError AlreadyExists(const std::string& resource, const std::string& name) {
  ApiError e = Make(409, "AlreadyExists", resource + " \"" + name + "\" already exists");
  SetResource(e, resource, name);
  return e;
}

ApiError Conflict(const std::string& resource, const std::string& name, const std::string& why) {
  ApiError e = Make(409, "Conflict",
                    "Operation cannot be fulfilled on " + resource + " \"" + name + "\": " + why);
  SetResource(e, resource, name);
  return e;
}

ApiError BadRequest(const std::string& message) { return Make(400, "BadRequest", message); }

ApiError Invalid(const std::string& kind_group, const std::string& name,
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
  ApiError e = Make(422, "Invalid", msg);
  auto dot = kind_group.find('.');
  e.kind = dot == std::string::npos ? kind_group : kind_group.substr(0, dot);
  if (dot != std::string::npos) e.group = kind_group.substr(dot + 1);
  e.name = name;
  e.causes = std::move(causes);
  return e;
}

ApiError Expired(const std::string& message) { return Make(410, "Expired", message); }
ApiError Gone(const std::string& message) { return Make(410, "Gone", message); }
ApiError Forbidden(const std::string& message) { return Make(403, "Forbidden", message); }
ApiError Unauthorized() { return Make(401, "Unauthorized", "Unauthorized"); }
ApiError MethodNotAllowed(const std::string& message) {
  return Make(405, "MethodNotAllowed", message);
}
ApiError UnsupportedMediaType(const std::string& message) {
  return Make(415, "UnsupportedMediaType", message);
}
ApiError TooManyRequests(const std::string& message, int retry_after_seconds) {
  ApiError e = Make(429, "TooManyRequests", message);
  e.retry_after_seconds = retry_after_seconds;
  return e;
}
ApiError InternalError(const std::string& message) {
  return Make(500, "InternalError", "Internal error occurred: " + message);
}
ApiError RequestEntityTooLarge(const std::string& message) {
  return Make(413, "RequestEntityTooLarge", message);
}

}  // namespace kubelocal
