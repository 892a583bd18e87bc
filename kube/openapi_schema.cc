#include "kube/openapi_schema.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

namespace hypertrain::kube::openapi {
namespace {

std::string Join(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

bool Flag(const json& s, const char* key) {
  if (!s.is_object()) return false;
  auto it = s.find(key);
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

void Prune(json& obj, const json& schema, const std::string& path, bool root,
           std::vector<std::string>* pruned) {
  if (!schema.is_object()) return;
  if (obj.is_object()) {
    const bool preserve = Flag(schema, "x-kubernetes-preserve-unknown-fields");
    const bool embedded = Flag(schema, "x-kubernetes-embedded-resource");
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    const json* addl = schema.contains("additionalProperties") ? &schema["additionalProperties"]
                                                                : nullptr;
    for (auto it = obj.begin(); it != obj.end();) {
      const std::string& k = it.key();
      if ((root || embedded) && (k == "apiVersion" || k == "kind" || k == "metadata")) {
        ++it;
        continue;
      }
      if (props && props->contains(k)) {
        Prune(it.value(), (*props)[k], Join(path, k), false, pruned);
      } else if (addl && addl->is_object()) {
        Prune(it.value(), *addl, Join(path, k), false, pruned);
      } else if (!preserve && !(addl && addl->is_boolean() && addl->get<bool>())) {
        pruned->push_back(Join(path, k));
        it = obj.erase(it);
        continue;
      }
      ++it;
    }
  } else if (obj.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < obj.size(); ++i) {
      Prune(obj[i], schema["items"], path + "[" + std::to_string(i) + "]", false, pruned);
    }
  }
}

void Default(json& obj, const json& schema) {
  if (!schema.is_object()) return;
  if (obj.is_object()) {
    if (schema.contains("properties")) {
      for (const auto& [k, ps] : schema["properties"].items()) {
        if (obj.contains(k) && obj[k].is_null() && !Flag(ps, "nullable")) obj.erase(k);
        if (!obj.contains(k) && ps.is_object() && ps.contains("default")) obj[k] = ps["default"];
        if (obj.contains(k)) Default(obj[k], ps);
      }
    }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
      for (auto& [k, v] : obj.items()) Default(v, schema["additionalProperties"]);
    }
  } else if (obj.is_array() && schema.contains("items")) {
    for (auto& e : obj) Default(e, schema["items"]);
  }
}

std::string TypeOf(const json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  return "null";
}

std::string Num(double d) {
  if (d == static_cast<double>(static_cast<long long>(d))) return std::to_string(static_cast<long long>(d));
  std::string s = std::to_string(d);
  s.erase(s.find_last_not_of('0') + 1);
  return s;
}

Cause Invalid(const std::string& path, const json& v, const std::string& what) {
  return {"FieldValueInvalid", path, "Invalid value: " + v.dump() + ": " + what};
}

void Validate(const json& v, const json& s, const std::string& path, bool root,
              std::vector<Cause>* out);

// Where a cause is reported ("<root>" for the object itself) and the phrase
// its messages use for that place.
struct At {
  std::string p;
  std::string body;
};

// null against nullable and the declared type; false when the value's type is
// wrong (or null), so nothing more is checked below it.
bool ValidateType(const json& v, const json& s, const At& at, std::vector<Cause>* out) {
  if (v.is_null()) {
    if (!Flag(s, "nullable") && s.contains("type")) {
      out->push_back({"FieldValueTypeInvalid", at.p,
                      "Invalid value: \"null\": " + at.body + " must be of type " +
                          s["type"].get<std::string>() + ": \"null\""});
    }
    return false;
  }
  if (Flag(s, "x-kubernetes-int-or-string")) {
    const std::string t = TypeOf(v);
    if (t == "integer" || t == "string") return true;
    out->push_back({"FieldValueTypeInvalid", at.p,
                    "Invalid value: \"" + t + "\": " + at.body + " must be of type integer or string: \"" +
                        t + "\""});
    return false;
  }
  if (!s.contains("type") || !s["type"].is_string()) return true;
  const std::string want = s["type"];
  const std::string got = TypeOf(v);
  if (want == got || (want == "number" && got == "integer")) return true;
  out->push_back({"FieldValueTypeInvalid", at.p,
                  "Invalid value: \"" + got + "\": " + at.body + " must be of type " + want + ": \"" + got +
                      "\""});
  return false;
}

void ValidateEnum(const json& v, const json& s, const At& at, std::vector<Cause>* out) {
  if (!s.contains("enum") || !s["enum"].is_array()) return;
  for (const auto& e : s["enum"]) {
    if (e == v) return;
  }
  std::string vals;
  for (const auto& e : s["enum"]) vals += (vals.empty() ? "" : ", ") + e.dump();
  out->push_back({"FieldValueNotSupported", at.p, "Unsupported value: " + v.dump() + ": supported values: " + vals});
}

void ValidateNumber(const json& v, const json& s, const At& at, std::vector<Cause>* out) {
  const double d = v.get<double>();
  if (s.contains("minimum")) {
    const double m = s["minimum"].get<double>();
    const bool excl = Flag(s, "exclusiveMinimum");
    if (excl ? d <= m : d < m) {
      out->push_back(
          Invalid(at.p, v, at.body + " should be greater than " + std::string(excl ? "" : "or equal to ") + Num(m)));
    }
  }
  if (s.contains("maximum")) {
    const double m = s["maximum"].get<double>();
    const bool excl = Flag(s, "exclusiveMaximum");
    if (excl ? d >= m : d > m) {
      out->push_back(
          Invalid(at.p, v, at.body + " should be less than " + std::string(excl ? "" : "or equal to ") + Num(m)));
    }
  }
  if (s.contains("multipleOf")) {
    const double m = s["multipleOf"].get<double>();
    if (m > 0 && std::fmod(d, m) != 0) {
      out->push_back(Invalid(at.p, v, at.body + " should be a multiple of " + Num(m)));
    }
  }
}

void ValidateString(const json& v, const json& s, const At& at, std::vector<Cause>* out) {
  const std::string str = v.get<std::string>();
  // Lengths count characters (UTF-8 code points), as Kubernetes does.
  size_t chars = 0;
  for (unsigned char c : str) chars += (c & 0xC0) != 0x80;
  if (s.contains("minLength") && chars < s["minLength"].get<size_t>()) {
    out->push_back(Invalid(at.p, v,
                           at.body + " should be at least " + std::to_string(s["minLength"].get<size_t>()) +
                               " chars long"));
  }
  if (s.contains("maxLength") && chars > s["maxLength"].get<size_t>()) {
    out->push_back(Invalid(at.p, v,
                           at.body + " should be at most " + std::to_string(s["maxLength"].get<size_t>()) +
                               " chars long"));
  }
  if (s.value("format", "") == "date-time") {
    static const std::regex kTime(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)");
    if (!std::regex_match(str, kTime)) {
      out->push_back(Invalid(at.p, v, at.body + " must be of type date-time"));
    }
  }
  if (s.contains("pattern") && s["pattern"].is_string()) {
    try {
      std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(str, re)) {
        out->push_back(Invalid(at.p, v, at.body + " should match '" + s["pattern"].get<std::string>() + "'"));
      }
    } catch (const std::regex_error&) {
      // CheckStructural rejects bad patterns when the CRD is written.
    }
  }
}

// Items i and j (j < i) are the same item of a set, or share a list-map's keys.
bool SameListItem(const json& a, const json& b, const json& s, bool map_keys) {
  if (!map_keys) return a == b;
  for (const auto& k : s["x-kubernetes-list-map-keys"]) {
    const std::string key = k.get<std::string>();
    if (!a.is_object() || !b.is_object() || a.value(key, json()) != b.value(key, json())) return false;
  }
  return true;
}

void ValidateArray(const json& v, const json& s, const std::string& path, const At& at,
                   std::vector<Cause>* out) {
  if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) {
    out->push_back(Invalid(at.p, v.size(),
                           at.body + " should have at least " + std::to_string(s["minItems"].get<size_t>()) +
                               " items"));
  }
  if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) {
    out->push_back({"FieldValueTooMany", at.p,
                    "Too many: " + std::to_string(v.size()) + ": must have at most " +
                        std::to_string(s["maxItems"].get<size_t>()) + " items"});
  }
  const std::string list_type = s.value("x-kubernetes-list-type", "");
  const bool set = Flag(s, "uniqueItems") || list_type == "set";
  const bool map = list_type == "map" && s.contains("x-kubernetes-list-map-keys");
  for (bool map_keys : {false, true}) {
    if (!(map_keys ? map : set)) continue;
    for (size_t i = 0; i < v.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (SameListItem(v[i], v[j], s, map_keys)) {
          out->push_back({"FieldValueDuplicate", at.p + "[" + std::to_string(i) + "]",
                          "Duplicate value: " + v[i].dump()});
        }
      }
    }
  }
  if (s.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      Validate(v[i], s["items"], path + "[" + std::to_string(i) + "]", false, out);
    }
  }
}

