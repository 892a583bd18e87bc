#pragma once
// HSDP: hybrid-sharded data parallelism as model::UnitHooks.
//
// Every unit (runtime/model/layout.h) is one flat buffer padded to a multiple
// of shard_degree * kShardAlignment elements; shard-group rank s owns the
// contiguous range [s*S, (s+1)*S), S = padded_numel / shard_degree, of the
// parameters, gradients and AdamW state. Two memory modes, chosen by the
// backend (Backend::PoolsUnits, set up by ShardedBackendOptions):
//  - pooled (CPU and CUDA backends in sharded runs): each rank persistently
//    holds only its owned range of the compute params (ComputeShard), fp32
//    master, m, v and ShardGrads; full-size params and grads live in the
//    backend's slot pool between acquire and release;
//  - unpooled (a backend without a pool): full-size compute params and fp32
//    FullGrads per unit, gathered in place.
// Per micro-batch:
//   BeforeForward(u)   all-gather u's compute params in the shard group (from
//                      ComputeShard(u) into an acquired slot, or in place),
//                      waiting on the prefetch when one was issued; then
//                      prefetch the next unit in forward order on the group's
//                      comm thread (or stream) so it overlaps u's compute (one
//                      unit ahead: "limit_all_gathers").
//   AfterForward(u)    release u's gathered params (reshard strategies;
//                      zero2 strategies keep them for backward). The
//                      embedding unit stays gathered: its backward is next.
//   BeforeBackward(u)  pooled: acquire a zeroed gradient slot for u. All-gather
//                      again if released; prefetch the next unit in backward
//                      order ("backward_pre").
//   AfterHeadBackward  split embedding gradient (pooled backends that
//                      support it): reduce-scatter the embedding unit's slot
//                      as AfterBackward does for a block — it holds the LM
//                      head's and final norm's gradient — and all-gather the
//                      token ids; the backend skips the lookup's scatter-add.
//                      After block 0's backward (ahead of its reduce-
//                      scatter) the hooks all-gather the embedding output's
//                      gradient in the shard group; in AfterBackward(E) each
//                      rank
//                      adds the lookup's gradient of all shard ranks' tokens
//                      into the part of the table inside its owned range of
//                      ShardGrads(E) (Backend::AccumulateEmbeddingGrad: the
//                      reduce-scatter's averaging and reduce dtype, fixed
//                      order). So the 1 GB embedding reduce-scatter (1b)
//                      overlaps the blocks' backward instead of ending it.
//   AfterBackward(u)   pooled, EVERY micro-batch: reduce-scatter the slot
//                      (averaged; reduce dtype fp32 or bf16) — on the first
//                      micro-batch of a step (BeginMicroBatch(0, ...))
//                      straight into ShardGrads(u), which it overwrites, so
//                      that slot is just freed; later ones in place — then fold
//                      the previous unit's reduced shard into its ShardGrads
//                      (Backend::ReleaseGrads) and free that slot; the
//                      embedding's (not split) is folded when its slot is
//                      next needed or in FinishGradients. Gradient accumulation thus costs
//                      one reduce-scatter per micro-batch instead of a
//                      full-size fp32 gradient per unit (not FSDP's no_sync).
//                      Unpooled: on the last micro-batch of a step
//                      (BeginMicroBatch's `last`; every micro-batch when it is
//                      never called) reduce-scatter FullGrads(u), which
//                      accumulated all micro-batches, into ShardGrads(u).
//                      Then release u's params.
//   Replica all-reduce (avg) of each ShardGrads(u), once per optimizer step:
//                      on the last micro-batch (BeginMicroBatch(m, true)) as
//                      soon as ShardGrads(u) is final — pooled: after the fold
//                      of u's reduce-scatter; no_shard: after u's backward —
//                      so it overlaps the rest of the backward; otherwise in
//                      FinishGradients.
//   FinishGradients()  wait for the reduce-scatters, start the remaining
//                      replica all-reduces, wait for all of them.
//   GlobalSumSquares   sum over the shard group only (replicas hold equal
//                      shards), so every element is counted once.
//   ReduceAmax         FP8 backends, after each pass: max of the per-tensor
//                      amaxes over the world, so every rank's delayed scales
//                      (and checkpointed histories) are the same.
//   AfterOptimizerStep(u) u = embedding, then block 0: start the next pass's
//                      gather of u (into its slot), overlapping the optimizer
//                      of the later units; the pass start checks
//                      Backend::ParamsVersion(u) and gathers again if stale.
// Averaging over shard and replica groups makes the gradient the mean over
// all world_size ranks' micro-batches: with each rank reading 1/world_size of
// the global batch (dp_rank = world rank) the step equals a single-process
// step on the whole global batch.
//
// Device backends (NCCL groups, Backend::ComputeStream() set): the shard and
// replica groups get the compute stream (SetComputeStream), so each collective
// is ordered after all compute queued before it was issued (it may read what
// compute wrote and overwrite what compute read); compute waits for a gather
// with Work::WaitOnStream, never the host. The host therefore runs ahead and
// queues a whole micro-batch; it blocks only in FinishGradients (the last
// reduce-scatters and the replica all-reduces) and on scalar all-reduces.
// Works the stream waited on are kept and host-waited ("reaped") at the next
// pass or FinishGradients, after the backend synchronised its stream, so a
// failed collective still returns its error; the watchdog tracks every
// collective from issue to completion either way.
//
// "Release" on the CPU backend poisons with NaN: a pooled slot wholly (the
// backend does it), an unpooled unit's non-owned part (poison_released), so
// any use of a parameter that was not gathered shows up at once in the loss.
#include <chrono>
#include <memory>
#include <vector>

