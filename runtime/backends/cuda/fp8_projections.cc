#include "runtime/backends/cuda/fp8_projections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/cuda/cuda_status.h"
#include "runtime/kernels/cuda/fp8_cast.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::Fp8Format;
using model::Fp8Role;

namespace {

size_t RoundUp(size_t b) { return (b + 255) & ~size_t{255}; }

struct Dims {
  int64_t max_in, max_out, max_w;
};

Dims GemmDims(const model::ModelConfig& c) {
  const int64_t C = c.hidden_size, Q = c.q_dim(), K = c.kv_dim(), F = c.intermediate_size;
  const int64_t qkv = Q + 2 * K;
  return {std::max({C, Q, F}), std::max({qkv, C, 2 * F}),
          std::max({qkv * C, C * Q, 2 * F * C, C * F})};
}

}  // namespace

Fp8Projections::ScratchSizes Fp8Projections::ScratchBytes(const model::ModelConfig& config,
                                                          int64_t tokens, bool lm_head) {
  const Dims d = GemmDims(config);
  ScratchSizes s;
  s.forward = RoundUp(size_t(tokens * d.max_in)) + RoundUp(size_t(d.max_w));
  s.backward = 2 * RoundUp(size_t(tokens * d.max_out)) + RoundUp(size_t(tokens * d.max_in)) +
               RoundUp(size_t(d.max_w));
  if (lm_head) {
    s.lm_head = 2 * (RoundUp(size_t(tokens * config.hidden_size)) +
                     RoundUp(size_t(config.vocab_size * config.hidden_size)));
  }
  return s;
}

StatusOr<std::unique_ptr<Fp8Projections>> Fp8Projections::Create(const model::Fp8Options& options,
                                                                  const model::ModelConfig& config,
                                                                  int device, OpProfile* profile,
                                                                  void* gemm_workspace,
                                                                  size_t gemm_workspace_bytes) {
  HT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Fp8Projections> p(new Fp8Projections());
  HT_ASSIGN_OR_RETURN(p->gemm_,
                      kc::Fp8Gemm::CreateSharing(device, gemm_workspace, gemm_workspace_bytes));
  p->config_ = config;
  p->profile_ = profile;
  p->state_ = model::Fp8ScalingState(
      options, model::Fp8Slots(static_cast<int>(config.num_hidden_layers), options));
  const size_t n = static_cast<size_t>(p->state_.num_slots()) * kSlotStride;
  HT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&p->host_scales_), 2 * n * sizeof(float), 0));
  HT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&p->host_amax_), 2 * n * sizeof(float), 0));
  std::fill(p->host_scales_, p->host_scales_ + 2 * n, 1.0f);
  std::fill(p->host_amax_, p->host_amax_ + 2 * n, 0.0f);
  p->layer_version_.assign(static_cast<size_t>(config.num_hidden_layers), 0);
  return p;
}

size_t Fp8Projections::SlotBytes() const {
  return 6 * static_cast<size_t>(state_.num_slots()) * kSlotStride * sizeof(float);
}

Status Fp8Projections::SetSlots(void* d) {
  if (d == nullptr || (reinterpret_cast<uintptr_t>(d) & 255) != 0) {
    return Internal("fp8: the scale slots need a 256-byte aligned buffer");
  }
  const size_t n = static_cast<size_t>(state_.num_slots()) * kSlotStride;
  scale_ = static_cast<float*>(d);
  scale_inv_ = scale_ + n;
  amax_ = scale_ + 2 * n;
  w_scale_ = scale_ + 3 * n;
  w_scale_inv_ = scale_ + 4 * n;
  w_amax_ = scale_ + 5 * n;
  HT_CUDA_RETURN_IF_ERROR(cudaMemset(d, 0, SlotBytes()));
  // Weight scales start at 1 (kept for an all-zero weight), as uploaded ones
  // do; host_scales_ holds ones until the first pass publishes real scales.
  std::vector<float> ones(2 * n, 1.0f);
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(w_scale_, ones.data(), 2 * n * sizeof(float), cudaMemcpyHostToDevice));
  scaled_version_.assign(static_cast<size_t>(state_.num_slots()), -1);
  amax_version_.assign(static_cast<size_t>(state_.num_slots()), -1);
  return Status::Ok();
}

