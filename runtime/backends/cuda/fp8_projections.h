#pragma once
// Fp8Projections: the CUDA backend's FP8 block projections (model.fp8;
// runtime/model/fp8.h has the recipe). For one GEMM of block l,
//
//   Forward:  Xq = fp8(X * s_x)  Wq = fp8(W * s_w)           (e4m3)
//             Y  = (Xq / s_x) (Wq / s_w)^T [+ C_in]          bf16 out, fp32 accumulation
//   Backward: dYq, dYt = fp8(dY * s_g), its transpose        (grad format: e5m2 default)
//             Wt = fp8(W * s_w)^T, Xt = fp8(X * s_x)^T       (the forward's scales)
//             dX = dYq . Wt^T                                 bf16
//             dW (+)= dYt . Xt^T                              fp32 (beta as in bf16)
//
// s_w comes from W's own amax, computed before its cast in the first forward
// after the weights changed (ParamsVersion) and kept while they do not
// (micro-batches of one step, recomputation, Loss passes; every forward with
// a unit pool or CUDA graphs);
// s_x and s_g from the delayed history (Fp8ScalingState) or, for the
// tensorwise recipe and a run's first pass, from the tensor's own amax. The
// casts record each tensor's amax into a device slot; EndPass() reads them
// back (after the pass's own synchronisation), agrees them across ranks
// (UnitHooks::ReduceAmax) and advances the history; BeginPass() zeroes the
// slots and uploads the next scales. Both are enqueued on the compute stream
// (so CUDA graphs capture them).
//
// Producer fusion: under delayed scaling with history the scale of an input
// or output gradient is known before the tensor exists, so the kernel that
// produces it may write the FP8 operand (and its amax) itself: FusedInput /
// FusedGrad say where (or with which scale, into the caller's buffer),
// Forward(x_codes) / Backward(dy_cast) then skip the cast. The bytes are
// those of the unfused cast. An input whose codes the caller keeps with
// their transpose (Fp8Transpose, in the forward) until the backward passes
// that transpose as Backward(x_t): no bf16 copy of X, no second cast.
//
// A frozen weight (PEFT's model.peft.fp8_base, SetFrozenWeight): its e4m3
// codes and scale were made once when the base was stored, so Forward reads
// the codes instead of casting W, Backward transposes them (a byte move)
// instead of casting W^T, and with no dW (dw null) neither X^T nor the
// transposed dY is made. Producer fusion is then off: the adapters beside
// each projection read the bf16 inputs and output gradients.
//
// Scratch: the forward operands (Xq, Wq) and the backward ones (dYq, dYt,
// Xt, Wt) are never live at once; the backend places them in its activation
// plan (dead regions), sized by ScratchBytes().
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"
#include "runtime/backends/cuda/op_profile.h"
#include "runtime/kernels/cuda/fp8_gemm.h"
#include "runtime/kernels/cuda/lm_head_loss.h"
#include "runtime/model/config.h"
#include "runtime/model/fp8.h"
#include "runtime/model/layout.h"
#include "runtime/model/unit_hooks.h"

namespace hypertrain::cuda {

class Fp8Projections {
 public:
  struct ScratchSizes {
    size_t forward = 0;   // Xq + Wq
    size_t backward = 0;  // dYq + dYt + Xt + Wt
    size_t lm_head = 0;   // model.fp8_lm_head: the head's Hq, Wq, Ht, Wt (0 without)
  };
  // For `tokens` rows per pass, each part rounded to 256 bytes.
  static ScratchSizes ScratchBytes(const model::ModelConfig& config, int64_t tokens,
                                   bool lm_head);

  // Fails with FailedPrecondition naming the GPU when it has no FP8 tensor
  // cores. The GEMMs use `gemm_workspace` (the bf16 GEMMs', shared: all
  // products are queued on the one compute stream). The small device buffers
  // (scales, amaxes: SlotBytes()) come later, with SetSlots.
  static StatusOr<std::unique_ptr<Fp8Projections>> Create(const model::Fp8Options& options,
                                                          const model::ModelConfig& config,
                                                          int device, OpProfile* profile,
                                                          void* gemm_workspace,
                                                          size_t gemm_workspace_bytes);
  // Bytes of the scale / amax slots, and where they live (256-byte aligned,
  // e.g. in the backend's activation plan: a cudaMalloc of their own would
  // take a 2 MiB page of its own). Initialises them; before the first pass.
  size_t SlotBytes() const;
  Status SetSlots(void* device);

  // Points the operands into the backend's plan: ScratchBytes(config,
  // tokens) at `forward` and `backward`; passes then have `tokens` rows.
  void SetScratch(int64_t tokens, void* forward, void* backward);
  // ScratchBytes().lm_head at `lm_head`, live while the LM head runs;
  // `dlogits_t` (chunk_rows * vocab bytes, null: the head's backward GEMMs
  // stay bf16) for the transposed dlogits codes.
  void SetLmHeadScratch(void* lm_head, void* dlogits_t) {
    lm_head_scratch_ = static_cast<uint8_t*>(lm_head);
    dlogits_t_ = static_cast<uint8_t*>(dlogits_t);
  }

