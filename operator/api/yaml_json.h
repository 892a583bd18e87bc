#pragma once
// YAML -> nlohmann::json with YAML 1.2 core-schema scalar resolution (plain
// scalars become null/bool/int/float when they look like one; quoted scalars
// stay strings). Used to read CRDs, examples and manifests.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypertrain::api {

// Parses one YAML document.
StatusOr<nlohmann::json> YamlToJson(std::string_view yaml);
// Parses every document of a multi-document stream ("---"); empty documents are skipped.
StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(std::string_view yaml);
// Reads and parses a file with one document.
StatusOr<nlohmann::json> YamlFileToJson(const std::string& path);

}  // namespace hypertrain::api