Fp8Projections::~Fp8Projections() {
  if (host_scales_) cudaFreeHost(host_scales_);
  if (host_amax_) cudaFreeHost(host_amax_);
}

void Fp8Projections::SetScratch(int64_t tokens, void* forward, void* backward) {
  const Dims d = GemmDims(config_);
  tokens_ = tokens;
  auto at = [](void* base, size_t off) { return static_cast<uint8_t*>(base) + off; };
  const size_t x = RoundUp(size_t(tokens * d.max_in)), g = RoundUp(size_t(tokens * d.max_out));
  xq_ = at(forward, 0);
  wq_ = at(forward, x);
  dyq_ = at(backward, 0);
  dyt_ = at(backward, g);
  xt_ = at(backward, 2 * g);
  wt_ = at(backward, 2 * g + x);
}

Status Fp8Projections::ComputeOwnScale(const __nv_bfloat16* x, size_t numel, int slot,
                                       cudaStream_t stream) {
  const model::Fp8Slots& slots = state_.slots();
  HT_CUDA_RETURN_IF_ERROR(kc::Fp8Amax(x, numel, amax(slot), stream));
  HT_CUDA_RETURN_IF_ERROR(kc::Fp8ScalesFromAmax(amax(slot), scale(slot), scale_inv(slot), 1, 1,
                                                slots.format(slot),
                                                static_cast<int>(state_.options().margin), stream));
  return Status::Ok();
}

Status Fp8Projections::CastInput(const __nv_bfloat16* x, size_t numel, uint8_t* q, int slot,
                                 cudaStream_t stream) {
  const Fp8Format f = state_.slots().format(slot);
  if (history_this_pass_) {
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(q, x, numel, scale(slot), amax(slot), f, stream));
    return Status::Ok();
  }
  HT_RETURN_IF_ERROR(ComputeOwnScale(x, numel, slot, stream));
  HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(q, x, numel, scale(slot), nullptr, f, stream));
  return Status::Ok();
}

Status Fp8Projections::CastTransposeGrad(const __nv_bfloat16* dy, int rows, int cols, int slot,
                                         cudaStream_t stream, bool transpose) {
  const Fp8Format f = state_.slots().format(slot);
  float* record = history_this_pass_ ? amax(slot) : nullptr;
  if (!history_this_pass_) {
    HT_RETURN_IF_ERROR(ComputeOwnScale(dy, size_t(rows) * cols, slot, stream));
  }
  if (!transpose) {
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(dyq_, dy, size_t(rows) * cols, scale(slot), record, f, stream));
    return Status::Ok();
  }
  HT_CUDA_RETURN_IF_ERROR(
      kc::Fp8CastTranspose(dyq_, dyt_, dy, rows, cols, scale(slot), record, f, stream));
  return Status::Ok();
}

std::optional<Fp8Projections::CastTarget> Fp8Projections::FusedInput(int layer, model::Fp8Gemm g,
                                                                     uint8_t* into) const {
  if (into == nullptr) into = xq_;
  if (!history_this_pass_ || frozen_base_ || into == nullptr) return std::nullopt;
  const int s = state_.slots().Block(layer, g, Fp8Role::kInput);
  return CastTarget{into, scale(s), amax(s), state_.slots().format(s)};
}

std::optional<Fp8Projections::CastTarget> Fp8Projections::FusedGrad(int layer,
                                                                    model::Fp8Gemm g) const {
  if (!history_this_pass_ || frozen_base_ || dyq_ == nullptr) return std::nullopt;
  const int s = state_.slots().Block(layer, g, Fp8Role::kGradOutput);
  return CastTarget{dyq_, scale(s), amax(s), state_.slots().format(s), dyt_};
}

