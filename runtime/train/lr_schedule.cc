#include "runtime/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace hypertrain::train {

double LrSchedule::At(int64_t step) const {
  if (step < warmup_steps) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (kind == ScheduleKind::kConstant) return lr;
  const int64_t decay_steps = std::max<int64_t>(1, max_steps - warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  const double coeff = kind == ScheduleKind::kCosine ? 0.5 * (1.0 + std::cos(M_PI * progress))
                                                     : 1.0 - progress;
  return min_lr + coeff * (lr - min_lr);
}

}  // namespace hypertrain::train
