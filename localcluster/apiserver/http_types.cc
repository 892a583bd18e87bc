#include "localcluster/apiserver/http_types.h"

#include <cctype>
#include <string>

namespace kubelocal {

std::string PercentDecode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!kv.empty()) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos) {
        out[PercentDecode(kv)] = "";
      } else {
        out[PercentDecode(kv.substr(0, eq))] = PercentDecode(kv.substr(eq + 1));
      }
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return out;
}

}  // namespace kubelocal