Fp8Projections::RunWeights Fp8Projections::FindRunWeights(
    const std::vector<model::TensorSlot>& tensors, size_t first, size_t next) {
  struct Weight {
    model::Fp8Gemm gemm;
    size_t begin, end;  // block tensor indices [begin, end)
  };
  static constexpr Weight kWeights[] = {
      {model::Fp8Gemm::kQkv, model::kQProj, model::kOProj},
      {model::Fp8Gemm::kO, model::kOProj, model::kOProj + 1},
      {model::Fp8Gemm::kGateUp, model::kGateProj, model::kDownProj},
      {model::Fp8Gemm::kDown, model::kDownProj, model::kDownProj + 1},
  };
  RunWeights out;
  size_t at = first;
  for (const Weight& wt : kWeights) {
    if (wt.begin != at || wt.end > next || out.count == 2) continue;
    if (out.count == 1) out.split = tensors[wt.begin].offset;
    out.gemm[out.count++] = wt.gemm;
    at = wt.end;
  }
  if (at != next) return {};  // the run holds something else too
  return out;
}

Status Fp8Projections::ZeroWeightAmax(int layer, cudaStream_t stream) {
  // The weights' slots of one block lie within 12 slots of the weights' own
  // array, whose other entries nothing reads (inputs' amaxes live in amax_).
  float* begin = amax(state_.slots().Block(layer, model::Fp8Gemm::kQkv, Fp8Role::kWeight));
  float* last = amax(state_.slots().Block(layer, model::Fp8Gemm::kDown, Fp8Role::kWeight));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(begin, 0, size_t(last - begin + 1) * sizeof(float), stream));
  return Status::Ok();
}

void Fp8Projections::UseWeights(int layer, int64_t version) {
  layer_version_.at(static_cast<size_t>(layer)) = version;
}

// The weight's scale from its own amax (once per version when kept; the
// optimizer may have recorded that amax already), then the cast. The amax
// slot is zeroed first: it is a running max.
Status Fp8Projections::CastWeight(int slot, int64_t version, const __nv_bfloat16* w, size_t numel,
                                  uint8_t* q, cudaStream_t stream) {
  const size_t i = static_cast<size_t>(slot);
  if (!cache_weight_scales_ || scaled_version_[i] != version) {
    if (cache_weight_scales_ && amax_version_[i] == version) {  // the optimizer recorded it
      HT_CUDA_RETURN_IF_ERROR(kc::Fp8ScalesFromAmax(amax(slot), scale(slot), scale_inv(slot), 1, 1,
                                                    Fp8Format::kE4M3,
                                                    static_cast<int>(state_.options().margin), stream));
    } else {
      HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax(slot), 0, sizeof(float), stream));
      HT_RETURN_IF_ERROR(ComputeOwnScale(w, numel, slot, stream));
    }
    scaled_version_[i] = version;
  }
  HT_CUDA_RETURN_IF_ERROR(kc::Fp8Cast(q, w, numel, scale(slot), nullptr, Fp8Format::kE4M3, stream));
  return Status::Ok();
}

Status Fp8Projections::CastLmHead(const __nv_bfloat16* h, int n, int cols, const __nv_bfloat16* w,
                                  int vocab, int64_t w_version, bool backward, LmHeadCast* out,
                                  cudaStream_t stream) {
  const model::Fp8Slots& slots = state_.slots();
  const int sx = slots.LmHead(Fp8Role::kInput), sw = slots.LmHead(Fp8Role::kWeight);
  const int sg = slots.LmHead(Fp8Role::kGradOutput);
  if (sx < 0 || lm_head_scratch_ == nullptr) {
    return Internal("fp8: the LM head is not in FP8 (model.fp8_lm_head) or has no scratch");
  }
  if (n > tokens_) return Internal(fmt::format("fp8: {} rows, scratch planned for {}", n, tokens_));
  const size_t h_bytes = RoundUp(size_t(tokens_) * cols), w_bytes = RoundUp(size_t(vocab) * cols);
  uint8_t* hq = lm_head_scratch_;
  uint8_t* wq = hq + h_bytes;
  uint8_t* ht = wq + w_bytes;
  uint8_t* wt = ht + h_bytes;
  HT_RETURN_IF_ERROR(CastWeight(sw, w_version, w, size_t(vocab) * cols, wq, stream));
  HT_RETURN_IF_ERROR(CastInput(h, size_t(n) * cols, hq, sx, stream));
  *out = LmHeadCast{};
  out->logits = {gemm_.get(), hq, wq, scale_inv(sx), scale_inv(sw)};
  if (backward) {
    out->dlogits_amax = amax(sg);
    // A delayed dlogits scale needs an amax in the history: the first pass
    // (and a resumed run whose history has none) records it from bf16 dlogits.
    const std::vector<float> hist = state_.History(sg);
    const bool seen = std::any_of(hist.begin(), hist.end(), [](float a) { return a > 0.0f; });
    if (history_this_pass_ && seen && dlogits_t_ != nullptr) {
      HT_CUDA_RETURN_IF_ERROR(kc::Fp8Transpose(ht, hq, n, cols, stream));
      HT_CUDA_RETURN_IF_ERROR(kc::Fp8Transpose(wt, wq, vocab, cols, stream));
      out->grads = {wt, ht, scale_inv(sw), scale_inv(sx), scale(sg), scale_inv(sg),
                    state_.options().grad_format, dlogits_t_};
      out->fp8_grads = true;
    }
  }
  Mark(Op::kFp8Cast, stream);
  return Status::Ok();
}