  // model.fp8_lm_head: casts the head's input h [n, cols] (scaled as a block
  // GEMM's input) and weight w [vocab, cols] (its own amax, kept per
  // `w_version`) into the LM-head scratch and points `out->logits` at the
  // codes. With `backward`: out->dlogits_amax is the dlogits slot, and when
  // this pass has a delayed dlogits scale (history with a nonzero amax) and
  // dlogits_t scratch, h^T and W^T codes too, and out->grads is set.
  struct LmHeadCast {
    kernels::cuda::LmHeadLossArgs::Fp8Logits logits;
    kernels::cuda::LmHeadLossArgs::Fp8Grads grads;
    bool fp8_grads = false;
    float* dlogits_amax = nullptr;
  };
  Status CastLmHead(const __nv_bfloat16* h, int n, int cols, const __nv_bfloat16* w, int vocab,
                    int64_t w_version, bool backward, LmHeadCast* out, cudaStream_t stream);

  // Where a producer writes an operand already cast: q [n, width] row-major
  // (width: the GEMM's in for an input, out for a gradient), the scale to
  // cast with, the amax slot to record into. nullopt when this pass scales
  // from the tensor's own amax (tensorwise, or a first pass).
  struct CastTarget {
    uint8_t* q;
    const float* scale;
    float* amax;
    model::Fp8Format format;
    uint8_t* qt = nullptr;  // FusedGrad: where the transposed codes go [width, n]
  };
  // `into`: the caller's buffer for the codes (default: the forward scratch).
  std::optional<CastTarget> FusedInput(int layer, model::Fp8Gemm g, uint8_t* into = nullptr) const;
  std::optional<CastTarget> FusedGrad(int layer, model::Fp8Gemm g) const;

  // PEFT's frozen FP8 base: block `layer`'s weight of `g` is `codes` (e4m3,
  // [out, in] row-major) with `scale_inv` (device, 256-byte aligned), kept by
  // the caller for the projections' lifetime. set_frozen_base(true) first.
  struct FrozenWeight {
    const uint8_t* codes = nullptr;
    const float* scale_inv = nullptr;
  };
  void set_frozen_base(bool on) {
    frozen_base_ = on;
    frozen_.assign(on ? size_t(config_.num_hidden_layers) * model::kFp8GemmsPerBlock : 0, {});
  }
  void SetFrozenWeight(int layer, model::Fp8Gemm g, FrozenWeight w) {
    frozen_.at(size_t(layer) * model::kFp8GemmsPerBlock + static_cast<int>(g)) = w;
  }

  // Block `layer`'s weights are at `version` (the backend's ParamsVersion)
  // for the calls that follow; a weight's scale is recomputed when it changed.
  void UseWeights(int layer, int64_t version);
  // The optimizer step may record a weight's amax while it writes the new
  // bf16 weight (AdamW's amax): WeightAmaxSlot is where (ZeroWeightAmax first),
  // WeightAmaxRecorded says the slot now holds the amax of `version`; the
  // next scale for that version then needs no read of the weight.
  float* WeightAmaxSlot(int layer, model::Fp8Gemm g) const {
    return amax(state_.slots().Block(layer, g, model::Fp8Role::kWeight));
  }
  // The projection weights a run of block tensors [first, next) (one AdamW
  // launch) is made of: one or two whole weights (q|k|v then o; gate|up then
  // down) and, for two, where the second starts (unit offset). count 0:
  // anything else.
  struct RunWeights {
    int count = 0;
    model::Fp8Gemm gemm[2] = {};
    int64_t split = 0;
  };
  static RunWeights FindRunWeights(const std::vector<model::TensorSlot>& tensors, size_t first,
                                   size_t next);
  // Zeroes block `layer`'s four weight amax slots (one memset).
  Status ZeroWeightAmax(int layer, cudaStream_t stream);
  void WeightAmaxRecorded(int layer, model::Fp8Gemm g, int64_t version) {
    amax_version_[static_cast<size_t>(state_.slots().Block(layer, g, model::Fp8Role::kWeight))] =
        version;
  }
  // Off: every forward recomputes the weights' amax (unit pools, graphs).
  void set_cache_weight_scales(bool on) { cache_weight_scales_ = on; }

  // Y[n, out] = X[n, in] W[out, in]^T (+ c_in, same layout as Y, may be null).
  // x_codes: X's codes, written as a FusedInput(layer, g) target said (x is
  // then not read and may be null).
  Status Forward(int layer, model::Fp8Gemm g, const __nv_bfloat16* x, int n, int in,
                 const __nv_bfloat16* w, int out, __nv_bfloat16* y, const __nv_bfloat16* c_in,
                 cudaStream_t stream, const uint8_t* x_codes = nullptr);
  // dX[n, in] = dY W (overwritten); dW[out, in] = dY^T X + dw_beta * dW.
  // dy_cast: FusedGrad(layer, g)'s target holds dY's codes and their
  // transpose (dy is not read).
  // x_t: X's codes transposed [in, n], kept from the forward (x not read).
  Status Backward(int layer, model::Fp8Gemm g, const __nv_bfloat16* dy, const __nv_bfloat16* x,
                  int n, int in, const __nv_bfloat16* w, int out, __nv_bfloat16* dx, float* dw,
                  float dw_beta, cudaStream_t stream, bool dy_cast = false,
                  const uint8_t* x_t = nullptr);
  // Whether this pass casts inputs with delayed scales (FusedInput answers).
  bool fused_this_pass() const { return history_this_pass_ && !frozen_base_; }
  // cuda.gemm_autotune for the FP8 products (shapes not planned yet).
  void set_gemm_autotune(bool on) { gemm_->set_autotune(on); }

