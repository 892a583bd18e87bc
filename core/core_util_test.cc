#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/log.h"
#include "core/time.h"

namespace hypertrain {
namespace {

using Clock = std::chrono::system_clock;

TEST(Rfc3339, FormatsUtcSecondsAndMillis) {
  const auto t = Clock::from_time_t(1764093662) + std::chrono::milliseconds(7);  // 2025-11-25T18:01:02.007Z
  EXPECT_EQ(FormatRfc3339(t), "2025-11-25T18:01:02Z");
  EXPECT_EQ(FormatRfc3339(t, true), "2025-11-25T18:01:02.007Z");
  EXPECT_EQ(FormatRfc3339(t + std::chrono::microseconds(42), TimePrecision::kMicros),
            "2025-11-25T18:01:02.007042Z");
  EXPECT_EQ(FormatRfc3339(t + std::chrono::microseconds(999), TimePrecision::kMillis),
            "2025-11-25T18:01:02.007Z");  // truncated, never rounded into the next second
}

TEST(Rfc3339, ParsesZuluFractionAndOffsets) {
  const auto base = Clock::from_time_t(1764093662);
  EXPECT_EQ(ParseRfc3339("2025-11-25T18:01:02Z"), base);
  EXPECT_EQ(ParseRfc3339("2025-11-25T18:01:02.5Z"), base + std::chrono::milliseconds(500));
  EXPECT_EQ(ParseRfc3339("2025-11-25T20:01:02+02:00"), base);
  EXPECT_EQ(ParseRfc3339("2025-11-25T17:31:02-00:30"), base);
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(base, true)), base);
  for (const char* bad : {"", "2025-11-25", "2025-11-25T18:01:02", "2025-13-25T18:01:02Z", "2025-11-25T18:01:02.Z",
                          "2025-11-25T18:01:02Zjunk", "2025-11-25 18:01:02Z", "x025-11-25T18:01:02Z"}) {
    EXPECT_FALSE(ParseRfc3339(bad).has_value()) << bad;
  }
}

TEST(Base64, RoundTripsEveryPaddingLength) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  std::string bytes;
  for (int i = 0; i < 300; ++i) bytes.push_back(static_cast<char>(i * 37));
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto back = Base64Decode(Base64Encode(bytes.substr(0, n)));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, bytes.substr(0, n));
  }
  EXPECT_EQ(*Base64Decode("Zm9v\nYmFy\n"), "foobar");
  EXPECT_FALSE(Base64Decode("Zm9").ok());
  EXPECT_FALSE(Base64Decode("Zm!v").ok());
}

TEST(Base64, UrlSafeAlphabetWithoutPadding) {
  const std::string bytes("\xfb\xff\xbf?", 4);  // '+' and '/' in the standard alphabet
  EXPECT_EQ(Base64Encode(bytes), "+/+/Pw==");
  EXPECT_EQ(Base64UrlEncode(bytes), "-_-_Pw");
  EXPECT_EQ(*Base64UrlDecode("-_-_Pw"), bytes);
  EXPECT_EQ(*Base64UrlDecode("-_-_Pw=="), bytes);
  for (size_t n = 0; n < 10; ++n) {
    const std::string s = std::string("continue/token").substr(0, n);
    EXPECT_EQ(*Base64UrlDecode(Base64UrlEncode(s)), s);
  }
  EXPECT_FALSE(Base64UrlDecode("+/+/Pw").ok());
  EXPECT_FALSE(Base64UrlDecode("Zm9v Zg").ok());
  EXPECT_FALSE(Base64UrlDecode("Zm9vZ").ok());
}

TEST(Log, RejectsUnknownFormatAndLevel) {
  EXPECT_FALSE(log::Init("xml", "info").ok());
  const Status s = log::Init("text", "loud");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("loud"), std::string::npos);
  EXPECT_TRUE(log::Init("text", "warning").ok());
  // Every level the error message lists is accepted.
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_TRUE(log::ParseLevel(level).ok()) << level;
  }
  EXPECT_EQ(*log::ParseLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(*log::ParseLevel("error"), spdlog::level::err);
  EXPECT_TRUE(log::Init("text", "warn").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  EXPECT_TRUE(log::Init("text", "error").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
}

TEST(Log, JsonLinesAreValidJsonWithContextFields) {
  const std::string path = ::testing::TempDir() + "/log.jsonl";
  ASSERT_NE(std::freopen(path.c_str(), "w", stderr), nullptr);
  ASSERT_TRUE(log::Init("json", "debug", {{"rank", "3"}}).ok());
  spdlog::info("quote \" and\nnewline");
  spdlog::debug("second");
  spdlog::trace("not shown");
  std::fflush(stderr);
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["msg"], "quote \" and\nnewline");
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[0]["rank"], "3");
  EXPECT_TRUE(ParseRfc3339(lines[0]["time"].get<std::string>()).has_value());
  EXPECT_EQ(lines[1]["level"], "debug");
}

}  // namespace
}  // namespace hypertrain