Status Fp8Projections::Forward(int layer, model::Fp8Gemm g, const __nv_bfloat16* x, int n, int in,
                               const __nv_bfloat16* w, int out, __nv_bfloat16* y,
                               const __nv_bfloat16* c_in, cudaStream_t stream,
                               const uint8_t* x_codes) {
  if (x_codes != nullptr && !history_this_pass_) {
    return Internal("fp8: a fused input cast without a delayed scale");
  }
  if (n > tokens_) return Internal(fmt::format("fp8: {} rows, scratch planned for {}", n, tokens_));
  const model::Fp8Slots& slots = state_.slots();
  const int sx = slots.Block(layer, g, Fp8Role::kInput), sw = slots.Block(layer, g, Fp8Role::kWeight);
  const FrozenWeight* frozen = Frozen(layer, g);
  if (frozen == nullptr) {
    HT_RETURN_IF_ERROR(
        CastWeight(sw, layer_version_[static_cast<size_t>(layer)], w, size_t(out) * in, wq_, stream));
  }
  if (x_codes == nullptr) {
    HT_RETURN_IF_ERROR(CastInput(x, size_t(n) * in, xq_, sx, stream));
    x_codes = xq_;
  }
  Mark(Op::kFp8Cast, stream);
  kc::Fp8GemmArgs a;
  a.m = n, a.n = out, a.k = in;
  a.a = {x_codes, Fp8Format::kE4M3, scale_inv(sx), in};
  a.b = frozen != nullptr ? kc::Fp8Operand{frozen->codes, Fp8Format::kE4M3, frozen->scale_inv, in}
                         : kc::Fp8Operand{wq_, Fp8Format::kE4M3, scale_inv(sw), in};
  a.c = y;
  a.c_type = kc::DType::kBF16;
  a.c_in = c_in;
  a.beta = c_in != nullptr ? 1.0f : 0.0f;
  a.fast_accum = true;  // forward only, as Transformer Engine
  HT_RETURN_IF_ERROR(gemm_->Matmul(a, stream));
  Mark(Op::kGemm, stream);
  return Status::Ok();
}

