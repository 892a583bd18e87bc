#include "core/env_lookup.h"

#include <cstdlib>
#include <utility>

namespace hypertrain {

EnvLookup ProcessEnvironment() {
  // The one getenv behind EnvLookup.
  return [](const char* name) -> const char* { return std::getenv(name); };
}

EnvLookup EnvFromMap(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace hypertrain
