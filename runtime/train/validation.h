#pragma once
// Held-out evaluation (model.data.val_dir, trainer.val_check_interval,
// trainer.limit_val_batches, model.val_batch_size): forward-only passes over
// the SAME sequences every time (a fresh loader from position 0 of the
// validation set's own fixed order), each rank its 1/world slice, the mean
// loss averaged over all data-parallel ranks. limit_val_batches batches of
// val_batch_size sequences are evaluated in micro-batches of the training
// size (the backend's planned shape), the count rounded up to a whole
// micro-batch.
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "runtime/config/config.h"
#include "runtime/data/loader.h"
#include "runtime/model/backend.h"
#include "runtime/model/unit_hooks.h"
#include "runtime/train/metrics.h"

namespace hypertrain::train {

class Validator {
 public:
  // `train` is the training loader's options (shape, rank, tokenizer check).
  Validator(const config::TrainConfig& c, const data::LoaderOptions& train, data::HostAllocator* allocator,
            data::BatchStager* stager);
  // Micro-batches per rank per evaluation.
  int64_t passes() const { return passes_; }
  // Opens the validation set once (a missing, empty or mismatched val_dir is
  // an error naming model.data.val_dir): at start, not at the first evaluation.
  Status Check() const;
  StatusOr<ValMetrics> Run(int64_t step, model::Backend& backend, model::UnitHooks& hooks);

 private:
  data::LoaderOptions options_;
  data::HostAllocator* allocator_;
  data::BatchStager* stager_;
  int64_t passes_ = 1;
};

}  // namespace hypertrain::train