#include "runtime/parallel/collectives.h"
#include "runtime/parallel/dist_context.h"
#include "runtime/parallel/fp8_wire.h"
#include "runtime/model/backend.h"

namespace hypertrain::parallel {

// Element alignment of each shard (keeps shards vector-aligned on GPU).
inline constexpr int64_t kShardAlignment = 64;

struct HsdpOptions {
  DType reduce_dtype = DType::kF32;
  bool prefetch = true;
  bool poison_released = true;  // host (CPU backend) buffers only
  // Pooled backends that support it (Backend::SplitsEmbeddingGrad): split the
  // embedding unit's gradient — reduce-scatter the LM-head/final-norm part
  // right after the head's backward, and all-gather the lookup's tokens and
  // output gradient instead of reduce-scattering its scatter-add. Only where
  // ShardedBackendOptions planned the gather (contract::SplitsEmbeddingGrad:
  // shard degree x tokens per rank <= vocabulary rows); otherwise the unit is
  // reduce-scattered whole, and no buffer grows with the shard degree.
  bool split_embedding_grad = true;
  // Start each unit's replica all-reduce as soon as its gradient shard is final,
  // overlapping the rest of the backward (default); false: all of them after
  // the backward, in FinishGradients (exposed, but not competing with the
  // backward's GEMMs for SMs and memory bandwidth). HT_REPLICA_REDUCE=overlap|after.
  bool replica_reduce_during_backward = true;
  // model.fp8: block units are all-gathered with their projection weights as
  // e4m3 bytes plus one agreed scale per tensor (fp8_wire.h), about half the
  // bytes of a bf16 gather; the forward and backward then see FP8 weights.
  // Host (Gloo) groups with fp32 pooled params (the CPU backend); NCCL groups
  // still gather in the compute dtype (stated at creation).
  bool fp8_all_gather = false;
};

struct HsdpStats {
  int64_t all_gathers = 0;
  int64_t prefetch_hits = 0;  // gathers that were already issued when needed
  int64_t reduce_scatters = 0;
  int64_t all_reduces = 0;
  int64_t early_all_reduces = 0;  // replica all-reduces issued during the backward
  // Gathers for the next pass issued in AfterOptimizerStep (embedding, block
  // 0), and those found stale at the pass start (params written since).
  int64_t early_gathers = 0;
  int64_t stale_gathers = 0;
  // First micro-batch of a step: reduce-scattered straight into ShardGrads
  // (no add, the slot is just freed).
  int64_t direct_reduce_scatters = 0;
  // Split embedding gradient: micro-batches whose lookup gradient was
  // all-gathered (tokens + output gradient) and added into the owned rows,
  // and the bytes those gathers delivered to this rank (all ranks' parts).
  int64_t embedding_grad_gathers = 0;
  int64_t embedding_grad_gather_bytes = 0;
  // Host time blocked in Work::Wait (and host all-reduces of scalars). With a
  // device compute stream the hooks only block the host at FinishGradients
  // (the last reduce-scatters, the replica all-reduces) and on scalars; time
  // the compute stream stalls on a gather is not host time and shows up in
  // the step time instead.
  double exposed_comm_s = 0;
  int64_t host_waits = 0;    // Work::Wait calls
  int64_t stream_waits = 0;  // Work::WaitOnStream calls (compute waits on comm, host does not)
  int64_t steps = 0;         // optimizer steps begun
  // FP8 all-gathers: count, bytes this rank received, and what the same
  // gathers would have received in the compute dtype.
  int64_t fp8_gathers = 0;
  int64_t fp8_gather_bytes = 0;
  int64_t fp8_gather_bytes_unquantized = 0;
};

// Backend options for a sharded run: layout padding and this rank's owned
// ranges. `base.layout.tensor_alignment` is kept.
StatusOr<model::BackendOptions> ShardedBackendOptions(const model::ModelConfig& config,
                                                      model::BackendOptions base,
                                                      const GroupLayout& groups);

class HsdpHooks final : public model::UnitHooks {
 public:
  // The backend must have been created with ShardedBackendOptions(...) for
  // ctx.layout(); its buffers must be host memory for Gloo groups and device
  // memory for NCCL groups.
  static StatusOr<std::unique_ptr<HsdpHooks>> Create(DistContext& ctx, model::Backend& backend,
                                                     HsdpOptions options = {});
  ~HsdpHooks() override;

