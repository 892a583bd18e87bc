// CudaBackend: the static activation plan and one micro-batch's forward and
// backward pass.
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/model/math.h"
#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/trace/recorder.h"
#include "runtime/kernels/cuda/attention.h"
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

namespace {

// Byte offset helper for compute-dtype buffers.
void* Off(void* p, int64_t elems, size_t es) { return static_cast<char*>(p) + elems * es; }
const void* Off(const void* p, int64_t elems, size_t es) {
  return static_cast<const char*>(p) + elems * es;
}

// Alignment of every buffer in the activation plan.
size_t PlanRoundUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// Where the attention backward's dqkv starts in a layer's gate|up buffer
// (after dout) when att_grads_in_gu_.
size_t DqkvOffsetInGu(int64_t N, int64_t Q, size_t es) { return PlanRoundUp(size_t(N * Q) * es); }

// The bf16 view of a compute-dtype buffer (the FP8 path runs in bf16 only).
__nv_bfloat16* Bf16(void* p) { return static_cast<__nv_bfloat16*>(p); }
const __nv_bfloat16* Bf16(const void* p) { return static_cast<const __nv_bfloat16*>(p); }

struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

}  // namespace

Status CudaBackend::PlanActivations() {
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
  if (cuda_.loss_chunk_rows > 0) {
    chunk_rows_ = std::min(cuda_.loss_chunk_rows, N);
  } else {
    // With fp8_lm_head the head's FP8 codes take their room from the chunk.
    const size_t room = std::max(backward_bytes, size_t{1} << 30);
    const size_t logits_room =
        room > fp8_bytes.lm_head + size_t(V) * es ? room - fp8_bytes.lm_head : size_t(V) * es;
    const int64_t fit = std::max<int64_t>(static_cast<int64_t>(logits_room / (V * es)), 1);
    const int64_t chunks = (N + fit - 1) / fit;
    chunk_rows_ = (N + chunks - 1) / chunks;
  }
  // The split embedding gradient sorts every shard rank's tokens.
  emb_scratch_bytes_ = kc::EmbeddingBackwardScratchBytes(
      static_cast<int>(N * std::max(emb_ranks_, 1)), static_cast<int>(V));
  const bool none = options_.checkpointing == ActivationCheckpointing::kNone;
  const bool keep_gemm_outputs = none || options_.checkpointing == ActivationCheckpointing::kSelective;
  scratch_ = std::make_unique<Acts>();
  acts_.clear();
  for (int64_t l = 0; l < L; ++l) acts_.push_back(std::make_unique<Acts>());

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
  size_t layer_bytes = 0;  // S, set by plan()
  bool share = false;

  // Two passes: sizes with a null base, then pointers into one allocation.
  auto plan = [&](char* base) -> size_t {
    size_t off = 0;
    auto take = [&](size_t bytes) -> void* {
      void* p = base == nullptr ? nullptr : base + off;
      off += round_up(bytes);
      return p;
    };
    auto act = [&](int64_t n) { return take(n * es); };
    auto f32 = [&](int64_t n) { return static_cast<float*>(take(n * sizeof(float))); };
    Acts& s = *scratch_;
    s.ln1 = none ? nullptr : act(N * C);
    s.rstd1 = none ? nullptr : f32(N);
    s.ln2 = none ? nullptr : act(N * C);
    s.rstd2 = none ? nullptr : f32(N);
    s.act = none ? nullptr : act(N * F);
    s.qkv = keep_gemm_outputs ? nullptr : act(N * (Q + 2 * K));
    s.att = keep_gemm_outputs ? nullptr : act(N * Q);
    // lse: + 4 floats per token of slack, so each packed sample's lse can
    // start 16-byte aligned (Segment::lse).
    const int64_t lse_floats = N * cfg.num_attention_heads + 4 * N;
    s.lse = keep_gemm_outputs ? nullptr : f32(lse_floats);
    s.h = keep_gemm_outputs ? nullptr : act(N * C);
    s.gu = keep_gemm_outputs ? nullptr : act(N * 2 * F);
    const size_t layers_begin = off;
    for (auto& ap_l : acts_) {
      Acts& a = *ap_l;
      a.x = act(N * C);
      a.ln1 = none ? act(N * C) : s.ln1;
      a.rstd1 = none ? f32(N) : s.rstd1;
      a.ln2 = none ? act(N * C) : s.ln2;
      a.rstd2 = none ? f32(N) : s.rstd2;
      a.act = none ? act(N * F) : s.act;
      a.qkv = keep_gemm_outputs ? act(N * (Q + 2 * K)) : s.qkv;
      a.att = keep_gemm_outputs ? act(N * Q) : s.att;
      a.lse = keep_gemm_outputs ? f32(lse_floats) : s.lse;
      a.h = keep_gemm_outputs ? act(N * C) : s.h;
      a.gu = keep_gemm_outputs ? act(N * 2 * F) : s.gu;
      for (int t = 0; t < model::kNumBlockTensors; ++t) {
        a.lora_t[t] = peft_ && adapter_slots_.has(t) ? act(N * options_.peft.rank) : nullptr;
      }
    }
    layer_bytes = (off - layers_begin) / static_cast<size_t>(L);
    if (share) {
      take(grad_bytes);
      for (int64_t l = 0; l < L; ++l) {
        const int u = ParamLayout::BlockUnit(static_cast<int>(l));
        char* g = base == nullptr ? nullptr : base + off - static_cast<size_t>(L - l) * grad_bytes;
        grads_[u] = shard_grads_[u] = reinterpret_cast<float*>(g);
      }
    }
    x_final_ = act(N * C);
    ln_f_ = act(N * C);
    rstd_f_ = f32(N);
    dres_ = act(N * C);
    dln_ = act(N * C);
    dln_f_ = dln_;  // dead before the first block's backward uses dln_
    // One region: the LM head's logits chunk, then (after the head, on the
    // same stream) the block backward's dact, dgu and attention workspace.
    const size_t logits_bytes = round_up(size_t(chunk_rows_ * V) * es);
    logits_ = take(std::max({backward_bytes, fp8_bytes.forward, logits_bytes + fp8_bytes.lm_head}));
    char* region = static_cast<char*>(logits_);
    if (fp8_ && region != nullptr && fp8_bytes.lm_head > 0) {
      fp8_->SetLmHeadScratch(region + logits_bytes);  // after the chunk, while the head runs
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
    lora_dt_ = peft_ ? act(N * options_.peft.rank) : nullptr;
    lora_u_ = peft_ && options_.peft.dropout > 0 ? act(N * std::max({C, Q, F})) : nullptr;
    losses_ = f32(N);
    norm_scratch_ = f32(static_cast<int64_t>(kc::RmsNormBackwardScratchFloats(static_cast<int>(C))));
    rope_table_ = f32(S_ * D);
    dscale_ = f32(1);
    loss_sum_ = static_cast<double*>(take(sizeof(double)));
    sumsq_partials_ = static_cast<double*>(take(sizeof(double) * kc::kSumSquaresPartials *
                                                    layout_.num_units()));
    sumsq_ = static_cast<double*>(take(sizeof(double)));
    tokens_ = static_cast<int32_t*>(take(N * sizeof(int32_t)));
    targets_ = static_cast<int32_t*>(take(N * sizeof(int32_t)));
    emb_scratch_ = take(emb_scratch_bytes_);
    all_tokens_ =
        emb_ranks_ > 1 ? static_cast<int32_t*>(take(emb_ranks_ * N * sizeof(int32_t))) : nullptr;
    all_dout_ = emb_ranks_ > 1 ? act(emb_ranks_ * N * C) : nullptr;
    return off;
  };
  plan(nullptr);  // sets layer_bytes
  share = shared_grads_ && layer_bytes >= grad_bytes;
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

  std::vector<double> inv_freq(D / 2);
  model::RopeInvFreq(inv_freq.data(), D, cfg.rope_theta, cfg.rope_scaling);
  const std::vector<float> table = kc::RopeCosSinTable(inv_freq, static_cast<int>(S_));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(rope_table_, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice));
  return Status::Ok();
}

