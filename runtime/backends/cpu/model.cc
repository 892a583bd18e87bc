#include "runtime/backends/cpu/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/backends/cpu/ops.h"
#include "runtime/model/math.h"

namespace hypertrain::cpu {

using model::ActivationCheckpointing;
using model::ParamLayout;

template <typename T>
CpuModel<T>::CpuModel(const ParamLayout& layout, int64_t batch, int64_t seq,
                      ActivationCheckpointing checkpointing, int32_t ignore_index,
                      const ParamLayout* adapters, const model::PeftOptions& peft, uint64_t seed)
    : layout_(layout),
      cfg_(layout.config()),
      B_(batch),
      T_(seq),
      N_(batch * seq),
      ckpt_(checkpointing),
      ignore_index_(ignore_index),
      adapters_(adapters),
      peft_(peft),
      slots_(model::AdapterSlots::For(adapters != nullptr ? peft.targets : std::vector<int>{})),
      seed_(seed) {
  const int64_t N = N_, C = cfg_.hidden_size, Q = cfg_.q_dim(), K = cfg_.kv_dim(),
                F = cfg_.intermediate_size, H = cfg_.num_attention_heads;
  const int64_t L = cfg_.num_hidden_layers;
  const bool sel = ckpt_ == ActivationCheckpointing::kSelective;
  const bool none = ckpt_ == ActivationCheckpointing::kNone;
  // Two passes: sizes with a null base, then pointers into the real storage.
  auto plan = [&](T* base) {
    int64_t off = 0;
    auto take = [&](int64_t n) {
      T* p = base == nullptr ? nullptr : base + off;
      off += n;
      return p;
    };
    Acts& s = scratch_;
    s.x = nullptr;
    s.ln1 = take(N * C), s.rstd1 = take(N), s.q = take(N * Q), s.k = take(N * K);
    s.v = take(N * K), s.att = take(N * Q), s.lse = take(H * N), s.h = take(N * C);
    s.ln2 = take(N * C), s.rstd2 = take(N), s.gate = take(N * F), s.up = take(N * F);
    s.act = take(N * F);
    const int64_t R = adapters_ != nullptr ? peft_.rank : 0;
    std::fill(std::begin(s.lora_t), std::end(s.lora_t), nullptr);
    acts_.assign(L, Acts{});
    for (Acts& a : acts_) {
      auto keep = [&](bool kept, int64_t n, T* scratch) { return kept ? take(n) : scratch; };
      a.x = take(N * C);
      a.ln1 = keep(none, N * C, s.ln1);
      a.rstd1 = keep(none, N, s.rstd1);
      a.q = keep(none || sel, N * Q, s.q);
      a.k = keep(none || sel, N * K, s.k);
      a.v = keep(none || sel, N * K, s.v);
      a.att = keep(none || sel, N * Q, s.att);
      a.lse = keep(none || sel, H * N, s.lse);
      a.h = keep(none || sel, N * C, s.h);
      a.ln2 = keep(none, N * C, s.ln2);
      a.rstd2 = keep(none, N, s.rstd2);
      a.gate = keep(none || sel, N * F, s.gate);
      a.up = keep(none || sel, N * F, s.up);
      a.act = keep(none, N * F, s.act);
      // Always kept (rank-wide, small): a full recompute skips the down
      // projection, whose backward still needs its t.
      for (int t = 0; t < model::kNumBlockTensors; ++t) {
        a.lora_t[t] = slots_.has(t) ? take(N * R) : nullptr;
      }
    }
    lora_u_ = adapters_ != nullptr && peft_.dropout > 0 ? take(N * std::max({C, Q, F})) : nullptr;
    lora_dt_ = adapters_ != nullptr ? take(N * R) : nullptr;
    x_final_ = take(N * C), ln_f_ = take(N * C), rstd_f_ = take(N), dln_f_ = take(N * C);
    dres_ = take(N * C), dh_ = take(N * C), dln_ = take(N * C), datt_ = take(N * Q);
    dq_ = take(N * Q), dk_ = take(N * K), dv_ = take(N * K), dact_ = take(N * F);
    dgate_ = take(N * F), dup_ = take(N * F);
    return off;
  };
  const int64_t total = plan(nullptr);
  store_.assign(total, T(0));
  plan(store_.data());
  activation_bytes_ = total * static_cast<int64_t>(sizeof(T));
  const int64_t D = cfg_.head_dim();
  cos_.resize(T_ * D / 2);
  sin_.resize(T_ * D / 2);
  RopeTables(cos_.data(), sin_.data(), T_, D, cfg_.rope_theta, cfg_.rope_scaling);
}

template <typename T>
const T* CpuModel<T>::Tensor(const T* unit, int u, int t) const {
  return unit + layout_.unit(u).tensors[t].offset;
}
template <typename T>
T* CpuModel<T>::Tensor(T* unit, int u, int t) const {
  return unit == nullptr ? nullptr : unit + layout_.unit(u).tensors[t].offset;
}

template <typename T>
Status CpuModel<T>::CheckExtras(const PassExtras<T>& x) const {
  if (adapters_ != nullptr &&
      (x.adapter_params == nullptr ||
       static_cast<int>(x.adapter_params->size()) != adapters_->num_units() ||
       (x.adapter_grads != nullptr &&
        static_cast<int>(x.adapter_grads->size()) != adapters_->num_units()))) {
    return InvalidArgument("CpuModel: a PEFT model needs adapter buffers for every unit");
  }
  if (x.positions != nullptr) {
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t t = 0; t < T_; ++t) {
        const int32_t p = x.positions[b * T_ + t];
        const bool ok = t == 0 ? p == 0 : (p == 0 || p == x.positions[b * T_ + t - 1] + 1);
        if (!ok) {
          return InvalidArgument(fmt::format(
              "positions[{}][{}] = {}: a packed row's positions must start at 0 and either "
              "continue by 1 or restart at 0",
              b, t, p));
        }
      }
    }
  }
  return Status::Ok();
}

