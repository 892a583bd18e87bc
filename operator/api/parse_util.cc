#include "operator/api/parse_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

namespace hypertrain::api::parse {

void Fail(const std::string& field, const std::string& message) { throw FieldError{InvalidField(field, message)}; }

std::string Join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string Index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json& RequireObject(const json& v, const std::string& path) {
  if (!v.is_object()) Fail(path, "must be an object");
  return v;
}

std::optional<std::string> OptString(const json& obj, const char* key, const std::string& path, size_t max_len) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) Fail(Join(path, key), "must be a string");
  std::string s = v->get<std::string>();
  if (s.size() > max_len) Fail(Join(path, key), "longer than " + std::to_string(max_len) + " characters");
  return s;
}

std::optional<int64_t> OptInt(const json& obj, const char* key, const std::string& path, int64_t min, int64_t max) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) Fail(Join(path, key), "must be an integer");
  int64_t x = v->get<int64_t>();
  if (x < min || x > max) {
    Fail(Join(path, key), std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
                              std::to_string(max) + "]");
  }
  return x;
}

std::optional<bool> OptBool(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) Fail(Join(path, key), "must be a boolean");
  return v->get<bool>();
}

std::vector<std::string> StringList(const json& obj, const char* key, const std::string& path, size_t max_items) {
  std::vector<std::string> out;
  const json* v = Find(obj, key);
  if (!v) return out;
  if (!v->is_array()) Fail(Join(path, key), "must be a list of strings");
  if (v->size() > max_items) Fail(Join(path, key), "more than " + std::to_string(max_items) + " items");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) Fail(Index(Join(path, key), i), "must be a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> StringMap(const json& obj, const char* key, const std::string& path) {
  std::map<std::string, std::string> out;
  const json* v = Find(obj, key);
  if (!v) return out;
  if (!v->is_object()) Fail(Join(path, key), "must be a map of strings");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) Fail(Join(Join(path, key), it.key()), "must be a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

std::vector<int32_t> ExitCodeList(const json& obj, const char* key, const std::string& path) {
  std::set<int32_t> seen;
  const json* codes = Find(obj, key);
  if (!codes) return {};
  const std::string p = Join(path, key);
  if (!codes->is_array()) Fail(p, "must be a list of integers");
  if (codes->size() > 255) Fail(p, "more than 255 items");
  for (size_t i = 0; i < codes->size(); ++i) {
    const json& c = (*codes)[i];
    if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > 255) {
      Fail(Index(p, i), "must be an exit code in [1, 255]");
    }
    if (!seen.insert(c.get<int32_t>()).second) Fail(Index(p, i), "duplicate exit code " + c.dump());
  }
  return {seen.begin(), seen.end()};
}

std::string OneOf(const std::string& value, const std::vector<std::string>& allowed, const std::string& field) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  Fail(field, "'" + value + "' is not one of " + list);
}

namespace {

bool IsQuantity(const std::string& s) {
  static const std::regex kQuantity(
      R"(^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$)");
  return std::regex_match(s, kQuantity);
}

// The name part of a label or annotation key, and a label value (non-empty).
bool IsQualifiedNamePart(const std::string& s) {
  static const std::regex kName("^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, kName);
}

// log10 of a quantity's value (its mantissa times its suffix's scale), from
// its text: enough to tell whether it fits an int64 as Kubernetes stores it.
double QuantityLog10(const std::string& q) {
  const size_t end = q.find_first_not_of("+0123456789.");
  const double mantissa = std::strtod(q.substr(0, end).c_str(), nullptr);
  if (mantissa <= 0) return -1e9;
  double scale = 0;
  const std::string suffix = end == std::string::npos ? "" : q.substr(end);
  static const std::map<std::string, double> kScales = {
      {"n", -9},         {"u", -6},         {"m", -3},         {"k", 3},          {"M", 6},
      {"G", 9},          {"T", 12},         {"P", 15},         {"E", 18},         {"Ki", 10 * std::log10(2.0)},
      {"Mi", 20 * std::log10(2.0)}, {"Gi", 30 * std::log10(2.0)}, {"Ti", 40 * std::log10(2.0)},
      {"Pi", 50 * std::log10(2.0)}, {"Ei", 60 * std::log10(2.0)}};
  if (auto it = kScales.find(suffix); it != kScales.end()) {
    scale = it->second;
  } else if (!suffix.empty()) {  // e/E exponent
    scale = std::strtod(suffix.c_str() + 1, nullptr);
  }
  return std::log10(mantissa) + scale;
}

}  // namespace

bool IsDns1123Subdomain(const std::string& s) {
  static const std::regex kSub("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  return !s.empty() && s.size() <= 253 && std::regex_match(s, kSub);
}

std::string LabelKeyProblem(const std::string& key) {
  const size_t slash = key.find('/');
  const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  if (slash != std::string::npos && !IsDns1123Subdomain(key.substr(0, slash))) {
    return "prefix '" + key.substr(0, slash) + "' must be a DNS subdomain (lower case, at most 253 characters)";
  }
  if (!IsQualifiedNamePart(name)) {
    return "name '" + name + "' must be at most 63 characters of letters, digits, '-', '_' or '.', starting and "
           "ending with a letter or digit";
  }
  return "";
}

std::string QuantityValue(const json& v, const std::string& field) {
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < 0) Fail(field, "must not be negative");
    return std::to_string(v.get<int64_t>());
  }
  if (!v.is_string() || !IsQuantity(v.get<std::string>())) {
    Fail(field, "must be a Kubernetes quantity such as 4, 500m or 64Gi");
  }
  std::string s = v.get<std::string>();
  if (s[0] == '-') Fail(field, "must not be negative");
  // Kubernetes keeps quantities as int64 (milli-units for cpu): a larger one
  // would be clamped to 2^63-1 in the pod, not refused.
  if (QuantityLog10(s) >= std::log10(9.2e15)) {
    Fail(field, "'" + s + "' is too large (Kubernetes stores a quantity as a 64-bit count of milli-units)");
  }
  return s;
}

bool IsDns1035Label(const std::string& s) {
  static const std::regex kLabel("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, kLabel);
}

bool IsDns1123Label(const std::string& s) {
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, kLabel);
}

void ValidateLabels(const std::map<std::string, std::string>& labels, const std::string& path) {
  for (const auto& [k, v] : labels) {
    if (std::string why = LabelKeyProblem(k); !why.empty()) Fail(Join(path, k), "invalid label key: " + why);
    if (!v.empty() && !IsQualifiedNamePart(v)) {
      Fail(Join(path, k), "invalid label value '" + v +
                              "': at most 63 characters of letters, digits, '-', '_' or '.', starting and ending "
                              "with a letter or digit");
    }
  }
}

void ValidateAnnotations(const std::map<std::string, std::string>& annotations, const std::string& path) {
  size_t total = 0;
  for (const auto& [k, v] : annotations) {
    if (std::string why = LabelKeyProblem(k); !why.empty()) {
      Fail(Join(path, k), "invalid annotation key: " + why);
    }
    total += k.size() + v.size();
  }
  if (total > 256 * 1024) Fail(path, "annotations are larger than 256 KiB in all");
}

}  // namespace hypertrain::api::parse
