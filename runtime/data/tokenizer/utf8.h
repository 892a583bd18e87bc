#pragma once
// UTF-8 helpers for the tokenizer: decoding one code point, appending one,
// and making arbitrary bytes valid UTF-8 (the regex engine runs with its UTF
// check off, so every text reaching it must be valid).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hypertrain::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the valid UTF-8 sequence at s[0..n) and its code point in *cp;
// 0 when the bytes there are not valid UTF-8 (overlong, surrogate, truncated,
// > U+10FFFF). n must be >= 1.
int DecodeUtf8(const char* s, size_t n, uint32_t* cp);

// Appends the UTF-8 encoding of cp (<= U+10FFFF, not a surrogate).
void AppendUtf8(uint32_t cp, std::string* out);

// Length of the first UTF-8 character of s (1 for an invalid byte).
inline int Utf8CharLength(const char* s, size_t n) {
  uint32_t cp;
  const int len = DecodeUtf8(s, n, &cp);
  return len > 0 ? len : 1;
}

bool IsValidUtf8(std::string_view s);

// s with every invalid byte replaced by U+FFFD (as Python's
// bytes.decode("utf-8", "replace") does per maximal invalid subpart); returns
// how many replacements were made. Valid input is returned unchanged.
size_t RepairUtf8(std::string_view s, std::string* out);

}  // namespace hypertrain::tokenizer