  Status BeginMicroBatch(int micro_batch, bool last) override;
  Status BeforeForward(int unit) override;
  Status AfterForward(int unit) override;
  Status BeforeBackward(int unit) override;
  Status AfterBackward(int unit) override;
  // Split embedding gradient: reduce-scatter the embedding unit's slot (the
  // LM head and final norm) now, so it overlaps the blocks' backward.
  Status AfterHeadBackward() override;
  bool SplitsEmbeddingGrad() const override { return split_emb_; }
  Status FinishGradients() override;
  StatusOr<double> GlobalSumSquares(double local) override;
  StatusOr<double> MeanAcrossDataParallel(double local) override;
  StatusOr<bool> AnyAcrossRanks(bool local) override;
  // FP8: max of each amax over all world ranks (one host all-reduce per pass).
  Status ReduceAmax(float* amax, size_t n) override;
  // Starts the next pass's gather of the embedding unit (after its optimizer
  // step) and of block 0 (after its own), so they overlap the optimizer of
  // the remaining units instead of opening the next pass exposed. The pass
  // start uses them only if Backend::ParamsVersion of the unit is unchanged
  // (no WriteState since); otherwise it waits for them and gathers again.
  Status AfterOptimizerStep(int unit) override;
  // Pooled: the first micro-batch's reduce-scatters write every ShardGrads(u)
  // whole, and no gradient slot is held between steps.
  bool OverwritesShardGrads() const override { return pool_ && sharded(); }

  // Host-waits the gathers issued by AfterOptimizerStep. Call it before
  // writing parameters outside a step (Backend::WriteState between steps), so
  // that no collective still reads the compute shard being overwritten; the
  // next pass then sees the version change and gathers again.
  Status WaitForPrefetches();

  const HsdpStats& stats() const { return stats_; }

