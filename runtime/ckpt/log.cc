#include "runtime/ckpt/log.h"

#include <cstdio>

namespace hypertrain::ckpt {

LogFn StderrLog() {
  return [](LogLevel level, const std::string& msg) {
    const char* tag = level == LogLevel::kInfo ? "INFO" : level == LogLevel::kWarning ? "WARNING" : "ERROR";
    std::fprintf(stderr, "[ckpt] %s: %s\n", tag, msg.c_str());
    std::fflush(stderr);
  };
}

}  // namespace hypertrain::ckpt
