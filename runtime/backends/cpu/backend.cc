#include "runtime/backends/cpu/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "core/startup_phases.h"
#include "runtime/backends/cpu/ops.h"
#include "runtime/kernels/cpu/adamw.h"
#include "runtime/model/init.h"
#include "runtime/model/nf4.h"

namespace hypertrain::cpu {

using model::Range;
using model::StateKind;
using model::UnitBuffer;

StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const model::ModelConfig& config,
                                                         const model::BackendOptions& options) {
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  b->peft_ = options.peft.enabled();
  if (b->peft_) {
    HT_RETURN_IF_ERROR(options.peft.Validate());
    if (options.unit_pool) {
      return InvalidArgument("model.peft: the CPU backend keeps the adapters whole (no unit pool)");
    }
    if (options.peft.fp8_base) {
      return InvalidArgument("model.peft.fp8_base needs the CUDA backend (FP8 tensor cores); the "
                             "CPU backend keeps the frozen base in its compute dtype");
    }
    HT_ASSIGN_OR_RETURN(b->layout_, model::BuildAdapterLayout(config, options.peft, options.layout));
    HT_ASSIGN_OR_RETURN(b->base_layout_,
                        model::ParamLayout::Build(
                            config, {.tensor_alignment = options.layout.tensor_alignment}));
    HT_RETURN_IF_ERROR(b->InitBase(options));
    b->base_needs_nf4_ = options.peft.quantized() && b->base_shard_ == 1;
  } else {
    HT_ASSIGN_OR_RETURN(b->layout_, model::ParamLayout::Build(config, options.layout));
  }
  b->options_ = options;
  if (b->options_.seq_len == 0) b->options_.seq_len = config.max_context_width;
  if (b->options_.seq_len < 1 || b->options_.seq_len > config.max_context_width) {
    return InvalidArgument(fmt::format("sequence length {} must be in [1, model.max_context_width={}]",
                                       b->options_.seq_len, config.max_context_width));
  }
  if (options.micro_batch_size < 1) {
    return InvalidArgument(fmt::format("micro_batch_size must be >= 1, got {}", options.micro_batch_size));
  }
  const int U = b->layout_.num_units();
  if (!options.owned.empty() && static_cast<int>(options.owned.size()) != U) {
    return InvalidArgument(fmt::format("owned ranges: {} given for {} units", options.owned.size(), U));
  }
  b->pool_ = options.unit_pool;
  if (options.embedding_grad_ranks < 0) {
    return InvalidArgument(
        fmt::format("embedding_grad_ranks must be >= 0, got {}", options.embedding_grad_ranks));
  }
  model::UnitPoolPlan plan;
  if (b->pool_) {
    HT_ASSIGN_OR_RETURN(plan, model::PlanUnitPool(b->layout_, options));
  }
  b->params_.resize(U);
  b->grads_.resize(U);
  b->shard_grads_.resize(U);
  b->m_.resize(U);
  b->v_.resize(U);
  b->versions_.assign(U, 0);
  startup::PhaseTimer init_phase("weight_init");
  for (int u = 0; u < U; ++u) {
    const int64_t n = b->layout_.unit(u).padded_numel;
    const Range r = options.owned.empty() ? Range{0, n} : options.owned[u];
    if (r.begin < 0 || r.end > n || r.begin > r.end) {
      return InvalidArgument(fmt::format("owned range [{}, {}) of unit {} is outside [0, {})",
                                         r.begin, r.end, u, n));
    }
    b->owned_.push_back(r);
    if (r.size() != n) b->shard_grads_[u].assign(r.size(), 0.0f);
    b->m_[u].assign(r.size(), 0.0f);
    b->v_[u].assign(r.size(), 0.0f);
    // Every rank initialises the whole unit identically (the init is
    // counter-based), so a sharded run starts with gathered params in place;
    // in pool mode it keeps just its owned range.
    const Range keep = b->pool_ ? r : Range{0, n};
    b->param_base_.push_back(keep.begin);
    b->params_[u].assign(keep.size(), 0.0f);
    model::InitUnitParams(b->layout_, u, options.seed, keep, b->params_[u].data());
    if (!b->pool_) b->grads_[u].assign(n, 0.0f);
    b->param_ptrs_.push_back(b->pool_ ? nullptr : b->params_[u].data());
    b->grad_ptrs_.push_back(b->pool_ ? nullptr : b->grads_[u].data());
  }
  init_phase.End();
  if (b->pool_) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int k = 0; k < 2; ++k) {
      b->param_slots_[k].assign(plan.param_slots[k], std::vector<float>(plan.slot_numel[k], nan));
      b->grad_slots_[k].assign(plan.grad_slots[k], std::vector<float>(plan.slot_numel[k], nan));
      b->param_pool_[k] = plan.ParamSlots(k, U);
      b->grad_pool_[k] = plan.GradSlots(k, U);
    }
  }
  const int64_t N = options.micro_batch_size * b->options_.seq_len;
  b->tokens_.assign(N, 0);
  if (b->pool_ && options.embedding_grad_ranks > 1) {  // only with a pool (sharded runs)
    b->emb_ranks_ = options.embedding_grad_ranks;
    b->all_tokens_.assign(N * b->emb_ranks_, 0);
    b->all_dout_.assign(N * b->emb_ranks_ * config.hidden_size, 0.0f);
  }
  if (b->peft_) {
    b->model_ = std::make_unique<CpuModel<float>>(
        b->base_layout_, options.micro_batch_size, b->options_.seq_len, options.checkpointing,
        options.ignore_index, &b->layout_, options.peft, options.seed);
  } else {
    b->model_ = std::make_unique<CpuModel<float>>(b->layout_, options.micro_batch_size,
                                                  b->options_.seq_len, options.checkpointing,
                                                  options.ignore_index);
  }
  return b;
}

