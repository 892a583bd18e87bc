#include "operator/api/crd_schema.h"

#include <regex>
#include <set>

namespace hypertrain::api {
namespace {

using nlohmann::json;

const std::set<std::string>& KnownKeywords() {
  static const std::set<std::string> k = {
      "type",      "format",    "description", "properties", "additionalProperties", "items",
      "required",  "enum",      "minimum",     "maximum",    "exclusiveMinimum",     "exclusiveMaximum",
      "minLength", "maxLength", "pattern",     "minItems",   "maxItems",             "uniqueItems",
      "minProperties", "maxProperties", "default", "nullable", "anyOf", "allOf", "oneOf", "not", "title",
      "multipleOf", "example", "externalDocs"};
  return k;
}

bool Flag(const json& n, const char* key) {
  auto it = n.find(key);
  return it != n.end() && it->is_boolean() && it->get<bool>();
}

bool IsIntOrStringAnyOf(const json& any) {
  return any == json::array({{{"type", "integer"}}, {{"type", "string"}}});
}

void CheckJunctor(const json& n, const std::string& path, std::vector<std::string>* out) {
  for (const char* j : {"anyOf", "allOf", "oneOf"}) {
    auto it = n.find(j);
    if (it == n.end()) continue;
    if (!it->is_array()) {
      out->push_back(path + "." + j + ": must be a list");
      continue;
    }
    if (std::string(j) == "anyOf" && Flag(n, "x-kubernetes-int-or-string") && IsIntOrStringAnyOf(*it)) continue;
    for (const json& sub : *it) {
      for (const char* bad : {"description", "type", "default", "additionalProperties", "nullable"}) {
        if (sub.contains(bad)) out->push_back(path + "." + j + ": must not set '" + bad + "' inside " + j);
      }
    }
  }
}

void Check(const json& n, const std::string& path, bool root, std::vector<std::string>* out);

// Validates a default value against the node's own schema.
void CheckDefault(const json& n, const std::string& path, std::vector<std::string>* out) {
  if (!n.contains("default")) return;
  json value = n["default"];
  json schema = n;
  schema.erase("default");
  for (const std::string& p : ValidateAgainstSchema(schema, &value)) {
    out->push_back(path + ".default: invalid: " + p);
  }
}

void Check(const json& n, const std::string& path, bool root, std::vector<std::string>* out) {
  if (!n.is_object()) {
    out->push_back(path + ": schema must be an object");
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string& k = it.key();
    if (k.rfind("x-kubernetes-", 0) == 0) continue;
    if (!KnownKeywords().count(k)) out->push_back(path + ": unknown keyword '" + k + "'");
    if (k == "$ref") out->push_back(path + ": $ref is not allowed");
  }
  const bool int_or_string = Flag(n, "x-kubernetes-int-or-string");
  const bool preserve = Flag(n, "x-kubernetes-preserve-unknown-fields");
  const std::string type = n.value("type", "");
  if (int_or_string) {
    if (!type.empty()) out->push_back(path + ": x-kubernetes-int-or-string must not set a type");
    if (n.contains("anyOf") && !IsIntOrStringAnyOf(n["anyOf"])) {
      out->push_back(path + ": x-kubernetes-int-or-string allows only anyOf [integer, string]");
    }
  } else if (type.empty()) {
    if (!preserve) out->push_back(path + ": type is required (structural schema)");
  } else if (!std::set<std::string>{"object", "array", "string", "integer", "number", "boolean"}.count(type)) {
    out->push_back(path + ": unknown type '" + type + "'");
  }
  if (Flag(n, "uniqueItems")) out->push_back(path + ": uniqueItems: true is not allowed in CRDs");
  CheckJunctor(n, path, out);
  if (n.contains("properties") && n.contains("additionalProperties")) {
    out->push_back(path + ": properties and additionalProperties are mutually exclusive");
  }
  if ((n.contains("properties") || n.contains("additionalProperties") || n.contains("required")) &&
      type != "object" && !preserve) {
    out->push_back(path + ": properties/required need type object");
  }
  if (type == "array" && !n.contains("items")) out->push_back(path + ": type array needs items");
  if (n.contains("required")) {
    for (const json& r : n["required"]) {
      if (!r.is_string() || !n.contains("properties") || !n["properties"].contains(r.get<std::string>())) {
        out->push_back(path + ": required '" + r.dump() + "' is not a declared property");
      }
    }
  }
  if (n.contains("x-kubernetes-validations")) {
    const json& rules = n["x-kubernetes-validations"];
    if (!rules.is_array()) out->push_back(path + ": x-kubernetes-validations must be a list");
    for (const json& r : rules) {
      if (!r.is_object() || !r.contains("rule") || !r["rule"].is_string() || r["rule"].get<std::string>().empty()) {
        out->push_back(path + ": each x-kubernetes-validations entry needs a rule");
      }
    }
  }
  if (n.value("x-kubernetes-list-type", "") == "map") {
    const json& items = n.value("items", json::object());
    const json keys = n.value("x-kubernetes-list-map-keys", json::array());
    if (keys.empty()) out->push_back(path + ": list-type map needs x-kubernetes-list-map-keys");
    for (const json& k : keys) {
      const std::string key = k.get<std::string>();
      const json req = items.value("required", json::array());
      bool required = std::find(req.begin(), req.end(), k) != req.end();
      bool defaulted = items.contains("properties") && items["properties"].contains(key) &&
                       items["properties"][key].contains("default");
      if (!required && !defaulted) out->push_back(path + ": list map key '" + key + "' must be required or defaulted");
    }
  }
  CheckDefault(n, path, out);
  if (n.contains("properties")) {
    for (auto it = n["properties"].begin(); it != n["properties"].end(); ++it) {
      const std::string p = path + ".properties." + it.key();
      if (root && it.key() == "metadata") {
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          if (m.key() != "type") out->push_back(p + ": root metadata may only set type: object");
        }
      }
      Check(it.value(), p, false, out);
    }
  }
  if (n.contains("additionalProperties")) {
    const json& ap = n["additionalProperties"];
    if (ap.is_object()) Check(ap, path + ".additionalProperties", false, out);
    else if (!ap.is_boolean()) out->push_back(path + ".additionalProperties: must be a schema");
  }
  if (n.contains("items")) Check(n["items"], path + ".items", false, out);
}

bool TypeMatches(const std::string& type, const json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return true;
}

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void Validate(const json& s, json& v, const std::string& path, std::vector<std::string>* out);

void ValidateArray(const json& s, json& v, const std::string& path, const std::string& at,
                   std::vector<std::string>* out) {
  if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) out->push_back(at + ": too few items");
  if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) {
    out->push_back(at + ": more than " + s["maxItems"].dump() + " items");
  }
  if (s.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) Validate(s["items"], v[i], path + "[" + std::to_string(i) + "]", out);
  }
  if (s.value("x-kubernetes-list-type", "") == "set") {
    for (size_t i = 0; i < v.size(); ++i) {
      for (size_t j = i + 1; j < v.size(); ++j) {
        if (v[i] == v[j]) out->push_back(at + ": duplicate set item " + v[i].dump());
      }
    }
  }
  if (s.value("x-kubernetes-list-type", "") == "map") {
    const json keys = s.value("x-kubernetes-list-map-keys", json::array());
    auto key_of = [&](const json& item) {
      json k = json::array();
      for (const json& name : keys) k.push_back(item.is_object() ? item.value(name.get<std::string>(), json()) : json());
      return k;
    };
    for (size_t i = 0; i < v.size(); ++i) {
      for (size_t j = i + 1; j < v.size(); ++j) {
        if (key_of(v[i]) == key_of(v[j])) out->push_back(at + ": duplicate map key " + key_of(v[j]).dump());
      }
    }
  }
}