kc::AttentionParams CudaBackend::StepAttentionParams() const {
  const model::ModelConfig& cfg = layout_.config();
  kc::AttentionParams ap;
  ap.batch = static_cast<int>(B_), ap.seq = static_cast<int>(S_);
  ap.n_heads = static_cast<int>(cfg.num_attention_heads);
  ap.n_kv_heads = static_cast<int>(cfg.num_key_value_heads);
  ap.head_dim = static_cast<int>(cfg.head_dim());
  ap.scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim()));
  ap.deterministic = options_.deterministic;
  ap.impl = cuda_.attention_impl;
  ap.cudnn_bwd_workspace_cap_bytes = cuda_.cudnn_bwd_workspace_cap_bytes;
  ap.dtype = dtype_ == kc::DType::kF16   ? kc::AttentionDtype::kFp16
             : dtype_ == kc::DType::kF32 ? kc::AttentionDtype::kFp32
                                         : kc::AttentionDtype::kBf16;
  // q, k and v are slices of one fused QKV row; the output is packed.
  ap.q_row_stride = ap.k_row_stride = ap.v_row_stride = cfg.q_dim() + 2 * cfg.kv_dim();
  ap.o_row_stride = 0;
  return ap;
}

Status CudaBackend::CheckBatch(const model::TokenBatch& batch) const {
  if (batch.inputs == nullptr || batch.targets == nullptr) return InvalidArgument("empty batch");
  if (batch.batch != B_ || batch.seq != S_) {
    return InvalidArgument(fmt::format("batch is {}x{}, the CUDA backend was planned for {}x{}",
                                       batch.batch, batch.seq, B_, S_));
  }
  const int64_t V = layout_.config().vocab_size;
  for (int64_t n = 0; n < N_; ++n) {
    if (batch.inputs[n] < 0 || batch.inputs[n] >= V) {
      return InvalidArgument(fmt::format("input token {} at position {} is outside [0, {})",
                                         batch.inputs[n], n, V));
    }
    const int32_t t = batch.targets[n];
    if (t != options_.ignore_index && (t < 0 || t >= V)) {
      return InvalidArgument(
          fmt::format("target token {} at position {} is outside [0, {})", t, n, V));
    }
  }
  return Status::Ok();
}

Status CudaBackend::LoadTokens(const model::TokenBatch& batch) {
  NvtxRange r("data");
  const size_t bytes = N_ * sizeof(int32_t);
  const Slot* slot = static_cast<const Slot*>(batch.staged);
  if (slot != nullptr) {
    HT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, slot->ready, 0));
    HT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(tokens_, slot->inputs, bytes, cudaMemcpyDeviceToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(targets_, slot->targets, bytes, cudaMemcpyDeviceToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot->done, stream_));
  } else {
    HT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(tokens_, batch.inputs, bytes, cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(targets_, batch.targets, bytes, cudaMemcpyHostToDevice, stream_));
  }
  return Status::Ok();
}

