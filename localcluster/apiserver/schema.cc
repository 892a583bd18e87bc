#include "localcluster/apiserver/schema.h"

#include <cmath>
#include <regex>
#include <set>

namespace kubelocal {
namespace {

std::string Join(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

bool Flag(const json& s, const char* key) { return s.is_object() && s.value(key, false); }

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

FieldCause Invalid(const std::string& path, const json& v, const std::string& what) {
  return {"FieldValueInvalid", path, "Invalid value: " + v.dump() + ": " + what};
}

void Validate(const json& v, const json& s, const std::string& path, bool root,
              std::vector<FieldCause>* out);

// Where a cause is reported ("<root>" for the object itself) and the phrase
// its messages use for that place.
struct At {
  std::string p;
  std::string body;
};

// null against nullable and the declared type; false when the value's type is
// wrong (or null), so nothing more is checked below it.
bool ValidateType(const json& v, const json& s, const At& at, std::vector<FieldCause>* out) {
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

void ValidateEnum(const json& v, const json& s, const At& at, std::vector<FieldCause>* out) {
  if (!s.contains("enum") || !s["enum"].is_array()) return;
  for (const auto& e : s["enum"]) {
    if (e == v) return;
  }
  std::string vals;
  for (const auto& e : s["enum"]) vals += (vals.empty() ? "" : ", ") + e.dump();
  out->push_back({"FieldValueNotSupported", at.p, "Unsupported value: " + v.dump() + ": supported values: " + vals});
}

void ValidateNumber(const json& v, const json& s, const At& at, std::vector<FieldCause>* out) {
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

void ValidateString(const json& v, const json& s, const At& at, std::vector<FieldCause>* out) {
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
  if (s.contains("pattern") && s["pattern"].is_string()) {
    try {
      std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(str, re)) {
        out->push_back(Invalid(at.p, v, at.body + " should match '" + s["pattern"].get<std::string>() + "'"));
      }
    } catch (const std::regex_error&) {
      // CheckSchema rejects bad patterns when the CRD is written.
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
                   std::vector<FieldCause>* out) {
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
                    std::vector<FieldCause>* out) {
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
                         std::vector<FieldCause>* out) {
  auto passes = [&](const json& sub) {
    std::vector<FieldCause> tmp;
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
              std::vector<FieldCause>* out) {
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

void Check(const json& s, const std::string& path, std::vector<FieldCause>* out) {
  if (!s.is_object()) {
    out->push_back({"FieldValueInvalid", path, "Invalid value: must be an object"});
    return;
  }
  static const std::set<std::string> kTypes = {"object", "array",   "string",
                                               "integer", "number", "boolean"};
  if (s.contains("type")) {
    if (!s["type"].is_string() || !kTypes.count(s["type"].get<std::string>())) {
      out->push_back({"FieldValueNotSupported", path + ".type",
                      "Unsupported value: " + s["type"].dump() +
                          ": supported values: \"array\", \"boolean\", \"integer\", \"number\", "
                          "\"object\", \"string\""});
    }
  }
  if (s.contains("pattern")) {
    try {
      std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
    } catch (const std::exception&) {
      out->push_back({"FieldValueInvalid", path + ".pattern",
                      "Invalid value: " + s["pattern"].dump() +
                          ": must be a valid regular expression"});
    }
  }
  if (s.contains("properties") && s["properties"].is_object()) {
    for (const auto& [k, sub] : s["properties"].items()) Check(sub, path + ".properties[" + k + "]", out);
  }
  if (s.contains("items")) Check(s["items"], path + ".items", out);
  if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
    Check(s["additionalProperties"], path + ".additionalProperties", out);
  }
}

}  // namespace

std::vector<std::string> PruneUnknownFields(json& object, const json& schema) {
  std::vector<std::string> pruned;
  Prune(object, schema, "", true, &pruned);
  return pruned;
}

void ApplyDefaults(json& object, const json& schema) { Default(object, schema); }

std::vector<FieldCause> ValidateAgainstSchema(const json& object, const json& schema) {
  std::vector<FieldCause> out;
  Validate(object, schema, "", true, &out);
  return out;
}

std::vector<FieldCause> CheckSchema(const json& schema, const std::string& path) {
  std::vector<FieldCause> out;
  Check(schema, path, &out);
  return out;
}

}  // namespace kubelocal
