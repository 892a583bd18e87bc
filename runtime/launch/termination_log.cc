#include "runtime/launch/termination_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "core/fd.h"

namespace hypertrain::launch {

bool WriteTerminationMessage(const std::string& line, const hypertrain::EnvLookup& env) {
  const char* configured_path = env(kTerminationLogEnv);
  const bool configured = configured_path != nullptr && *configured_path != '\0';
  const std::string path = configured ? configured_path : kDefaultTerminationLog;
  const int flags = O_WRONLY | O_TRUNC | O_CLOEXEC | (configured ? O_CREAT : 0);
  const Fd fd(::open(path.c_str(), flags, 0644));
  if (!fd.valid()) return false;
  std::string text = line.substr(0, 1024);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  text += '\n';
  return ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

}  // namespace hypertrain::launch
