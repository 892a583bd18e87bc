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

namespace {
constexpr AttentionImpl kAttentionImpls[] = {AttentionImpl::kAuto,     AttentionImpl::kCudnn,
                                             AttentionImpl::kCudnnFast, AttentionImpl::kCudnnFwd,
                                             AttentionImpl::kTiled,    AttentionImpl::kSimple};
}  // namespace

const char* AttentionImplName(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::kAuto: return "auto";
    case AttentionImpl::kCudnn: return "cudnn";
    case AttentionImpl::kCudnnFast: return "cudnn-fast";
    case AttentionImpl::kCudnnFwd: return "cudnn-fwd";
    case AttentionImpl::kTiled: return "tiled";
    case AttentionImpl::kSimple: return "simple";
  }
  return "?";
}

const std::vector<std::string>& AttentionImplNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (AttentionImpl a : kAttentionImpls) names.push_back(AttentionImplName(a));
    return names;
  }();
  return kNames;
}

StatusOr<AttentionImpl> ParseAttentionImpl(const std::string& s) {
  for (AttentionImpl a : kAttentionImpls) {
    if (s == AttentionImplName(a)) return a;
  }
  std::string names;
  for (const std::string& n : AttentionImplNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument("cuda.attention_impl: '" + s + "' is not one of " + names);
}

}  // namespace hypertrain::config
