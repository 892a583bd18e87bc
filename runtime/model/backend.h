#pragma once
// Backend: one device's implementation of the Llama-3 training step over the
// flat unit layout (runtime/model/layout.h). The CPU reference backend lives in
// runtime/backends/cpu/, the CUDA backend in runtime/backends/cuda/; the training loop
// (runtime/train/) and the sharder (runtime/parallel/) only see this interface.
//
// Memory per unit u (all sized/offset as ParamLayout::unit(u)):
//   ComputeParams(u)  full, compute dtype (bf16/fp16/fp32), padded_numel elems.
//   FullGrads(u)      full, fp32, padded_numel elems; backward ADDS into it.
//   Owned(u)          the range [begin, end) of u this rank updates (whole
//                     unit unless BackendOptions::owned says otherwise).
//   MasterParams(u), ShardGrads(u), AdamM(u), AdamV(u)
//                     fp32, Owned(u).size() elems, element i <-> unit offset
//                     Owned(u).begin + i. Single process: ShardGrads(u)
//                     aliases FullGrads(u) + begin (and on CPU fp32,
//                     MasterParams(u) aliases ComputeParams(u) + begin).
// Pointers are device pointers of the backend (host pointers for CPU) and stay
// valid for the backend's lifetime (ComputeParams/FullGrads of a pooling
// backend: see "Unit pool" below). Moving data to/from host goes through
// ReadState/WriteState (what checkpointing uses).
//
// One optimizer step, as runtime/train/ drives it:
//   ZeroGrads()
//   for m in micro-batches: ForwardBackward(batch_m, grad_multiplier, hooks)
//   hooks.FinishGradients()
//   sumsq = hooks.GlobalSumSquares(TotalGradSumSquares())
//   for u: OptimizerStep(u, adamw with grad_scale = clip / loss_scale)
//          hooks.AfterOptimizerStep(u)        (unit 0 first)
// OptimizerStep also refreshes the owned range of ComputeParams(u) from the
// new master weights (so an in-place all-gather can build the full unit).
//
// Unit pool (BackendOptions::unit_pool with partial owned ranges; PoolsUnits()
// says whether the backend honours it). Persistently, per unit, the backend
// then holds only Owned(u)-sized buffers: ComputeShard(u) (compute dtype,
// the owned range of the compute params, refreshed by OptimizerStep and
// WriteState(kMasterParams)), MasterParams, ShardGrads, AdamM, AdamV.
// Full-size ComputeParams(u) / FullGrads(u) exist only between
// AcquireParams(u)/AcquireGrads(u) and the matching release, in a pool of
// slots: one each for the embedding unit (held through a whole pass) and
// `pool_param_slots` / 2 for the blocks (all blocks share one size). Outside
// that window ComputeParams(u).data / FullGrads(u).data are nullptr. Slot
// reuse is ordered on the compute stream: a release only returns the slot to
// the free list; everything that touches a slot later is queued on the
// compute stream or (collectives) waits for it (SetComputeStream).
// ReleaseGrads(u) first ADDS the owned range of FullGrads(u) into
// ShardGrads(u) (where an in-place reduce-scatter left this rank's reduced
// shard), on the compute stream, so gradient accumulation needs no full-size
// gradient between micro-batches.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contract/precision.h"
#include "core/status.h"
#include "runtime/numerics/adamw_params.h"
#include "runtime/model/fp8.h"
#include "runtime/model/layout.h"
#include "runtime/model/peft.h"
#include "runtime/model/unit_hooks.h"

namespace hypertrain::trace {
class Recorder;
}  // namespace hypertrain::trace