template <typename T>
model::DropoutMask CpuModel<T>::Mask(int layer, int t) const {
  if (!pass_.dropout) return {};
  return model::MakeDropoutMask(peft_, seed_, pass_.rng_offset, layer, t);
}

template <typename T>
void CpuModel<T>::Project(T* out, const T* in, const T* p, int layer, int t, const Acts& a) {
  const model::TensorSlot& w = layout_.unit(1).tensors[t];
  const int64_t OF = w.shape[0], IF = w.shape[1];
  Matmul(out, in, p + w.offset, N_, IF, OF);
  if (!slots_.has(t)) return;
  const int u = ParamLayout::BlockUnit(layer);
  const T* ap = (*pass_.adapter_params)[u];
  const model::UnitLayout& au = adapters_->unit(u);
  LoraForward(out, a.lora_t[t], lora_u_, in, ap + au.tensors[slots_.lora_a[t]].offset,
              ap + au.tensors[slots_.lora_b[t]].offset, N_, IF, OF, peft_.rank, peft_.scaling(),
              Mask(layer, t));
}

template <typename T>
void CpuModel<T>::ProjectBackward(T* din, T* g, const T* dout, const T* in, const T* p, int layer,
                                  int t, const Acts& a) {
  const model::TensorSlot& w = layout_.unit(1).tensors[t];
  const int64_t OF = w.shape[0], IF = w.shape[1];
  MatmulBackward(din, g == nullptr ? nullptr : g + w.offset, dout, in, p + w.offset, N_, IF, OF);
  if (!slots_.has(t)) return;
  const int u = ParamLayout::BlockUnit(layer);
  const T* ap = (*pass_.adapter_params)[u];
  T* ag = (*pass_.adapter_grads)[u];
  const model::UnitLayout& au = adapters_->unit(u);
  const int64_t ao = au.tensors[slots_.lora_a[t]].offset, bo = au.tensors[slots_.lora_b[t]].offset;
  LoraBackward(din, ag + ao, ag + bo, lora_dt_, lora_u_, dout, in, a.lora_t[t], ap + ao, ap + bo,
               N_, IF, OF, peft_.rank, peft_.scaling(), Mask(layer, t));
}

