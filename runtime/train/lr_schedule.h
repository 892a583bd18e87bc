#pragma once
// Learning-rate schedules: linear warmup then cosine decay to min_lr.
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/config/options.h"

namespace hypertrain::train {

using config::ScheduleKind;  // the config's (model.optim.sched.name)
using config::ParseScheduleKind;

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kCosine;
  double lr = 3e-4;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t max_steps = 1;  // decay horizon (trainer.max_steps unless constant_steps given)
  // lr for 0-based optimizer step `step`: warmup lr*(step+1)/warmup for
  // step < warmup, then decays from lr to min_lr over the remaining steps.
  double At(int64_t step) const;
};

}  // namespace hypertrain::train
