#pragma once
// Manifest checks for CustomResourceDefinitions without a server, on the
// API server's own rules (kube/openapi_schema.h), as "path: message" lines:
//  - CheckStructural: the structural-schema rules kube-apiserver enforces on a
//    CRD's openAPIV3Schema, plus hygiene (known keywords, declared required).
//  - ValidateAgainstSchema: an object as the API server would admit it
//    (defaults applied in place, then validated), and stricter in one way: a
//    field the schema does not describe is reported (the API server would
//    silently prune it: a typo in a manifest). CEL rules are not evaluated
//    here; ParseSpec enforces the same rules in C++.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hypertrain::api {

// Problems in `schema` (the openAPIV3Schema of one CRD version); empty when structural.
std::vector<std::string> CheckStructural(const nlohmann::json& schema);

// Problems of `value` against `schema`, each "path: message". Defaults are
// written into `value` first, as the API server does on create.
std::vector<std::string> ValidateAgainstSchema(const nlohmann::json& schema, nlohmann::json* value);

// The schema node at a dotted JSON path (".spec.nodes"; "[-1:]"/"[*]" step into
// items), or null when the path leaves the schema.
nlohmann::json SchemaAt(const nlohmann::json& schema, const std::string& json_path);

}  // namespace hypertrain::api
