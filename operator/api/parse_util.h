#pragma once
// Internal to operator/api: the field-by-field readers the spec parsers share.
// Each throws FieldError naming the offending field ("spec.env[3].name"); the
// public parsers (training_job.h) catch it and return its Status, so no
// exception leaves the library.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hypertrain::api::parse {

using nlohmann::json;

struct FieldError {
  Status error;
};

[[noreturn]] void Fail(const std::string& field, const std::string& message);

std::string Join(const std::string& path, const std::string& key);
std::string Index(const std::string& path, size_t i);

// obj[key], or nullptr when absent or null.
const json* Find(const json& obj, const char* key);
const json& RequireObject(const json& v, const std::string& path);
std::optional<std::string> OptString(const json& obj, const char* key, const std::string& path,
                                     size_t max_len = 4096);
std::optional<int64_t> OptInt(const json& obj, const char* key, const std::string& path, int64_t min, int64_t max);
std::optional<bool> OptBool(const json& obj, const char* key, const std::string& path);
std::vector<std::string> StringList(const json& obj, const char* key, const std::string& path, size_t max_items);
std::map<std::string, std::string> StringMap(const json& obj, const char* key, const std::string& path);
// A set of exit codes in [1, 255] (obj[key], absent: empty).
std::vector<int32_t> ExitCodeList(const json& obj, const char* key, const std::string& path);
std::string OneOf(const std::string& value, const std::vector<std::string>& allowed, const std::string& field);

// A Kubernetes quantity ("4", "500m", "64Gi"), never negative, below 9.2e15
// (what a 64-bit count of milli-units holds; the API server would clamp more).
std::string QuantityValue(const json& v, const std::string& field);
bool IsDns1035Label(const std::string& s);
bool IsDns1123Label(const std::string& s);
bool IsDns1123Subdomain(const std::string& s);
// Empty when `key` is a valid label/annotation key ([prefix/]name), else why not.
std::string LabelKeyProblem(const std::string& key);
// Label keys ([prefix/]name) and values as Kubernetes validates them.
void ValidateLabels(const std::map<std::string, std::string>& labels, const std::string& path);
// Annotation keys as Kubernetes validates them (values are free; 256 KiB in all).
void ValidateAnnotations(const std::map<std::string, std::string>& annotations, const std::string& path);

}  // namespace hypertrain::api::parse