template <typename T>
Status CpuModel<T>::CheckTokens(const int32_t* inputs, const int32_t* targets) const {
  const int64_t V = cfg_.vocab_size;
  for (int64_t n = 0; n < N_; ++n) {
    if (inputs[n] < 0 || inputs[n] >= V) {
      return InvalidArgument(fmt::format("input token {} at position {} is outside [0, {})",
                                         inputs[n], n, V));
    }
    if (targets[n] != ignore_index_ && (targets[n] < 0 || targets[n] >= V)) {
      return InvalidArgument(fmt::format("target token {} at position {} is outside [0, {})",
                                         targets[n], n, V));
    }
  }
  return Status::Ok();
}

template <typename T>
void CpuModel<T>::BlockForward(int layer, const Acts& a, const T* p, T* y) {
  using namespace model;
  const int64_t N = N_, C = cfg_.hidden_size, F = cfg_.intermediate_size,
                H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim();
  const int u = 1;  // every block unit has the same offsets
  const int32_t* pos = pass_.positions;
  RmsNormForward(a.ln1, a.rstd1, a.x, Tensor(p, u, kInputNorm), N, C, cfg_.rms_norm_eps);
  Project(a.q, a.ln1, p, layer, kQProj, a);
  Project(a.k, a.ln1, p, layer, kKProj, a);
  Project(a.v, a.ln1, p, layer, kVProj, a);
  RopeForward(a.q, a.q, cos_.data(), sin_.data(), B_, T_, H, D, pos);
  RopeForward(a.k, a.k, cos_.data(), sin_.data(), B_, T_, KV, D, pos);
  AttentionForward(a.att, a.lse, a.q, a.k, a.v, B_, T_, H, KV, D, pos);
  Project(a.h, a.att, p, layer, kOProj, a);
  Add(a.h, a.h, a.x, N * C);
  RmsNormForward(a.ln2, a.rstd2, a.h, Tensor(p, u, kPostNorm), N, C, cfg_.rms_norm_eps);
  Project(a.gate, a.ln2, p, layer, kGateProj, a);
  Project(a.up, a.ln2, p, layer, kUpProj, a);
  SwiGluForward(a.act, a.gate, a.up, N * F);
  if (y == nullptr) return;
  Project(y, a.act, p, layer, kDownProj, a);
  Add(y, y, a.h, N * C);
}

template <typename T>
void CpuModel<T>::Recompute(int layer, const T* p) {
  using namespace model;
  const Acts& a = acts_[layer];
  const int64_t N = N_, C = cfg_.hidden_size, F = cfg_.intermediate_size;
  switch (ckpt_) {
    case ActivationCheckpointing::kNone:
      return;
    case ActivationCheckpointing::kSelective:
      RmsNormForward(a.ln1, a.rstd1, a.x, Tensor(p, 1, kInputNorm), N, C, cfg_.rms_norm_eps);
      RmsNormForward(a.ln2, a.rstd2, a.h, Tensor(p, 1, kPostNorm), N, C, cfg_.rms_norm_eps);
      SwiGluForward(a.act, a.gate, a.up, N * F);
      return;
    case ActivationCheckpointing::kFull:
      BlockForward(layer, a, p, nullptr);
      return;
  }
}

