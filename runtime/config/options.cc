#include "runtime/config/options.h"

namespace hypertrain::config {

StatusOr<ScheduleKind> ParseScheduleKind(const std::string& s) {
  if (s == "cosine" || s == "CosineAnnealing") return ScheduleKind::kCosine;
  if (s == "constant") return ScheduleKind::kConstant;
  if (s == "linear") return ScheduleKind::kLinear;
  return InvalidArgument("model.optim.sched.name: '" + s +
                         "' is not one of cosine, CosineAnnealing, linear, constant");
}

}  // namespace hypertrain::config