 private:
  HsdpHooks(DistContext& ctx, model::Backend& backend, HsdpOptions options, DType param_dtype);
  Status Gather(int unit);          // ensure gathered (waits)
  Status Prefetch(int unit);        // issue without waiting
  // Pool: folds u's reduce-scattered slot into ShardGrads(u), frees the slot.
  Status FlushGrads(int unit);
  // Pool: issues the reduce-scatter of u's gradient slot (straight into
  // ShardGrads(u) on the first micro-batch) and marks it pending.
  Status ReduceScatterSlot(int unit);
  // Split embedding gradient, AfterBackward(E): gather the lookup's inputs,
  // add into the owned rows of ShardGrads(E).
  Status AccumulateEmbeddingGrad();
  // Issues the all-gather of the embedding output's gradient (once per pass;
  // after block 0's backward, ahead of its reduce-scatter).
  Status StartEmbeddingGradGather();
  // Issues the replica all-reduce of ShardGrads(u) once per step.
  Status StartReplicaReduce(int unit);
  // The same from inside the backward, unless the options defer it to
  // FinishGradients.
  Status StartReplicaReduceDuringBackward(int unit) {
    return options_.replica_reduce_during_backward ? StartReplicaReduce(unit) : Status::Ok();
  }
  Status Release(int unit);
  Status CompleteGather(int unit);  // host-waits an issued gather, if any
  // FP8 gather of `unit` (pool slot acquired): agree the scales, encode,
  // issue the byte all-gather.
  Status StartFp8Gather(int unit);
  // After its all-gather completed: decode into ComputeParams(unit).
  Status FinishFp8Gather(int unit);
  Status WaitReduceScatter(int unit);
  Status WaitTimed(Work& w);
  // Makes compute wait for `w` (device stream, or the host when there is
  // none) and keeps it for Reap(); resets `w`.
  Status WaitForCompute(std::unique_ptr<Work>& w);
  // Host-waits the collectives compute already waited on (complete once the
  // compute stream was synchronised), so errors and hangs still surface.
  Status Reap();
  StatusOr<double> SumScalar(ProcessGroup& g, double x, ReduceOp op);
  bool sharded() const { return shard_degree_ > 1; }

  DistContext& ctx_;
  model::Backend& backend_;
  HsdpOptions options_;
  DType param_dtype_;
  int shard_degree_;
  int num_units_;
  bool reshard_after_forward_;
  std::vector<bool> gathered_;
  std::vector<std::unique_ptr<Work>> gather_work_;   // in-flight all-gather per unit
  std::vector<std::unique_ptr<Work>> rs_work_;       // in-flight reduce-scatter per unit
  std::vector<std::unique_ptr<Work>> reap_;          // waited on by the stream, not the host
  bool last_micro_batch_ = true;
  int64_t step_ = 0;  // optimizer steps begun by this process (watchdog reports)
  bool step_open_ = false;
  bool device_ = false;  // backend buffers are device memory
  void* stream_ = nullptr;  // the backend's compute stream (device groups only)
  bool pool_ = false;       // backend pools full-size params/grads (PoolsUnits)
  std::vector<bool> grads_pending_;  // pool: slot reduce-scattered, not yet folded in
  std::vector<bool> rs_final_;       // pool: that reduce-scatter was the step's last
  std::vector<bool> rs_direct_;      // pool: it wrote ShardGrads directly (first micro-batch)
  // ParamsVersion at the time of an AfterOptimizerStep gather; -1 = none.
  std::vector<int64_t> early_version_;
  bool first_micro_batch_ = false;  // BeginMicroBatch(0, ...) opened this pass
  std::vector<std::unique_ptr<Work>> ar_work_;  // replica all-reduce per unit
  bool final_pass_ = false;  // BeginMicroBatch said this is the step's last micro-batch
  bool split_emb_ = false;   // split embedding gradient (pool + backend support)
  DType emb_dout_dtype_ = DType::kF32;     // wire type of the embedding output gradient
  std::unique_ptr<Work> emb_tokens_work_;  // all-gather of this pass's token ids
  std::unique_ptr<Work> emb_dout_work_;    // all-gather of the embedding output's gradient
  bool fp8_gather_ = false;
  std::vector<Fp8Wire> wires_;                       // per unit (empty: not FP8)
  std::vector<std::vector<uint8_t>> wire_send_, wire_recv_;
  std::vector<bool> fp8_pending_;                    // gathered bytes not decoded yet
  HsdpStats stats_;
};

}  // namespace hypertrain::parallel
