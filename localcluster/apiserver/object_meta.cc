#include "localcluster/apiserver/object_meta.h"

#include <openssl/rand.h>

#include <chrono>
#include <cstdio>

#include "core/time.h"

namespace kubelocal {

std::string MetaStr(const json& o, const char* field) {
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) return "";
  const json& m = o["metadata"];
  return m.contains(field) && m[field].is_string() ? m[field].get<std::string>() : "";
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && i > 0 && i + 1 < s.size())) return false;
  }
  return true;
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t pos = 0;
  while (true) {
    size_t dot = s.find('.', pos);
    std::string label = s.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!IsDnsLabel(label)) return false;
    if (dot == std::string::npos) return true;
    pos = dot + 1;
  }
}

std::string NowRfc3339(int64_t offset_seconds) {
  return hypertrain::FormatRfc3339(std::chrono::system_clock::now() + std::chrono::seconds(offset_seconds));
}

std::string NewUid() {
  unsigned char b[16];
  RAND_bytes(b, sizeof(b));
  b[6] = (b[6] & 0x0F) | 0x40;
  b[8] = (b[8] & 0x3F) | 0x80;
  char buf[37];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return buf;
}

bool SpecChanged(const json& a, const json& b) {
  json x = a, y = b;
  for (json* o : {&x, &y}) {
    if (!o->is_object()) continue;
    o->erase("metadata");
    o->erase("status");
  }
  return x != y;
}

}  // namespace kubelocal
