#include "runtime/config/options.h"

namespace hypertrain::config {

StatusOr<ScheduleKind> ParseScheduleKind(const std::string& s) {
  if (s == "cosine" || s == "CosineAnnealing") return ScheduleKind::kCosine;
  if (s == "constant") return ScheduleKind::kConstant;
  if (s == "linear") return ScheduleKind::kLinear;
  return InvalidArgument("model.optim.sched.name: '" + s +
                         "' is not one of cosine, CosineAnnealing, linear, constant");
}

StatusOr<FailurePolicy> ParseFailurePolicy(const std::string& s) {
  if (s == "stop") return FailurePolicy::kStop;
  if (s == "continue") return FailurePolicy::kContinue;
  return InvalidArgument("exp_manager.checkpoint.failure_policy: '" + s + "' is not one of stop, continue");
}

const char* FailurePolicyName(FailurePolicy p) { return p == FailurePolicy::kStop ? "stop" : "continue"; }

StatusOr<ReduceDtype> ParseReduceDtype(const std::string& s) {
  if (s == "fp32") return ReduceDtype::kFp32;
  if (s == "bf16") return ReduceDtype::kBf16;
  return InvalidArgument("distributed.reduce_dtype: '" + s + "' is not one of fp32, bf16");
}

const char* ReduceDtypeName(ReduceDtype d) { return d == ReduceDtype::kBf16 ? "bf16" : "fp32"; }

}  // namespace hypertrain::config
