// CudaBackend: the static activation plan (PlanActivations: every buffer of
// a micro-batch's pass, placed once at start).
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/model/math.h"
#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/trace/recorder.h"
#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/fp8_swiglu.h"
#include "runtime/kernels/cuda/lm_head_loss.h"
#include "runtime/kernels/cuda/naive_attention_f32.h"
#include "runtime/kernels/cuda/reduce.h"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/swiglu.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::ActivationCheckpointing;
using model::ParamLayout;

// Every size the activation plan needs (PlanActivationSizes).
struct CudaBackend::ActivationSizes {
  int64_t N, C, Q, K, F, L, V, D;
  size_t es;  // bytes of a compute-dtype element
  size_t dact_bytes, dgu_bytes, backward_bytes, fp8_backward_offset, grad_bytes;
  Fp8Projections::ScratchSizes fp8_bytes;
  bool head_grads_fp8, none, keep_gemm_outputs;
};

// Places buffers one after another, each rounded up (PlanRoundUp), from
// `base`; with a null base it only counts (the plan's sizing passes).
struct CudaBackend::Placer {
  char* base;
  size_t es;
  size_t off = 0;
  void* take(size_t bytes) {
    void* p = base == nullptr ? nullptr : base + off;
    off += PlanRoundUp(bytes);
    return p;
  }
  void* act(int64_t n) { return take(n * es); }
  float* f32(int64_t n) { return static_cast<float*>(take(n * sizeof(float))); }
};

Status CudaBackend::PlanActivations() {
  ActivationSizes z;
  PlanActivationSizes(&z);
  const int64_t L = z.L;
  scratch_ = std::make_unique<Acts>();
  acts_.clear();
  for (int64_t l = 0; l < L; ++l) acts_.push_back(std::make_unique<Acts>());
  size_t layer_bytes = 0;  // S, set by plan()
  bool share = false;  // block gradients in the activations (see PlanActivationSizes)
  void* fp8_slots = nullptr;  // the FP8 scale / amax slots (small)
  // Two passes: sizes with a null base, then pointers into one allocation.
  auto plan = [&](char* base) -> size_t {
    Placer at{base, z.es};
    PlaceBlockActivations(z, share, &at, &layer_bytes);
    PlaceSharedBuffers(z, &at, &fp8_slots);
    return at.off;
  };
  plan(nullptr);  // sets layer_bytes
  share = shared_grads_ && layer_bytes >= z.grad_bytes;
  if (shared_grads_ && !share) {  // e.g. full checkpointing keeps only x per layer
    shared_grads_ = false;
    for (int64_t l = 0; l < L; ++l) {
      HT_RETURN_IF_ERROR(AllocGrads(ParamLayout::BlockUnit(static_cast<int>(l))));
    }
  }
  const size_t total = plan(nullptr);
  void* base = nullptr;
  HT_RETURN_IF_ERROR(Alloc(total, &base));
  plan(static_cast<char*>(base));
  activation_bytes_ = static_cast<int64_t>(total);
  if (fp8_) HT_RETURN_IF_ERROR(fp8_->SetSlots(fp8_slots));
  return UploadRopeTable();
}

