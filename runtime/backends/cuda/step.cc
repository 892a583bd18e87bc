// CudaBackend: one micro-batch's pass around the blocks (tokens, LM head and
// loss, the forward and backward loops over the units, the embedding gradient,
// trace) and the ForwardBackward/Loss entry points.
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
  Fp8Projections::LmHeadCast fp8_head;
  if (fp8_ && options_.fp8.lm_head) {
    HT_RETURN_IF_ERROR(fp8_->CastLmHead(Bf16(ln_f_), N, C, Bf16(W(E, head)), la.vocab,
                                        versions_[E], backward, &fp8_head, stream_));
    la.fp8 = &fp8_head.logits;
    la.fp8_grad = fp8_head.fp8_grads ? &fp8_head.grads : nullptr;
    la.dlogits_amax = fp8_head.dlogits_amax;
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
  if (peft_ && base_shard_ > 1 && base_[u] == nullptr) {
    return FailedPrecondition(fmt::format(
        "base unit {} is sharded and not gathered: a sharded PEFT base needs hooks that gather "
        "it (parallel::PeftDataParallelHooks)", u));
  }
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
