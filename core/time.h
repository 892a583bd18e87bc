#pragma once
// RFC 3339 timestamps in UTC, the format of every Kubernetes time field,
// checkpoint manifest and JSON log line.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace hypertrain {

// Digits of the fraction of a second: none (metav1.Time), milliseconds (log
// lines) or microseconds (metav1.MicroTime, e.g. a Lease's renewTime).
enum class TimePrecision { kSeconds, kMillis, kMicros };

// "2026-11-25T18:01:02Z", "2026-11-25T18:01:02.123Z" or "...02.123456Z".
std::string FormatRfc3339(std::chrono::system_clock::time_point t,
                          TimePrecision precision = TimePrecision::kSeconds);
// The same, `millis` choosing kMillis over kSeconds.
inline std::string FormatRfc3339(std::chrono::system_clock::time_point t, bool millis) {
  return FormatRfc3339(t, millis ? TimePrecision::kMillis : TimePrecision::kSeconds);
}
// Accepts "YYYY-MM-DDTHH:MM:SS", optional fraction, then "Z" or "+hh:mm" /
// "-hh:mm"; nullopt on anything else.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s);

}  // namespace hypertrain
