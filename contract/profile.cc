#include "contract/profile.h"

#include <cctype>
#include <cstdlib>

namespace hypertrain::contract {
namespace {

// A non-negative decimal integer, or nullopt.
std::optional<int64_t> ParseCount(std::string_view s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::string EncodeProfile(const ProfileRequest& p) {
  std::string out;
  if (p.start_step > 0) out += "start_step=" + std::to_string(p.start_step) + ",";
  out += "num_steps=" + std::to_string(p.num_steps);
  if (!p.dir.empty()) out += ",dir=" + p.dir;
  return out;
}

std::optional<ProfileRequest> DecodeProfile(std::string_view text, std::string* error) {
  ProfileRequest p;
  bool seen_start = false, seen_steps = false, seen_dir = false;
  auto fail = [&](std::string why) {
    *error = std::move(why);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty (expected e.g. num_steps=5 or start_step=100,num_steps=3)");
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail("'" + std::string(item) + "' is not key=value");
    const std::string_view key = item.substr(0, eq);
    // dir comes last and keeps the rest of the text, commas included.
    const bool rest = key == "dir";
    if (rest) item = text.substr(pos);
    const std::string_view value = item.substr(eq + 1);
    if (key == "start_step") {
      if (seen_start) return fail("start_step given twice");
      seen_start = true;
      const auto v = ParseCount(value);
      if (!v) return fail("start_step must be a non-negative integer, got '" + std::string(value) + "'");
      p.start_step = *v;
    } else if (key == "num_steps") {
      if (seen_steps) return fail("num_steps given twice");
      seen_steps = true;
      const auto v = ParseCount(value);
      if (!v || *v < 1 || *v > kMaxProfileSteps) {
        return fail("num_steps must be in 1.." + std::to_string(kMaxProfileSteps) + ", got '" + std::string(value) + "'");
      }
      p.num_steps = *v;
    } else if (key == "dir") {
      if (seen_dir) return fail("dir given twice");
      seen_dir = true;
      if (value.empty() || value[0] != '/') return fail("dir must be an absolute path, got '" + std::string(value) + "'");
      for (char c : value) {
        if (static_cast<unsigned char>(c) < 0x20) return fail("dir holds a control character");
      }
      p.dir = std::string(value);
    } else {
      return fail("unknown key '" + std::string(key) + "' (expected start_step, num_steps, dir)");
    }
    if (rest || comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (!seen_steps) return fail("num_steps is required");
  return p;
}

}  // namespace hypertrain::contract
