#include "runtime/model/fp8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/base64.h"

namespace hypertrain::model {
namespace {

constexpr int kStateVersion = 1;
const char* const kGemmNames[kFp8GemmsPerBlock] = {"qkv", "o", "gate_up", "down"};
const char* const kRoleNames[kFp8Roles] = {"input", "weight", "grad_output"};

std::string FloatsToBase64(const float* p, size_t n) {
  static_assert(sizeof(float) == 4);
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(p), n * sizeof(float)));
}

}  // namespace

Status Fp8Options::Validate() const {
  if (amax_history_len < 1 || amax_history_len > (int64_t{1} << 20)) {
    return InvalidArgument(fmt::format("model.fp8_amax_history_len: {} must be in [1, 1048576]",
                                       amax_history_len));
  }
  if (margin < 0 || margin > 32) {
    return InvalidArgument(fmt::format("model.fp8_margin: {} must be in [0, 32]", margin));
  }
  return Status::Ok();
}

const char* Fp8FormatName(Fp8Format f) { return f == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }
const char* Fp8RecipeName(Fp8Recipe r) { return r == Fp8Recipe::kDelayed ? "delayed" : "tensorwise"; }
const char* AmaxComputeAlgoName(AmaxComputeAlgo a) {
  return a == AmaxComputeAlgo::kMax ? "max" : "most_recent";
}

StatusOr<Fp8Format> ParseFp8Format(const std::string& s) {
  if (s == "e4m3" || s == "E4M3") return Fp8Format::kE4M3;
  if (s == "e5m2" || s == "E5M2") return Fp8Format::kE5M2;
  return InvalidArgument(fmt::format("model.fp8_grad_format: '{}' is not one of e5m2, e4m3", s));
}

StatusOr<Fp8Recipe> ParseFp8Recipe(const std::string& s) {
  if (s == "delayed") return Fp8Recipe::kDelayed;
  if (s == "tensorwise" || s == "current") return Fp8Recipe::kTensorwise;
  return InvalidArgument(fmt::format("model.fp8_recipe: '{}' is not one of delayed, tensorwise", s));
}

StatusOr<AmaxComputeAlgo> ParseAmaxComputeAlgo(const std::string& s) {
  if (s == "max") return AmaxComputeAlgo::kMax;
  if (s == "most_recent") return AmaxComputeAlgo::kMostRecent;
  return InvalidArgument(
      fmt::format("model.fp8_amax_compute_algo: '{}' is not one of max, most_recent", s));
}

Fp8Slots::Fp8Slots(int num_layers, const Fp8Options& options)
    : num_layers_(num_layers), lm_head_(options.lm_head) {
  const int n = num_layers * kFp8GemmsPerBlock * kFp8Roles + (lm_head_ ? kFp8Roles : 0);
  format_.resize(n);
  for (int s = 0; s < n; ++s) {
    format_[s] = role(s) == Fp8Role::kGradOutput ? options.grad_format : Fp8Format::kE4M3;
  }
}

std::string Fp8Slots::Name(int slot) const {
  const int r = slot % kFp8Roles, gemm = slot / kFp8Roles;
  if (gemm >= num_layers_ * kFp8GemmsPerBlock) return fmt::format("lm_head.{}", kRoleNames[r]);
  return fmt::format("layers.{}.{}.{}", gemm / kFp8GemmsPerBlock,
                     kGemmNames[gemm % kFp8GemmsPerBlock], kRoleNames[r]);
}

Fp8ScalingState::Fp8ScalingState(const Fp8Options& options, Fp8Slots slots)
    : options_(options), slots_(std::move(slots)) {
  history_.assign(static_cast<size_t>(options_.amax_history_len) * slots_.size(), 0.0f);
  scale_.assign(slots_.size(), 1.0f);
  scale_inv_.assign(slots_.size(), 1.0f);
}

Status Fp8ScalingState::Record(const std::vector<float>& amax) {
  const int n = num_slots();
  if (static_cast<int>(amax.size()) != n) {
    return InvalidArgument(fmt::format("fp8: {} amax values for {} slots", amax.size(), n));
  }
  float* row = history_.data() + next_ * n;
  for (int s = 0; s < n; ++s) {
    const bool finite = std::isfinite(amax[s]) && amax[s] >= 0.0f;
    nonfinite_ += finite ? 0 : 1;
    row[s] = finite ? amax[s] : 0.0f;
  }
  next_ = (next_ + 1) % options_.amax_history_len;
  filled_ = std::min<int64_t>(filled_ + 1, options_.amax_history_len);
  ++passes_;
  Recompute();
  return Status::Ok();
}