template <typename T>
void CpuModel<T>::BlockBackward(int layer, const Acts& a, const T* p, T* g, T* dres) {
  using namespace model;
  const int64_t N = N_, C = cfg_.hidden_size, Q = cfg_.q_dim(), K = cfg_.kv_dim(),
                F = cfg_.intermediate_size, H = cfg_.num_attention_heads,
                KV = cfg_.num_key_value_heads, D = cfg_.head_dim();
  const int u = 1;
  const int32_t* pos = pass_.positions;
  auto zero = [](T* x, int64_t n) { std::fill(x, x + n, T(0)); };
  // MLP half: y = h + down(silu(gate(ln2)) * up(ln2)), ln2 = norm(h).
  std::copy(dres, dres + N * C, dh_);
  zero(dact_, N * F);
  ProjectBackward(dact_, g, dres, a.act, p, layer, kDownProj, a);
  zero(dgate_, N * F);
  zero(dup_, N * F);
  SwiGluBackward(dgate_, dup_, dact_, a.gate, a.up, N * F);
  zero(dln_, N * C);
  ProjectBackward(dln_, g, dgate_, a.ln2, p, layer, kGateProj, a);
  ProjectBackward(dln_, g, dup_, a.ln2, p, layer, kUpProj, a);
  RmsNormBackward(dh_, Tensor(g, u, kPostNorm), dln_, a.h, Tensor(p, u, kPostNorm), a.rstd2, N, C);
  // Attention half: h = x + o(attn(rope(q(ln1)), rope(k(ln1)), v(ln1))).
  zero(datt_, N * Q);
  ProjectBackward(datt_, g, dh_, a.att, p, layer, kOProj, a);
  zero(dq_, N * Q);
  zero(dk_, N * K);
  zero(dv_, N * K);
  AttentionBackward(dq_, dk_, dv_, datt_, a.q, a.k, a.v, a.att, a.lse, B_, T_, H, KV, D, pos);
  RopeBackward(dq_, dq_, cos_.data(), sin_.data(), B_, T_, H, D, pos);
  RopeBackward(dk_, dk_, cos_.data(), sin_.data(), B_, T_, KV, D, pos);
  zero(dln_, N * C);
  ProjectBackward(dln_, g, dq_, a.ln1, p, layer, kQProj, a);
  ProjectBackward(dln_, g, dk_, a.ln1, p, layer, kKProj, a);
  ProjectBackward(dln_, g, dv_, a.ln1, p, layer, kVProj, a);
  std::copy(dh_, dh_ + N * C, dres);
  RmsNormBackward(dres, Tensor(g, u, kInputNorm), dln_, a.x, Tensor(p, u, kInputNorm), a.rstd1,
                  N, C);
}

template <typename T>
Status CpuModel<T>::Forward(const int32_t* inputs, const std::vector<T*>& params,
                            model::UnitHooks& hooks) {
  using namespace model;
  const int E = ParamLayout::kEmbeddingUnit;
  const int64_t L = cfg_.num_hidden_layers, C = cfg_.hidden_size;
  if (static_cast<int>(params.size()) != layout_.num_units()) {
    return InvalidArgument(fmt::format("CpuModel: {} parameter units given, layout has {}",
                                       params.size(), layout_.num_units()));
  }
  HT_RETURN_IF_ERROR(hooks.BeforeForward(E));
  EmbeddingForward(acts_[0].x, inputs, Tensor(params[E], E, kEmbedTokens), N_, C);
  for (int64_t l = 0; l < L; ++l) {
    const int u = ParamLayout::BlockUnit(static_cast<int>(l));
    HT_RETURN_IF_ERROR(hooks.BeforeForward(u));
    BlockForward(static_cast<int>(l), acts_[l], params[u], l + 1 < L ? acts_[l + 1].x : x_final_);
    HT_RETURN_IF_ERROR(hooks.AfterForward(u));
  }
  RmsNormForward(ln_f_, rstd_f_, x_final_, Tensor(params[E], E, kFinalNorm), N_, C,
                 cfg_.rms_norm_eps);
  return Status::Ok();
}