UnitBuffer CpuBackend::ComputeParams(int u) {
  return {param_ptrs_.at(u), model::DType::kF32, layout_.unit(u).padded_numel};
}
UnitBuffer CpuBackend::FullGrads(int u) {
  return {grad_ptrs_.at(u), model::DType::kF32, layout_.unit(u).padded_numel};
}
UnitBuffer CpuBackend::MasterParams(int u) {
  return {Param(u, owned_.at(u).begin), model::DType::kF32, owned_[u].size()};
}
UnitBuffer CpuBackend::ComputeShard(int u) {
  if (!pool_) return {};
  return {Param(u, owned_.at(u).begin), model::DType::kF32, owned_[u].size()};
}

Status CpuBackend::AcquireParams(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CPU"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, param_pool_[k].Acquire(u));
  param_ptrs_[u] = param_slots_[k][s].data();
  return Status::Ok();
}

Status CpuBackend::ReleaseParams(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CPU"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, param_pool_[k].Release(u));
  auto& slot = param_slots_[k][s];
  std::fill(slot.begin(), slot.end(), std::numeric_limits<float>::quiet_NaN());
  param_ptrs_[u] = nullptr;
  return Status::Ok();
}

Status CpuBackend::AcquireGrads(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CPU"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, grad_pool_[k].Acquire(u));
  auto& slot = grad_slots_[k][s];
  std::fill(slot.begin(), slot.end(), 0.0f);
  grad_ptrs_[u] = slot.data();
  return Status::Ok();
}

Status CpuBackend::ReleaseGrads(int u) { return FreeGrads(u, /*fold=*/true); }
Status CpuBackend::DiscardGrads(int u) { return FreeGrads(u, /*fold=*/false); }

Status CpuBackend::FreeGrads(int u, bool fold) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CPU"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, grad_pool_[k].Release(u));
  auto& slot = grad_slots_[k][s];
  const Range own = owned_[u];
  float* sg = shard_grads_[u].data();
  if (fold) {
    for (int64_t i = 0; i < own.size(); ++i) sg[i] += slot[own.begin + i];
  }
  std::fill(slot.begin(), slot.end(), std::numeric_limits<float>::quiet_NaN());
  grad_ptrs_[u] = nullptr;
  return Status::Ok();
}
UnitBuffer CpuBackend::ShardGrads(int u) {
  float* p = shard_grads_.at(u).empty() ? grads_[u].data() + owned_[u].begin
                                        : shard_grads_[u].data();
  return {p, model::DType::kF32, owned_[u].size()};
}
UnitBuffer CpuBackend::AdamM(int u) { return {m_.at(u).data(), model::DType::kF32, owned_[u].size()}; }
UnitBuffer CpuBackend::AdamV(int u) { return {v_.at(u).data(), model::DType::kF32, owned_[u].size()}; }

