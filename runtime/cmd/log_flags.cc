#include "runtime/cmd/log_flags.h"

#include <algorithm>
#include <cstdlib>

namespace hypertrain::cmd {

Status TakeLogFlags(std::vector<std::string>* args, size_t begin, bool stop_at_positional,
                    LogFlags* flags, const std::vector<std::string>& value_flags) {
  std::vector<std::string>& a = *args;
  size_t i = begin;
  while (i < a.size()) {
    if (a[i] == "--") break;
    if (stop_at_positional && (a[i].empty() || a[i][0] != '-')) break;
    const std::pair<std::string, std::string*> known[] = {{"--log-format", &flags->format},
                                                          {"--log-level", &flags->level}};
    std::string* target = nullptr;
    std::string name;
    for (const auto& [flag, field] : known) {
      if (a[i] == flag || a[i].rfind(flag + "=", 0) == 0) {
        target = field;
        name = flag;
      }
    }
    if (target == nullptr) {
      const bool takes_next =
          std::find(value_flags.begin(), value_flags.end(), a[i]) != value_flags.end();
      i += takes_next ? 2 : 1;
      continue;
    }
    if (a[i].size() > name.size()) {  // --flag=value
      *target = a[i].substr(name.size() + 1);
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      if (i + 1 >= a.size()) return InvalidArgument(name + " needs a value");
      *target = a[i + 1];
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(i),
              a.begin() + static_cast<std::ptrdiff_t>(i) + 2);
    }
  }
  return Status::Ok();
}

log::Fields LogContext(const std::string& command, const launch::EnvLookup& env) {
  auto get = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v != nullptr ? v : "";
  };
  if (command == "launch") {
    std::string node = get("NODE_RANK");
    if (node.empty()) node = get("PET_NODE_RANK");
    if (!node.empty()) return {{"node", node}};
    return {};
  }
  const std::string rank = get("RANK");
  if (!rank.empty() && std::atoi(get("WORLD_SIZE").c_str()) > 1) return {{"rank", rank}};
  return {};
}

}  // namespace hypertrain::cmd