// Sizes and the chunking of the LM head's logits; sets the members they decide
// (attention workspace, logits chunk rows, embedding scratch).
void CudaBackend::PlanActivationSizes(ActivationSizes* z_out) {
  const model::ModelConfig& cfg = layout_.config();
  const int64_t N = N_, C = cfg.hidden_size, Q = cfg.q_dim(), K = cfg.kv_dim(),
                F = cfg.intermediate_size, L = cfg.num_hidden_layers, V = cfg.vocab_size,
                D = cfg.head_dim();
  const size_t es = kc::DTypeSize(dtype_);
  // The params the steps pass: the workspace depends on the implementation
  // and, for cuDNN, its plan for this exact layout.
  const kc::AttentionParams ap = StepAttentionParams();
  attn_ws_bytes_ = std::max(kc::AttentionBackwardWorkspaceBytes(ap),
                            kc::NaiveAttentionBackwardScratchFloats(ap) * sizeof(float));
  // The block backward's dact, dgu and attention workspace are dead while the
  // LM head runs, so the head's logits chunk lives in them; by default it
  // fills them (at least 1 GiB) in equal chunks: fewer, larger chunks mean
  // fewer fp32 read-modify-writes of the head's weight gradient and fuller
  // GEMMs. The floor matters when the region is small (cuDNN's atomic-dQ
  // backward, no dP buffer): 1b 6 -> 2 chunks, +0.6% on an H100 for 0.6 GiB.
  const auto round_up = PlanRoundUp;
  // The attention backward's dout and dqkv go in the layer's gate|up buffer
  // (dead once the SwiGLU backward ran) where they fit, so the region holds
  // the MLP's dact + dgu or the attention workspace, not both.
  att_grads_in_gu_ = DqkvOffsetInGu(N, Q, es) + size_t(N * (Q + 2 * K)) * es <=
                     size_t(N * 2 * F) * es;
  const size_t dact_bytes = round_up(size_t(N * std::max(F, Q)) * es);
  const size_t dgu_bytes = round_up(size_t(N * std::max(2 * F, Q + 2 * K)) * es);
  const size_t dead_bytes = att_grads_in_gu_
                                ? std::max(dact_bytes + dgu_bytes, round_up(attn_ws_bytes_))
                                : dact_bytes + dgu_bytes + round_up(attn_ws_bytes_);
  // FP8 operands: the backward's after dact + dgu (live together), over the
  // attention workspace (which lives only inside the attention backward, when
  // no FP8 GEMM runs); the forward's from the region's start (nothing else of
  // the region is live during a block's forward or its recomputation).
  Fp8Projections::ScratchSizes fp8_bytes;
  if (fp8_) fp8_bytes = Fp8Projections::ScratchBytes(cfg, N, options_.fp8.lm_head);
  const size_t fp8_backward_offset = dact_bytes + dgu_bytes;
  const size_t backward_bytes =
      fp8_ ? std::max(dead_bytes, fp8_backward_offset + fp8_bytes.backward) : dead_bytes;
  // fp8_lm_head's FP8 backward: each chunk row also needs V bytes for the
  // transposed dlogits codes, and chunks of whole 16-row groups.
  const bool head_grads_fp8 = fp8_ && options_.fp8.lm_head && dtype_ == kc::DType::kBF16 &&
                              N % 16 == 0 && size_t(V) <= kc::kMaxFp8GradVocab &&
                              (cuda_.loss_chunk_rows <= 0 || cuda_.loss_chunk_rows % 16 == 0);
  const size_t row_bytes = size_t(V) * es + (head_grads_fp8 ? size_t(V) : 0);
  if (cuda_.loss_chunk_rows > 0) {
    chunk_rows_ = std::min(cuda_.loss_chunk_rows, N);
  } else {
    // With fp8_lm_head the head's FP8 codes take their room from the chunk.
    const size_t room = std::max(backward_bytes, size_t{1} << 30);
    const size_t logits_room =
        room > fp8_bytes.lm_head + row_bytes ? room - fp8_bytes.lm_head : row_bytes;
    const int64_t fit = std::max<int64_t>(static_cast<int64_t>(logits_room / row_bytes), 1);
    const int64_t chunks = (N + fit - 1) / fit;
    chunk_rows_ = (N + chunks - 1) / chunks;
    if (head_grads_fp8) chunk_rows_ = (chunk_rows_ + 15) / 16 * 16;  // N % 16 == 0: <= N
  }
  // The split embedding gradient sorts every shard rank's tokens.
  emb_scratch_bytes_ = kc::EmbeddingBackwardScratchBytes(
      static_cast<int>(N * std::max(emb_ranks_, 1)), static_cast<int>(V));
  const bool none = options_.checkpointing == ActivationCheckpointing::kNone;
  const bool keep_gemm_outputs = none || options_.checkpointing == ActivationCheckpointing::kSelective;
  // Shared gradients: block l's fp32 gradient sits in the activations of
  // blocks > l, which are dead once their backward ran, and the last
  // block's in one extra slot after the last layer. With per-layer
  // activations of S >= G bytes (a gradient), counting G slots down from the
  // end of the layers' span + G puts block l's at or after the end of layer
  // l's activations: offset L*S + G - (L-l)*G >= (l+1)*S.
  int64_t grad_numel = 0;
  for (int64_t l = 0; l < L; ++l) {
    grad_numel = std::max(grad_numel, layout_.unit(ParamLayout::BlockUnit(static_cast<int>(l))).padded_numel);
  }
  const size_t grad_bytes = round_up(size_t(grad_numel) * sizeof(float));
  *z_out = {N, C, Q, K, F, L, V, D, es, dact_bytes, dgu_bytes, backward_bytes, fp8_backward_offset,
            grad_bytes, fp8_bytes, head_grads_fp8, none, keep_gemm_outputs};
}

