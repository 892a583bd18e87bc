#include "runtime/model/unit_pool.h"

#include <algorithm>

namespace hypertrain::model {

namespace {
const char* KindName(int kind) { return kind == 0 ? "embedding" : "block"; }
}  // namespace

UnitSlots UnitPoolPlan::ParamSlots(int kind, int num_units) const {
  return UnitSlots(num_units, param_slots.at(kind), std::string(KindName(kind)) + " param pool");
}

UnitSlots UnitPoolPlan::GradSlots(int kind, int num_units) const {
  return UnitSlots(num_units, grad_slots.at(kind), std::string(KindName(kind)) + " grad pool");
}

StatusOr<UnitPoolPlan> PlanUnitPool(const ParamLayout& layout, const BackendOptions& options) {
  const int U = layout.num_units();
  if (options.owned.empty()) return InvalidArgument("unit_pool needs owned ranges (a sharded run)");
  if (options.pool_param_slots < 1) {
    return InvalidArgument("pool_param_slots must be >= 1, got " +
                           std::to_string(options.pool_param_slots));
  }
  for (int u = 0; u < U && u < static_cast<int>(options.owned.size()); ++u) {
    const Range r = options.owned[u];
    if (r.begin == 0 && r.end == layout.unit(u).padded_numel) {
      return InvalidArgument("unit_pool: unit " + std::to_string(u) +
                             " is owned whole (shard degree 1?)");
    }
  }
  const int64_t block = U > 1 ? layout.unit(1).padded_numel : 0;
  for (int u = 1; u < U; ++u) {
    if (layout.unit(u).padded_numel != block) return Internal("block units differ in size");
  }
  UnitPoolPlan plan;
  plan.slot_numel = {layout.unit(ParamLayout::kEmbeddingUnit).padded_numel, block};
  plan.param_slots = {1, std::min(options.pool_param_slots, std::max(U - 1, 1))};
  plan.grad_slots = {1, 2};
  return plan;
}

Status CheckPoolUnit(const ParamLayout& layout, bool pooled, int unit, const char* backend) {
  if (unit < 0 || unit >= layout.num_units()) {
    return InvalidArgument("no unit " + std::to_string(unit));
  }
  if (!pooled) {
    return FailedPrecondition(std::string("the ") + backend +
                              " backend was created without unit_pool");
  }
  return Status::Ok();
}

}  // namespace hypertrain::model
