// CudaBackend: one transformer block's forward, recomputation and backward.
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
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/fp8_rmsnorm.h"
#include "runtime/kernels/cuda/fp8_rope.h"
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

uint8_t* Codes(void* p) { return static_cast<uint8_t*>(p); }

// Under delayed FP8 scaling a normalised GEMM input (ln1, ln2) lives only as
// FP8: its buffer (bf16-sized) holds the codes [N, C] the forward GEMM reads
// and, right after them, their transpose [C, N] that the wgrad reads.
Status NormFp8(const Fp8Projections::CastTarget& t, float* rstd, const void* x, const void* w,
               int N, int C, float eps, OpProfile& profile, cudaStream_t stream) {
  HT_LAUNCH(kc::RmsNormForwardFp8(t.q, rstd, static_cast<const __nv_bfloat16*>(x),
                                  static_cast<const __nv_bfloat16*>(w), N, C, eps, t.scale, t.amax,
                                  t.format, stream));
  profile.Mark(Op::kNorm, stream);
  HT_LAUNCH(kc::Fp8Transpose(t.q + size_t(N) * C, t.q, N, C, stream));
  profile.Mark(Op::kFp8Cast, stream);
  return Status::Ok();
}

// y = RMSNorm(x) * w in the compute dtype, or, with an FP8 target (delayed
// scaling), only as its codes and their transpose (NormFp8).
Status BlockNorm(const std::optional<Fp8Projections::CastTarget>& fp8, kc::DType dt, void* y,
                 float* rstd, const void* x, const void* w, int N, int C, float eps,
                 OpProfile& profile, cudaStream_t stream) {
  if (fp8) return NormFp8(*fp8, rstd, x, w, N, C, eps, profile, stream);
  HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormForward<T>(static_cast<T*>(y), rstd, nullptr, static_cast<const T*>(x),
                                 nullptr, static_cast<const T*>(w), N, C, eps, stream);
  }));
  profile.Mark(Op::kNorm, stream);
  return Status::Ok();
}

