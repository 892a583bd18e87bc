#include "operator/api/crd_schema.h"

#include "kube/openapi_schema.h"

namespace hypertrain::api {
namespace {

namespace openapi = kube::openapi;

std::vector<std::string> Lines(const std::vector<openapi::Cause>& causes) {
  std::vector<std::string> out;
  for (const openapi::Cause& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

}  // namespace

std::vector<std::string> CheckStructural(const nlohmann::json& schema) {
  return Lines(openapi::CheckStructural(schema, "openAPIV3Schema"));
}

std::vector<std::string> ValidateAgainstSchema(const nlohmann::json& schema, nlohmann::json* value) {
  openapi::ApplyDefaults(*value, schema);
  nlohmann::json pruned = *value;
  const std::vector<std::string> unknown = openapi::PruneUnknownFields(pruned, schema);
  std::vector<std::string> out = Lines(openapi::Validate(*value, schema));
  for (const std::string& field : unknown) out.push_back(field + ": unknown field (the API server would drop it)");
  return out;
}

nlohmann::json SchemaAt(const nlohmann::json& schema, const std::string& json_path) {
  return openapi::SchemaAt(schema, json_path);
}

}  // namespace hypertrain::api
