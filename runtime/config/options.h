#pragma once
// Option types the config produces and lower-level trainer parts consume: the
// learning-rate schedule's kind, the fp16 loss scaler's options, the
// checkpoint failure policy and the gradient reduce type. They live
// here, below runtime/train, so that the config does not depend on the
// training loop's package (runtime/train uses them through its own headers).
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/kernels/attention_impl.h"

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

// exp_manager.checkpoint.failure_policy: what a failed save does to the run
// (runtime/ckpt/manager.h).
enum class FailurePolicy { kContinue, kStop };
// stop | continue; InvalidArgument naming the key and the accepted values.
StatusOr<FailurePolicy> ParseFailurePolicy(const std::string& s);
const char* FailurePolicyName(FailurePolicy p);

// distributed.reduce_dtype: the type the gradient reduce-scatter sums in.
enum class ReduceDtype { kFp32, kBf16 };
// fp32 | bf16; InvalidArgument naming the key and the accepted values.
StatusOr<ReduceDtype> ParseReduceDtype(const std::string& s);
const char* ReduceDtypeName(ReduceDtype d);

// cuda.attention_impl: the kernels' one enum (runtime/kernels/attention_impl.h,
// no CUDA dependency); the config parses it once and the CUDA backend takes it
// as it is.
using kernels::AttentionImpl;
using kernels::AttentionImplName;
using kernels::AttentionImplNames;
using kernels::ParseAttentionImpl;

}  // namespace hypertrain::config