float* CpuBackend::State(int u, StateKind kind) {
  switch (kind) {
    case StateKind::kMasterParams: return static_cast<float*>(MasterParams(u).data);
    case StateKind::kShardGrads: return static_cast<float*>(ShardGrads(u).data);
    case StateKind::kAdamM: return m_[u].data();
    case StateKind::kAdamV: return v_[u].data();
  }
  return nullptr;
}

Status CpuBackend::ReadState(int u, StateKind kind, float* host) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  std::memcpy(host, State(u, kind), sizeof(float) * owned_[u].size());
  return Status::Ok();
}

Status CpuBackend::WriteState(int u, StateKind kind, const float* host) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  // Master params alias the compute params: writing them refreshes both.
  std::memcpy(State(u, kind), host, sizeof(float) * owned_[u].size());
  if (kind == StateKind::kMasterParams) ++versions_[u];
  return Status::Ok();
}

Status CpuBackend::ZeroGrads() {
  for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
  for (auto& g : shard_grads_) std::fill(g.begin(), g.end(), 0.0f);
  return Status::Ok();
}

Status CpuBackend::CheckBatch(const model::TokenBatch& batch) const {
  if (batch.inputs == nullptr || batch.targets == nullptr) return InvalidArgument("empty batch");
  if (batch.batch != options_.micro_batch_size || batch.seq != options_.seq_len) {
    return InvalidArgument(fmt::format("batch is {}x{}, the backend was planned for {}x{}",
                                       batch.batch, batch.seq, options_.micro_batch_size,
                                       options_.seq_len));
  }
  return Status::Ok();
}

namespace {

// Pool mode: after each Before* hook the unit's buffers must be acquired; a
// missing one is a hook-order bug, reported instead of a null dereference.
class PoolCheckHooks final : public model::UnitHooks {
 public:
  PoolCheckHooks(model::UnitHooks& inner, const std::vector<float*>& params,
                 const std::vector<float*>& grads)
      : inner_(inner), params_(params), grads_(grads) {}
  Status BeginMicroBatch(int m, bool last) override { return inner_.BeginMicroBatch(m, last); }
  Status BeforeForward(int u) override {
    HT_RETURN_IF_ERROR(inner_.BeforeForward(u));
    return Check(u, false);
  }
  Status AfterForward(int u) override { return inner_.AfterForward(u); }
  Status BeforeBackward(int u) override {
    HT_RETURN_IF_ERROR(inner_.BeforeBackward(u));
    return Check(u, true);
  }
  Status AfterBackward(int u) override { return inner_.AfterBackward(u); }
  Status AfterHeadBackward() override { return inner_.AfterHeadBackward(); }
  bool SplitsEmbeddingGrad() const override { return inner_.SplitsEmbeddingGrad(); }
  Status FinishGradients() override { return inner_.FinishGradients(); }
  StatusOr<double> GlobalSumSquares(double x) override { return inner_.GlobalSumSquares(x); }
  Status AfterOptimizerStep(int u) override { return inner_.AfterOptimizerStep(u); }
  bool OverwritesShardGrads() const override { return inner_.OverwritesShardGrads(); }
  StatusOr<double> MeanAcrossDataParallel(double x) override { return inner_.MeanAcrossDataParallel(x); }

 private:
  Status Check(int u, bool grads) const {
    if (params_[u] != nullptr && (!grads || grads_[u] != nullptr)) return Status::Ok();
    return FailedPrecondition(fmt::format(
        "unit {} has no {} buffer: a pooling backend needs hooks that acquire it (HSDP, or "
        "the sharded PEFT base)", u,
        params_[u] == nullptr ? "parameter" : "gradient"));
  }
  model::UnitHooks& inner_;
  const std::vector<float*>& params_;
  const std::vector<float*>& grads_;
};

}  // namespace