Status CudaBackend::BlockForward(int layer, bool write_output) {
  const model::ModelConfig& cfg = layout_.config();
  const Acts& a = *acts_[layer];
  const int u = ParamLayout::BlockUnit(layer);
  const int N = static_cast<int>(N_), C = static_cast<int>(cfg.hidden_size),
            Q = static_cast<int>(cfg.q_dim()), K = static_cast<int>(cfg.kv_dim()),
            F = static_cast<int>(cfg.intermediate_size), H = static_cast<int>(cfg.num_attention_heads),
            KV = static_cast<int>(cfg.num_key_value_heads), D = static_cast<int>(cfg.head_dim());
  const int QKV = Q + 2 * K;
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  const size_t es = kc::DTypeSize(dtype_);
  const kc::DType dt = dtype_;
  kc::Gemm& g = *gemm_;
  if (fp8_) fp8_->UseWeights(layer, versions_[u]);
  if (qlora_) HT_RETURN_IF_ERROR(MaterializeBlock(u));
  HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormForward<T>(static_cast<T*>(a.ln1), a.rstd1, nullptr, static_cast<T*>(a.x),
                                 nullptr, static_cast<const T*>(W(u, model::kInputNorm)), N, C, eps,
                                 stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kQkv, Bf16(a.ln1), N, C,
                                     Bf16(W(u, model::kQProj)), QKV, Bf16(a.qkv), nullptr, stream_));
  } else if (fused_qkv_) {
    HT_RETURN_IF_ERROR(g.Matmul({N, QKV, C, false, true}, a.ln1, W(u, model::kQProj), dt, a.qkv,
                                dt, 1.0f, 0.0f, stream_));
  } else {
    const int tensors[3] = {model::kQProj, model::kKProj, model::kVProj};
    const int widths[3] = {Q, K, K};
    int col = 0;
    for (int i = 0; i < 3; ++i) {
      kc::GemmShape s{N, widths[i], C, false, true};
      s.ldc = QKV;
      HT_RETURN_IF_ERROR(g.Matmul(s, a.ln1, W(u, tensors[i]), dt, Off(a.qkv, col, es), dt, 1.0f,
                                  0.0f, stream_));
      col += widths[i];
    }
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kQProj, a.ln1, a.qkv, QKV));
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kKProj, a.ln1, Off(a.qkv, Q, es), QKV));
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kVProj, a.ln1, Off(a.qkv, Q + K, es), QKV));
    profile_.Mark(Op::kLora, stream_);
  }
  if (!segments_.empty()) {
    HT_RETURN_IF_ERROR(SegmentedRopeAttentionForward(a));
  } else {
    // q and k heads are adjacent in each row: one in-place RoPE call for both.
    HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      return kc::RopeForward<T>(static_cast<T*>(a.qkv), QKV, static_cast<T*>(a.qkv), QKV,
                                rope_table_, N, static_cast<int>(S_), H + KV, D, stream_);
    }));
    profile_.Mark(Op::kRope, stream_);
    const kc::AttentionParams ap = StepAttentionParams();
    if (dt == kc::DType::kF32) {
      const float* qkv = static_cast<const float*>(a.qkv);
      HT_RETURN_IF_ERROR(kc::NaiveAttentionForwardF32(ap, qkv, qkv + Q, qkv + Q + K,
                                                      static_cast<float*>(a.att), a.lse, stream_));
    } else {
      HT_RETURN_IF_ERROR(kc::AttentionForward(ap, a.qkv, Off(a.qkv, Q, es), Off(a.qkv, Q + K, es),
                                              a.att, a.lse, stream_));
    }
    profile_.Mark(Op::kAttention, stream_);
  }
  // h = x + att Wo^T
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kO, Bf16(a.att), N, Q,
                                     Bf16(W(u, model::kOProj)), C, Bf16(a.h), Bf16(a.x), stream_));
  } else {
    HT_RETURN_IF_ERROR(g.Matmul({N, C, Q, false, true}, a.att, W(u, model::kOProj), dt, a.h, dt,
                                1.0f, 1.0f, stream_, a.x));
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kOProj, a.att, a.h, C));
    profile_.Mark(Op::kLora, stream_);
  }
  HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormForward<T>(static_cast<T*>(a.ln2), a.rstd2, nullptr, static_cast<T*>(a.h),
                                 nullptr, static_cast<const T*>(W(u, model::kPostNorm)), N, C, eps,
                                 stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kGateUp, Bf16(a.ln2), N, C,
                                     Bf16(W(u, model::kGateProj)), 2 * F, Bf16(a.gu), nullptr,
                                     stream_));
  } else if (fused_gu_) {
    HT_RETURN_IF_ERROR(g.Matmul({N, 2 * F, C, false, true}, a.ln2, W(u, model::kGateProj), dt,
                                a.gu, dt, 1.0f, 0.0f, stream_));
  } else {
    kc::GemmShape s{N, F, C, false, true};
    s.ldc = 2 * F;
    HT_RETURN_IF_ERROR(g.Matmul(s, a.ln2, W(u, model::kGateProj), dt, a.gu, dt, 1.0f, 0.0f, stream_));
    HT_RETURN_IF_ERROR(
        g.Matmul(s, a.ln2, W(u, model::kUpProj), dt, Off(a.gu, F, es), dt, 1.0f, 0.0f, stream_));
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kGateProj, a.ln2, a.gu, 2 * F));
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kUpProj, a.ln2, Off(a.gu, F, es), 2 * F));
    profile_.Mark(Op::kLora, stream_);
  }
  // With a delayed scale at hand the SwiGLU writes the down GEMM's FP8 input
  // too (not when recomputing: the down GEMM does not run then).
  const std::optional<Fp8Projections::CastTarget> act_fp8 =
      fp8_ && write_output ? fp8_->FusedInput(layer, model::Fp8Gemm::kDown) : std::nullopt;
  if (act_fp8) {
    const __nv_bfloat16* gu = Bf16(a.gu);
    HT_LAUNCH(kc::SwiGluForwardFp8(Bf16(a.act), F, act_fp8->q, F, gu, gu + F, 2 * F, N, F,
                                   act_fp8->scale, act_fp8->amax, act_fp8->format, stream_));
  } else {
    HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* gu = static_cast<const T*>(a.gu);
      return kc::SwiGluForward<T>(static_cast<T*>(a.act), F, gu, gu + F, 2 * F, N, F, stream_);
    }));
  }
  profile_.Mark(Op::kSwiGlu, stream_);
  if (!write_output) return Status::Ok();
  const int L = static_cast<int>(cfg.num_hidden_layers);
  void* y = layer + 1 < L ? acts_[layer + 1]->x : x_final_;
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kDown, Bf16(a.act), N, F,
                                     Bf16(W(u, model::kDownProj)), C, Bf16(y), Bf16(a.h), stream_,
                                     /*x_cast=*/act_fp8.has_value()));
  } else {
    HT_RETURN_IF_ERROR(g.Matmul({N, C, F, false, true}, a.act, W(u, model::kDownProj), dt, y, dt,
                                1.0f, 1.0f, stream_, a.h));
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterForward(layer, model::kDownProj, a.act, y, C));
    profile_.Mark(Op::kLora, stream_);
  }
  return Status::Ok();
}

