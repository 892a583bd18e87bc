#pragma once
// Option types the config produces and lower-level trainer parts consume: the
// learning-rate schedule's kind and the fp16 loss scaler's options. They live
// here, below runtime/train, so that the config does not depend on the
// training loop's package (runtime/train uses them through its own headers).
#include <cstdint>
#include <string>

#include "core/status.h"

namespace hypertrain::config {

// model.optim.sched.name.
enum class ScheduleKind { kCosine, kConstant, kLinear };

// cosine | CosineAnnealing, constant, linear; InvalidArgument naming the key.
StatusOr<ScheduleKind> ParseScheduleKind(const std::string& s);

// trainer.loss_scale.* (runtime/train/loss_scaler.h); enabled iff precision is fp16.
struct LossScalerOptions {
  bool enabled = false;
  double initial_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
};

}  // namespace hypertrain::config
