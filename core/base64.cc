#include "core/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace hypertrain {

std::string Base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view text) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return InvalidArgument("base64 text length " + std::to_string(clean.size()) + " is not a multiple of 4");
  size_t pad = 0;
  while (pad < 2 && pad < clean.size() && clean[clean.size() - 1 - pad] == '=') ++pad;
  std::string out(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (n < 0) return InvalidArgument("base64 text holds a character outside the alphabet");
  // EVP_DecodeBlock counts the padding as zero bytes.
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Base64UrlEncode(std::string_view data) {
  std::string out = Base64Encode(data);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

StatusOr<std::string> Base64UrlDecode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return InvalidArgument("base64url text length " + std::to_string(text.size()) + " is impossible");
  std::string std_text(text);
  for (char& c : std_text) {
    if (c == '+' || c == '/' || std::isspace(static_cast<unsigned char>(c))) {
      return InvalidArgument("base64url text holds a character outside the URL-safe alphabet");
    }
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  std_text.append((4 - std_text.size() % 4) % 4, '=');
  return Base64Decode(std_text);
}

}  // namespace hypertrain