void ValidateObject(const json& v, const json& s, const std::string& path, bool root, const At& at,
                    std::vector<Cause>* out) {
  if (s.contains("required") && s["required"].is_array()) {
    for (const auto& r : s["required"]) {
      const std::string k = r.get<std::string>();
      if (!v.contains(k)) out->push_back({"FieldValueRequired", Join(path, k), "Required value"});
    }
  }
  if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>()) {
    out->push_back(Invalid(at.p, v.size(),
                           at.body + " should have at least " +
                               std::to_string(s["minProperties"].get<size_t>()) + " properties"));
  }
  if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>()) {
    out->push_back(Invalid(at.p, v.size(),
                           at.body + " should have at most " + std::to_string(s["maxProperties"].get<size_t>()) +
                               " properties"));
  }
  for (const auto& [k, child] : v.items()) {
    if (root && (k == "apiVersion" || k == "kind" || k == "metadata")) continue;
    if (s.contains("properties") && s["properties"].contains(k)) {
      Validate(child, s["properties"][k], Join(path, k), false, out);
    } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      Validate(child, s["additionalProperties"], Join(path, k), false, out);
    }
  }
}

// Combinators: validation only (structural schemas forbid types in them).
void ValidateCombinators(const json& v, const json& s, const std::string& path, bool root, const At& at,
                         std::vector<Cause>* out) {
  auto passes = [&](const json& sub) {
    std::vector<Cause> tmp;
    Validate(v, sub, path, root, &tmp);
    return tmp.empty();
  };
  if (s.contains("allOf")) {
    for (const auto& sub : s["allOf"]) Validate(v, sub, path, root, out);
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const auto& sub : s["anyOf"]) any = passes(sub) || any;
    if (!any) out->push_back(Invalid(at.p, v, at.body + " must validate at least one schema (anyOf)"));
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const auto& sub : s["oneOf"]) n += passes(sub);
    if (n != 1) out->push_back(Invalid(at.p, v, at.body + " must validate one and only one schema (oneOf)"));
  }
  if (s.contains("not") && passes(s["not"])) {
    out->push_back(Invalid(at.p, v, at.body + " must not validate the schema (not)"));
  }
}

