#pragma once
// Dynamic loss scaling for fp16 training (also usable, disabled, for others).
//
// Per step: multiply the loss gradient by scale(); after backward, if any
// gradient is inf/NaN call Update(false): the step is skipped and the scale is
// multiplied by backoff_factor (never below min_scale). Otherwise Update(true):
// after growth_interval consecutive good steps the scale is multiplied by
// growth_factor (never above max_scale). When disabled the scale stays 1 and
// Update() only counts. State is plain numbers so checkpoints can save it.
#include <cstdint>

#include "runtime/config/options.h"

namespace hypertrain::train {

using config::LossScalerOptions;  // trainer.loss_scale.* (runtime/config/options.h)

struct LossScalerState {
  double scale = 1.0;
  int64_t good_steps = 0;     // consecutive finite steps since last change
  int64_t skipped_steps = 0;  // total skipped
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options = {});
  double scale() const { return state_.scale; }
  bool enabled() const { return options_.enabled; }
  // Returns true when the step should be applied (grads finite).
  bool Update(bool grads_finite);
  const LossScalerState& state() const { return state_; }
  void set_state(const LossScalerState& s) { state_ = s; }

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace hypertrain::train