void Fp8ScalingState::Recompute() {
  const int n = num_slots();
  const int64_t len = options_.amax_history_len;
  const int64_t newest = (next_ + len - 1) % len;
  for (int s = 0; s < n; ++s) {
    float a = 0.0f;
    if (options_.amax_compute_algo == AmaxComputeAlgo::kMostRecent) {
      a = filled_ > 0 ? history_[newest * n + s] : 0.0f;
    } else {
      for (int64_t i = 0; i < filled_; ++i) a = std::max(a, history_[((newest - i + len) % len) * n + s]);
    }
    scale_[s] = Fp8ScaleFromAmax(a, Fp8MaxOf(slots_.format(s)), static_cast<int>(options_.margin),
                                 scale_[s]);
    scale_inv_[s] = 1.0f / scale_[s];  // exact: a power of two
  }
}

std::vector<float> Fp8ScalingState::History(int slot) const {
  const int n = num_slots();
  const int64_t len = options_.amax_history_len;
  std::vector<float> out;
  for (int64_t i = filled_; i > 0; --i) out.push_back(history_[((next_ - i + len) % len) * n + slot]);
  return out;
}

float Fp8ScalingState::NewestRangeUse(Fp8Role role) const {
  if (filled_ == 0) return 0.0f;
  const int n = num_slots();
  const int64_t len = options_.amax_history_len;
  const float* row = history_.data() + ((next_ + len - 1) % len) * n;
  float use = 0.0f;
  for (int s = 0; s < n; ++s) {
    if (slots_.role(s) != role) continue;
    use = std::max(use, row[s] * scale_[s] / Fp8MaxOf(slots_.format(s)));
  }
  return use;
}

std::string Fp8ScalingState::ToJson() const {
  const int n = num_slots();
  const int64_t len = options_.amax_history_len;
  std::vector<float> rows;  // oldest first
  rows.reserve(static_cast<size_t>(filled_) * n);
  for (int64_t i = filled_; i > 0; --i) {
    const float* r = history_.data() + ((next_ - i + len) % len) * n;
    rows.insert(rows.end(), r, r + n);
  }
  std::vector<std::string> formats;
  for (int s = 0; s < n; ++s) formats.push_back(Fp8FormatName(slots_.format(s)));
  nlohmann::json j = {{"version", kStateVersion},
                      {"slots", n},
                      {"history_len", len},
                      {"rows", filled_},
                      {"passes", passes_},
                      {"nonfinite", nonfinite_},
                      {"formats", formats},
                      {"history", FloatsToBase64(rows.data(), rows.size())},
                      {"scales", FloatsToBase64(scale_.data(), scale_.size())}};
  return j.dump();
}

Status Fp8ScalingState::FromJson(const std::string& text) {
  const int n = num_slots();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return DataLoss(std::string("fp8 state: not JSON: ") + e.what());
  }
  try {
    if (j.at("version").get<int>() != kStateVersion) {
      return DataLoss(fmt::format("fp8 state: version {} (this build reads {})",
                                  j.at("version").get<int>(), kStateVersion));
    }
    if (j.at("slots").get<int>() != n) {
      return DataLoss(fmt::format("fp8 state: {} slots saved, this model has {} (layers or "
                                  "model.fp8_lm_head differ)",
                                  j.at("slots").get<int>(), n));
    }
    const auto formats = j.at("formats").get<std::vector<std::string>>();
    for (int s = 0; s < n; ++s) {
      if (formats.at(s) != Fp8FormatName(slots_.format(s))) {
        return DataLoss(fmt::format("fp8 state: slot {} was saved as {}, is {} now "
                                    "(model.fp8_grad_format changed)",
                                    slots_.Name(s), formats.at(s), Fp8FormatName(slots_.format(s))));
      }
    }
    const int64_t rows = j.at("rows").get<int64_t>();
    HT_ASSIGN_OR_RETURN(const std::string hist, Base64Decode(j.at("history").get<std::string>()));
    HT_ASSIGN_OR_RETURN(const std::string scales, Base64Decode(j.at("scales").get<std::string>()));
    if (rows < 0 || hist.size() != static_cast<size_t>(rows) * n * sizeof(float) ||
        scales.size() != static_cast<size_t>(n) * sizeof(float)) {
      return DataLoss(fmt::format("fp8 state: {} history bytes / {} scale bytes for {} rows of {} "
                                  "slots", hist.size(), scales.size(), rows, n));
    }
    const int64_t len = options_.amax_history_len;
    const int64_t keep = std::min(rows, len);
    std::fill(history_.begin(), history_.end(), 0.0f);
    // The newest `keep` rows, oldest first, into ring rows 0..keep-1.
    std::memcpy(history_.data(), hist.data() + (rows - keep) * n * sizeof(float),
                static_cast<size_t>(keep) * n * sizeof(float));
    filled_ = keep;
    next_ = keep % len;
    passes_ = j.at("passes").get<int64_t>();
    nonfinite_ = j.at("nonfinite").get<int64_t>();
    std::memcpy(scale_.data(), scales.data(), scales.size());
    // The saved scales are what the next pass used before the save; with an
    // unchanged history length Recompute() gives the same values (it starts
    // from them for slots whose history is all zero).
    Recompute();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("fp8 state: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace hypertrain::model