void Validate(const json& v, const json& s, const std::string& path, bool root,
              std::vector<Cause>* out) {
  if (!s.is_object()) return;
  At at;
  at.p = path.empty() ? "<root>" : path;
  at.body = at.p + " in body";
  if (!ValidateType(v, s, at, out)) return;
  ValidateEnum(v, s, at, out);
  if (v.is_number()) ValidateNumber(v, s, at, out);
  if (v.is_string()) ValidateString(v, s, at, out);
  if (v.is_array()) ValidateArray(v, s, path, at, out);
  if (v.is_object()) ValidateObject(v, s, path, root, at, out);
  ValidateCombinators(v, s, path, root, at, out);
}

// --- Structural-schema rules -------------------------------------------------

const std::set<std::string>& KnownKeywords() {
  static const std::set<std::string> k = {
      "type",          "format",        "description", "properties", "additionalProperties", "items",
      "required",      "enum",          "minimum",     "maximum",    "exclusiveMinimum",     "exclusiveMaximum",
      "minLength",     "maxLength",     "pattern",     "minItems",   "maxItems",             "uniqueItems",
      "minProperties", "maxProperties", "default",     "nullable",   "anyOf",                "allOf",
      "oneOf",         "not",           "title",       "multipleOf", "example",              "externalDocs"};
  return k;
}

bool IsIntOrStringAnyOf(const json& any) {
  return any == json::array({{{"type", "integer"}}, {{"type", "string"}}});
}