// Fills in defaults of missing properties, then checks the object's fields.
void ValidateObject(const json& s, json& v, const std::string& path, const std::string& at,
                    std::vector<std::string>* out) {
  const bool preserve = Flag(s, "x-kubernetes-preserve-unknown-fields");
  if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>()) {
    out->push_back(at + ": more than " + s["maxProperties"].dump() + " properties");
  }
  const json props = s.value("properties", json::object());
  for (auto it = props.begin(); it != props.end(); ++it) {
    if (!v.contains(it.key()) && it.value().contains("default")) v[it.key()] = it.value()["default"];
  }
  for (const json& r : s.value("required", json::array())) {
    if (!v.contains(r.get<std::string>())) out->push_back((path.empty() ? "" : path + ".") + r.get<std::string>() + ": required");
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string p = (path.empty() ? "" : path + ".") + it.key();
    // ObjectMeta is validated by the API server itself, not by the CRD schema.
    if (path.empty() && it.key() == "metadata" && it.value().is_object()) continue;
    if (props.contains(it.key())) {
      Validate(props[it.key()], it.value(), p, out);
    } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      Validate(s["additionalProperties"], it.value(), p, out);
    } else if (!preserve && !(s.contains("additionalProperties") && s["additionalProperties"] == true)) {
      out->push_back(p + ": unknown field (the API server would drop it)");
    }
  }
}

