#include "core/log.h"

#include <atomic>

#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/time.h"

namespace hypertrain::log {
namespace {

// One JSON object per line; the message and the fields are escaped by the
// JSON library, so a message with quotes or newlines stays one valid line.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(Fields context) : context_(std::move(context)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["time"] = FormatRfc3339(msg.time, /*millis=*/true);
    const auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    for (const auto& [k, v] : context_) line[k] = v;
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(context_); }

 private:
  Fields context_;
};

std::string TextPattern(const Fields& context) {
  std::string pattern = "[%Y-%m-%d %H:%M:%S.%e] [%l]";
  for (const auto& [k, v] : context) pattern += " [" + k + " " + v + "]";
  return pattern + " %v";
}

}  // namespace

StatusOr<Format> ParseFormat(std::string_view s) {
  if (s == "text") return Format::kText;
  if (s == "json") return Format::kJson;
  return InvalidArgument("log format '" + std::string(s) + "' is not text or json");
}

StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view s) {
  for (auto l : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                 spdlog::level::err, spdlog::level::critical, spdlog::level::off}) {
    const auto name = spdlog::level::to_string_view(l);
    if (s == std::string_view(name.data(), name.size())) return l;
  }
  // spdlog names these "warning" and "error"; the short forms are what the
  // flags document.
  if (s == "warn" || s == "warning") return spdlog::level::warn;
  if (s == "error" || s == "err") return spdlog::level::err;
  return InvalidArgument("log level '" + std::string(s) +
                         "' is not one of trace, debug, info, warn, error, critical, off");
}

namespace {
std::atomic<bool> g_json{false};
}  // namespace

bool IsJson() { return g_json.load(); }

bool JsonRequested(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;  // the rest is a child's command line
    if (a == "--log-format=json" || (a == "--log-format" && i + 1 < argc && std::string_view(argv[i + 1]) == "json")) {
      return true;
    }
  }
  return false;
}

void Init(Format format, spdlog::level::level_enum level, Fields context) {
  g_json.store(format == Format::kJson);
  auto logger = std::make_shared<spdlog::logger>("hypertrain", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == Format::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>(std::move(context)));
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(TextPattern(context)));
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // every line reaches the pod log at once
  spdlog::set_default_logger(std::move(logger));
}

Status Init(std::string_view format, std::string_view level, Fields context) {
  HT_ASSIGN_OR_RETURN(const Format f, ParseFormat(format));
  HT_ASSIGN_OR_RETURN(const auto l, ParseLevel(level));
  Init(f, l, std::move(context));
  return Status::Ok();
}

}  // namespace hypertrain::log