Status CudaBackend::Recompute(int layer) {
  const model::ModelConfig& cfg = layout_.config();
  const Acts& a = *acts_[layer];
  const int u = ParamLayout::BlockUnit(layer);
  const int N = static_cast<int>(N_), C = static_cast<int>(cfg.hidden_size),
            F = static_cast<int>(cfg.intermediate_size);
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  switch (options_.checkpointing) {
    case ActivationCheckpointing::kNone:
      return Status::Ok();
    case ActivationCheckpointing::kFull:
      return BlockForward(layer, /*write_output=*/false);
    case ActivationCheckpointing::kSelective:
      break;
  }
  if (qlora_) HT_RETURN_IF_ERROR(MaterializeBlock(u));  // the norms' weights
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    cudaError_t e = kc::RmsNormForward<T>(static_cast<T*>(a.ln1), a.rstd1, nullptr,
                                          static_cast<T*>(a.x), nullptr,
                                          static_cast<const T*>(W(u, model::kInputNorm)), N, C,
                                          eps, stream_);
    if (e != cudaSuccess) return e;
    e = kc::RmsNormForward<T>(static_cast<T*>(a.ln2), a.rstd2, nullptr, static_cast<T*>(a.h),
                              nullptr, static_cast<const T*>(W(u, model::kPostNorm)), N, C, eps,
                              stream_);
    if (e != cudaSuccess) return e;
    const T* gu = static_cast<const T*>(a.gu);
    return kc::SwiGluForward<T>(static_cast<T*>(a.act), F, gu, gu + F, 2 * F, N, F, stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);  // both norms and the SwiGLU product
  return Status::Ok();
}

