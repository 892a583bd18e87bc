#include "runtime/data/sampler.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <utility>

#include "runtime/model/init.h"

namespace hypertrain::data {

std::string SamplerState::ToJson() const {
  return nlohmann::json{{"seed", seed}, {"epoch", epoch}, {"position", position}}.dump();
}

StatusOr<SamplerState> SamplerState::FromJson(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    SamplerState s;
    s.seed = j.at("seed").get<uint64_t>();
    s.epoch = j.at("epoch").get<int64_t>();
    s.position = j.at("position").get<int64_t>();
    if (s.epoch < 0 || s.position < 0) return DataLoss("sampler state: negative epoch/position");
    return s;
  } catch (const std::exception& e) {
    return DataLoss(std::string("sampler state is not valid JSON {seed, epoch, position}: ") + e.what());
  }
}

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  uint64_t x = model::SplitMix64(seed ^ (0x5851F42D4C957F2Dull * static_cast<uint64_t>(epoch + 1)));
  for (int64_t i = n - 1; i > 0; --i) {
    x = model::SplitMix64(x);
    const int64_t j = static_cast<int64_t>(x % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

Sampler::Sampler(int64_t num_samples, int64_t micro_batch, int64_t grad_accum, int rank,
                 int dp_world, SamplerState state, bool shuffle)
    : num_samples_(num_samples),
      micro_batch_(micro_batch),
      grad_accum_(grad_accum),
      rank_(rank),
      dp_world_(dp_world),
      shuffle_(shuffle),
      state_(state) {
  // Normalise a position saved with a different global batch / data size.
  state_.epoch += state_.position / num_samples_;
  state_.position %= num_samples_;
}

void Sampler::EnsurePermutation(int64_t epoch) {
  if (perm_epoch_ == epoch) return;
  if (next_perm_epoch_ == epoch) {
    std::swap(perm_, next_perm_);
    std::swap(perm_epoch_, next_perm_epoch_);
    return;
  }
  // Keep the previous one as the spare: a step may straddle two epochs.
  next_perm_ = std::move(perm_);
  next_perm_epoch_ = perm_epoch_;
  perm_ = EpochPermutation(num_samples_, state_.seed, epoch);
  perm_epoch_ = epoch;
}

int64_t Sampler::GlobalSample(int64_t offset_in_step) {
  const int64_t idx = state_.position + offset_in_step;
  const int64_t epoch = state_.epoch + idx / num_samples_;
  if (!shuffle_) return idx % num_samples_;
  EnsurePermutation(epoch);
  return perm_[idx % num_samples_];
}

std::vector<int64_t> Sampler::NextMicroBatch() {
  std::vector<int64_t> out(micro_batch_);
  const int64_t base = (static_cast<int64_t>(rank_) * grad_accum_ + micro_in_step_) * micro_batch_;
  for (int64_t j = 0; j < micro_batch_; ++j) out[j] = GlobalSample(base + j);
  if (++micro_in_step_ == grad_accum_) {
    micro_in_step_ = 0;
    state_.position += static_cast<int64_t>(dp_world_) * grad_accum_ * micro_batch_;
    state_.epoch += state_.position / num_samples_;
    state_.position %= num_samples_;
  }
  return out;
}

}  // namespace hypertrain::data
