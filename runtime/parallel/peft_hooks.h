#pragma once
// Data parallelism for PEFT (runtime/model/peft.h) as model::UnitHooks.
//
// Every rank holds the whole frozen base and the whole adapters (a LoRA
// adapter is ~0.5% of the model: 42M parameters for 8B at rank 16 on all
// seven projections), reads its own slice of every global batch, and, once
// per optimizer step, the adapters' gradients are averaged over all ranks
// (one all-reduce per unit on the world group, issued as each unit's backward
// of the last micro-batch ends, waited in FinishGradients). Every rank then
// applies the identical AdamW update, so the replicas never drift; the
// gradient norm is local (identical everywhere). The step equals a single
// process's on the whole global batch. On a device backend (CUDA + NCCL) the
// world group orders each all-reduce after the compute stream's work so far
// (ProcessGroup::SetComputeStream), as HSDP does for its groups.
//
// Not done (docs/PEFT.md): sharding the frozen base over the shard group
// (all-gathered per unit, like HSDP's parameters); today each rank keeps it
// whole.
#include <memory>
#include <vector>

#include "runtime/model/backend.h"
#include "runtime/parallel/dist_context.h"

namespace hypertrain::parallel {

class PeftDataParallelHooks final : public model::UnitHooks {
 public:
  // The backend must be in PEFT mode with whole (unsharded) adapter units.
  static StatusOr<std::unique_ptr<PeftDataParallelHooks>> Create(DistContext& ctx,
                                                                 model::Backend& backend);
  ~PeftDataParallelHooks() override;
  Status BeginMicroBatch(int micro_batch, bool last) override;
  Status AfterBackward(int unit) override;
  Status FinishGradients() override;
  StatusOr<double> MeanAcrossDataParallel(double local) override;

 private:
  PeftDataParallelHooks(DistContext& ctx, model::Backend& backend);
  DistContext& ctx_;
  model::Backend& backend_;
  bool last_ = true;
  std::vector<std::unique_ptr<Work>> work_;  // per unit, this step's all-reduce
};

}  // namespace hypertrain::parallel