Status CudaBackend::BlockBackward(int layer) {
  const model::ModelConfig& cfg = layout_.config();
  const Acts& a = *acts_[layer];
  const int u = ParamLayout::BlockUnit(layer);
  const int N = static_cast<int>(N_), C = static_cast<int>(cfg.hidden_size),
            Q = static_cast<int>(cfg.q_dim()), K = static_cast<int>(cfg.kv_dim()),
            F = static_cast<int>(cfg.intermediate_size), H = static_cast<int>(cfg.num_attention_heads),
            KV = static_cast<int>(cfg.num_key_value_heads), D = static_cast<int>(cfg.head_dim());
  const int QKV = Q + 2 * K;
  const size_t es = kc::DTypeSize(dtype_);
  const kc::DType dt = dtype_, f32 = kc::DType::kF32;
  kc::Gemm& g = *gemm_;
  // The first micro-batch after ZeroGrads writes the weight gradients (no
  // zeroing pass over them), later ones add.
  const float dw_beta = first_write_ ? 0.0f : 1.0f;
  // The attention backward's dout and dqkv (see PlanActivations).
  void* const datt = att_grads_in_gu_ ? a.gu : datt_;
  void* const dqkv =
      att_grads_in_gu_ ? static_cast<char*>(a.gu) + DqkvOffsetInGu(N, Q, es) : dqkv_;
  if (fp8_) fp8_->UseWeights(layer, versions_[u]);
  if (qlora_) HT_RETURN_IF_ERROR(MaterializeBlock(u));  // no-op after a full recompute
  // --- MLP: y = h + down(act), act = silu(gate) * up.
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kDown, Bf16(dres_), Bf16(a.act), N, F,
                                      Bf16(W(u, model::kDownProj)), C, Bf16(dact_),
                                      G(u, model::kDownProj), dw_beta, stream_));
  } else {
    HT_RETURN_IF_ERROR(g.Matmul({N, F, C, false, false}, dres_, W(u, model::kDownProj), dt, dact_,
                                dt, 1.0f, 0.0f, stream_));
    if (!peft_) {
      HT_RETURN_IF_ERROR(g.Matmul({C, F, N, true, false}, dres_, a.act, dt,
                                  G(u, model::kDownProj), f32, 1.0f, dw_beta, stream_));
    }
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kDownProj, a.act, dres_, C, dact_));
    profile_.Mark(Op::kLora, stream_);
  }
  // With a delayed scale at hand the SwiGLU backward writes the gate|up
  // GEMMs' FP8 output gradient directly (no bf16 dgu).
  const std::optional<Fp8Projections::CastTarget> dgu_fp8 =
      fp8_ ? fp8_->FusedGrad(layer, model::Fp8Gemm::kGateUp) : std::nullopt;
  if (dgu_fp8) {
    const __nv_bfloat16* gu = Bf16(a.gu);
    HT_LAUNCH(kc::SwiGluBackwardFp8(dgu_fp8->q, Bf16(dact_), F, gu, gu + F, 2 * F, N, F,
                                    dgu_fp8->scale, dgu_fp8->amax, dgu_fp8->format, stream_));
  } else {
    HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      T* dgu = static_cast<T*>(dgu_);
      const T* gu = static_cast<const T*>(a.gu);
      return kc::SwiGluBackward<T>(dgu, dgu + F, 2 * F, static_cast<const T*>(dact_), F, gu,
                                   gu + F, 2 * F, N, F, stream_);
    }));
  }
  profile_.Mark(Op::kSwiGlu, stream_);
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kGateUp, Bf16(dgu_), Bf16(a.ln2), N, C,
                                      Bf16(W(u, model::kGateProj)), 2 * F, Bf16(dln_),
                                      G(u, model::kGateProj), dw_beta, stream_,
                                      /*dy_cast=*/dgu_fp8.has_value()));
  } else if (fused_gu_) {
    HT_RETURN_IF_ERROR(g.Matmul({N, C, 2 * F, false, false}, dgu_, W(u, model::kGateProj), dt,
                                dln_, dt, 1.0f, 0.0f, stream_));
    if (!peft_) {
      HT_RETURN_IF_ERROR(g.Matmul({2 * F, C, N, true, false}, dgu_, a.ln2, dt,
                                  G(u, model::kGateProj), f32, 1.0f, dw_beta, stream_));
    }
  } else {
    kc::GemmShape dx{N, C, F, false, false};
    dx.lda = 2 * F;
    kc::GemmShape dw{F, C, N, true, false};
    dw.lda = 2 * F;
    HT_RETURN_IF_ERROR(g.Matmul(dx, dgu_, W(u, model::kGateProj), dt, dln_, dt, 1.0f, 0.0f, stream_));
    HT_RETURN_IF_ERROR(
        g.Matmul(dx, Off(dgu_, F, es), W(u, model::kUpProj), dt, dln_, dt, 1.0f, 1.0f, stream_));
    if (!peft_) {
      HT_RETURN_IF_ERROR(
          g.Matmul(dw, dgu_, a.ln2, dt, G(u, model::kGateProj), f32, 1.0f, dw_beta, stream_));
      HT_RETURN_IF_ERROR(g.Matmul(dw, Off(dgu_, F, es), a.ln2, dt, G(u, model::kUpProj), f32, 1.0f,
                                  dw_beta, stream_));
    }
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kGateProj, a.ln2, dgu_, 2 * F, dln_));
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kUpProj, a.ln2, Off(dgu_, F, es), 2 * F, dln_));
    profile_.Mark(Op::kLora, stream_);
  }
  // dres (= dy) += norm2 backward: dres becomes dh.
  HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormBackward<T>(static_cast<T*>(dres_), static_cast<const T*>(dres_),
                                  NormDw(u, model::kPostNorm), norm_scratch_,
                                  static_cast<const T*>(dln_), static_cast<const T*>(a.h),
                                  static_cast<const T*>(W(u, model::kPostNorm)), a.rstd2, N, C,
                                  stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  // --- Attention: h = x + o(att).
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kO, Bf16(dres_), Bf16(a.att), N, Q,
                                      Bf16(W(u, model::kOProj)), C, Bf16(datt), G(u, model::kOProj),
                                      dw_beta, stream_));
  } else {
    HT_RETURN_IF_ERROR(g.Matmul({N, Q, C, false, false}, dres_, W(u, model::kOProj), dt, datt, dt,
                                1.0f, 0.0f, stream_));
    if (!peft_) {
      HT_RETURN_IF_ERROR(g.Matmul({C, Q, N, true, false}, dres_, a.att, dt, G(u, model::kOProj),
                                  f32, 1.0f, dw_beta, stream_));
    }
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kOProj, a.att, dres_, C, datt));
    profile_.Mark(Op::kLora, stream_);
  }
  if (!segments_.empty()) {
    HT_RETURN_IF_ERROR(SegmentedAttentionRopeBackward(a, datt, dqkv));
  } else {
    const kc::AttentionParams ap = StepAttentionParams();
    if (dt == kc::DType::kF32) {
      const float* qkv = static_cast<const float*>(a.qkv);
      float* const dqkv_f = static_cast<float*>(dqkv);
      HT_RETURN_IF_ERROR(kc::NaiveAttentionBackwardF32(
          ap, qkv, qkv + Q, qkv + Q + K, static_cast<const float*>(a.att),
          static_cast<const float*>(datt), a.lse, dqkv_f, dqkv_f + Q, dqkv_f + Q + K,
          static_cast<float*>(attn_ws_), stream_));
    } else {
      HT_RETURN_IF_ERROR(kc::AttentionBackward(
          ap, a.qkv, Off(a.qkv, Q, es), Off(a.qkv, Q + K, es), a.att, datt, a.lse, dqkv,
          Off(dqkv, Q, es), Off(dqkv, Q + K, es), attn_ws_, attn_ws_bytes_, stream_));
    }
    profile_.Mark(Op::kAttention, stream_);
    HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      return kc::RopeBackward<T>(static_cast<T*>(dqkv), QKV, static_cast<T*>(dqkv), QKV,
                                 rope_table_, N, static_cast<int>(S_), H + KV, D, stream_);
    }));
    profile_.Mark(Op::kRope, stream_);
  }
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kQkv, Bf16(dqkv), Bf16(a.ln1), N, C,
                                      Bf16(W(u, model::kQProj)), QKV, Bf16(dln_),
                                      G(u, model::kQProj), dw_beta, stream_));
  } else if (fused_qkv_) {
    HT_RETURN_IF_ERROR(g.Matmul({N, C, QKV, false, false}, dqkv, W(u, model::kQProj), dt, dln_,
                                dt, 1.0f, 0.0f, stream_));
    if (!peft_) {
      HT_RETURN_IF_ERROR(g.Matmul({QKV, C, N, true, false}, dqkv, a.ln1, dt, G(u, model::kQProj),
                                  f32, 1.0f, dw_beta, stream_));
    }
  } else {
    const int tensors[3] = {model::kQProj, model::kKProj, model::kVProj};
    const int widths[3] = {Q, K, K};
    int col = 0;
    for (int i = 0; i < 3; ++i) {
      kc::GemmShape dx{N, C, widths[i], false, false};
      dx.lda = QKV;
      HT_RETURN_IF_ERROR(g.Matmul(dx, Off(dqkv, col, es), W(u, tensors[i]), dt, dln_, dt, 1.0f,
                                  i == 0 ? 0.0f : 1.0f, stream_));
      kc::GemmShape dw{widths[i], C, N, true, false};
      dw.lda = QKV;
      if (!peft_) {
        HT_RETURN_IF_ERROR(g.Matmul(dw, Off(dqkv, col, es), a.ln1, dt, G(u, tensors[i]), f32,
                                    1.0f, dw_beta, stream_));
      }
      col += widths[i];
    }
  }
  profile_.Mark(Op::kGemm, stream_);
  if (peft_) {
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kQProj, a.ln1, dqkv, QKV, dln_));
    HT_RETURN_IF_ERROR(AdapterBackward(layer, model::kKProj, a.ln1, Off(dqkv, Q, es), QKV, dln_));
    HT_RETURN_IF_ERROR(
        AdapterBackward(layer, model::kVProj, a.ln1, Off(dqkv, Q + K, es), QKV, dln_));
    profile_.Mark(Op::kLora, stream_);
  }
  // dres (= dh) += norm1 backward: dres becomes dx of the block.
  HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormBackward<T>(static_cast<T*>(dres_), static_cast<const T*>(dres_),
                                  NormDw(u, model::kInputNorm), norm_scratch_,
                                  static_cast<const T*>(dln_), static_cast<const T*>(a.x),
                                  static_cast<const T*>(W(u, model::kInputNorm)), a.rstd1, N, C,
                                  stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  return Status::Ok();
}