// The per-block activations (shared scratch for what checkpointing
// recomputes) and, when shared, the block gradients after them; sets
// *layer_bytes to one layer's share.
void CudaBackend::PlaceBlockActivations(const ActivationSizes& z, bool share, Placer* at,
                                        size_t* layer_bytes) {
  const model::ModelConfig& cfg = layout_.config();
  const int64_t N = z.N, C = z.C, Q = z.Q, K = z.K, F = z.F, L = z.L;
  const size_t grad_bytes = z.grad_bytes;
  const bool none = z.none, keep_gemm_outputs = z.keep_gemm_outputs;
  Acts& s = *scratch_;
  s.ln1 = none ? nullptr : at->act(N * C);
  s.rstd1 = none ? nullptr : at->f32(N);
  s.ln2 = none ? nullptr : at->act(N * C);
  s.rstd2 = none ? nullptr : at->f32(N);
  s.act = none ? nullptr : at->act(N * F);
  s.qkv = keep_gemm_outputs ? nullptr : at->act(N * (Q + 2 * K));
  s.att = keep_gemm_outputs ? nullptr : at->act(N * Q);
  // lse: + 4 floats per token of slack, so each packed sample's lse can
  // start 16-byte aligned (Segment::lse).
  const int64_t lse_floats = N * cfg.num_attention_heads + 4 * N;
  s.lse = keep_gemm_outputs ? nullptr : at->f32(lse_floats);
  s.h = keep_gemm_outputs ? nullptr : at->act(N * C);
  s.gu = keep_gemm_outputs ? nullptr : at->act(N * 2 * F);
  const size_t layers_begin = at->off;
  for (auto& ap_l : acts_) {
    Acts& a = *ap_l;
    a.x = at->act(N * C);
    a.ln1 = none ? at->act(N * C) : s.ln1;
    a.rstd1 = none ? at->f32(N) : s.rstd1;
    a.ln2 = none ? at->act(N * C) : s.ln2;
    a.rstd2 = none ? at->f32(N) : s.rstd2;
    a.act = none ? at->act(N * F) : s.act;
    a.qkv = keep_gemm_outputs ? at->act(N * (Q + 2 * K)) : s.qkv;
    a.att = keep_gemm_outputs ? at->act(N * Q) : s.att;
    a.lse = keep_gemm_outputs ? at->f32(lse_floats) : s.lse;
    a.h = keep_gemm_outputs ? at->act(N * C) : s.h;
    a.gu = keep_gemm_outputs ? at->act(N * 2 * F) : s.gu;
    for (int t = 0; t < model::kNumBlockTensors; ++t) {
      a.lora_t[t] = peft_ && adapter_slots_.has(t) ? at->act(N * options_.peft.rank) : nullptr;
    }
  }
  *layer_bytes = (at->off - layers_begin) / static_cast<size_t>(L);
  if (share) {
    at->take(grad_bytes);
    for (int64_t l = 0; l < L; ++l) {
      const int u = ParamLayout::BlockUnit(static_cast<int>(l));
      char* g = at->base == nullptr ? nullptr : at->base + at->off - static_cast<size_t>(L - l) * grad_bytes;
      grads_[u] = shard_grads_[u] = reinterpret_cast<float*>(g);
    }
  }
}

