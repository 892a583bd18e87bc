#pragma once
// Tests that assert on log lines: while a LogCapture lives, the default spdlog
// logger (core/log.h) writes every message, one per line, into it (and
// nowhere else). Thread-safe: background threads may log meanwhile.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>

namespace hypertrain::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()), previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // "<level>: <message>\n" per line so far (level as spdlog names it:
  // "info", "warning", "error", ...).
  std::string text() const { return sink_->text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string text() {
      std::lock_guard<std::mutex> l(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      const auto level = spdlog::level::to_string_view(msg.level);
      text_.append(level.data(), level.size());
      text_ += ": ";
      text_.append(msg.payload.data(), msg.payload.size());
      text_ += '\n';
    }
    void flush_() override {}

   private:
    std::string text_;
  };

  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace hypertrain::testing
