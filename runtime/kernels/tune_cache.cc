#include "runtime/kernels/tune_cache.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"

namespace hypertrain::kernels {
namespace {

constexpr const char* kFormat = "hypertrain-tune-cache/1";

// How the file's context differs from `want` ("device NVIDIA A100 ..."), or
// nullopt when it is the same.
std::optional<std::string> Mismatch(const TuneCache::Context& want, const nlohmann::json& got) {
  for (const auto& [k, v] : want) {
    if (!got.contains(k) || !got[k].is_string()) return fmt::format("{} (none)", k);
    if (got[k].get<std::string>() != v) return fmt::format("{} {}", k, got[k].get<std::string>());
  }
  for (const auto& [k, v] : got.items()) {
    if (want.count(k) == 0) return fmt::format("{} (not in this build's context)", k);
  }
  return std::nullopt;
}

}  // namespace

TuneCache TuneCache::Open(std::string path, Context context, std::string* note) {
  TuneCache c;
  c.path_ = std::move(path);
  c.context_ = std::move(context);
  std::string why;
  std::ifstream in(c.path_);
  if (!in) {
    why = "none: no file yet";
  } else {
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat ||
        !j.contains("context") || !j["context"].is_object() || !j.contains("entries") ||
        !j["entries"].is_object()) {
      why = "none: not a tune cache of this version";
    } else if (std::optional<std::string> diff = Mismatch(c.context_, j["context"])) {
      why = "none: written for " + *diff;
    } else {
      for (const auto& [k, v] : j["entries"].items()) {
        if (v.is_string()) c.entries_[k] = v.get<std::string>();
      }
      why = fmt::format("{} entries", c.entries_.size());
    }
  }
  if (note != nullptr) *note = why;
  return c;
}

std::optional<std::string> TuneCache::Get(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuneCache::Put(const std::string& key, std::string value) {
  auto [it, inserted] = entries_.try_emplace(key, value);
  if (!inserted && it->second == value) return;
  it->second = std::move(value);
  dirty_ = true;
}

Status TuneCache::Save() {
  if (!dirty_) return Status::Ok();
  nlohmann::json ctx = nlohmann::json::object();
  for (const auto& [k, v] : context_) ctx[k] = v;
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [k, v] : entries_) entries[k] = v;
  const nlohmann::json j = {{"format", kFormat}, {"context", std::move(ctx)}, {"entries", std::move(entries)}};
  // The exp_dir may not exist yet on this node (rank 0 makes it for the metrics).
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  HT_RETURN_IF_ERROR(WriteFileAtomically(path_, j.dump(1) + "\n"));
  dirty_ = false;
  return Status::Ok();
}

std::string ToHex(const void* data, size_t size) {
  static const char* kDigits = "0123456789abcdef";
  const auto* b = static_cast<const unsigned char*>(data);
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[b[i] >> 4];
    out[2 * i + 1] = kDigits[b[i] & 15];
  }
  return out;
}

bool FromHex(const std::string& hex, void* data, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  auto* b = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    b[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace hypertrain::kernels
