#include "core/time.h"

#include <cstdio>
#include <ctime>

namespace hypertrain {

using Clock = std::chrono::system_clock;

std::string FormatRfc3339(Clock::time_point t, TimePrecision precision) {
  const auto since_epoch = std::chrono::floor<std::chrono::microseconds>(t.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  const int micros = static_cast<int>((since_epoch - secs).count());
  char frac[16];
  if (precision == TimePrecision::kMillis) {
    std::snprintf(frac, sizeof(frac), ".%03d", micros / 1000);
    out += frac;
  } else if (precision == TimePrecision::kMicros) {
    std::snprintf(frac, sizeof(frac), ".%06d", micros);
    out += frac;
  }
  return out + "Z";
}

std::optional<Clock::time_point> ParseRfc3339(std::string_view s) {
  // Fixed layout "YYYY-MM-DDTHH:MM:SS" first.
  if (s.size() < 20) return std::nullopt;
  auto digits = [&](size_t pos, size_t n, int* out) {
    int v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
  };
  std::tm tm{};
  int year, mon, day, hour, min, sec;
  if (!digits(0, 4, &year) || s[4] != '-' || !digits(5, 2, &mon) || s[7] != '-' || !digits(8, 2, &day) ||
      (s[10] != 'T' && s[10] != 't') || !digits(11, 2, &hour) || s[13] != ':' || !digits(14, 2, &min) ||
      s[16] != ':' || !digits(17, 2, &sec)) {
    return std::nullopt;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  size_t i = 19;
  std::chrono::nanoseconds frac{0};
  if (i < s.size() && s[i] == '.') {
    ++i;
    int64_t scale = 100000000;
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      frac += std::chrono::nanoseconds((s[i] - '0') * scale);
      scale /= 10;
      ++i;
    }
    if (i == start) return std::nullopt;
  }
  std::chrono::minutes offset{0};
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh, om;
    if (!digits(i + 1, 2, &oh) || !digits(i + 4, 2, &om)) return std::nullopt;
    offset = std::chrono::minutes(oh * 60 + om) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const Clock::time_point base = Clock::from_time_t(timegm(&tm));
  return base + std::chrono::duration_cast<Clock::duration>(frac) - offset;
}

}  // namespace hypertrain
