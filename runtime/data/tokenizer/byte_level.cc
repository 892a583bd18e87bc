#include "runtime/data/tokenizer/byte_level.h"

#include <array>

#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_char{};
  std::array<int16_t, 324> char_to_byte{};  // every shown code point is < 256 + 68
  Tables() {
    char_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_char[b] = printable ? static_cast<uint32_t>(b) : next++;
      char_to_byte[byte_to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t ByteToChar(uint8_t b) { return T().byte_to_char[b]; }

int CharToByte(uint32_t cp) { return cp < T().char_to_byte.size() ? T().char_to_byte[cp] : -1; }

bool DecodeByteLevel(std::string_view shown, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < shown.size()) {
    uint32_t cp;
    const int len = DecodeUtf8(shown.data() + i, shown.size() - i, &cp);
    if (len == 0) return false;
    const int b = CharToByte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

std::string EncodeByteLevel(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) AppendUtf8(ByteToChar(c), &out);
  return out;
}

}  // namespace hypertrain::tokenizer
