#include "runtime/parallel/peft_hooks.h"

namespace hypertrain::parallel {

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
  // A device backend (CUDA): every all-reduce first waits for the compute
  // queued so far on its stream (the unit's backward that wrote the
  // gradients); FinishGradients waits on the host before the optimizer runs.
  if (backend.ComputeStream() != nullptr) ctx.world().SetComputeStream(backend.ComputeStream());
  return std::unique_ptr<PeftDataParallelHooks>(new PeftDataParallelHooks(ctx, backend));
}

PeftDataParallelHooks::PeftDataParallelHooks(DistContext& ctx, model::Backend& backend)
    : ctx_(ctx), backend_(backend), work_(backend.layout().num_units()) {}

PeftDataParallelHooks::~PeftDataParallelHooks() {
  for (auto& w : work_)
    if (w) (void)w->Wait();
}

Status PeftDataParallelHooks::BeginMicroBatch(int /*micro_batch*/, bool last) {
  last_ = last;
  return Status::Ok();
}

Status PeftDataParallelHooks::AfterBackward(int unit) {
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