// The frozen base: whole units, or (base_shard.size S > 1) this rank's slice
// of every unit's fp32 values, ceil(P / S) elements, zero-padded.
Status CpuBackend::InitBase(const model::BackendOptions& options) {
  const model::BackendOptions::BaseShard bs = options.base_shard;
  if (bs.size < 1 || bs.rank < 0 || bs.rank >= bs.size) {
    return InvalidArgument(fmt::format("base shard {} of {} is not a shard", bs.rank, bs.size));
  }
  base_shard_ = bs.size;
  base_rank_ = bs.rank;
  const int U = base_layout_.num_units();
  base_ptrs_.assign(U, nullptr);
  frozen_grads_.assign(U, nullptr);
  std::vector<float> full;
  int64_t slot_numel[2] = {0, 0};
  for (const model::UnitLayout& u : base_layout_.units()) {
    const int64_t P = u.padded_numel;
    if (base_shard_ == 1) {
      base_.emplace_back(P);
      model::InitUnitParams(base_layout_, u.index, options.seed, {0, P}, base_.back().data());
      base_ptrs_[u.index] = base_.back().data();
      continue;
    }
    // Every rank builds the same whole unit (counter-based init, NF4 needs
    // whole projections), then keeps its slice.
    full.assign(P, 0.0f);
    model::InitUnitParams(base_layout_, u.index, options.seed, {0, P}, full.data());
    const int64_t k = (P + base_shard_ - 1) / base_shard_;
    base_.emplace_back(k, 0.0f);
    HT_RETURN_IF_ERROR(KeepBaseSlice(u.index, full.data(), options.peft.quantized()));
    int64_t& n = slot_numel[model::PoolKind(u.index)];
    n = std::max(n, k * base_shard_);
  }
  if (base_shard_ > 1) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int kind = 0; kind < 2; ++kind) {
      const int slots = kind == 0 ? 1 : 2;  // the embedding; current + prefetched block
      base_slots_[kind].assign(slots, std::vector<float>(slot_numel[kind], nan));
      base_pool_[kind] = model::UnitSlots(U, slots, kind == 0 ? "CPU base embedding slot"
                                                              : "CPU base block slots");
    }
  }
  return Status::Ok();
}

// QLoRA: every block projection (not only the adapter targets) rounded
// through NF4 in place, as QLoRA quantises every linear layer of the base
// but the LM head.
Status CpuBackend::RoundBaseUnitNf4(int unit, float* values) const {
  const model::UnitLayout& u = base_layout_.unit(unit);
  if (u.name.rfind("layers.", 0) != 0) return Status::Ok();
  for (int t = model::kQProj; t <= model::kDownProj; ++t) {
    if (t >= static_cast<int>(u.tensors.size())) {
      return Internal(fmt::format("unit {} has no tensor {}", u.name, t));
    }
    const model::TensorSlot& slot = u.tensors[t];
    if (slot.kind != model::TensorKind::kLinear) continue;
    float* w = values + slot.offset;
    const model::Nf4Tensor q = model::QuantizeNf4(w, slot.numel);
    model::DequantizeNf4(q, 0, slot.numel, w);
  }
  return Status::Ok();
}

Status CpuBackend::KeepBaseSlice(int u, float* full, bool quantized) {
  if (quantized) HT_RETURN_IF_ERROR(RoundBaseUnitNf4(u, full));
  const int64_t P = base_layout_.unit(u).padded_numel, k = static_cast<int64_t>(base_[u].size());
  const Range mine = model::Intersect({base_rank_ * k, (base_rank_ + 1) * k}, {0, P});
  std::fill(base_[u].begin(), base_[u].end(), 0.0f);
  if (!mine.empty()) std::copy(full + mine.begin, full + mine.end, base_[u].begin());
  return Status::Ok();
}

Status CpuBackend::CheckBaseRange(int u, Range r) const {
  if (!peft_) return FailedPrecondition("this backend has no frozen base (model.peft is off)");
  if (u < 0 || u >= base_layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  if (r.begin < 0 || r.end > base_layout_.unit(u).padded_numel || r.begin > r.end) {
    return InvalidArgument(fmt::format("base range [{}, {}) of unit {} is outside the unit", r.begin,
                                       r.end, u));
  }
  return Status::Ok();
}

Status CpuBackend::WriteBase(int u, Range r, const float* host) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, r));
  if (base_shard_ == 1) {
    std::copy(host, host + r.size(), base_[u].data() + r.begin);
    base_needs_nf4_ = options_.peft.quantized();
    return Status::Ok();
  }
  const int64_t P = base_layout_.unit(u).padded_numel, k = static_cast<int64_t>(base_[u].size());
  if (options_.peft.quantized() && u != model::ParamLayout::kEmbeddingUnit) {
    if (r.begin != 0 || r.end != P) {
      return InvalidArgument(fmt::format(
          "QLoRA base: block unit {} is written whole (its projections are quantised per tensor), "
          "got [{}, {})", u, r.begin, r.end));
    }
    std::vector<float> full(host, host + P);
    return KeepBaseSlice(u, full.data(), /*quantized=*/true);
  }
  const Range mine = model::Intersect(r, {base_rank_ * k, (base_rank_ + 1) * k});
  for (int64_t i = mine.begin; i < mine.end; ++i) base_[u][i - base_rank_ * k] = host[i - r.begin];
  return Status::Ok();
}

