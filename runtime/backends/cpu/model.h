#pragma once
// CpuModel<T>: the Llama-3 decoder's forward and backward on the CPU over the
// flat unit layout, built from runtime/backends/cpu/ops.h. T = float for training,
// double for gradient checks. All activation memory is planned once in the
// constructor for a fixed [batch, seq]; a step allocates nothing but the
// classifier's chunk buffer.
//
// Activation checkpointing, per block:
//   none       every activation of every block is kept.
//   selective  keeps the GEMM/attention outputs (q, k, v after RoPE, attention
//              output + lse, residual h, gate, up); recomputes both RMSNorm
//              outputs and the SwiGLU product in backward.
//   full       keeps only each block's input; backward re-runs the block's
//              forward into shared scratch.
// Recomputation runs the same code on the same inputs, so all three give
// bit-identical gradients.
//
// PEFT (runtime/model/peft.h): given an adapter layout, every target
// projection adds its LoRA term; a pass then takes the adapters' params and
// grads in PassExtras. Base gradients may be null per unit (a frozen base):
// nothing is computed for them, only the activation gradients the adapters
// need. Packed samples: PassExtras::positions restarts RoPE per sample and
// confines attention to it (ops.h AttentionForward).
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runtime/model/backend.h"
#include "runtime/model/layout.h"
#include "runtime/model/peft.h"
#include "runtime/model/unit_hooks.h"

namespace hypertrain::cpu {

// Per-pass inputs beyond the tokens.
template <typename T>
struct PassExtras {
  const int32_t* positions = nullptr;   // [batch*seq] or null (0..seq-1 per row)
  uint64_t rng_offset = 0;              // dropout pass number
  const std::vector<T*>* adapter_params = nullptr;  // per unit of the adapter layout
  const std::vector<T*>* adapter_grads = nullptr;   // null: forward only
  bool dropout = true;  // false: evaluation (no adapter dropout)
};

template <typename T>
class CpuModel {
 public:
  // `adapters` (PEFT) must outlive the model; `seed` keys the dropout masks.
  CpuModel(const model::ParamLayout& layout, int64_t batch, int64_t seq,
           model::ActivationCheckpointing checkpointing, int32_t ignore_index = -100,
           const model::ParamLayout* adapters = nullptr, const model::PeftOptions& peft = {},
           uint64_t seed = 0);

  // params[u] / grads[u]: full buffers of unit u (layout.unit(u).padded_numel).
  // Forward + backward of one micro-batch; grads accumulate the gradient of
  // grad_multiplier * mean loss. Returns the mean loss. Calls hooks in the
  // order documented in runtime/model/unit_hooks.h.
  // A null grads[u] means unit u is frozen.
  StatusOr<double> ForwardBackward(const int32_t* inputs, const int32_t* targets,
                                   double grad_multiplier, const std::vector<T*>& params,
                                   const std::vector<T*>& grads, model::UnitHooks& hooks,
                                   const PassExtras<T>& extras = {});
  // Forward only.
  StatusOr<double> Loss(const int32_t* inputs, const int32_t* targets,
                        const std::vector<T*>& params, model::UnitHooks& hooks,
                        const PassExtras<T>& extras = {});

  // Bytes of activation memory planned (for tests comparing modes).
  int64_t activation_bytes() const { return activation_bytes_; }
  // [batch*seq, hidden]: the gradient of the embedding output left by the
  // last ForwardBackward (what the embedding lookup's backward consumes).
  const T* embedding_output_grad() const { return dres_; }

 private:
  struct Acts {
    T *x, *ln1, *rstd1, *q, *k, *v, *att, *lse, *h, *ln2, *rstd2, *gate, *up, *act;
    T* lora_t[model::kNumBlockTensors];  // [N, rank] per LoRA target (else null)
  };
  Status CheckTokens(const int32_t* inputs, const int32_t* targets) const;
  Status CheckExtras(const PassExtras<T>& extras) const;
  Status Forward(const int32_t* inputs, const std::vector<T*>& params, model::UnitHooks& hooks);
  model::DropoutMask Mask(int layer, int t) const;
  // out[N, OF] = in W_t^T (+ t's LoRA term).
  void Project(T* out, const T* in, const T* p, int layer, int t, const Acts& a);
  // Backward of Project: din += ..., weight/adapter grads += ...
  void ProjectBackward(T* din, T* g, const T* dout, const T* in, const T* p, int layer, int t,
                       const Acts& a);
  // Writes the block output into y (skipped when y == nullptr: recompute).
  void BlockForward(int layer, const Acts& a, const T* p, T* y);
  void Recompute(int layer, const T* p);
  void BlockBackward(int layer, const Acts& a, const T* p, T* g, T* dres);
  const T* Tensor(const T* unit, int u, int t) const;
  T* Tensor(T* unit, int u, int t) const;

  const model::ParamLayout& layout_;
  const model::ModelConfig& cfg_;
  int64_t B_, T_, N_;
  model::ActivationCheckpointing ckpt_;
  int32_t ignore_index_;
  std::vector<T> store_;    // per-block kept activations + scratch + final
  std::vector<Acts> acts_;  // per block: pointers into kept or scratch storage
  Acts scratch_;
  T *x_final_, *ln_f_, *rstd_f_, *dln_f_;
  T *dres_, *dh_, *dln_, *datt_, *dq_, *dk_, *dv_, *dact_, *dgate_, *dup_;
  std::vector<T> cos_, sin_;
  int64_t activation_bytes_ = 0;
  // PEFT.
  const model::ParamLayout* adapters_ = nullptr;
  model::PeftOptions peft_;
  model::AdapterSlots slots_{};
  uint64_t seed_ = 0;
  T *lora_u_ = nullptr, *lora_dt_ = nullptr;  // dropout input / dt scratch
  PassExtras<T> pass_;                        // the pass being run
};

extern template class CpuModel<float>;
extern template class CpuModel<double>;

}  // namespace hypertrain::cpu
