#pragma once
// Test helper: captures what libraries log through spdlog's default logger
// while it lives, then puts the previous default logger back.
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

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace hypertrain::testing
