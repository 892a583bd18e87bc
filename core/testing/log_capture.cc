#include "core/testing/log_capture.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>

namespace hypertrain::testing {

class LogCapture::Sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<Line> Lines() {
    std::lock_guard<std::mutex> l(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.push_back({msg.level, std::string(msg.payload.data(), msg.payload.size())});
  }
  void flush_() override {}

 private:
  std::vector<Line> lines_;  // guarded by base_sink's mutex_
};

LogCapture::LogCapture(spdlog::level::level_enum level)
    : sink_(std::make_shared<Sink>()), previous_(spdlog::default_logger()) {
  auto logger = std::make_shared<spdlog::logger>("capture", sink_);
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
}

LogCapture::~LogCapture() { spdlog::set_default_logger(previous_); }

std::vector<LogCapture::Line> LogCapture::Lines() const { return sink_->Lines(); }

std::vector<std::string> LogCapture::Matching(std::string_view needle) const {
  std::vector<std::string> out;
  for (const Line& l : Lines()) {
    if (l.message.find(needle) != std::string::npos) out.push_back(l.message);
  }
  return out;
}

std::string LogCapture::text() const {
  std::string out;
  for (const Line& l : Lines()) {
    const auto level = spdlog::level::to_string_view(l.level);
    out.append(level.data(), level.size());
    out += ": " + l.message + "\n";
  }
  return out;
}

}  // namespace hypertrain::testing
