#include "localcluster/apiserver/patch.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace kubelocal {
namespace {

const std::vector<std::string> kMergeKeys = {"name", "containerPort", "port", "type",
                                             "uid",  "mountPath",     "ip",   "devicePath"};

// The merge key shared by every element of both lists, or "".
std::string MergeKeyFor(const json& a, const json& b) {
  for (const auto& key : kMergeKeys) {
    bool all = true;
    bool any = false;
    for (const json* list : {&a, &b}) {
      for (const auto& e : *list) {
        if (!e.is_object()) return "";
        if (e.contains("$patch") && e.size() <= 2 && e.contains(key)) {
          any = true;
          continue;
        }
        if (!e.contains(key)) all = false;
        any = true;
      }
    }
    if (all && any) return key;
  }
  return "";
}

StatusOr<json> Strategic(const json& target, const json& patch);

StatusOr<json> MergeLists(const json& target, const json& patch, const json* order) {
  std::string key = MergeKeyFor(target.is_array() ? target : json::array(), patch);
  if (key.empty()) {
    json out = json::array();
    for (const auto& e : patch) {
      if (e.is_object() && e.contains("$patch")) continue;
      out.push_back(e);
    }
    return out;
  }
  json out = target.is_array() ? target : json::array();
  for (const auto& pe : patch) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const json& e) { return e.is_object() && e.value(key, json()) == pe[key]; });
    std::string directive = pe.value("$patch", "");
    if (directive == "delete") {
      if (it != out.end()) out.erase(it);
      continue;
    }
    if (it == out.end()) {
      json fresh = pe;
      fresh.erase("$patch");
      auto merged = Strategic(json::object(), fresh);
      if (!merged.ok()) return merged.status();
      out.push_back(*merged);
    } else if (directive == "replace") {
      json fresh = pe;
      fresh.erase("$patch");
      *it = fresh;
    } else {
      auto merged = Strategic(*it, pe);
      if (!merged.ok()) return merged.status();
      *it = *merged;
    }
  }
  if (order && order->is_array()) {
    json sorted = json::array();
    for (const auto& o : *order) {
      for (const auto& e : out) {
        if (e.is_object() && o.is_object() && e.value(key, json()) == o.value(key, json())) sorted.push_back(e);
      }
    }
    for (const auto& e : out) {
      bool listed = std::any_of(order->begin(), order->end(), [&](const json& o) {
        return o.is_object() && o.value(key, json()) == e.value(key, json());
      });
      if (!listed) sorted.push_back(e);
    }
    out = sorted;
  }
  return out;
}

StatusOr<json> Strategic(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json out = target.is_object() ? target : json::object();
  if (patch.value("$patch", "") == "replace") {
    json r = patch;
    r.erase("$patch");
    return r;
  }
  if (patch.value("$patch", "") == "delete") return json(nullptr);
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    std::set<std::string> keep;
    for (const auto& k : patch["$retainKeys"]) keep.insert(k.get<std::string>());
    for (auto it = out.begin(); it != out.end();) {
      if (!keep.count(it.key())) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [k, v] : patch.items()) {
    if (k == "$patch" || k == "$retainKeys") continue;
    if (k.rfind("$setElementOrder/", 0) == 0) continue;
    if (k.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      std::string field = k.substr(std::string("$deleteFromPrimitiveList/").size());
      if (out.contains(field) && out[field].is_array()) {
        json kept = json::array();
        for (const auto& e : out[field]) {
          if (std::find(v.begin(), v.end(), e) == v.end()) kept.push_back(e);
        }
        out[field] = kept;
      }
      continue;
    }
    if (v.is_null()) {
      out.erase(k);
    } else if (v.is_object()) {
      auto m = Strategic(out.value(k, json::object()), v);
      if (!m.ok()) return m.status();
      if (m->is_null()) {
        out.erase(k);
      } else {
        out[k] = *m;
      }
    } else if (v.is_array()) {
      const json* order = nullptr;
      std::string ok = "$setElementOrder/" + k;
      if (patch.contains(ok)) order = &patch[ok];
      auto m = MergeLists(out.value(k, json::array()), v, order);
      if (!m.ok()) return m.status();
      out[k] = *m;
    } else {
      out[k] = v;
    }
  }
  return out;
}

json YamlNodeToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlNodeToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(YamlNodeToJson(e));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted scalar: always a string
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
      if (!s.empty()) {
        json num = json::parse(s, nullptr, false);
        if (!num.is_discarded() && num.is_number()) return num;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

StatusOr<PatchType> PatchTypeFromContentType(const std::string& content_type) {
  std::string ct = content_type.substr(0, content_type.find(';'));
  ct.erase(std::remove_if(ct.begin(), ct.end(), ::isspace), ct.end());
  if (ct == "application/merge-patch+json") return PatchType::kMerge;
  if (ct == "application/json-patch+json") return PatchType::kJson;
  if (ct == "application/strategic-merge-patch+json") return PatchType::kStrategic;
  if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+cbor") {
    if (ct == "application/apply-patch+cbor") {
      return UnsupportedMediaType("the body of the request was in an unknown format - accepted "
                                  "media types include: application/apply-patch+yaml");
    }
    return PatchType::kApply;
  }
  return UnsupportedMediaType(
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, "
      "application/strategic-merge-patch+json, application/apply-patch+yaml");
}

json MergePatch(const json& target, const json& patch) {
  json out = target;
  out.merge_patch(patch);
  return out;
}

StatusOr<json> StrategicMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return BadRequest("strategic merge patch must be a JSON object");
  return Strategic(target, patch);
}

StatusOr<json> YamlToJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  try {
    return YamlNodeToJson(YAML::Load(text));
  } catch (const std::exception& e) {
    return BadRequest(std::string("error converting YAML to JSON: ") + e.what());
  }
}

StatusOr<json> ApplyPatch(const json& target, PatchType type, const std::string& patch_body) {
  if (type == PatchType::kApply) {
    auto p = YamlToJson(patch_body);
    if (!p.ok()) return p.status();
    if (!p->is_object()) return BadRequest("apply patch must be an object");
    return MergePatch(target, *p);
  }
  json p = json::parse(patch_body, nullptr, false);
  if (p.is_discarded()) {
    return BadRequest("error decoding patch: invalid JSON");
  }
  switch (type) {
    case PatchType::kMerge:
      if (!p.is_object()) return BadRequest("merge patch must be a JSON object");
      return MergePatch(target, p);
    case PatchType::kStrategic:
      return StrategicMergePatch(target, p);
    case PatchType::kJson:
      if (!p.is_array()) {
        return BadRequest("json patch must be an array of operations");
      }
      try {
        return target.patch(p);
      } catch (const json::exception& e) {
        // A failed "test" op is a conflict in Kubernetes; others are invalid patches.
        std::string what = e.what();
        if (what.find("unsuccessful") != std::string::npos) {
          return MakeApiError(
              422, "Invalid",
              "the server rejected our request due to an error in our request: " + what);
        }
        return MakeApiError(
            422, "Invalid",
            "the server rejected our request due to an error in our request: " + what);
      }
    case PatchType::kApply:
      break;
  }
  return BadRequest("unsupported patch");
}

}  // namespace kubelocal