Status CpuBackend::QuantizeBaseIfNeeded() {
  if (!base_needs_nf4_) return Status::Ok();
  for (const model::UnitLayout& u : base_layout_.units()) {
    HT_RETURN_IF_ERROR(RoundBaseUnitNf4(u.index, base_[u.index].data()));
  }
  base_needs_nf4_ = false;
  return Status::Ok();
}

Status CpuBackend::ReadBase(int u, Range r, float* host) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, r));
  HT_RETURN_IF_ERROR(QuantizeBaseIfNeeded());
  if (base_ptrs_[u] == nullptr) {
    return FailedPrecondition(fmt::format(
        "base unit {} is sharded over {} ranks: all-gather it (AcquireBase) before reading it", u,
        base_shard_));
  }
  std::copy(base_ptrs_[u] + r.begin, base_ptrs_[u] + r.end, host);
  return Status::Ok();
}

int64_t CpuBackend::BaseShardBytes(int u) const {
  if (!peft_ || base_shard_ == 1 || u < 0 || u >= base_layout_.num_units()) return 0;
  return static_cast<int64_t>(base_[u].size() * sizeof(float));
}

void* CpuBackend::BaseShard(int u) {
  if (!peft_ || base_shard_ == 1 || u < 0 || u >= base_layout_.num_units()) return nullptr;
  return base_[u].data();
}

void* CpuBackend::BaseSlot(int u) {
  if (!peft_ || base_shard_ == 1 || u < 0 || u >= base_layout_.num_units()) return nullptr;
  return base_ptrs_[u];
}

Status CpuBackend::AcquireBase(int u) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, {0, 0}));
  if (base_shard_ == 1) return Status::Ok();
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, base_pool_[k].Acquire(u));
  base_ptrs_[u] = base_slots_[k][s].data();
  return Status::Ok();
}

Status CpuBackend::ReleaseBase(int u) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, {0, 0}));
  if (base_shard_ == 1) return Status::Ok();
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, base_pool_[k].Release(u));
  // Poisoned, so a pass that reads a released slot shows it in the loss.
  std::fill(base_slots_[k][s].begin(), base_slots_[k][s].end(),
            std::numeric_limits<float>::quiet_NaN());
  base_ptrs_[u] = nullptr;
  return Status::Ok();
}

model::Range CpuBackend::BaseNeeded(int u) const {
  const Range whole = Backend::BaseNeeded(u);
  if (base_shard_ == 1 || whole.empty()) return whole;
  if (options_.peft.quantized() && u != model::ParamLayout::kEmbeddingUnit) return whole;
  const int64_t k = static_cast<int64_t>(base_[u].size());
  return model::Intersect({base_rank_ * k, (base_rank_ + 1) * k}, whole);
}

int64_t CpuBackend::BaseBytes() const {
  int64_t n = 0;
  for (const auto& b : base_) n += static_cast<int64_t>(b.size() * sizeof(float));
  return n;
}

StatusOr<double> CpuBackend::ForwardBackward(const model::TokenBatch& batch, float grad_multiplier,
                                             model::UnitHooks& hooks) {
  HT_RETURN_IF_ERROR(CheckBatch(batch));
  std::copy(batch.inputs, batch.inputs + tokens_.size(), tokens_.begin());
  PassExtras<float> x{batch.positions, batch.rng_offset};
  if (peft_) {  // adapters are the trained parameters; the base is frozen
    HT_RETURN_IF_ERROR(QuantizeBaseIfNeeded());
    x.adapter_params = &param_ptrs_;
    x.adapter_grads = &grad_ptrs_;
    if (base_shard_ > 1) {  // every base unit must be gathered by the hooks
      PoolCheckHooks checked(hooks, base_ptrs_, grad_ptrs_);
      return model_->ForwardBackward(batch.inputs, batch.targets, grad_multiplier, base_ptrs_,
                                     frozen_grads_, checked, x);
    }
    return model_->ForwardBackward(batch.inputs, batch.targets, grad_multiplier, base_ptrs_,
                                   frozen_grads_, hooks, x);
  }
  if (pool_) {
    PoolCheckHooks checked(hooks, param_ptrs_, grad_ptrs_);
    return model_->ForwardBackward(batch.inputs, batch.targets, grad_multiplier, param_ptrs_,
                                   grad_ptrs_, checked, x);
  }
  return model_->ForwardBackward(batch.inputs, batch.targets, grad_multiplier, param_ptrs_,
                                 grad_ptrs_, hooks, x);
}