template <typename T>
StatusOr<double> CpuModel<T>::ForwardBackward(const int32_t* inputs, const int32_t* targets,
                                              double grad_multiplier,
                                              const std::vector<T*>& params,
                                              const std::vector<T*>& grads,
                                              model::UnitHooks& hooks,
                                              const PassExtras<T>& extras) {
  using namespace model;
  const int E = ParamLayout::kEmbeddingUnit;
  const int64_t L = cfg_.num_hidden_layers, C = cfg_.hidden_size, V = cfg_.vocab_size;
  HT_RETURN_IF_ERROR(CheckTokens(inputs, targets));
  if (grads.size() != params.size()) return InvalidArgument("CpuModel: grads/params unit mismatch");
  HT_RETURN_IF_ERROR(CheckExtras(extras));
  if (adapters_ != nullptr && extras.adapter_grads == nullptr) {
    return InvalidArgument("CpuModel: a PEFT backward needs adapter gradient buffers");
  }
  pass_ = extras;
  HT_RETURN_IF_ERROR(Forward(inputs, params, hooks));
  HT_RETURN_IF_ERROR(hooks.AfterForward(E));
  HT_RETURN_IF_ERROR(hooks.BeforeBackward(E));
  const int head = cfg_.tie_word_embeddings ? kEmbedTokens : kLmHead;
  const int64_t count = model::CountTargets(targets, N_, ignore_index_);
  const double dloss = count > 0 ? grad_multiplier / static_cast<double>(count) : 0.0;
  std::fill(dln_f_, dln_f_ + N_ * C, T(0));
  const LossSum ls = FusedClassifier(dln_f_, Tensor(grads[E], E, head), ln_f_,
                                     Tensor(params[E], E, head), targets, N_, C, V, ignore_index_,
                                     dloss);
  std::fill(dres_, dres_ + N_ * C, T(0));
  RmsNormBackward(dres_, Tensor(grads[E], E, kFinalNorm), dln_f_, x_final_,
                  Tensor(params[E], E, kFinalNorm), rstd_f_, N_, C);
  HT_RETURN_IF_ERROR(hooks.AfterHeadBackward());
  // Split: the hooks take the lookup's gradient from dres_ (FullGrads(E) may
  // be released by the end of the backward).
  const bool split = hooks.SplitsEmbeddingGrad();
  for (int64_t l = L - 1; l >= 0; --l) {
    const int u = ParamLayout::BlockUnit(static_cast<int>(l));
    HT_RETURN_IF_ERROR(hooks.BeforeBackward(u));
    Recompute(static_cast<int>(l), params[u]);
    BlockBackward(static_cast<int>(l), acts_[l], params[u], grads[u], dres_);
    HT_RETURN_IF_ERROR(hooks.AfterBackward(u));
  }
  if (!split && grads[E] != nullptr) {
    EmbeddingBackward(Tensor(grads[E], E, kEmbedTokens), dres_, inputs, N_, C);
  }
  HT_RETURN_IF_ERROR(hooks.AfterBackward(E));
  return count > 0 ? ls.loss_sum / static_cast<double>(count) : 0.0;
}

template <typename T>
StatusOr<double> CpuModel<T>::Loss(const int32_t* inputs, const int32_t* targets,
                                   const std::vector<T*>& params, model::UnitHooks& hooks,
                                   const PassExtras<T>& extras) {
  using namespace model;
  const int E = ParamLayout::kEmbeddingUnit;
  HT_RETURN_IF_ERROR(CheckTokens(inputs, targets));
  HT_RETURN_IF_ERROR(CheckExtras(extras));
  pass_ = extras;
  HT_RETURN_IF_ERROR(Forward(inputs, params, hooks));
  const int head = cfg_.tie_word_embeddings ? kEmbedTokens : kLmHead;
  const LossSum ls = FusedClassifier<T>(nullptr, nullptr, ln_f_, Tensor(params[E], E, head),
                                        targets, N_, cfg_.hidden_size, cfg_.vocab_size,
                                        ignore_index_, 0.0);
  HT_RETURN_IF_ERROR(hooks.AfterForward(E));
  return ls.count > 0 ? ls.loss_sum / static_cast<double>(ls.count) : 0.0;
}

template class CpuModel<float>;
template class CpuModel<double>;

}  // namespace hypertrain::cpu
