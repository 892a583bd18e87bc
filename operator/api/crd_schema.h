// Checks for CustomResourceDefinition schemas without a server:
//  - CheckStructural applies the structural-schema rules that kube-apiserver
//    (apiextensions.k8s.io/v1) enforces on a CRD's openAPIV3Schema, plus
//    hygiene rules (known keywords only, required names declared).
//  - ValidateAgainstSchema validates an object against an OpenAPI v3 schema
//    subset the way the API server does (types, required, enum, ranges,
//    lengths, patterns, item/property counts, int-or-string, preserve-unknown),
//    applying defaults in place. Unknown fields are reported (the API server
//    would silently prune them: a typo in a manifest). CEL rules are not
//    evaluated here; ParseSpec enforces the same rules in C++.
#ifndef HYPERTRAIN_OPERATOR_API_CRD_SCHEMA_H_
#define HYPERTRAIN_OPERATOR_API_CRD_SCHEMA_H_

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

#endif  // HYPERTRAIN_OPERATOR_API_CRD_SCHEMA_H_
