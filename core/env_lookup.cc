#include "core/env_lookup.h"

#include <cstdlib>
#include <utility>

namespace hypertrain {

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    // The one getenv behind EnvLookup.
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup EnvFromMap(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

EnvLookup FromPointerLookup(std::function<const char*(const char*)> raw) {
  return [raw = std::move(raw)](const std::string& name) -> std::optional<std::string> {
    const char* v = raw ? raw(name.c_str()) : nullptr;
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

}  // namespace hypertrain