Status Fp8Projections::Backward(int layer, model::Fp8Gemm g, const __nv_bfloat16* dy,
                                const __nv_bfloat16* x, int n, int in, const __nv_bfloat16* w,
                                int out, __nv_bfloat16* dx, float* dw, float dw_beta,
                                cudaStream_t stream, bool dy_cast, const uint8_t* x_t) {
  if ((dy_cast || x_t != nullptr) && !history_this_pass_) {
    return Internal("fp8: a fused gradient cast or kept input without a delayed scale");
  }
  if (n > tokens_) return Internal(fmt::format("fp8: {} rows, scratch planned for {}", n, tokens_));
  const model::Fp8Slots& slots = state_.slots();
  const int sx = slots.Block(layer, g, Fp8Role::kInput), sw = slots.Block(layer, g, Fp8Role::kWeight),
            sg = slots.Block(layer, g, Fp8Role::kGradOutput);
  const Fp8Format gf = slots.format(sg);
  const FrozenWeight* frozen = Frozen(layer, g);
  const bool wgrad = dw != nullptr;
  if (!dy_cast) HT_RETURN_IF_ERROR(CastTransposeGrad(dy, n, out, sg, stream, wgrad));
  if (frozen != nullptr) {  // the codes cast at load, transposed
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8Transpose(wt_, frozen->codes, out, in, stream));
  } else {  // W again with its forward scale (still in its slot), transposed
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8CastTranspose<__nv_bfloat16>(nullptr, wt_, w, out, in, scale(sw),
                                                                nullptr, Fp8Format::kE4M3, stream));
  }
  if (wgrad && x_t == nullptr) {
    HT_CUDA_RETURN_IF_ERROR(kc::Fp8CastTranspose<__nv_bfloat16>(nullptr, xt_, x, n, in, scale(sx),
                                                                nullptr, Fp8Format::kE4M3, stream));
    x_t = xt_;
  }
  Mark(Op::kFp8Cast, stream);
  kc::Fp8GemmArgs d;  // dX[n, in] = dY[n, out] . Wt[in, out]^T
  d.m = n, d.n = in, d.k = out;
  d.a = {dyq_, gf, scale_inv(sg), out};
  d.b = {wt_, Fp8Format::kE4M3, frozen != nullptr ? frozen->scale_inv : scale_inv(sw), out};
  d.c = dx;
  d.c_type = kc::DType::kBF16;
  HT_RETURN_IF_ERROR(gemm_->Matmul(d, stream));
  if (wgrad) {
    kc::Fp8GemmArgs wg;  // dW[out, in] = dYt[out, n] . Xt[in, n]^T (+ dW)
    wg.m = out, wg.n = in, wg.k = n;
    wg.a = {dyt_, gf, scale_inv(sg), n};
    wg.b = {x_t, Fp8Format::kE4M3, scale_inv(sx), n};
    wg.c = dw;
    wg.c_type = kc::DType::kF32;
    wg.beta = dw_beta;
    HT_RETURN_IF_ERROR(gemm_->Matmul(wg, stream));
  }
  Mark(Op::kGemm, stream);
  return Status::Ok();
}

Status Fp8Projections::BeginPass(cudaStream_t stream) {
  const size_t n = static_cast<size_t>(state_.num_slots()) * kSlotStride;
  history_this_pass_ = state_.UsesHistory();
  PublishScales();  // the previous pass has synchronised: the buffer is free
  HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax_, 0, n * sizeof(float), stream));
  // scale_ and scale_inv_ are adjacent: one copy.
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(scale_, host_scales_, 2 * n * sizeof(float), cudaMemcpyHostToDevice, stream));
  return Status::Ok();
}

Status Fp8Projections::QueueAmaxReadback(cudaStream_t stream) {
  const size_t n = static_cast<size_t>(state_.num_slots()) * kSlotStride;
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_amax_, amax_, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_amax_ + n, w_amax_, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status Fp8Projections::EndPass(model::UnitHooks& hooks) {
  const int n = state_.num_slots();
  const size_t w = static_cast<size_t>(n) * kSlotStride;  // the weights' half
  std::vector<float> amax(n);
  for (int s = 0; s < n; ++s) amax[s] = host_amax_[(IsWeight(s) ? w : 0) + s * kSlotStride];
  HT_RETURN_IF_ERROR(hooks.ReduceAmax(amax.data(), amax.size()));
  HT_RETURN_IF_ERROR(state_.Record(amax));
  PublishScales();  // for a replayed graph, whose copy reads the pinned buffer
  return Status::Ok();
}

void Fp8Projections::PublishScales() {
  const int n = state_.num_slots();
  const size_t inv = static_cast<size_t>(n) * kSlotStride;
  for (int s = 0; s < n; ++s) {
    host_scales_[s * kSlotStride] = state_.scales()[s];
    host_scales_[inv + s * kSlotStride] = state_.scale_invs()[s];
  }
}

}  // namespace hypertrain::cuda
