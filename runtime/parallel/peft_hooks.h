#pragma once
// Data parallelism for PEFT (runtime/model/peft.h) as model::UnitHooks.
//
// Adapters: every rank holds the whole adapters (a LoRA adapter is ~0.5% of
// the model: 42M parameters for 8B at rank 16 on all seven projections),
// reads its own slice of every global batch, and, once per optimizer step,
// the adapters' gradients are averaged over ALL ranks (one all-reduce per
// unit on the world group, issued as each unit's backward of the last
// micro-batch ends, waited in FinishGradients). Every rank then applies the
// identical AdamW update, so the replicas never drift; the gradient norm is
// local (identical everywhere). The step equals a single process's on the
// whole global batch.
//
// Frozen base: whole on every rank when the backend's base_shard.size is 1
// (no_shard, or one rank per shard group). With a sharding strategy whose
// shard group has S > 1 ranks (hybrid_shard, full_shard, ...) the backend
// keeps only this rank's 1/S slice of every base unit (Backend "Sharded
// frozen base") and these hooks all-gather a unit's slices over the shard
// group into a base slot before the unit runs and release the slot after:
//   BeforeForward(u) / BeforeBackward(u): AcquireBase + all-gather (raw bytes
//     of the backend's storage form), waited before the unit computes (on a
//     device: the compute stream waits; no host sync), then the next unit in
//     hook order is prefetched (forward: E, B0 .. B(L-1); backward: E,
//     B(L-1) .. B0), so one gather overlaps one unit's compute.
//   AfterForward(u) / AfterBackward(u): ReleaseBase(u) for a block. The
//     embedding unit (embedding, final norm, LM head: the largest unit) has a
//     slot of its own and never changes, so it stays gathered from its first
//     gather on: AfterForward(E) is followed at once by BeforeBackward(E),
//     and the next pass starts with it again. It is gathered anew only when
//     someone else released it (the merged export's ReleaseBase).
// Activation checkpointing recomputes between BeforeBackward and
// AfterBackward, so it reads the gathered unit too. The base has no
// gradients; nothing else crosses the shard group. The hooks install the
// gather as Backend::SetBaseGatherer (cleared when they go) so the merged
// export can read gathered units (runtime/ckpt/peft_hooks.h).
//
// On a device backend (CUDA + NCCL) the world and shard groups order each
// collective after the compute stream's work so far
// (ProcessGroup::SetComputeStream), as HSDP does for its groups.
#include <memory>
#include <vector>

#include "runtime/model/backend.h"
#include "runtime/parallel/dist_context.h"

namespace hypertrain::parallel {

class PeftDataParallelHooks final : public model::UnitHooks {
 public:
  // The backend must be in PEFT mode with whole (unsharded) adapter units;
  // a sharded base must match the context's shard group (size and rank).
  static StatusOr<std::unique_ptr<PeftDataParallelHooks>> Create(DistContext& ctx,
                                                                 model::Backend& backend);
  ~PeftDataParallelHooks() override;
  Status BeginMicroBatch(int micro_batch, bool last) override;
  Status BeforeForward(int unit) override;
  Status AfterForward(int unit) override;
  Status BeforeBackward(int unit) override;
  Status AfterBackward(int unit) override;
  Status FinishGradients() override;
  StatusOr<double> MeanAcrossDataParallel(double local) override;
  // All-gathers of base unit u started so far (tests; 0 when unsharded).
  int64_t BaseGathers(int unit) const {
    return unit >= 0 && unit < static_cast<int>(gathers_.size()) ? gathers_[unit] : 0;
  }

 private:
  PeftDataParallelHooks(DistContext& ctx, model::Backend& backend);
  // Sharded base: makes unit u's slot whole (its prefetch, or a gather now),
  // then prefetches `next` (-1: none).
  Status Gather(int unit, int next);
  Status StartGather(int unit);
  Status Release(int unit);
  // The embedding unit is gathered and still acquired (see the top).
  bool EmbeddingHeld() const;
  DistContext& ctx_;
  model::Backend& backend_;
  bool shards_base_ = false;
  bool last_ = true;
  std::vector<std::unique_ptr<Work>> work_;    // per unit, this step's all-reduce
  std::vector<std::unique_ptr<Work>> gather_;  // per unit, a base gather in flight
  bool embedding_gathered_ = false;            // the last gather of E completed
  std::vector<int64_t> gathers_;               // per unit, BaseGathers
};

}  // namespace hypertrain::parallel