// Everything after the blocks: the final norm, the LM head / block backward
// region, PEFT scratch, losses, reductions, tokens, FP8 slots.
void CudaBackend::PlaceSharedBuffers(const ActivationSizes& z, Placer* at, void** fp8_slots) {
  const int64_t N = z.N, C = z.C, Q = z.Q, F = z.F, V = z.V, D = z.D;
  const size_t es = z.es, dact_bytes = z.dact_bytes, dgu_bytes = z.dgu_bytes;
  const size_t backward_bytes = z.backward_bytes, fp8_backward_offset = z.fp8_backward_offset;
  const auto round_up = PlanRoundUp;
  const bool head_grads_fp8 = z.head_grads_fp8;
  const Fp8Projections::ScratchSizes& fp8_bytes = z.fp8_bytes;
  x_final_ = at->act(N * C);
  ln_f_ = at->act(N * C);
  rstd_f_ = at->f32(N);
  dres_ = at->act(N * C);
  dln_ = at->act(N * C);
  dln_f_ = dln_;  // dead before the first block's backward uses dln_
  // One region: the LM head's logits chunk, then (after the head, on the
  // same stream) the block backward's dact, dgu and attention workspace.
  const size_t logits_bytes = round_up(size_t(chunk_rows_ * V) * es);
  const size_t dlogits_t_bytes = head_grads_fp8 ? round_up(size_t(chunk_rows_ * V)) : 0;
  logits_ = at->take(std::max({backward_bytes, fp8_bytes.forward,
                           logits_bytes + dlogits_t_bytes + fp8_bytes.lm_head}));
  char* region = static_cast<char*>(logits_);
  if (fp8_ && region != nullptr && fp8_bytes.lm_head > 0) {
    // After the chunk, while the head runs: dlogits^T codes, then h / W codes.
    fp8_->SetLmHeadScratch(region + logits_bytes + dlogits_t_bytes,
                           head_grads_fp8 ? region + logits_bytes : nullptr);
  }
  if (fp8_ && region != nullptr) fp8_->SetScratch(N, region, region + fp8_backward_offset);
  dact_ = region;
  dgu_ = region == nullptr ? nullptr : region + dact_bytes;
  if (att_grads_in_gu_) {  // BlockBackward points datt/dqkv into the layer's gu
    datt_ = dqkv_ = nullptr;
    attn_ws_ = region;
  } else {
    datt_ = dact_;  // dact_ is dead once the SwiGLU backward ran
    dqkv_ = dgu_;   // dgu_ is dead once the gate/up weight gradients ran
    attn_ws_ = region == nullptr ? nullptr : region + dact_bytes + dgu_bytes;
  }
  // PEFT scratch: the adapters' dt, and the dropped-out adapter input (and
  // its gradient) of the widest projection input.
  lora_dt_ = peft_ ? at->act(N * options_.peft.rank) : nullptr;
  lora_u_ = peft_ && options_.peft.dropout > 0 ? at->act(N * std::max({C, Q, F})) : nullptr;
  losses_ = at->f32(N);
  norm_scratch_ = at->f32(static_cast<int64_t>(kc::RmsNormBackwardScratchFloats(static_cast<int>(C))));
  rope_table_ = at->f32(S_ * D);
  dscale_ = at->f32(1);
  loss_sum_ = static_cast<double*>(at->take(sizeof(double)));
  sumsq_partials_ = static_cast<double*>(at->take(sizeof(double) * kc::kSumSquaresPartials *
                                                  layout_.num_units()));
  sumsq_ = static_cast<double*>(at->take(sizeof(double)));
  tokens_ = static_cast<int32_t*>(at->take(N * sizeof(int32_t)));
  targets_ = static_cast<int32_t*>(at->take(N * sizeof(int32_t)));
  emb_scratch_ = at->take(emb_scratch_bytes_);
  all_tokens_ =
      emb_ranks_ > 1 ? static_cast<int32_t*>(at->take(emb_ranks_ * N * sizeof(int32_t))) : nullptr;
  all_dout_ = emb_ranks_ > 1 ? at->act(emb_ranks_ * N * C) : nullptr;
  *fp8_slots = fp8_ ? at->take(fp8_->SlotBytes()) : nullptr;
}

Status CudaBackend::UploadRopeTable() {
  const model::ModelConfig& cfg = layout_.config();
  const int64_t D = cfg.head_dim();
  std::vector<double> inv_freq(D / 2);
  model::RopeInvFreq(inv_freq.data(), D, cfg.rope_theta, cfg.rope_scaling);
  const std::vector<float> table = kc::RopeCosSinTable(inv_freq, static_cast<int>(S_));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(rope_table_, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice));
  return Status::Ok();
}

}  // namespace hypertrain::cuda