Status CudaBackend::HeadLoss(bool backward) {
  const model::ModelConfig& cfg = layout_.config();
  const int E = ParamLayout::kEmbeddingUnit;
  const int N = static_cast<int>(N_), C = static_cast<int>(cfg.hidden_size);
  const int head = cfg.tie_word_embeddings ? model::kEmbedTokens : model::kLmHead;
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormForward<T>(static_cast<T*>(ln_f_), rstd_f_, nullptr,
                                 static_cast<T*>(x_final_), nullptr,
                                 static_cast<const T*>(W(E, model::kFinalNorm)), N, C,
                                 static_cast<float>(cfg.rms_norm_eps), stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  kc::LmHeadLossArgs la;
  la.dtype = dtype_;
  la.h = ln_f_;
  la.w = W(E, head);
  la.targets = targets_;
  la.n = N;
  la.cols = C;
  la.vocab = static_cast<int>(cfg.vocab_size);
  la.chunk_rows = static_cast<int>(chunk_rows_);
  la.ignore_index = options_.ignore_index;
  la.logits = logits_;
  la.losses = losses_;
  if (backward) {
    la.dh = dln_f_;
    la.dw = peft_ ? nullptr : G(E, head);  // a frozen head has no weight gradient
    la.dw_overwrite = first_write_;
    la.dscale = dscale_;
  }
  kc::LmHeadLossArgs::Fp8Logits fp8_logits;
  if (fp8_ && options_.fp8.lm_head) {
    HT_RETURN_IF_ERROR(fp8_->CastLmHead(Bf16(ln_f_), N, C, Bf16(W(E, head)), la.vocab,
                                        versions_[E], &fp8_logits, stream_));
    la.fp8 = &fp8_logits;
  }
  HT_RETURN_IF_ERROR(kc::LmHeadLoss(*gemm_, la, stream_));
  HT_LAUNCH(kc::SumFloats(losses_, N, loss_sum_, stream_));
  profile_.Mark(Op::kLmHeadLoss, stream_);
  if (!backward) return Status::Ok();
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormBackward<T>(static_cast<T*>(dres_), nullptr, NormDw(E, model::kFinalNorm),
                                  norm_scratch_, static_cast<const T*>(dln_f_),
                                  static_cast<const T*>(x_final_),
                                  static_cast<const T*>(W(E, model::kFinalNorm)), rstd_f_, N, C,
                                  stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  return Status::Ok();
}

// With a unit pool the hooks must have acquired the unit's slots; a missing
// one is a hook-order bug, reported instead of a device fault.
Status CudaBackend::CheckHeld(int u, bool grads) const {
  if (compute_[u] == nullptr || (grads && grads_[u] == nullptr)) {
    return FailedPrecondition(fmt::format(
        "unit {} has no {} buffer: a pooling backend needs hooks that acquire it (HSDP)", u,
        compute_[u] == nullptr ? "parameter" : "gradient"));
  }
  return Status::Ok();
}

Status CudaBackend::ForwardPass(model::UnitHooks& hooks, bool for_backward) {
  NvtxRange r("forward");
  const model::ModelConfig& cfg = layout_.config();
  const int E = ParamLayout::kEmbeddingUnit;
  // QLoRA: every pass dequantises its blocks itself (the same launches in
  // every pass, so a captured graph replays correctly).
  materialized_ = -1;
  HT_RETURN_IF_ERROR(hooks.BeforeForward(E));
  HT_RETURN_IF_ERROR(CheckHeld(E, false));
  profile_.Mark(Op::kOther, stream_);
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::EmbeddingForward<T>(static_cast<T*>(acts_[0]->x), tokens_,
                                   static_cast<const T*>(W(E, model::kEmbedTokens)),
                                   static_cast<int>(N_), static_cast<int>(cfg.hidden_size), stream_);
  }));
  profile_.Mark(Op::kEmbedding, stream_);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const int u = ParamLayout::BlockUnit(l);
    HT_RETURN_IF_ERROR(hooks.BeforeForward(u));
    HT_RETURN_IF_ERROR(CheckHeld(u, false));
    profile_.Mark(Op::kOther, stream_);
    HT_RETURN_IF_ERROR(BlockForward(l, /*write_output=*/true));
    HT_RETURN_IF_ERROR(hooks.AfterForward(u));
    profile_.Mark(Op::kOther, stream_);
  }
  (void)for_backward;
  return Status::Ok();
}