namespace hypertrain::model {

// The modes and their names are the contract's (contract/precision.h), which
// the estimate shares.
using Precision = contract::Precision;
using ActivationCheckpointing = contract::Checkpointing;
using contract::CheckpointingName;
using contract::PrecisionName;
enum class DType { kF32, kBF16, kF16 };

// The contract's parsers with the config key in the error.
StatusOr<Precision> ParsePrecision(const std::string& s);
StatusOr<ActivationCheckpointing> ParseCheckpointing(const std::string& s);
int DTypeSize(DType d);

struct UnitBuffer {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t numel = 0;
};

// One micro-batch of token ids in HOST memory, row-major [batch, seq].
// targets[i] == ignore_index contributes neither loss nor gradient.
// `staged` is opaque to everyone but the backend whose data stager filled it
// (e.g. a CUDA backend's device copy + event, see runtime/data/loader.h).
// Packed samples (SFT): `positions` [batch, seq] restart at 0 at every
// sample's first token; RoPE uses them and attention stays inside each sample
// (cpu/ops.h AttentionForward). nullptr = one sequence per row.
// `rng_offset` numbers the pass for dropout masks (runtime/model/peft.h); the
// trainer passes step * grad_accumulation_steps + micro_batch.
struct TokenBatch {
  const int32_t* inputs = nullptr;
  const int32_t* targets = nullptr;
  int64_t batch = 0;
  int64_t seq = 0;
  void* staged = nullptr;
  const int32_t* positions = nullptr;
  uint64_t rng_offset = 0;
};

struct BackendOptions {
  Precision precision = Precision::kBF16;
  ActivationCheckpointing checkpointing = ActivationCheckpointing::kNone;
  int64_t micro_batch_size = 1;
  int64_t seq_len = 0;  // 0 = config.max_context_width; must be <= it
  uint64_t seed = 1234;  // parameter init (runtime/model/init.h)
  int32_t ignore_index = -100;
  LayoutOptions layout;
  // Owned range per unit, indexed by unit; empty = every unit whole.
  std::vector<Range> owned;
  // Pool full-size params/grads (see "Unit pool" above); only with owned
  // ranges that are not whole units. Block param slots: 2 = current unit +
  // one prefetched; a strategy that keeps params from forward to backward
  // needs num_hidden_layers.
  bool unit_pool = false;
  int pool_param_slots = 2;
  // Split embedding gradient (see EmbeddingGrad below; only with unit_pool):
  // the shard-group size R whose micro-batches AccumulateEmbeddingGrad takes;
  // the backend plans gather buffers for R x micro-batch tokens. 0 = off.
  int embedding_grad_ranks = 0;
  // Each ZeroGrads is followed by at most one ForwardBackward before the
  // gradients are consumed (no gradient accumulation). A backend may then
  // keep a block's gradients in activation memory that the backward has
  // already freed (CUDA: about (layers - 1) block gradients less peak); a
  // second pass without ZeroGrads, or reading gradients after a forward-only
  // Loss(), is then an error instead of a silent overwrite.
  bool single_pass_grads = false;
  // Bitwise-reproducible passes: the same inputs give the same gradients run
  // after run. false lets a backend use faster reductions whose order varies
  // (CUDA: cuDNN's attention backward with atomic dQ, +2% on 125m). The CPU
  // backend is always reproducible.
  bool deterministic = true;
  // FP8 GEMMs (runtime/model/fp8.h); a backend without an FP8 path computes
  // as it does for the precision and says so (CPU: fp32).
  Fp8Options fp8;
  // LoRA / QLoRA (runtime/model/peft.h): see "PEFT" in Backend below.
  PeftOptions peft;
  // PEFT under a sharding strategy: this rank's position in its shard group
  // (`size` ranks) for the frozen base; size 1 = every rank keeps the whole
  // base. See "Sharded frozen base" in Backend below.
  struct BaseShard {
    int rank = 0;
    int size = 1;
  } base_shard;
};

// Buffers of the split embedding gradient (Backend::EmbeddingGrad). A sharder
// all-gathers `tokens` into `all_tokens` and `dout` into `all_dout` (rank r's
// rows at r * tokens_per_rank) and then calls AccumulateEmbeddingGrad.
struct EmbeddingGradIo {
  const int32_t* tokens = nullptr;  // this pass's N input token ids (from the pass start)
  const void* dout = nullptr;       // [N, C] gradient of the embedding output, `dtype`
                                    // (after the blocks' backward, until the next pass)
  int32_t* all_tokens = nullptr;    // [R * N]
  void* all_dout = nullptr;         // [R * N, C], `dtype`
  DType dtype = DType::kF32;        // the compute dtype
  int64_t tokens_per_rank = 0;      // N
  int64_t cols = 0;                 // C (hidden size)
  int ranks = 0;                    // R
};

enum class StateKind { kMasterParams, kShardGrads, kAdamM, kAdamV };

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda"
  virtual const ParamLayout& layout() const = 0;
  virtual const BackendOptions& options() const = 0;
  virtual Range Owned(int unit) const = 0;

