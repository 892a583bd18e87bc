#pragma once
// RFC 3339 timestamps in UTC, the format of every Kubernetes time field,
// checkpoint manifest and JSON log line.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace hypertrain {

// "2026-11-25T18:01:02Z", or "2026-11-25T18:01:02.123Z" with millis.
std::string FormatRfc3339(std::chrono::system_clock::time_point t, bool millis = false);
// Accepts "YYYY-MM-DDTHH:MM:SS", optional fraction, then "Z" or "+hh:mm" /
// "-hh:mm"; nullopt on anything else.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s);

}  // namespace hypertrain