  Status BeginPass(cudaStream_t stream);
  // Queues the copy of this pass's amaxes to pinned host memory.
  Status QueueAmaxReadback(cudaStream_t stream);
  // After the stream synchronised: agree the amaxes across ranks, record them.
  Status EndPass(model::UnitHooks& hooks);

  model::Fp8ScalingState& state() { return state_; }
  const model::Fp8ScalingState& state() const { return state_; }
  ~Fp8Projections();

 private:
  Fp8Projections() = default;
  // Scale of `slot` for this pass: its own amax (tensorwise / no history)
  // before the cast, else the uploaded delayed scale; the cast records amax
  // in the delayed case.
  Status CastInput(const __nv_bfloat16* x, size_t numel, uint8_t* q, int slot, cudaStream_t stream);
  // dY's codes into dyq_, and with `transpose` their transpose into dyt_.
  Status CastTransposeGrad(const __nv_bfloat16* dy, int rows, int cols, int slot, cudaStream_t stream,
                           bool transpose = true);
  const FrozenWeight* Frozen(int layer, model::Fp8Gemm g) const {
    if (frozen_.empty()) return nullptr;
    const FrozenWeight& w = frozen_[size_t(layer) * model::kFp8GemmsPerBlock + static_cast<int>(g)];
    return w.codes != nullptr ? &w : nullptr;
  }
  // state_'s scales into the pinned buffer the pass's upload reads.
  void PublishScales();
  Status ComputeOwnScale(const __nv_bfloat16* x, size_t numel, int slot, cudaStream_t stream);
  // One slot every 256 bytes, each scale pointer aligned like a cudaMalloc
  // result: cuBLASLt refused (NOT_SUPPORTED) 4-byte aligned ones on an H100.
  // Weights' slots live in arrays of their own (w_*) that BeginPass leaves
  // alone, so a kept weight scale and its amax survive from pass to pass.
  static constexpr int kSlotStride = 64;
  bool IsWeight(int slot) const { return state_.slots().role(slot) == model::Fp8Role::kWeight; }
  float* scale(int slot) const { return (IsWeight(slot) ? w_scale_ : scale_) + slot * kSlotStride; }
  float* scale_inv(int slot) const {
    return (IsWeight(slot) ? w_scale_inv_ : scale_inv_) + slot * kSlotStride;
  }
  float* amax(int slot) const { return (IsWeight(slot) ? w_amax_ : amax_) + slot * kSlotStride; }
  // The weight's scale (kept while `version` holds) and its e4m3 codes into q.
  Status CastWeight(int slot, int64_t version, const __nv_bfloat16* w, size_t numel, uint8_t* q,
                    cudaStream_t stream);
  void Mark(Op op, cudaStream_t stream) {
    if (profile_ != nullptr) profile_->Mark(op, stream);
  }

  model::Fp8ScalingState state_;
  model::ModelConfig config_;
  int64_t tokens_ = 0;
  OpProfile* profile_ = nullptr;
  std::unique_ptr<kernels::cuda::Fp8Gemm> gemm_;
  bool history_this_pass_ = false;  // scales of inputs/grads from the history
  float *scale_ = nullptr, *scale_inv_ = nullptr, *amax_ = nullptr;  // device, per slot
  float *w_scale_ = nullptr, *w_scale_inv_ = nullptr, *w_amax_ = nullptr;  // weights' slots
  bool cache_weight_scales_ = true;
  bool frozen_base_ = false;
  std::vector<FrozenWeight> frozen_;  // [layer * kFp8GemmsPerBlock + gemm]
  std::vector<int64_t> layer_version_;   // per layer, from UseWeights
  std::vector<int64_t> scaled_version_;  // per slot: version its weight scale is from (-1: none)
  std::vector<int64_t> amax_version_;    // per slot: version the optimizer recorded the amax of
  // Pinned mirrors with the same stride: scale | scale_inv, and amax | w_amax.
  float *host_scales_ = nullptr, *host_amax_ = nullptr;
  uint8_t* lm_head_scratch_ = nullptr;
  uint8_t* dlogits_t_ = nullptr;
  uint8_t *xq_ = nullptr, *wq_ = nullptr, *dyq_ = nullptr, *dyt_ = nullptr, *xt_ = nullptr,
          *wt_ = nullptr;
};

}  // namespace hypertrain::cuda