  virtual UnitBuffer ComputeParams(int unit) = 0;
  virtual UnitBuffer FullGrads(int unit) = 0;
  virtual UnitBuffer MasterParams(int unit) = 0;
  virtual UnitBuffer ShardGrads(int unit) = 0;
  virtual UnitBuffer AdamM(int unit) = 0;
  virtual UnitBuffer AdamV(int unit) = 0;

  // Copies Owned(unit).size() fp32 values between host memory and the state.
  // WriteState(kMasterParams) also refreshes the owned range of ComputeParams.
  virtual Status ReadState(int unit, StateKind kind, float* host) = 0;
  virtual Status WriteState(int unit, StateKind kind, const float* host) = 0;

  // Zeroes FullGrads and ShardGrads of every unit.
  virtual Status ZeroGrads() = 0;
  // Forward + backward of one micro-batch, calling `hooks` in the order of
  // unit_hooks.h. Gradients accumulate d(mean_loss * grad_multiplier)/dparam,
  // where mean_loss is the mean cross-entropy over this micro-batch's
  // non-ignored targets; the trainer passes loss_scale / num_micro_batches.
  // Returns mean_loss (unscaled).
  virtual StatusOr<double> ForwardBackward(const TokenBatch& batch, float grad_multiplier,
                                           UnitHooks& hooks) = 0;
  // Forward only (evaluation: no adapter dropout); returns the mean loss.
  virtual StatusOr<double> Loss(const TokenBatch& batch, UnitHooks& hooks) = 0;
  // Sum of squares of ShardGrads(unit) in fp64 (inf/nan when any grad is).
  virtual StatusOr<double> GradSumSquares(int unit) = 0;
  // Sum of GradSumSquares over every unit. Backends override it to wait for
  // the device once per step instead of once per unit.
  virtual StatusOr<double> TotalGradSumSquares();
  // AdamW on Owned(unit): weight decay only on decay ranges of the unit
  // (p.weight_decay is applied there, 0 elsewhere); p.grad_scale multiplies
  // every gradient. Then refreshes the owned range of ComputeParams(unit).
  virtual Status OptimizerStep(int unit, const kernels::AdamWParams& p) = 0;
  // Waits for all queued device work (CPU: nothing).
  virtual Status Synchronize() = 0;
  // The device stream (a cudaStream_t for CUDA) on which this backend queues
  // all compute, in issue order; nullptr for host backends, which finish all
  // work before returning. Collectives order themselves against it
  // (ProcessGroup::SetComputeStream / Work::WaitOnStream in runtime/parallel/).
  virtual void* ComputeStream() { return nullptr; }

