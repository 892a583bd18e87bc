#include "runtime/train/loss_scaler.h"

#include <algorithm>

namespace hypertrain::train {

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options) {
  state_.scale = options_.enabled ? options_.initial_scale : 1.0;
}

bool LossScaler::Update(bool grads_finite) {
  if (!grads_finite) {
    ++state_.skipped_steps;
    state_.good_steps = 0;
    if (options_.enabled) {
      state_.scale = std::max(options_.min_scale, state_.scale * options_.backoff_factor);
    }
    return false;
  }
  ++state_.good_steps;
  if (options_.enabled && state_.good_steps >= options_.growth_interval) {
    state_.scale = std::min(options_.max_scale, state_.scale * options_.growth_factor);
    state_.good_steps = 0;
  }
  return true;
}

}  // namespace hypertrain::train
