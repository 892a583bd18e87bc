// Errors of the local control plane: hypertrain::Status values that carry an
// ApiErrorDetail shaped like a Kubernetes `Status` object.
//
// Every failure a handler can produce is a Status whose detail holds the HTTP
// code, a machine reason (NotFound, AlreadyExists, Conflict, Invalid, Expired,
// ...), optional StatusDetails (name, group, kind, field causes) and
// Retry-After. ToStatusJson() renders the exact wire form of a metav1.Status so
// that clients (kubectl, client-go, our C++ client) can map it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kubelocal {

using json = nlohmann::json;
using hypertrain::Status;
using hypertrain::StatusOr;
using FieldCause = hypertrain::ApiErrorDetail::Cause;

// An error with HTTP `code` and Status.reason `reason` (the Status code follows
// from them, e.g. 409 Conflict → kAborted).
Status MakeApiError(int code, std::string reason, std::string message,
                    int retry_after_seconds = -1);

// Constructors for the common Kubernetes errors. `resource` is the qualified
// resource as Kubernetes prints it (e.g. "pods" or "trainingjobs.example.com").
Status NotFound(const std::string& resource, const std::string& name);
Status AlreadyExists(const std::string& resource, const std::string& name);
Status Conflict(const std::string& resource, const std::string& name, const std::string& why);
Status BadRequest(const std::string& message);
Status Invalid(const std::string& kind_group, const std::string& name,
               std::vector<FieldCause> causes);
Status Expired(const std::string& message);
Status Gone(const std::string& message);  // 410 with reason Gone (legacy)
// `kind` and `name` (optional) fill StatusDetails.
Status Forbidden(const std::string& message, const std::string& kind = "",
                 const std::string& name = "");
Status Unauthorized();
Status MethodNotAllowed(const std::string& message);
Status UnsupportedMediaType(const std::string& message);
Status TooManyRequests(const std::string& message, int retry_after_seconds);
Status InternalError(const std::string& message);
Status RequestEntityTooLarge(const std::string& message);

// The HTTP code a failed Status is answered with (500 when it has no detail).
int HttpCode(const Status& s);
// Status.reason ("InternalError" when the Status has no detail).
std::string Reason(const Status& s);
// Retry-After seconds, 0 when none.
int RetryAfterSeconds(const Status& s);
// The field causes of an Invalid error (empty otherwise).
const std::vector<FieldCause>& Causes(const Status& s);
// The metav1.Status wire form of a failed Status.
json ToStatusJson(const Status& s);

}  // namespace kubelocal
