#pragma once
// UnitHooks: the seam where parameter sharding (HSDP) plugs into a step.
//
// The training loop calls BeginMicroBatch(m, last) before each micro-batch;
// then the backend's ForwardBackward() walks the units of ParamLayout and
// calls the hooks in exactly this order (E = embedding unit 0, B_l = block
// unit l+1):
//
//   BeforeForward(E)                       ; embedding lookup
//   for l = 0..L-1:  BeforeForward(B_l)  ; block forward ; AfterForward(B_l)
//                                          ; final norm + LM head + loss
//   AfterForward(E)  BeforeBackward(E)     ; LM head + final norm backward
//   AfterHeadBackward()
//   for l = L-1..0:  BeforeBackward(B_l) ; block backward ; AfterBackward(B_l)
//                                          ; embedding backward (dense: unless
//                                          ;   SplitsEmbeddingGrad())
//   AfterBackward(E)
//
// (A forward-only Loss() calls the Forward hooks only.) The LM head may run
// its forward and backward fused after BeforeBackward(E).
// With activation checkpointing the block's recomputation happens between
// BeforeBackward(B_l) and AfterBackward(B_l), using the same parameters.
//
// Contract per hook (HSDP meaning in brackets):
//  - BeforeForward(u)/BeforeBackward(u): on return, Backend::ComputeParams(u)
//    holds the full parameters of u in compute dtype [all-gather; may also
//    start prefetching the next unit in the order above].
//  - AfterForward(u): u's full parameters are not needed until
//    BeforeBackward(u) [free / release to a pool unless zero2-style].
//  - AfterBackward(u): Backend::FullGrads(u) holds this micro-batch's gradient
//    of u added to whatever was there [reduce-scatter into ShardGrads(u) and
//    zero FullGrads(u); single process: nothing, ShardGrads aliases it].
//  - AfterHeadBackward(): FullGrads(E) holds this micro-batch's LM-head and
//    final-norm gradient (plus the embedding lookup's of earlier micro-batches
//    unless SplitsEmbeddingGrad()); the lookup's gradient of this micro-batch
//    is not in it yet.
//  - SplitsEmbeddingGrad(): when true (asked once per ForwardBackward, after
//    AfterHeadBackward), the backend does NOT scatter-add the embedding
//    lookup's gradient into FullGrads(E) — FullGrads(E) may be released by
//    then — and the hooks take it in AfterBackward(E) from
//    Backend::EmbeddingGrad() / AccumulateEmbeddingGrad(), whose `dout` is
//    final from AfterBackward(B_0) on [pooled HSDP:
//    reduce-scatter the head part in AfterHeadBackward, all-gather the
//    lookup's inputs in the shard group and add into each rank's owned rows].
//  - FinishGradients(): called by the training loop once per optimizer step
//    after the LAST micro-batch; on return ShardGrads(u) of every unit holds
//    the final summed gradient [wait for reduce-scatters, all-reduce across
//    the replica group].
//  - GlobalSumSquares(x): x is this rank's sum of squares over its owned
//    gradient ranges; return the sum over every element of the model counted
//    once [sum across the shard group only: replicas hold equal shards].
//  - AfterOptimizerStep(u): called by the training loop right after
//    Backend::OptimizerStep(u) (units in order 0..U-1, only for steps that
//    are applied) [start gathering the next pass's first units, so that the
//    gather overlaps the optimizer of the remaining units].
//  - OverwritesShardGrads(): true when, in a step whose first micro-batch is
//    opened with BeginMicroBatch(0, ...), the hooks OVERWRITE every
//    ShardGrads(u) in full during that micro-batch (later ones add), so the
//    training loop may skip Backend::ZeroGrads [pooled HSDP: the first
//    reduce-scatter writes the shard directly].
//  - MeanAcrossDataParallel(x): mean of a per-rank scalar (the loss) over the
//    data-parallel ranks, for logging.
//  - AnyAcrossRanks(x): whether x is true on any rank of the job (the
//    training loop's stop agreement after each step; every rank calls it
//    the same number of times) [all-reduce max over the world].
//  - ReduceAmax(amax, n): FP8 (runtime/model/fp8.h), after a pass: replace
//    each of the n per-tensor amaxes by its max over all data-parallel ranks,
//    so every rank's scaling state stays identical [all-reduce max].
// Every hook may fail (e.g. DeadlineExceeded for a collective timeout); the
// backend stops the step and returns that Status.
#include <cstddef>

#include "core/status.h"

namespace hypertrain::model {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual Status BeginMicroBatch(int /*micro_batch*/, bool /*last*/) { return Status::Ok(); }
  virtual Status BeforeForward(int /*unit*/) { return Status::Ok(); }
  virtual Status AfterForward(int /*unit*/) { return Status::Ok(); }
  virtual Status BeforeBackward(int /*unit*/) { return Status::Ok(); }
  virtual Status AfterBackward(int /*unit*/) { return Status::Ok(); }
  virtual Status AfterHeadBackward() { return Status::Ok(); }
  virtual bool SplitsEmbeddingGrad() const { return false; }
  virtual Status FinishGradients() { return Status::Ok(); }
  virtual StatusOr<double> GlobalSumSquares(double local) { return local; }
  virtual Status AfterOptimizerStep(int /*unit*/) { return Status::Ok(); }
  virtual bool OverwritesShardGrads() const { return false; }
  virtual StatusOr<double> MeanAcrossDataParallel(double local) { return local; }
  virtual StatusOr<bool> AnyAcrossRanks(bool local) { return local; }
  virtual Status ReduceAmax(float* /*amax*/, size_t /*n*/) { return Status::Ok(); }
};

// Single process: every unit is always whole and local; all hooks are no-ops.
class NoOpUnitHooks final : public UnitHooks {};

}  // namespace hypertrain::model
