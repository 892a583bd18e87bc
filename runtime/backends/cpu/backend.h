#pragma once
// CpuBackend: the reference implementation of model::Backend.
//
// Compute is always fp32 on the CPU, whatever the configured precision (bf16,
// fp16, tf32 are accepted so one config runs on both backends; fp16 still
// drives the dynamic loss scaler). Every unit's ComputeParams is an fp32 buffer
// and MasterParams aliases its owned range; ShardGrads aliases FullGrads when
// the unit is owned whole, and is a separate buffer otherwise (sharded runs,
// where the hooks reduce-scatter FullGrads into it).
//
// With BackendOptions::unit_pool (sharded runs) it implements the unit pool
// of runtime/model/backend.h: per unit only the owned range of the params
// (ComputeShard == MasterParams, fp32) persists; full-size params and grads
// live in pool slots between acquire and release. A released param slot is
// filled with NaN and a released grad slot too, so a use outside the
// acquire/release window poisons the loss at once (what CI relies on).
// BackendOptions::embedding_grad_ranks adds the split embedding gradient of
// runtime/model/backend.h (host gather buffers, cpu::EmbeddingBackwardRange).
//
// PEFT (BackendOptions::peft): the units above are the adapters' (fp32,
// trained as any parameter); the frozen base is one fp32 buffer per unit
// (the CPU computes in fp32 whatever the precision) with no gradient, master
// or optimizer state. QLoRA keeps the block projections as NF4 blocks
// (runtime/model/nf4.h) and dequantises a unit when the pass reaches it.
// With BackendOptions::base_shard (S > 1) each unit's storage is its fp32
// values: this rank keeps ceil(P / S) of them and the base slots (one for the
// embedding, two for blocks, NaN while free) take the gathered units.
#include <memory>
#include <vector>

#include "runtime/backends/cpu/model.h"
#include "runtime/model/backend.h"
#include "runtime/model/unit_pool.h"

namespace hypertrain::cpu {

class CpuBackend final : public model::Backend {
 public:
  // Validates options (seq_len <= max_context_width, owned ranges inside units)
  // and initialises parameters from options.seed (runtime/model/init.h).
  static StatusOr<std::unique_ptr<CpuBackend>> Create(const model::ModelConfig& config,
                                                      const model::BackendOptions& options);

  std::string name() const override { return "cpu"; }
  const model::ParamLayout& layout() const override { return layout_; }
  const model::BackendOptions& options() const override { return options_; }
  model::Range Owned(int unit) const override { return owned_.at(unit); }

  model::UnitBuffer ComputeParams(int unit) override;
  model::UnitBuffer FullGrads(int unit) override;
  model::UnitBuffer MasterParams(int unit) override;
  model::UnitBuffer ShardGrads(int unit) override;
  model::UnitBuffer AdamM(int unit) override;
  model::UnitBuffer AdamV(int unit) override;
  Status ReadState(int unit, model::StateKind kind, float* host) override;
  Status WriteState(int unit, model::StateKind kind, const float* host) override;

  Status ZeroGrads() override;
  StatusOr<double> ForwardBackward(const model::TokenBatch& batch, float grad_multiplier,
                                   model::UnitHooks& hooks) override;
  StatusOr<double> Loss(const model::TokenBatch& batch, model::UnitHooks& hooks) override;
  StatusOr<double> GradSumSquares(int unit) override;
  Status OptimizerStep(int unit, const kernels::AdamWParams& p) override;
  Status Synchronize() override { return Status::Ok(); }
  double PeakFlops() const override { return 0.0; }
  // Peak resident set size of the process (VmHWM).
  int64_t PeakMemoryBytes() const override;