StatusOr<double> CpuBackend::Loss(const model::TokenBatch& batch, model::UnitHooks& hooks) {
  HT_RETURN_IF_ERROR(CheckBatch(batch));
  PassExtras<float> x{batch.positions, batch.rng_offset};
  x.dropout = false;  // a forward-only pass evaluates
  if (peft_) {
    HT_RETURN_IF_ERROR(QuantizeBaseIfNeeded());
    x.adapter_params = &param_ptrs_;
    if (base_shard_ > 1) {
      PoolCheckHooks checked(hooks, base_ptrs_, grad_ptrs_);
      return model_->Loss(batch.inputs, batch.targets, base_ptrs_, checked, x);
    }
    return model_->Loss(batch.inputs, batch.targets, base_ptrs_, hooks, x);
  }
  if (pool_) {
    PoolCheckHooks checked(hooks, param_ptrs_, grad_ptrs_);
    return model_->Loss(batch.inputs, batch.targets, param_ptrs_, checked, x);
  }
  return model_->Loss(batch.inputs, batch.targets, param_ptrs_, hooks, x);
}

model::EmbeddingGradIo CpuBackend::EmbeddingGrad() {
  if (emb_ranks_ <= 1) return {};
  model::EmbeddingGradIo io;
  io.tokens = tokens_.data();
  io.dout = model_->embedding_output_grad();
  io.all_tokens = all_tokens_.data();
  io.all_dout = all_dout_.data();
  io.dtype = model::DType::kF32;
  io.tokens_per_rank = static_cast<int64_t>(tokens_.size());
  io.cols = layout_.config().hidden_size;
  io.ranks = emb_ranks_;
  return io;
}

Status CpuBackend::AccumulateEmbeddingGrad(bool bf16_reduce) {
  if (emb_ranks_ <= 1)
    return FailedPrecondition("the CPU backend was created without embedding_grad_ranks");
  const int E = model::ParamLayout::kEmbeddingUnit;
  const model::TensorSlot& t = layout_.unit(E).tensors[model::kEmbedTokens];
  const Range own = owned_[E];
  const Range r = model::Intersect(own, t.range());
  if (r.empty()) return Status::Ok();
  const int64_t V = layout_.config().vocab_size;
  for (int32_t tok : all_tokens_) {  // other ranks' ids come from the wire
    if (tok < 0 || tok >= V)
      return Internal(fmt::format("gathered token {} is outside [0, {})", tok, V));
  }
  float* dst = static_cast<float*>(ShardGrads(E).data) + (r.begin - own.begin);
  EmbeddingBackwardRange(dst, r.begin - t.offset, r.end - t.offset, all_dout_.data(),
                         all_tokens_.data(), static_cast<int64_t>(tokens_.size()), emb_ranks_,
                         layout_.config().hidden_size, bf16_reduce);
  return Status::Ok();
}

StatusOr<double> CpuBackend::GradSumSquares(int u) {
  const UnitBuffer g = ShardGrads(u);
  return SumSquares(static_cast<const float*>(g.data), g.numel);
}

Status CpuBackend::OptimizerStep(int u, const kernels::AdamWParams& p) {
  const Range own = owned_.at(u);
  ++versions_[u];
  const float* g = static_cast<const float*>(ShardGrads(u).data);
  for (const model::TensorSlot& t : layout_.unit(u).tensors) {
    const Range r = model::Intersect(t.range(), own);
    if (r.empty()) continue;
    kernels::AdamWParams q = p;
    if (!t.weight_decay) q.weight_decay = 0.0f;
    const int64_t i = r.begin - own.begin;  // index in the owned-range buffers
    kernels::cpu::AdamW(Param(u, r.begin), g + i, m_[u].data() + i, v_[u].data() + i, r.size(), q);
  }
  return Status::Ok();
}

int64_t CpuBackend::PeakMemoryBytes() const {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace hypertrain::cpu
