// Server-side printing: meta.k8s.io/v1 Table responses for
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, with built-in
// columns for core types and a CRD's additionalPrinterColumns for CRs.
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/resources.h"

namespace kubelocal {

// Evaluates a simple JSONPath (`.a.b`, `[0]`, `[-1:]`, `[*]`,
// `[?(@.type=="Ready")]`) and returns all matches.
StatusOr<std::vector<json>> JsonPathFind(const json& object, const std::string& path);

// "5s", "3m10s", "2d4h" like kubectl's HumanDuration.
std::string HumanAge(const std::string& rfc3339_timestamp);

enum class IncludeObject { kNone, kMetadata, kObject };

// Builds a Table for `objects` (already in API form).
json MakeTable(const ResourceType& type, const std::vector<json>& objects, IncludeObject include,
               const std::string& resource_version, const std::string& continue_token,
               int64_t remaining);

// True if an Accept header asks for a meta.k8s.io Table.
bool WantsTable(const std::string& accept);

}  // namespace kubelocal
