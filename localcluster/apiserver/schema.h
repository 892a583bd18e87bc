// Structural OpenAPI v3 schemas of CustomResourceDefinitions: pruning,
// defaulting and validation, in the order the apiserver applies them.
//
// Supported keywords: type, properties, required, items, additionalProperties
// (bool or schema), enum, minimum/maximum (+exclusive), minLength/maxLength,
// pattern (ECMAScript regex; Kubernetes uses RE2, which agrees on common
// patterns), minItems/maxItems, uniqueItems, minProperties/maxProperties,
// nullable, default, allOf/anyOf/oneOf/not, x-kubernetes-preserve-unknown-fields,
// x-kubernetes-int-or-string, x-kubernetes-embedded-resource,
// x-kubernetes-list-type (set/map uniqueness with x-kubernetes-list-map-keys).
// x-kubernetes-validations (CEL) are accepted but NOT evaluated.
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"

namespace kubelocal {

// Removes fields not described by the schema; returns their paths. The root's
// apiVersion/kind/metadata are always kept.
std::vector<std::string> PruneUnknownFields(json& object, const json& schema);

// Fills in `default`s recursively (a defaulted object gets its own nested
// defaults too). Null values of non-nullable fields are dropped first.
void ApplyDefaults(json& object, const json& schema);

// Validates `object` against `schema`; causes carry dotted field paths.
std::vector<FieldCause> ValidateAgainstSchema(const json& object, const json& schema);

// Checks that a CRD schema is itself well-formed enough to serve (types known,
// patterns compile); returns causes under `path`.
std::vector<FieldCause> CheckSchema(const json& schema, const std::string& path);

}  // namespace kubelocal