// The same for act = silu(g) * u (the down GEMM's input, buffer [N, F]), in
// one pass: the SwiGLU writes both.
Status SwiGluFp8(const Fp8Projections::CastTarget& t, const void* gu, int N, int F,
                 OpProfile& profile, cudaStream_t stream) {
  const __nv_bfloat16* g = static_cast<const __nv_bfloat16*>(gu);
  HT_LAUNCH(kc::SwiGluForwardFp8Transpose(t.q, t.q + size_t(N) * F, g, g + F, 2 * F, N, F, t.scale,
                                          t.amax, t.format, stream));
  profile.Mark(Op::kSwiGlu, stream);
  return Status::Ok();
}

}  // namespace

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
  // With delayed FP8 scales ln1, ln2 and act exist only as codes (NormFp8).
  using Target = std::optional<Fp8Projections::CastTarget>;
  auto fused = [&](model::Fp8Gemm gemm, void* buf) -> Target {
    return fp8_ ? fp8_->FusedInput(layer, gemm, Codes(buf)) : std::nullopt;
  };
  const Target ln1_fp8 = fused(model::Fp8Gemm::kQkv, a.ln1);
  const Target ln2_fp8 = fused(model::Fp8Gemm::kGateUp, a.ln2);
  const Target act_fp8 = fused(model::Fp8Gemm::kDown, a.act);
  HT_RETURN_IF_ERROR(BlockNorm(ln1_fp8, dt, a.ln1, a.rstd1, a.x, W(u, model::kInputNorm), N, C,
                               eps, profile_, stream_));
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kQkv, Bf16(a.ln1), N, C,
                                     Bf16(W(u, model::kQProj)), QKV, Bf16(a.qkv), nullptr, stream_,
                                     ln1_fp8 ? ln1_fp8->q : nullptr));
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
  HT_RETURN_IF_ERROR(BlockNorm(ln2_fp8, dt, a.ln2, a.rstd2, a.h, W(u, model::kPostNorm), N, C,
                               eps, profile_, stream_));
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kGateUp, Bf16(a.ln2), N, C,
                                     Bf16(W(u, model::kGateProj)), 2 * F, Bf16(a.gu), nullptr,
                                     stream_, ln2_fp8 ? ln2_fp8->q : nullptr));
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
  // The codes and their transpose also when recomputing (full checkpointing):
  // the down GEMM's wgrad reads the transpose.
  if (act_fp8) {
    HT_RETURN_IF_ERROR(SwiGluFp8(*act_fp8, a.gu, N, F, profile_, stream_));
  } else {
    HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* gu = static_cast<const T*>(a.gu);
      return kc::SwiGluForward<T>(static_cast<T*>(a.act), F, gu, gu + F, 2 * F, N, F, stream_);
    }));
    profile_.Mark(Op::kSwiGlu, stream_);
  }
  if (!write_output) return Status::Ok();
  const int L = static_cast<int>(cfg.num_hidden_layers);
  void* y = layer + 1 < L ? acts_[layer + 1]->x : x_final_;
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Forward(layer, model::Fp8Gemm::kDown, Bf16(a.act), N, F,
                                     Bf16(W(u, model::kDownProj)), C, Bf16(y), Bf16(a.h), stream_,
                                     act_fp8 ? act_fp8->q : nullptr));
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
  if (fp8_ && fp8_->fused_this_pass()) {  // as BlockForward: codes and transposes only
    using Target = std::optional<Fp8Projections::CastTarget>;
    const Target ln1 = fp8_->FusedInput(layer, model::Fp8Gemm::kQkv, Codes(a.ln1));
    const Target ln2 = fp8_->FusedInput(layer, model::Fp8Gemm::kGateUp, Codes(a.ln2));
    const Target act = fp8_->FusedInput(layer, model::Fp8Gemm::kDown, Codes(a.act));
    HT_RETURN_IF_ERROR(BlockNorm(ln1, dtype_, a.ln1, a.rstd1, a.x, W(u, model::kInputNorm), N, C,
                                 eps, profile_, stream_));
    HT_RETURN_IF_ERROR(BlockNorm(ln2, dtype_, a.ln2, a.rstd2, a.h, W(u, model::kPostNorm), N, C,
                                 eps, profile_, stream_));
    return SwiGluFp8(*act, a.gu, N, F, profile_, stream_);
  }
  HT_RETURN_IF_ERROR(BlockNorm(std::nullopt, dtype_, a.ln1, a.rstd1, a.x, W(u, model::kInputNorm),
                               N, C, eps, profile_, stream_));
  HT_RETURN_IF_ERROR(BlockNorm(std::nullopt, dtype_, a.ln2, a.rstd2, a.h, W(u, model::kPostNorm),
                               N, C, eps, profile_, stream_));
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* gu = static_cast<const T*>(a.gu);
    return kc::SwiGluForward<T>(static_cast<T*>(a.act), F, gu, gu + F, 2 * F, N, F, stream_);
  }));
  profile_.Mark(Op::kSwiGlu, stream_);
  return Status::Ok();
}

// What BlockBackward's steps share for one layer.
struct CudaBackend::BlockStep {
  int layer, u;
  const Acts& a;
  int N, C, Q, K, F, H, KV, D, QKV;
  size_t es;
  // The first micro-batch after ZeroGrads writes the weight gradients (no
  // zeroing pass over them), later ones add.
  float dw_beta;
  void* datt;  // the attention backward's dout and dqkv (see PlanActivations)
  void* dqkv;
  // The transposed codes the forward kept after ln1's, ln2's and act's (NormFp8).
  bool kept;
  const uint8_t* KeptT(void* buf, int cols) const {
    return kept ? Codes(buf) + size_t(N) * cols : nullptr;
  }
};