Status CudaBackend::BackwardPass(model::UnitHooks& hooks) {
  NvtxRange r("backward");
  const model::ModelConfig& cfg = layout_.config();
  const int E = ParamLayout::kEmbeddingUnit;
  HT_RETURN_IF_ERROR(hooks.AfterForward(E));
  HT_RETURN_IF_ERROR(hooks.BeforeBackward(E));
  HT_RETURN_IF_ERROR(CheckHeld(E, true));
  profile_.Mark(Op::kOther, stream_);
  // The loss forward and the LM head backward run fused, chunk by chunk.
  HT_RETURN_IF_ERROR(HeadLoss(/*backward=*/true));
  HT_RETURN_IF_ERROR(hooks.AfterHeadBackward());
  profile_.Mark(Op::kOther, stream_);
  // Split: the hooks add the lookup's gradient from dres_ into the owned rows
  // (FullGrads(E) is released by the end of the backward).
  const bool split = hooks.SplitsEmbeddingGrad();
  if (split && emb_ranks_ <= 1) {
    return FailedPrecondition(
        "hooks split the embedding gradient but the backend has no buffers for it");
  }
  for (int l = static_cast<int>(cfg.num_hidden_layers) - 1; l >= 0; --l) {
    const int u = ParamLayout::BlockUnit(l);
    HT_RETURN_IF_ERROR(hooks.BeforeBackward(u));
    HT_RETURN_IF_ERROR(CheckHeld(u, true));
    profile_.Mark(Op::kOther, stream_);
    if (first_write_ && shared_grads_) HT_RETURN_IF_ERROR(ZeroGradsNotWrittenByGemms(u));
    HT_RETURN_IF_ERROR(Recompute(l));
    HT_RETURN_IF_ERROR(BlockBackward(l));
    HT_RETURN_IF_ERROR(hooks.AfterBackward(u));
    profile_.Mark(Op::kOther, stream_);
  }
  if (!split && !peft_) {  // PEFT: the embedding is frozen
    HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      return kc::EmbeddingBackward<T>(
          G(E, model::kEmbedTokens), static_cast<const T*>(dres_), tokens_, static_cast<int>(N_),
          static_cast<int>(cfg.hidden_size), static_cast<int>(cfg.vocab_size), emb_scratch_,
          emb_scratch_bytes_, stream_);
    }));
    profile_.Mark(Op::kEmbedding, stream_);
  }
  HT_RETURN_IF_ERROR(hooks.AfterBackward(E));
  profile_.Mark(Op::kOther, stream_);
  return Status::Ok();
}

model::EmbeddingGradIo CudaBackend::EmbeddingGrad() {
  if (emb_ranks_ <= 1) return {};
  model::EmbeddingGradIo io;
  io.tokens = tokens_;
  io.dout = dres_;
  io.all_tokens = all_tokens_;
  io.all_dout = all_dout_;
  io.dtype = model_dtype_;
  io.tokens_per_rank = N_;
  io.cols = layout_.config().hidden_size;
  io.ranks = emb_ranks_;
  return io;
}

Status CudaBackend::AccumulateEmbeddingGrad(bool bf16_reduce) {
  if (emb_ranks_ <= 1) {
    return FailedPrecondition("the CUDA backend was created without embedding_grad_ranks");
  }
  const model::ModelConfig& cfg = layout_.config();
  const int E = ParamLayout::kEmbeddingUnit;
  const model::TensorSlot& t = layout_.unit(E).tensors[model::kEmbedTokens];
  const model::Range own = owned_[E];
  const model::Range r = model::Intersect(own, t.range());
  if (r.empty()) return Status::Ok();
  float* dst = shard_grads_[E] + (r.begin - own.begin);
  profile_.Mark(Op::kOther, stream_);  // the wait on the gathers is not the kernel's
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::EmbeddingBackwardRange<T>(
        dst, r.begin - t.offset, r.end - t.offset, static_cast<const T*>(all_dout_), all_tokens_,
        static_cast<int>(N_), emb_ranks_, static_cast<int>(cfg.hidden_size),
        static_cast<int>(cfg.vocab_size), bf16_reduce, emb_scratch_, emb_scratch_bytes_, stream_);
  }));
  profile_.Mark(Op::kEmbedding, stream_);
  return Status::Ok();
}

Status CudaBackend::DeviceForwardBackward(model::UnitHooks& hooks) {
  HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev_start_, stream_));
  if (fp8_) HT_RETURN_IF_ERROR(fp8_->BeginPass(stream_));
  profile_.Begin(stream_);
  HT_RETURN_IF_ERROR(ForwardPass(hooks, true));
  HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev_fwd_, stream_));
  HT_RETURN_IF_ERROR(BackwardPass(hooks));
  if (fp8_) HT_RETURN_IF_ERROR(fp8_->QueueAmaxReadback(stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev_end_, stream_));
  return Status::Ok();
}

StatusOr<double> CudaBackend::ReadLoss() {
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_result_, loss_sum_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  UpdatePeakMemory();
  return *host_result_;
}

void CudaBackend::SetTrace(trace::Recorder* recorder) {
  trace_ = recorder;
  if (trace_ == nullptr) return;
  trace_phase_track_ = trace_->Track("cuda phases (device " + std::to_string(cuda_.device) + ")");
  trace_op_track_ = trace_->Track("cuda stream (device " + std::to_string(cuda_.device) + ")");
  trace_owns_profile_ = !profile_.enabled();  // else bench --profile records every pass
  if (trace_owns_profile_) {
    // One event per op: a pass of 1b marks ~700; room for several passes.
    if (!profile_.Enable(16384).ok()) {
      trace_ = nullptr;  // no events, no device trace; the host trace stays
      return;
    }
    profile_.set_active(false);
  }
  if (ev_anchor_ == nullptr && cudaEventCreate(&ev_anchor_) != cudaSuccess) {
    cudaGetLastError();
    trace_ = nullptr;
  }
}

Status CudaBackend::EmitTrace() {
  HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev_anchor_, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev_anchor_));
  const double now = trace_->NowUs();
  // An event's time on the recorder's clock: now minus its distance to the anchor.
  auto at = [&](cudaEvent_t e, double* us) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, e, ev_anchor_) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    *us = now - 1000.0 * static_cast<double>(ms);
    return true;
  };
  double data = 0, start = 0, fwd = 0, end = 0;
  if (at(ev_data_, &data) && at(ev_start_, &start) && at(ev_fwd_, &fwd) && at(ev_end_, &end)) {
    trace_->Complete(trace_phase_track_, "data", "device", data, start);
    trace_->Complete(trace_phase_track_, "forward", "device", start, fwd);
    trace_->Complete(trace_phase_track_, "backward", "device", fwd, end);
  }
  profile_.ForEachInterval([&](Op op, cudaEvent_t a, cudaEvent_t b) {
    double x = 0, y = 0;
    if (at(a, &x) && at(b, &y)) trace_->Complete(trace_op_track_, OpName(op), "device", x, y);
  });
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    constexpr double kMiB = 1024.0 * 1024.0;
    trace_->Counter("cuda memory (MiB)", now,
                    {{"in use", static_cast<double>(total_b - free_b) / kMiB},
                     {"allocated", static_cast<double>(allocated_bytes_) / kMiB}});
  }
  return Status::Ok();
}

