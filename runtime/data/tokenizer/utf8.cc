#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {

int DecodeUtf8(const char* s, size_t n, uint32_t* cp) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  const unsigned char b0 = u[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  uint32_t c, min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n < static_cast<size_t>(len)) return 0;
  for (int i = 1; i < len; ++i) {
    if ((u[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (u[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return len;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    const int len = DecodeUtf8(s.data() + i, n - i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t RepairUtf8(std::string_view s, std::string* out) {
  out->clear();
  if (IsValidUtf8(s)) {
    out->assign(s);
    return 0;
  }
  out->reserve(s.size() + 16);
  size_t replaced = 0, i = 0;
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    uint32_t cp;
    const int len = DecodeUtf8(s.data() + i, s.size() - i, &cp);
    if (len > 0) {
      out->append(s.data() + i, len);
      i += len;
      continue;
    }
    // Skip the maximal prefix of a would-be sequence (lead byte plus the
    // continuation bytes that could still belong to it), one U+FFFD for it.
    size_t j = i + 1;
    const unsigned char b0 = u[i];
    const int want = (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    while (j < s.size() && j < i + want && (u[j] & 0xC0) == 0x80) ++j;
    AppendUtf8(kReplacementChar, out);
    ++replaced;
    i = j;
  }
  return replaced;
}

}  // namespace hypertrain::tokenizer