Status CudaBackend::BlockBackward(int layer) {
  const model::ModelConfig& cfg = layout_.config();
  const Acts& a = *acts_[layer];
  const int u = ParamLayout::BlockUnit(layer);
  const int N = static_cast<int>(N_), Q = static_cast<int>(cfg.q_dim()), K = static_cast<int>(cfg.kv_dim());
  const size_t es = kc::DTypeSize(dtype_);
  void* const datt = att_grads_in_gu_ ? a.gu : datt_;
  void* const dqkv =
      att_grads_in_gu_ ? static_cast<char*>(a.gu) + DqkvOffsetInGu(N, Q, es) : dqkv_;
  if (fp8_) fp8_->UseWeights(layer, versions_[u]);
  if (qlora_) HT_RETURN_IF_ERROR(MaterializeBlock(u));  // no-op after a full recompute
  const BlockStep b{layer, u, a, N, static_cast<int>(cfg.hidden_size), Q, K,
                    static_cast<int>(cfg.intermediate_size), static_cast<int>(cfg.num_attention_heads),
                    static_cast<int>(cfg.num_key_value_heads), static_cast<int>(cfg.head_dim()),
                    Q + 2 * K, es, first_write_ ? 0.0f : 1.0f, datt, dqkv,
                    fp8_ && fp8_->fused_this_pass()};
  HT_RETURN_IF_ERROR(DownProjBackward(b));
  HT_RETURN_IF_ERROR(GateUpBackward(b));
  // dres (= dy) += norm2 backward: dres becomes dh.
  HT_RETURN_IF_ERROR(NormBackward(u, model::kPostNorm, a.h, a.rstd2));
  std::optional<Fp8Projections::CastTarget> dqkv_fp8;  // packed segments: cast separately
  HT_RETURN_IF_ERROR(AttentionBlockBackward(b, &dqkv_fp8));
  HT_RETURN_IF_ERROR(QkvBackward(b, dqkv_fp8.has_value()));
  // dres (= dh) += norm1 backward: dres becomes dx of the block.
  return NormBackward(u, model::kInputNorm, a.x, a.rstd1);
}

// --- MLP: y = h + down(act), act = silu(gate) * up; dres is dy.
Status CudaBackend::DownProjBackward(const BlockStep& b) {
  const Acts& a = b.a;
  const int layer = b.layer, u = b.u, N = b.N, C = b.C, F = b.F;
  const kc::DType dt = dtype_, f32 = kc::DType::kF32;
  kc::Gemm& g = *gemm_;
  const float dw_beta = b.dw_beta;
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kDown, Bf16(dres_), Bf16(a.act), N, F,
                                      Bf16(W(u, model::kDownProj)), C, Bf16(dact_),
                                      G(u, model::kDownProj), dw_beta, stream_, false,
                                      b.KeptT(a.act, F)));
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
  return Status::Ok();
}

// The SwiGLU backward and the gate|up projections' (dln gets their dx).
Status CudaBackend::GateUpBackward(const BlockStep& b) {
  const Acts& a = b.a;
  const int layer = b.layer, u = b.u, N = b.N, C = b.C, F = b.F;
  const size_t es = b.es;
  const kc::DType dt = dtype_, f32 = kc::DType::kF32;
  kc::Gemm& g = *gemm_;
  const float dw_beta = b.dw_beta;
  // With a delayed scale at hand the SwiGLU backward writes the gate|up
  // GEMMs' FP8 output gradient and its transpose (the wgrad operand) in one
  // pass (no bf16 dgu).
  const std::optional<Fp8Projections::CastTarget> dgu_fp8 =
      fp8_ ? fp8_->FusedGrad(layer, model::Fp8Gemm::kGateUp) : std::nullopt;
  if (dgu_fp8) {
    const __nv_bfloat16* gu = Bf16(a.gu);
    HT_LAUNCH(kc::SwiGluBackwardFp8Transpose(dgu_fp8->q, dgu_fp8->qt, Bf16(dact_), F, gu, gu + F,
                                             2 * F, N, F, dgu_fp8->scale, dgu_fp8->amax,
                                             dgu_fp8->format, stream_));
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
                                      /*dy_cast=*/dgu_fp8.has_value(), b.KeptT(a.ln2, C)));
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
  return Status::Ok();
}