Cause Forbidden(const std::string& field, const std::string& message) {
  return {"FieldValueForbidden", field, "Forbidden: " + message};
}
Cause Required(const std::string& field, const std::string& message) {
  return {"FieldValueRequired", field, "Required value: " + message};
}
Cause BadValue(const std::string& field, const json& v, const std::string& message) {
  return {"FieldValueInvalid", field, "Invalid value: " + v.dump() + ": " + message};
}

// allOf/anyOf/oneOf: lists whose members set no type, default, description,
// additionalProperties or nullable (the int-or-string anyOf excepted).
void CheckJunctors(const json& n, const std::string& path, std::vector<Cause>* out) {
  for (const char* j : {"anyOf", "allOf", "oneOf"}) {
    auto it = n.find(j);
    if (it == n.end()) continue;
    if (!it->is_array()) {
      out->push_back(BadValue(path + "." + j, *it, "must be a list"));
      continue;
    }
    if (std::string(j) == "anyOf" && Flag(n, "x-kubernetes-int-or-string") && IsIntOrStringAnyOf(*it)) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      for (const char* bad : {"description", "type", "default", "additionalProperties", "nullable"}) {
        if ((*it)[i].contains(bad)) {
          out->push_back(Forbidden(path + "." + j + "[" + std::to_string(i) + "]." + bad,
                                   std::string("must not be set inside ") + j + " (structural schema)"));
        }
      }
    }
  }
}

