#include "runtime/parallel/peft_hooks.h"

#include <fmt/format.h>

namespace hypertrain::parallel {

using model::ParamLayout;

StatusOr<std::unique_ptr<PeftDataParallelHooks>> PeftDataParallelHooks::Create(
    DistContext& ctx, model::Backend& backend) {
  if (backend.BaseLayout() == nullptr) {
    return InvalidArgument("PEFT data parallelism needs a backend in PEFT mode (model.peft)");
  }
  const model::ParamLayout& l = backend.layout();
  for (int u = 0; u < l.num_units(); ++u) {
    const model::Range own = backend.Owned(u);
    if (own.begin != 0 || own.end != l.unit(u).padded_numel || backend.PoolsUnits()) {
      return InvalidArgument("PEFT data parallelism keeps the adapters whole on every rank");
    }
  }
  const model::BackendOptions::BaseShard bs = backend.options().base_shard;
  if (backend.ShardsBase() && (bs.size != ctx.shard().size() || bs.rank != ctx.shard().rank())) {
    return InvalidArgument(fmt::format(
        "the frozen base is sharded as rank {} of {} but this rank is {} of a shard group of {}",
        bs.rank, bs.size, ctx.shard().rank(), ctx.shard().size()));
  }
  // A device backend (CUDA): every all-reduce / gather first waits for the
  // compute queued so far on its stream (the unit's backward that wrote the
  // gradients, the passes that read a slot about to be reused);
  // FinishGradients waits on the host before the optimizer runs.
  if (backend.ComputeStream() != nullptr) {
    ctx.world().SetComputeStream(backend.ComputeStream());
    if (backend.ShardsBase()) ctx.shard().SetComputeStream(backend.ComputeStream());
  }
  std::unique_ptr<PeftDataParallelHooks> h(new PeftDataParallelHooks(ctx, backend));
  if (h->shards_base_) {
    PeftDataParallelHooks* self = h.get();
    backend.SetBaseGatherer([self](int unit) { return self->Gather(unit, -1); });
  }
  return h;
}

PeftDataParallelHooks::PeftDataParallelHooks(DistContext& ctx, model::Backend& backend)
    : ctx_(ctx),
      backend_(backend),
      shards_base_(backend.ShardsBase()),
      work_(backend.layout().num_units()),
      gather_(backend.layout().num_units()),
      gathers_(backend.layout().num_units(), 0) {}

PeftDataParallelHooks::~PeftDataParallelHooks() {
  if (shards_base_) backend_.SetBaseGatherer(nullptr);
  for (auto& w : work_)
    if (w) (void)w->Wait();
  for (int u = 0; u < static_cast<int>(gather_.size()); ++u) {
    if (!gather_[u]) continue;
    (void)gather_[u]->Wait();
    (void)backend_.ReleaseBase(u);
  }
  if (EmbeddingHeld()) (void)backend_.ReleaseBase(ParamLayout::kEmbeddingUnit);
}

bool PeftDataParallelHooks::EmbeddingHeld() const {
  return shards_base_ && embedding_gathered_ &&
         backend_.BaseSlot(ParamLayout::kEmbeddingUnit) != nullptr;
}

Status PeftDataParallelHooks::StartGather(int u) {
  HT_RETURN_IF_ERROR(backend_.AcquireBase(u));
  if (u == ParamLayout::kEmbeddingUnit) embedding_gathered_ = false;  // until waited
  ++gathers_[u];
  const int64_t bytes = backend_.BaseShardBytes(u);
  gather_[u] = ctx_.shard().AllGather(backend_.BaseShard(u), backend_.BaseSlot(u),
                                      static_cast<size_t>(bytes), DType::kU8);
  return Status::Ok();
}

Status PeftDataParallelHooks::Gather(int u, int next) {
  if (!shards_base_) return Status::Ok();
  if (u < 0 || u >= static_cast<int>(gather_.size())) return InvalidArgument("no base unit");
  const bool embedding = u == ParamLayout::kEmbeddingUnit;
  if (!(embedding && EmbeddingHeld())) {
    if (!gather_[u]) HT_RETURN_IF_ERROR(StartGather(u));
    std::unique_ptr<Work> w = std::move(gather_[u]);
    void* stream = backend_.ComputeStream();
    HT_RETURN_IF_ERROR(stream != nullptr ? w->WaitOnStream(stream) : w->Wait());
    if (embedding) embedding_gathered_ = true;
  }
  if (next >= 0 && !gather_[next]) HT_RETURN_IF_ERROR(StartGather(next));
  return Status::Ok();
}

Status PeftDataParallelHooks::Release(int u) {
  if (!shards_base_ || u == ParamLayout::kEmbeddingUnit) return Status::Ok();  // kept: see the header
  return backend_.ReleaseBase(u);
}

Status PeftDataParallelHooks::BeginMicroBatch(int /*micro_batch*/, bool last) {
  last_ = last;
  return Status::Ok();
}

// Prefetch: the unit after u in the hook order of runtime/model/unit_hooks.h.
Status PeftDataParallelHooks::BeforeForward(int u) {
  const int L = backend_.layout().num_units() - 1;  // blocks
  const int next = u == ParamLayout::kEmbeddingUnit ? (L > 0 ? ParamLayout::BlockUnit(0) : -1)
                   : u < ParamLayout::BlockUnit(L - 1) ? u + 1
                                                       : -1;
  return Gather(u, next);
}

Status PeftDataParallelHooks::AfterForward(int u) { return Release(u); }

Status PeftDataParallelHooks::BeforeBackward(int u) {
  const int L = backend_.layout().num_units() - 1;  // blocks
  const int next = u == ParamLayout::kEmbeddingUnit ? (L > 0 ? ParamLayout::BlockUnit(L - 1) : -1)
                   : u > ParamLayout::BlockUnit(0) ? u - 1
                                                   : -1;
  return Gather(u, next);
}

Status PeftDataParallelHooks::AfterBackward(int unit) {
  HT_RETURN_IF_ERROR(Release(unit));
  if (!last_) return Status::Ok();  // gradients accumulate locally until the last micro-batch
  if (work_[unit]) return FailedPrecondition("adapter all-reduce issued twice in one step");
  const model::UnitBuffer g = backend_.FullGrads(unit);
  if (g.dtype != model::DType::kF32) return Internal("adapter gradients must be fp32");
  work_[unit] = ctx_.world().AllReduce(g.data, static_cast<size_t>(g.numel), DType::kF32,
                                       ReduceOp::kAvg, DType::kF32);
  return Status::Ok();
}

Status PeftDataParallelHooks::FinishGradients() {
  Status first;
  for (int u = 0; u < static_cast<int>(work_.size()); ++u) {
    if (!work_[u]) {  // a unit the backward did not reach: reduce it now
      const model::UnitBuffer g = backend_.FullGrads(u);
      work_[u] = ctx_.world().AllReduce(g.data, static_cast<size_t>(g.numel), DType::kF32,
                                        ReduceOp::kAvg, DType::kF32);
    }
  }
  for (auto& w : work_) {
    Status s = w->Wait();
    if (first.ok() && !s.ok()) first = s;
    w.reset();
  }
  return first;
}

StatusOr<double> PeftDataParallelHooks::MeanAcrossDataParallel(double local) {
  float x = static_cast<float>(local);
  HT_RETURN_IF_ERROR(ctx_.world().AllReduceHost(&x, 1, ReduceOp::kAvg));
  return static_cast<double>(x);
}

}  // namespace hypertrain::parallel