// --- Attention: h = x + o(att); dres is dh. The o projection, the attention
// and RoPE backward; *dqkv_fp8 is set when RoPE wrote the FP8 dqkv.
Status CudaBackend::AttentionBlockBackward(const BlockStep& b,
                                           std::optional<Fp8Projections::CastTarget>* dqkv_fp8) {
  const Acts& a = b.a;
  const int layer = b.layer, u = b.u, N = b.N, C = b.C, Q = b.Q, K = b.K, QKV = b.QKV;
  const size_t es = b.es;
  const kc::DType dt = dtype_, f32 = kc::DType::kF32;
  kc::Gemm& g = *gemm_;
  const float dw_beta = b.dw_beta;
  const int H = b.H, KV = b.KV, D = b.D;
  void* const datt = b.datt;
  void* const dqkv = b.dqkv;
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
    // With a delayed scale at hand the RoPE backward writes the q|k|v GEMMs'
    // FP8 output gradient and its transpose in one pass (no rotated bf16 dqkv).
    *dqkv_fp8 = fp8_ ? fp8_->FusedGrad(layer, model::Fp8Gemm::kQkv) : std::nullopt;
    if (const auto& t = *dqkv_fp8) {
      HT_LAUNCH(kc::RopeBackwardFp8Transpose(t->q, t->qt, Bf16(dqkv), N, QKV, rope_table_,
                                             static_cast<int>(S_), H + KV, D, t->scale, t->amax,
                                             t->format, stream_));
    } else {
      HT_LAUNCH(DispatchDType(dt, [&](auto tag) {
        using T = decltype(tag);
        return kc::RopeBackward<T>(static_cast<T*>(dqkv), QKV, static_cast<T*>(dqkv), QKV,
                                   rope_table_, N, static_cast<int>(S_), H + KV, D, stream_);
      }));
    }
    profile_.Mark(Op::kRope, stream_);
  }
  return Status::Ok();
}

// The q|k|v projections' backward (dln gets their dx); `dqkv_cast`: the FP8
// output gradient is already cast.
Status CudaBackend::QkvBackward(const BlockStep& b, bool dqkv_cast) {
  const Acts& a = b.a;
  const int layer = b.layer, u = b.u, N = b.N, C = b.C, Q = b.Q, K = b.K, QKV = b.QKV;
  const size_t es = b.es;
  const kc::DType dt = dtype_, f32 = kc::DType::kF32;
  kc::Gemm& g = *gemm_;
  const float dw_beta = b.dw_beta;
  void* const dqkv = b.dqkv;
  if (fp8_) {
    HT_RETURN_IF_ERROR(fp8_->Backward(layer, model::Fp8Gemm::kQkv, Bf16(dqkv), Bf16(a.ln1), N, C,
                                      Bf16(W(u, model::kQProj)), QKV, Bf16(dln_),
                                      G(u, model::kQProj), dw_beta, stream_,
                                      /*dy_cast=*/dqkv_cast, b.KeptT(a.ln1, C)));
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
  return Status::Ok();
}

Status CudaBackend::NormBackward(int u, int norm, const void* input, const float* rstd) {
  const int N = static_cast<int>(N_), C = static_cast<int>(layout_.config().hidden_size);
  HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::RmsNormBackward<T>(static_cast<T*>(dres_), static_cast<const T*>(dres_), NormDw(u, norm),
                                  norm_scratch_, static_cast<const T*>(dln_), static_cast<const T*>(input),
                                  static_cast<const T*>(W(u, norm)), rstd, N, C, stream_);
  }));
  profile_.Mark(Op::kNorm, stream_);
  return Status::Ok();
}

}  // namespace hypertrain::cuda