// type: required unless int-or-string or preserve-unknown-fields; a known name.
void CheckType(const json& n, const std::string& path, std::vector<Cause>* out) {
  const bool int_or_string = Flag(n, "x-kubernetes-int-or-string");
  const bool preserve = Flag(n, "x-kubernetes-preserve-unknown-fields");
  if (n.contains("type") && !n["type"].is_string()) {
    out->push_back(BadValue(path + ".type", n["type"], "must be a string"));
    return;
  }
  const std::string type = n.value("type", "");
  static const std::set<std::string> kTypes = {"object", "array", "string", "integer", "number", "boolean"};
  if (int_or_string) {
    if (!type.empty()) out->push_back(Forbidden(path + ".type", "x-kubernetes-int-or-string must not set a type"));
    if (n.contains("anyOf") && !IsIntOrStringAnyOf(n["anyOf"])) {
      out->push_back(Forbidden(path + ".anyOf", "x-kubernetes-int-or-string allows only anyOf [integer, string]"));
    }
  } else if (type.empty()) {
    if (!preserve) out->push_back(Required(path + ".type", "must not be empty for specified object fields"));
  } else if (!kTypes.count(type)) {
    out->push_back({"FieldValueNotSupported", path + ".type",
                    "Unsupported value: " + n["type"].dump() +
                        ": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""});
  }
}

// properties/additionalProperties/required/items agree with the type; required
// names are declared; list-map keys are required or defaulted.
void CheckShape(const json& n, const std::string& path, std::vector<Cause>* out) {
  const std::string type = n.value("type", "");
  const bool preserve = Flag(n, "x-kubernetes-preserve-unknown-fields");
  if (Flag(n, "uniqueItems")) out->push_back(Forbidden(path + ".uniqueItems", "uniqueItems cannot be set to true"));
  if (n.contains("properties") && n.contains("additionalProperties")) {
    out->push_back(Forbidden(path + ".additionalProperties",
                             "additionalProperties and properties are mutually exclusive"));
  }
  if ((n.contains("properties") || n.contains("additionalProperties") || n.contains("required")) &&
      type != "object" && !preserve) {
    out->push_back(Forbidden(path + ".properties", "properties and required need type: object"));
  }
  if (type == "array" && !n.contains("items")) out->push_back(Required(path + ".items", "type array needs items"));
  if (n.contains("required")) {
    for (const json& r : n["required"]) {
      if (!r.is_string() || !n.contains("properties") || !n["properties"].contains(r.get<std::string>())) {
        out->push_back(BadValue(path + ".required", r, "is not a declared property"));
      }
    }
  }
  if (n.contains("x-kubernetes-validations")) {
    const json& rules = n["x-kubernetes-validations"];
    if (!rules.is_array()) out->push_back(BadValue(path + ".x-kubernetes-validations", rules, "must be a list"));
    for (const json& r : rules) {
      if (!r.is_object() || !r.contains("rule") || !r["rule"].is_string() || r["rule"].get<std::string>().empty()) {
        out->push_back(Required(path + ".x-kubernetes-validations", "each entry needs a rule"));
      }
    }
  }
  if (n.value("x-kubernetes-list-type", "") == "map") {
    const json items = n.value("items", json::object());
    const json keys = n.value("x-kubernetes-list-map-keys", json::array());
    if (keys.empty()) out->push_back(Required(path + ".x-kubernetes-list-map-keys", "list-type map needs keys"));
    for (const json& k : keys) {
      const std::string key = k.get<std::string>();
      const json req = items.value("required", json::array());
      const bool required = std::find(req.begin(), req.end(), k) != req.end();
      const bool defaulted = items.contains("properties") && items["properties"].contains(key) &&
                             items["properties"][key].contains("default");
      if (!required && !defaulted) {
        out->push_back(Required(path + ".items.properties[" + key + "]",
                                "list map key '" + key + "' must be required or defaulted"));
      }
    }
  }
}

// A default must validate against its own node; a pattern must compile.
void CheckValues(const json& n, const std::string& path, std::vector<Cause>* out) {
  if (n.contains("pattern")) {
    try {
      std::regex re(n["pattern"].get<std::string>(), std::regex::ECMAScript);
    } catch (const std::exception&) {
      out->push_back(BadValue(path + ".pattern", n["pattern"], "must be a valid regular expression"));
    }
  }
  if (n.contains("default")) {
    json value = n["default"];
    json schema = n;
    schema.erase("default");
    Default(value, schema);
    Validate(value, schema, path + ".default", false, out);
  }
}

void Check(const json& n, const std::string& path, bool root, std::vector<Cause>* out) {
  if (!n.is_object()) {
    out->push_back(BadValue(path, n, "must be an object"));
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string& k = it.key();
    if (k.rfind("x-kubernetes-", 0) == 0) continue;
    if (k == "$ref") {
      out->push_back(Forbidden(path + ".$ref", "$ref is not allowed"));
    } else if (!KnownKeywords().count(k)) {
      out->push_back({"FieldValueNotSupported", path + "." + k, "Unsupported value: unknown keyword '" + k + "'"});
    }
  }
  CheckType(n, path, out);
  CheckJunctors(n, path, out);
  CheckShape(n, path, out);
  CheckValues(n, path, out);
  if (n.contains("properties") && n["properties"].is_object()) {
    for (auto it = n["properties"].begin(); it != n["properties"].end(); ++it) {
      const std::string p = path + ".properties[" + it.key() + "]";
      if (root && it.key() == "metadata" && it.value().is_object()) {
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          if (m.key() != "type") out->push_back(Forbidden(p + "." + m.key(), "root metadata may only set type: object"));
        }
      }
      Check(it.value(), p, false, out);
    }
  }
  if (n.contains("additionalProperties")) {
    const json& ap = n["additionalProperties"];
    if (ap.is_object()) {
      Check(ap, path + ".additionalProperties", false, out);
    } else if (!ap.is_boolean()) {
      out->push_back(BadValue(path + ".additionalProperties", ap, "must be a schema or a boolean"));
    }
  }
  if (n.contains("items")) Check(n["items"], path + ".items", false, out);
}

}  // namespace

std::vector<std::string> PruneUnknownFields(json& object, const json& schema) {
  std::vector<std::string> pruned;
  Prune(object, schema, "", true, &pruned);
  return pruned;
}

void ApplyDefaults(json& object, const json& schema) { Default(object, schema); }

std::vector<Cause> Validate(const json& object, const json& schema) {
  std::vector<Cause> out;
  Validate(object, schema, "", true, &out);
  return out;
}

std::vector<Cause> CheckStructural(const json& schema, const std::string& path) {
  std::vector<Cause> out;
  if (!schema.is_object() || schema.value("type", "") != "object") {
    out.push_back(BadValue(path + ".type", schema.is_object() ? schema.value("type", json()) : schema,
                           "the root must be type: object"));
  }
  Check(schema, path, true, &out);
  return out;
}

json SchemaAt(const json& schema, const std::string& json_path) {
  static const std::regex kStep(R"(\.([A-Za-z0-9_-]+)|\[[^\]]*\])");
  json node = schema;
  for (auto it = std::sregex_iterator(json_path.begin(), json_path.end(), kStep); it != std::sregex_iterator();
       ++it) {
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

}  // namespace hypertrain::kube::openapi