StatusOr<double> CudaBackend::ForwardBackward(const model::TokenBatch& batch,
                                              float grad_multiplier, model::UnitHooks& hooks) {
  HT_RETURN_IF_ERROR(CheckBatch(batch));
  HT_RETURN_IF_ERROR(SetSegments(batch));
  const bool tracing = trace_ != nullptr && trace_->active();
  if (trace_owns_profile_) profile_.set_active(tracing);
  const int64_t count = model::CountTargets(batch.targets, N_, options_.ignore_index);
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev_data_, stream_));
  HT_RETURN_IF_ERROR(LoadTokens(batch));
  // The previous step has synchronised (ReadLoss), so the pinned scalar is free.
  *host_dscale_ = count > 0 ? static_cast<float>(grad_multiplier / static_cast<double>(count)) : 0.0f;
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dscale_, host_dscale_, sizeof(float), cudaMemcpyHostToDevice, stream_));
  // Capture from the second call on: the first runs eagerly so lazy module
  // loading and cuBLASLt's algorithm choice happen outside the capture.
  if (shared_grads_ && (grads_hold_pass_ || grads_clobbered_)) {
    return FailedPrecondition(
        "a second ForwardBackward without ZeroGrads: this backend keeps block gradients in "
        "activation memory (BackendOptions::single_pass_grads), so it cannot accumulate "
        "micro-batches; create it without single_pass_grads to accumulate");
  }
  // Shared gradients: zeros materialised before this pass are overwritten
  // by its forward, so the pass writes every gradient itself.
  first_write_ = grads_zero_pending_ || shared_grads_;
  grads_zero_pending_ = false;
  grads_hold_pass_ = shared_grads_;
  if (first_write_) HT_RETURN_IF_ERROR(ZeroGradsNotWrittenByGemms());
  // PEFT dropout keys change every pass: a replayed graph would reuse the first one's.
  pass_rng_offset_ = batch.rng_offset;
  pass_dropout_ = true;
  const bool dropout_keys = peft_ && options_.peft.dropout > 0;
  const bool graph = cuda_.cuda_graphs && !profile_.recording() && !graph_failed_ && eager_steps_ > 0 &&
                     !dropout_keys && segments_.empty() &&
                     dynamic_cast<model::NoOpUnitHooks*>(&hooks) != nullptr;
  if (graph) {
    if (graph_exec_ == nullptr) {
      HT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      const Status st = DeviceForwardBackward(hooks);
      cudaGraph_t g = nullptr;
      const cudaError_t end = cudaStreamEndCapture(stream_, &g);
      if (!st.ok() || end != cudaSuccess) {
        graph_failed_ = true;
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return st.ok() ? kc::CudaStatus(end, "cudaStreamEndCapture") : st;
      }
      const cudaError_t inst = cudaGraphInstantiate(&graph_exec_, g, 0);
      cudaGraphDestroy(g);
      if (inst != cudaSuccess) {
        graph_failed_ = true;
        graph_exec_ = nullptr;
        return kc::CudaStatus(inst, "cudaGraphInstantiate");
      }
    }
    HT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec_, stream_));
  } else {
    HT_RETURN_IF_ERROR(DeviceForwardBackward(hooks));
    ++eager_steps_;
  }
  HT_ASSIGN_OR_RETURN(const double loss_sum, ReadLoss());
  if (fp8_) HT_RETURN_IF_ERROR(fp8_->EndPass(hooks));  // the amaxes arrived with the loss
  if (tracing) HT_RETURN_IF_ERROR(EmitTrace());
  if (passes_ > 0) {
    HT_RETURN_IF_ERROR(profile_.Collect());
  } else {
    profile_.Begin(stream_);  // drop the warm-up pass's marks
  }
  // Timing is best effort (events recorded inside a graph may not time).
  if (cudaEventElapsedTime(&phase_.data_ms, ev_data_, ev_start_) != cudaSuccess ||
      cudaEventElapsedTime(&phase_.forward_ms, ev_start_, ev_fwd_) != cudaSuccess ||
      cudaEventElapsedTime(&phase_.backward_ms, ev_fwd_, ev_end_) != cudaSuccess) {
    cudaGetLastError();
    phase_ = PhaseTimes{-1.0f, -1.0f, -1.0f};
  } else if (passes_ > 0) {  // the first pass is warm-up (module loading, GEMM choice)
    phase_sum_.data_ms += phase_.data_ms;
    phase_sum_.forward_ms += phase_.forward_ms;
    phase_sum_.backward_ms += phase_.backward_ms;
    ++timed_passes_;
  }
  ++passes_;
  return count > 0 ? loss_sum / static_cast<double>(count) : 0.0;
}

StatusOr<double> CudaBackend::Loss(const model::TokenBatch& batch, model::UnitHooks& hooks) {
  HT_RETURN_IF_ERROR(CheckBatch(batch));
  HT_RETURN_IF_ERROR(SetSegments(batch));
  const int64_t count = model::CountTargets(batch.targets, N_, options_.ignore_index);
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  HT_RETURN_IF_ERROR(LoadTokens(batch));
  if (shared_grads_) {  // the forward below overwrites the block gradients
    grads_clobbered_ = grads_clobbered_ || grads_hold_pass_;
    grads_hold_pass_ = false;
    grads_zero_pending_ = !grads_clobbered_;  // zeros are re-made on demand
  }
  if (fp8_) HT_RETURN_IF_ERROR(fp8_->BeginPass(stream_));  // a forward-only pass records nothing
  pass_rng_offset_ = batch.rng_offset;
  pass_dropout_ = false;  // evaluation: no adapter dropout
  HT_RETURN_IF_ERROR(ForwardPass(hooks, false));
  HT_RETURN_IF_ERROR(HeadLoss(/*backward=*/false));
  HT_RETURN_IF_ERROR(hooks.AfterForward(ParamLayout::kEmbeddingUnit));
  HT_ASSIGN_OR_RETURN(const double loss_sum, ReadLoss());
  return count > 0 ? loss_sum / static_cast<double>(count) : 0.0;
}

}  // namespace hypertrain::cuda