void Validate(const json& s, json& v, const std::string& path, std::vector<std::string>* out) {
  const std::string at = path.empty() ? "<root>" : path;
  if (v.is_null()) {
    if (!Flag(s, "nullable")) out->push_back(at + ": must not be null");
    return;
  }
  const bool int_or_string = Flag(s, "x-kubernetes-int-or-string");
  const std::string type = s.value("type", "");
  if (int_or_string) {
    if (!v.is_number_integer() && !v.is_string()) {
      out->push_back(at + ": must be an integer or a string");
      return;
    }
  } else if (!type.empty() && !TypeMatches(type, v)) {
    out->push_back(at + ": must be of type " + type + ", got " + v.type_name());
    return;
  }
  if (s.contains("enum")) {
    const json& e = s["enum"];
    if (std::find(e.begin(), e.end(), v) == e.end()) out->push_back(at + ": " + v.dump() + " is not one of " + e.dump());
  }
  if (v.is_number()) {
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) {
      out->push_back(at + ": " + v.dump() + " is less than the minimum " + s["minimum"].dump());
    }
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) {
      out->push_back(at + ": " + v.dump() + " is more than the maximum " + s["maximum"].dump());
    }
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && Utf8Length(str) < s["minLength"].get<size_t>()) {
      out->push_back(at + ": shorter than " + s["minLength"].dump());
    }
    if (s.contains("maxLength") && Utf8Length(str) > s["maxLength"].get<size_t>()) {
      out->push_back(at + ": longer than " + s["maxLength"].dump());
    }
    if (s.contains("pattern")) {
      const std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(str, re)) out->push_back(at + ": '" + str + "' does not match " + s["pattern"].dump());
    }
    if (s.value("format", "") == "date-time") {
      static const std::regex kTime(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)");
      if (!std::regex_match(str, kTime)) out->push_back(at + ": '" + str + "' is not an RFC 3339 date-time");
    }
  }
  if (v.is_array()) ValidateArray(s, v, path, at, out);
  if (v.is_object()) ValidateObject(s, v, path, at, out);
}

}  // namespace

std::vector<std::string> CheckStructural(const json& schema) {
  std::vector<std::string> out;
  if (!schema.is_object() || schema.value("type", "") != "object") {
    out.push_back("openAPIV3Schema: the root must be type: object");
  }
  Check(schema, "openAPIV3Schema", true, &out);
  return out;
}

std::vector<std::string> ValidateAgainstSchema(const json& schema, json* value) {
  std::vector<std::string> out;
  Validate(schema, *value, "", &out);
  return out;
}

json SchemaAt(const json& schema, const std::string& json_path) {
  static const std::regex kStep(R"(\.([A-Za-z0-9_-]+)|\[[^\]]*\])");
  json node = schema;
  for (auto it = std::sregex_iterator(json_path.begin(), json_path.end(), kStep); it != std::sregex_iterator(); ++it) {
    if ((*it)[1].matched) {
      const std::string key = (*it)[1];
      if (!node.contains("properties") || !node["properties"].contains(key)) return nullptr;
      node = node["properties"][key];
    } else {
      if (!node.contains("items")) return nullptr;
      node = node["items"];
    }
  }
  return node;
}

}  // namespace hypertrain::api