  bool PoolsUnits() const override { return pool_; }
  model::UnitBuffer ComputeShard(int unit) override;
  Status AcquireParams(int unit) override;
  Status ReleaseParams(int unit) override;
  Status AcquireGrads(int unit) override;
  Status ReleaseGrads(int unit) override;
  Status DiscardGrads(int unit) override;
  int64_t ParamsVersion(int unit) const override { return versions_.at(unit); }
  // Split embedding gradient (BackendOptions::embedding_grad_ranks > 1):
  // host gather buffers; the op is cpu::EmbeddingBackwardRange.
  bool SplitsEmbeddingGrad() const override { return emb_ranks_ > 1; }
  model::EmbeddingGradIo EmbeddingGrad() override;
  Status AccumulateEmbeddingGrad(bool bf16_reduce) override;

  const model::ParamLayout* BaseLayout() const override { return peft_ ? &base_layout_ : nullptr; }
  Status WriteBase(int unit, model::Range range, const float* host) override;
  Status ReadBase(int unit, model::Range range, float* host) override;
  int64_t BaseShardBytes(int unit) const override;
  void* BaseShard(int unit) override;
  void* BaseSlot(int unit) override;
  Status AcquireBase(int unit) override;
  Status ReleaseBase(int unit) override;
  int64_t BaseBytes() const override;
  model::Range BaseNeeded(int unit) const override;

  int64_t activation_bytes() const { return model_->activation_bytes(); }

 private:
  CpuBackend() = default;
  Status CheckBatch(const model::TokenBatch& batch) const;
  float* State(int unit, model::StateKind kind);
  // Element `i` of unit u's persistent params (full, or the owned range in
  // pool mode).
  float* Param(int u, int64_t i) { return params_[u].data() + (i - param_base_[u]); }
  // Frees u's gradient slot, first adding its owned range into ShardGrads(u)
  // when `fold`.
  Status FreeGrads(int u, bool fold);

  model::ParamLayout layout_;
  model::BackendOptions options_;
  std::vector<model::Range> owned_;
  std::vector<std::vector<float>> params_, grads_, shard_grads_, m_, v_;
  std::vector<int64_t> param_base_;  // unit element held at params_[u][0]
  // ComputeParams/FullGrads per unit (pool mode: nullptr unless acquired).
  std::vector<float*> param_ptrs_, grad_ptrs_;
  bool pool_ = false;
  // Pool slots: [0] for the embedding unit, [1] for blocks.
  std::vector<std::vector<float>> param_slots_[2], grad_slots_[2];
  model::UnitSlots param_pool_[2], grad_pool_[2];
  std::unique_ptr<CpuModel<float>> model_;
  std::vector<int64_t> versions_;  // ParamsVersion per unit
  // Split embedding gradient: this pass's tokens, and the gathered ones.
  int emb_ranks_ = 0;
  std::vector<int32_t> tokens_, all_tokens_;
  std::vector<float> all_dout_;
  // PEFT: the frozen base (full units, fp32), pointers per unit, and the
  // null gradient list CpuModel reads as "frozen".
  bool peft_ = false;
  model::ParamLayout base_layout_;
  std::vector<std::vector<float>> base_;
  std::vector<float*> base_ptrs_, frozen_grads_;
  // QLoRA: the block projections of the base are rounded through NF4
  // (runtime/model/nf4.h) once written, before the next pass or read, so
  // the reference computes with exactly the dequantised weights.
  bool base_needs_nf4_ = false;
  Status QuantizeBaseIfNeeded();
  // Sharded base (base_shard_ > 1): base_[u] is this rank's slice,
  // base_ptrs_[u] the acquired slot or nullptr.
  int base_shard_ = 1, base_rank_ = 0;
  std::vector<std::vector<float>> base_slots_[2];
  model::UnitSlots base_pool_[2];
  Status InitBase(const model::BackendOptions& options);
  Status RoundBaseUnitNf4(int unit, float* values) const;
  // Rounds `full` (the whole unit) through NF4 when `quantized`, then keeps
  // this rank's slice of it.
  Status KeepBaseSlice(int unit, float* full, bool quantized);
  Status CheckBaseRange(int unit, model::Range r) const;
};

}  // namespace hypertrain::cpu
