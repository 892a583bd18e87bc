#pragma once
// UnitSlots: which pool slot holds which unit, for backends that pool their
// full-size unit buffers (Backend::PoolsUnits, runtime/model/backend.h).
// Slots are handed out first-released-first (FIFO), so a freshly released
// slot is reused as late as possible. Misuse (acquiring a held unit, running
// out of slots, releasing a unit not held) is an error, never a silent
// reuse: the slot counts are derived from the hook order and a violation is
// a bug worth stopping for.
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/model/backend.h"
#include "runtime/model/layout.h"

namespace hypertrain::model {

class UnitSlots {
 public:
  UnitSlots() = default;
  UnitSlots(int num_units, int num_slots, std::string what)
      : slot_of_(num_units, -1), what_(std::move(what)) {
    for (int i = 0; i < num_slots; ++i) free_.push_back(i);
  }

  StatusOr<int> Acquire(int unit) {
    if (unit < 0 || unit >= static_cast<int>(slot_of_.size())) {
      return InvalidArgument(what_ + ": no unit " + std::to_string(unit));
    }
    if (slot_of_[unit] >= 0) return FailedPrecondition(what_ + ": unit " + std::to_string(unit) + " is already held");
    if (free_.empty()) {
      return FailedPrecondition(what_ + ": no free slot for unit " + std::to_string(unit) + " (" +
                                std::to_string(held()) + " held)");
    }
    const int s = free_.front();
    free_.pop_front();
    slot_of_[unit] = s;
    return s;
  }

  StatusOr<int> Release(int unit) {
    const int s = slot(unit);
    if (s < 0) return FailedPrecondition(what_ + ": unit " + std::to_string(unit) + " is not held");
    slot_of_[unit] = -1;
    free_.push_back(s);
    return s;
  }

  // Slot holding `unit`, or -1.
  int slot(int unit) const {
    return unit >= 0 && unit < static_cast<int>(slot_of_.size()) ? slot_of_[unit] : -1;
  }
  int held() const {
    int n = 0;
    for (int s : slot_of_) n += s >= 0;
    return n;
  }

 private:
  std::deque<int> free_;
  std::vector<int> slot_of_;
  std::string what_;
};

// Which pool holds a unit's full-size buffers: 0 = the embedding unit (its
// own size, held through a whole pass), 1 = the blocks (one shared size).
inline int PoolKind(int unit) { return unit == ParamLayout::kEmbeddingUnit ? 0 : 1; }

// The slots every pooling backend allocates, by PoolKind: the embedding gets
// one param and one grad slot; the blocks pool_param_slots param slots (at
// most one per block) and 2 grad slots (the unit in backward + the previous
// one, whose reduce-scatter may still be in flight).
struct UnitPoolPlan {
  std::array<int64_t, 2> slot_numel{};
  std::array<int, 2> param_slots{};
  std::array<int, 2> grad_slots{};

  // Empty bookkeeping for `num_units` units, named for error messages.
  UnitSlots ParamSlots(int kind, int num_units) const;
  UnitSlots GradSlots(int kind, int num_units) const;
};

// Checks what a pool needs (owned ranges that split every unit, i.e. a
// sharded run; pool_param_slots >= 1; blocks of one size) and returns the
// plan. Owned ranges outside their unit are left to the backend's own check.
StatusOr<UnitPoolPlan> PlanUnitPool(const ParamLayout& layout, const BackendOptions& options);

// The check at the top of every unit-pool call of a backend named `backend`
// ("CPU", "CUDA"): InvalidArgument for a unit outside the layout,
// FailedPrecondition when the backend was created without a pool.
Status CheckPoolUnit(const ParamLayout& layout, bool pooled, int unit, const char* backend);

}  // namespace hypertrain::model