  // Unit pool (see the top of this file). Defaults: no pool.
  virtual bool PoolsUnits() const { return false; }
  virtual UnitBuffer ComputeShard(int /*unit*/) { return {}; }
  // ComputeParams(u) becomes a full-size slot; its contents are undefined
  // until written (the all-gather). FailedPrecondition when no slot is free.
  virtual Status AcquireParams(int /*unit*/) { return FailedPrecondition("this backend has no unit pool"); }
  virtual Status ReleaseParams(int /*unit*/) { return FailedPrecondition("this backend has no unit pool"); }
  // FullGrads(u) becomes a full-size slot, zeroed (on the compute stream).
  virtual Status AcquireGrads(int /*unit*/) { return FailedPrecondition("this backend has no unit pool"); }
  // ShardGrads(u) += FullGrads(u)[Owned(u)], then the slot is free.
  virtual Status ReleaseGrads(int /*unit*/) { return FailedPrecondition("this backend has no unit pool"); }
  // Frees u's gradient slot without touching ShardGrads(u) (a reduce-scatter
  // already wrote this rank's shard straight into it: the first micro-batch
  // of a step needs no add and no zeroed ShardGrads). Later device work on
  // the slot is queued after whatever was queued before, as for ReleaseGrads.
  virtual Status DiscardGrads(int /*unit*/) {
    return FailedPrecondition("this backend has no unit pool");
  }
  // Split embedding gradient (pooled HSDP; BackendOptions::embedding_grad_ranks
  // = R > 1). When the hooks' SplitsEmbeddingGrad() is true, ForwardBackward
  // skips the embedding lookup's scatter-add into FullGrads(E); instead, in
  // AfterBackward(E), the hooks gather every shard rank's tokens and output
  // gradient into EmbeddingGrad()'s buffers and call
  // AccumulateEmbeddingGrad(bf16_reduce), which, on the compute stream, adds
  // into ShardGrads(E) the part of the embed_tokens gradient that falls in
  // Owned(E) (rows may be cut at its ends), averaged over the R ranks exactly
  // like the reduce-scatter it replaces: per element, each rank's rows with
  // that token summed in fp32 in token order, those R partial sums added in
  // rank order (bf16_reduce: each partial and each running sum rounded to
  // bf16), times 1/R. Deterministic. (cpu::EmbeddingBackwardRange is the
  // reference.)
  virtual bool SplitsEmbeddingGrad() const { return false; }
  virtual EmbeddingGradIo EmbeddingGrad() { return {}; }
  virtual Status AccumulateEmbeddingGrad(bool /*bf16_reduce*/) {
    return FailedPrecondition("this backend does not split the embedding gradient");
  }
  // A counter per unit that changes whenever the owned compute parameters of
  // `unit` change (OptimizerStep(unit), WriteState(unit, kMasterParams)); -1
  // when the backend does not track it. HSDP uses it to tell whether a gather
  // prefetched across an optimizer step is still current.
  virtual int64_t ParamsVersion(int /*unit*/) const { return -1; }
  // FP8 amax histories and scales (runtime/model/fp8.h) when the backend
  // runs FP8 GEMMs, else nullptr. Checkpoints save and restore it; it is the
  // same on every data-parallel rank (UnitHooks::ReduceAmax).
  virtual Fp8ScalingState* Fp8Scaling() { return nullptr; }
  // PEFT (options().peft enabled): layout() and every state accessor above
  // (params, grads, master, m, v, ReadState/WriteState, OptimizerStep)
  // describe the ADAPTERS (ParamLayout::BuildLora). The frozen base model has
  // the layout BaseLayout() (nullptr without PEFT) and is read and written in
  // fp32 by element ranges of its units; the backend stores it in its own
  // form (compute dtype; NF4 projections for QLoRA) and initialises it from
  // options().seed like a model (runtime/model/init.h) until written.
  virtual const ParamLayout* BaseLayout() const { return nullptr; }
  virtual Status WriteBase(int /*unit*/, Range /*range*/, const float* /*host*/) {
    return FailedPrecondition("this backend has no frozen base (model.peft is off)");
  }
  // The base as the forward sees it (QLoRA: dequantised).
  virtual Status ReadBase(int /*unit*/, Range /*range*/, float* /*host*/) {
    return FailedPrecondition("this backend has no frozen base (model.peft is off)");
  }
  // Sharded frozen base (PEFT with options().base_shard.size = S > 1). Each
  // base unit u has a storage form of the backend's own, a byte string (CPU:
  // the fp32 values; CUDA: the compute-dtype values, or for a QLoRA block its
  // two norms and the projections' NF4 codes and block scales), zero-padded to
  // S * BaseShardBytes(u). Persistently this rank keeps only its slice,
  // BaseShard(u) = bytes [rank * BaseShardBytes(u), (rank + 1) * ...), equal
  // in size on every rank. Between AcquireBase(u) and ReleaseBase(u),
  // BaseSlot(u) is a full-size slot (undefined until the caller all-gathers
  // every rank's slice into it: rank r's at r * BaseShardBytes(u)) and the
  // forward, the backward and ReadBase of u read it; outside that window a
  // pass reaching u is an error (FailedPrecondition) and BaseSlot(u) is
  // nullptr. Slots: one for the embedding unit, two for the blocks (the
  // current one and one prefetched). Slot reuse is ordered on the compute
  // stream as for the unit pool above. WriteBase keeps only what falls in
  // this rank's slice (QLoRA: block units are written whole, quantised, then
  // sliced); every rank initialises the same base from the seed.
  // WriteBase while a unit is acquired does not update its slot. Unsharded
  // (S = 1) there are no slices or slots: BaseShardBytes is 0, BaseShard and
  // BaseSlot nullptr, Acquire/Release no-ops; ReadBase/WriteBase as above.
  virtual int64_t BaseShardBytes(int /*unit*/) const { return 0; }
  virtual void* BaseShard(int /*unit*/) { return nullptr; }
  virtual void* BaseSlot(int /*unit*/) { return nullptr; }
  virtual Status AcquireBase(int /*unit*/) {
    return FailedPrecondition("this backend has no sharded frozen base");
  }
  virtual Status ReleaseBase(int /*unit*/) {
    return FailedPrecondition("this backend has no sharded frozen base");
  }
  bool ShardsBase() const { return BaseLayout() != nullptr && options().base_shard.size > 1; }
  // Bytes of frozen base this rank holds persistently (its slices, or every
  // whole unit), not counting the slots; 0 without PEFT.
  virtual int64_t BaseBytes() const { return 0; }
  // The element range of base unit u that WriteBase needs for this rank to
  // hold its part: the whole unit unsharded and for a QLoRA block (quantised
  // whole), else the elements overlapping this rank's slice (a loader reads
  // only these: 1/S of an HF base per rank).
  virtual Range BaseNeeded(int unit) const {
    const ParamLayout* l = BaseLayout();
    return l != nullptr && unit >= 0 && unit < l->num_units() ? Range{0, l->unit(unit).padded_numel}
                                                              : Range{};
  }
  // GatherBase(u) = AcquireBase(u) + the collective that fills the slot
  // from every shard rank's slice (installed by the PEFT hooks,
  // runtime/parallel/peft_hooks.h, while they live: the merged export reads
  // gathered units through it). Every rank of the shard group calls it for
  // the same units in the same order; on return BaseSlot(u) holds the whole
  // unit (ordered on the compute stream) until ReleaseBase(u). Unsharded:
  // nothing to do.
  void SetBaseGatherer(std::function<Status(int unit)> gather) { base_gatherer_ = std::move(gather); }
  Status GatherBase(int unit) {
    if (!ShardsBase()) return Status::Ok();
    if (!base_gatherer_) {
      return FailedPrecondition("the frozen base is sharded but no process group gathers it");
    }
    return base_gatherer_(unit);
  }

  // Peak dense FLOP/s of the device at the active precision (0 = unknown),
  // and the device-memory high-water mark in bytes (0 = not tracked).
  virtual double PeakFlops() const = 0;
  virtual int64_t PeakMemoryBytes() const = 0;
  // Tracing (runtime/trace/recorder.h): while `recorder` is active the
  // backend records its device work on the recorder's tracks (CUDA: each
  // pass's phases and every op from CUDA events, the memory in use); a host
  // backend records nothing (the loop's host spans are its work). nullptr
  // (the default) turns it off; outside the recorder's window it costs a
  // branch per pass. The recorder must outlive the backend's use of it.
  virtual void SetTrace(trace::Recorder* /*recorder*/) {}

 private:
  std::function<Status(int)> base_gatherer_;  // SetBaseGatherer
};

}  // namespace hypertrain::model
