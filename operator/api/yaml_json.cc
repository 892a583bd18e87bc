#include "operator/api/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace hypertrain::api {
namespace {

using nlohmann::json;

json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "?") return s;  // quoted or explicitly tagged: keep the string
  static const std::regex kNull("^(~|null|Null|NULL)?$");
  static const std::regex kBool("^(true|True|TRUE|false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kHex("^0x[0-9a-fA-F]+$");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kBool)) return s[0] == 't' || s[0] == 'T';
  if (std::regex_match(s, kInt)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;
    }
  }
  if (std::regex_match(s, kHex)) return std::stoll(s, nullptr, 16);
  if (std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

json Convert(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return Scalar(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(Convert(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = Convert(kv.second);
      return o;
    }
  }
  return nullptr;
}

Status ParseError(const YAML::Exception& e) {
  return InvalidArgument("not valid YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) +
                         ", column " + std::to_string(e.mark.column + 1) + ")");
}

}  // namespace

StatusOr<json> YamlToJson(std::string_view yaml) {
  try {
    return Convert(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {
    return ParseError(e);
  }
}

StatusOr<std::vector<json>> YamlDocumentsToJson(std::string_view yaml) {
  try {
    std::vector<json> out;
    for (const YAML::Node& doc : YAML::LoadAll(std::string(yaml))) {
      json j = Convert(doc);
      if (!j.is_null()) out.push_back(std::move(j));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return ParseError(e);
  }
}

StatusOr<json> YamlFileToJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidField(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  StatusOr<json> r = YamlToJson(ss.str());
  if (!r.ok()) return InvalidField(path, r.status().message());
  return r;
}

}  // namespace hypertrain::api
