// The OpenAPI v3 schemas of CustomResourceDefinitions (apiextensions.k8s.io/v1)
// as kube-apiserver applies them, in its order: prune unknown fields, apply
// defaults, validate; and the structural-schema rules a CRD's schema must meet
// to be served. One implementation for the local control plane (which serves
// CRDs) and the operator's manifest checks (which lint them without a server).
//
// Supported keywords: type, properties, required, items, additionalProperties
// (bool or schema), enum, minimum/maximum (+exclusive), multipleOf,
// minLength/maxLength, pattern (ECMAScript regex; Kubernetes uses RE2, which
// agrees on common patterns), format date-time, minItems/maxItems,
// minProperties/maxProperties, nullable, default, allOf/anyOf/oneOf/not,
// x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string,
// x-kubernetes-embedded-resource, x-kubernetes-list-type (set/map with
// x-kubernetes-list-map-keys). x-kubernetes-validations (CEL) are checked for
// shape but NOT evaluated.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hypertrain::kube::openapi {

using json = nlohmann::json;
// reason (FieldValueInvalid, FieldValueRequired, ...), dotted field path, and
// the API server's message for it.
using Cause = ApiErrorDetail::Cause;

// Removes fields the schema does not describe; returns their paths. The root's
// (and an embedded resource's) apiVersion/kind/metadata are always kept.
std::vector<std::string> PruneUnknownFields(json& object, const json& schema);

// Fills in `default`s recursively (a defaulted object gets its own nested
// defaults too). Null values of non-nullable fields are dropped first.
void ApplyDefaults(json& object, const json& schema);

// Validates `object` against `schema`; causes carry dotted field paths and the
// API server's messages ("Invalid value: 0: spec.replicas in body should be
// greater than or equal to 1").
std::vector<Cause> Validate(const json& object, const json& schema);

// The structural-schema rules kube-apiserver enforces on a CRD version's
// openAPIV3Schema (types everywhere, no types inside junctors, root metadata
// only `type: object`, list-map keys required or defaulted, valid defaults and
// patterns), plus hygiene: known keywords only, required names declared.
// Causes are reported under `path` ("spec.versions[0].schema.openAPIV3Schema").
std::vector<Cause> CheckStructural(const json& schema, const std::string& path);

// The schema node at a dotted JSON path (".spec.nodes"; "[-1:]"/"[*]" step into
// items), or null when the path leaves the schema.
json SchemaAt(const json& schema, const std::string& json_path);

}  // namespace hypertrain::kube::openapi
