#pragma once
// Tests that assert on log lines: while a LogCapture lives, spdlog's default
// logger (core/log.h) writes every message into it (and nowhere else); then
// the previous default logger is back. Thread-safe: background threads may
// log meanwhile. The one log capture of the code base.
#include <spdlog/common.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog {
class logger;
}

namespace hypertrain::testing {

class LogCapture {
 public:
  // Records messages at `level` and above.
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::trace);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  struct Line {
    spdlog::level::level_enum level;
    std::string message;
  };
  std::vector<Line> Lines() const;
  // The messages that contain `needle`.
  std::vector<std::string> Matching(std::string_view needle) const;
  // "<level>: <message>\n" per line so far (level as spdlog names it:
  // "info", "warning", "error", ...).
  std::string text() const;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace hypertrain::testing
