#pragma once
// CudaBackend: model::Backend on one CUDA device.
//
// State per unit u (ParamLayout::unit(u), padded_numel elements P, owned
// range R): fp32 full gradients [P]; fp32 master weights, m, v [|R|]; a
// compute copy [P] in the precision's dtype (bf16 / fp16 / fp32; tf32 is
// fp32 storage with TF32 tensor-core GEMMs). Attention: the flash kernels of
// kernels/cuda/attention.h for bf16/fp16, the exact but slow fp32 kernels of
// kernels/cuda/naive_attention_f32.h for fp32/tf32 (correctness runs).
//
// Unit pool (BackendOptions::unit_pool, sharded runs; runtime/model/backend.h):
// per unit only the owned range persists (compute-dtype ComputeShard, fp32
// master, m, v, ShardGrads); full-size compute params and fp32 grads live in
// slots allocated once in Create(): one params + one grads slot for the
// embedding unit, pool_param_slots params slots and 2 grads slots for the
// blocks. Acquire/release only re-point ComputeParams/FullGrads; every
// device access to a slot is queued on the compute stream (AcquireGrads'
// memset, ReleaseGrads' fold into ShardGrads) or, for collectives, waits for
// it, so reuse follows stream order.
//
// Static memory plan: every activation, gradient-of-activation and scratch
// buffer is carved out of ONE allocation made in Create() from the config,
// batch and checkpointing mode; ForwardBackward/Loss/OptimizerStep never
// allocate. Per block the forward is
//   ln1 = rmsnorm(x);  qkv = ln1 Wqkv^T;  rope(q, k);  att = attention(qkv)
//   h = x + att Wo^T  (residual add fused into the GEMM epilogue)
//   ln2 = rmsnorm(h);  gu = ln2 [Wg;Wu]^T;  act = silu(g) * u
//   y = h + act Wd^T  (fused residual)
// with the q/k/v (gate/up) GEMMs fused into one when the layout stores the
// weights back to back. Activation checkpointing: none keeps everything;
// selective keeps the GEMM/attention outputs (qkv, att, lse, h, gu) and
// recomputes both norms and the SwiGLU product; full keeps each block's input
// and re-runs its forward into shared scratch. The LM head + loss runs in
// token chunks (kernels/cuda/lm_head_loss.h): full fp32 logits never exist.
//
// Streams: all compute on one stream; token batches staged by stager() go
// host->device on a second stream, joined with events (no step waits on a
// copy that was issued ahead). NVTX ranges mark forward/backward/optimizer/
// data. With CudaOptions::cuda_graphs the device work of ForwardBackward is
// captured once and replayed (only with hooks that do no work, i.e. a single
// process).
//
// FP8 (BackendOptions::fp8, bf16 precision only): the four block GEMMs of
// each layer run through Fp8Projections (fp8_projections.h) with their
// operands cast into scratch that lives in the backward's dead region (the
// LM head's logits chunk), so the plan grows only where that region is
// smaller than the scratch; attention, norms, the LM head and the optimizer
// are unchanged. Creation fails at once on a GPU without FP8 tensor cores.
//
// PEFT (BackendOptions::peft, peft_type lora; runtime/model/peft.h): the
// units above (compute copy, fp32 grads, master, m, v) are the ADAPTERS'
// (model::BuildAdapterLayout, the CPU backend's layout and names); the base
// model is a frozen store in the compute dtype per unit of BaseLayout() (no
// master, gradient or optimizer state), written/read in fp32 through
// WriteBase/ReadBase. Each target projection runs its frozen GEMM and the
// adapter ops of kernels/cuda/lora.h beside it (q/k/v and gate/up adapters
// write into their column slice of the fused output row); the backward
// computes no weight gradient of the base (no dW GEMMs, no LM-head dW, no
// embedding scatter; the frozen norms' dw goes to a scratch row), only the
// activation gradients through base + adapters and the adapters' fp32
// gradients. Each layer keeps its adapters' t = s (u A^T) [N, rank] (small),
// so every checkpointing mode recomputes nothing of them. Dropout masks are
// the CPU's counter-based ones (seed, TokenBatch::rng_offset, layer,
// projection); with dropout CUDA graphs stay off (the keys change per pass).
// QLoRA (peft_type qlora): every block projection of the base (q, k, v, o,
// gate, up, down) is stored as NF4 on the device (runtime/model/nf4.h,
// quantised on the host exactly as the CPU reference does), the block norms
// and the embedding unit in the compute dtype; the pass dequantises the block
// it reaches (kernels/cuda/nf4_dequant.h, bit for bit the CPU's values) into
// one block-sized buffer that the frozen GEMMs read: one dequantisation per
// block per forward and per backward (a recompute shares the backward's). A
// block unit of the base is written whole (WriteBase).
// Sharded base (BackendOptions::base_shard, S > 1; peft_base.cc): each unit's
// storage above (a QLoRA block: its norms, then every projection's codes,
// scale codes and group absmaxes, 256-byte aligned pieces; the fp32 offsets
// stay on the host) is one byte string; this rank keeps its 1/S slice and the
// hooks all-gather a unit into a slot (one for the embedding, two for
// blocks), where base_ and the NF4 views point while it is acquired.
// Not here: fp8, a unit pool of the adapters.
//
// Packed rows (TokenBatch::positions, SFT): each sample of a row is its own
// causal attention call (batch 1, the sample's length; our tiled kernels, as a
// cuDNN plan per length would be built otherwise) and its own RoPE call from
// position 0, so attention stays inside the sample exactly as the CPU's
// document masking; the rest of the pass is per token and unchanged. Rows
// whose positions are 0..seq-1 run as one batched call. No CUDA graphs for a
// pass with packed rows (the calls depend on the batch).
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/backends/cuda/fp8_projections.h"
#include "runtime/backends/cuda/op_profile.h"
#include "runtime/backends/cuda/packed_segments.h"
#include "runtime/data/loader.h"
#include "runtime/kernels/cuda/attention.h"
#include "runtime/kernels/cuda/dtype.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/lora.h"
#include "runtime/kernels/cuda/nf4_dequant.h"
#include "runtime/model/backend.h"
#include "runtime/model/peft.h"
#include "runtime/model/unit_pool.h"

namespace hypertrain::cuda {

struct CudaOptions {
  int device = 0;
  bool cuda_graphs = false;
  // Token rows per LM-head chunk (0 = choose: the dead backward region, at
  // least 1 GiB of logits, in equal chunks).
  int64_t loss_chunk_rows = 0;
  // Device slots for staged batches; must be >= the loader's prefetch_depth + 2.
  int staging_slots = 16;
  // With BackendOptions::single_pass_grads, no unit pool, no CUDA graphs and
  // whole units: block l's gradient lives in the activations of blocks > l
  // (dead once their backward ran), see PlanActivations. false = always a
  // separate gradient buffer per unit (bench --share-grads 0).
  bool share_grads_with_activations = true;
  // Kernel options (config keys cuda.attention_impl, cuda.gemm_autotune,
  // cuda.cudnn_bwd_workspace_mb; SetKernelOptions sets them; the attention
  // enum is the config's own, runtime/kernels/attention_impl.h).
  kernels::cuda::AttentionImpl attention_impl = kernels::cuda::AttentionImpl::kAuto;
  kernels::cuda::GemmAutotune gemm_autotune = kernels::cuda::GemmAutotune::kOn;
  size_t cudnn_bwd_workspace_cap_bytes = kernels::cuda::kDefaultCudnnBackwardWorkspaceCapBytes;
  // GEMM autotuning results kept here across runs (runtime/kernels/
  // tune_cache.h; `train` passes <exp_dir>/tune_cache.json); "" = none.
  std::string tune_cache_path;
};

// Sets o's kernel options from the config's values (config::CudaConfig; the
// attention implementation as the config parsed it): InvalidArgument naming
// the key for a GEMM autotune name the kernels do not know or a workspace cap
// < 1 MiB.
Status SetKernelOptions(kernels::AttentionImpl attention_impl, const std::string& gemm_autotune,
                        int64_t cudnn_bwd_workspace_mb, CudaOptions* o);

// Device time of the last ForwardBackward, from CUDA events (milliseconds).
// forward: embedding .. last block; backward: LM head + loss (fused forward
// and backward, chunked) .. embedding backward; data: the wait for the staged
// tokens plus their copy into the step's input buffers. -1 when not timed.
struct PhaseTimes {
  float data_ms = 0;
  float forward_ms = 0;
  float backward_ms = 0;
};

// Per unit, the gradient ranges a pass leaves unwritten when its GEMMs write
// their weight gradients with beta 0: norm weights, gaps and padding, and an
// untied embedding (its lookup only adds). Merged, in offset order. The lazy
// ZeroGrads zeroes exactly these at the first pass after it.
std::vector<std::pair<int, model::Range>> UnwrittenGradRanges(const model::ParamLayout& layout);

class CudaBackend final : public model::Backend {
 public:
  static StatusOr<std::unique_ptr<CudaBackend>> Create(const model::ModelConfig& config,
                                                       const model::BackendOptions& options,
                                                       const CudaOptions& cuda = {});
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
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
  StatusOr<double> TotalGradSumSquares() override;
  Status OptimizerStep(int unit, const kernels::AdamWParams& p) override;
  Status Synchronize() override;
  void* ComputeStream() override { return stream_; }
  bool PoolsUnits() const override { return pool_; }
  model::UnitBuffer ComputeShard(int unit) override;
  Status AcquireParams(int unit) override;
  Status ReleaseParams(int unit) override;
  Status AcquireGrads(int unit) override;
  Status ReleaseGrads(int unit) override;
  Status DiscardGrads(int unit) override;
  int64_t ParamsVersion(int unit) const override { return versions_.at(unit); }
  // Split embedding gradient (BackendOptions::embedding_grad_ranks = R > 1
  // with a unit pool): R x micro-batch gather buffers in the activation
  // plan; kernels::cuda::EmbeddingBackwardRange on the compute stream.
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
  int64_t BaseBytes() const override { return base_bytes_; }
  model::Range BaseNeeded(int unit) const override;
  model::Fp8ScalingState* Fp8Scaling() override { return fp8_ ? &fp8_->state() : nullptr; }
  double PeakFlops() const override { return peak_flops_; }
  int64_t PeakMemoryBytes() const override { return peak_memory_; }
  // Per traced pass (ForwardBackward synchronises at its end, so its events
  // are complete there): track "cuda phases" gets data / forward / backward,
  // track "cuda stream" every op between OpProfile marks (gemm, attention,
  // rmsnorm, ... and waits on collectives as "other"), on the recorder's clock
  // through an anchor event recorded on the idle stream; counter
  // "cuda memory" the device memory in use and allocated. Op marks (an event
  // per op, ~1 us each) are recorded only inside the window.
  void SetTrace(trace::Recorder* recorder) override;

  // For the data loader: pinned host buffers and the H2D stager.
  data::HostAllocator* host_allocator();
  data::BatchStager* stager();
  cudaStream_t stream() const { return stream_; }
  kernels::cuda::Gemm::TuneStats gemm_tune_stats() const { return gemm_->tune_stats(); }
  const PhaseTimes& last_phase_times() const { return phase_; }
  // Per-op device time of forward+backward passes (bench --profile); enable
  // before the first pass. Disables CUDA graphs.
  OpProfile& op_profile() { return profile_; }
  // Mean PhaseTimes over the timed passes after the first (warm-up); the
  // destructor prints it as a "[cuda] device N: ... per pass" line when
  // more than one pass ran. Device time on the compute stream includes its
  // stalls on collectives, so HSDP vs one GPU shows the device-side cost.
  PhaseTimes mean_phase_times() const;
  // Bytes of the static activation plan, of the persistent parameter /
  // gradient / optimizer state, and of the unit pool's slots (0 without one).
  int64_t activation_bytes() const { return activation_bytes_; }
  int64_t state_bytes() const { return state_bytes_; }
  int64_t pool_bytes() const { return pool_bytes_; }
  // Every byte this backend holds with cudaMalloc (state, activation plan,
  // staging slots, GEMM workspace): the analogue of PyTorch's
  // torch.cuda.max_memory_allocated(), which excludes the CUDA context.
  int64_t allocated_bytes() const { return allocated_bytes_; }
  // Whether the block gradients live in the activation plan (see
  // CudaOptions::share_grads_with_activations).
  bool shares_grads_with_activations() const { return shared_grads_; }
  std::string device_name() const { return device_name_; }

 private:
  struct Acts;
  struct Slot;
  class Stager;
  class PinnedAllocator;
  CudaBackend();

  Status Init(const model::ModelConfig& config, const model::BackendOptions& options,
              const CudaOptions& cuda);
  // Init's steps, in order.
  Status InitOptions(const model::ModelConfig& config, const model::BackendOptions& options,
                     const CudaOptions& cuda);
  Status InitDevice();
  Status InitFp8(const model::ModelConfig& config);
  Status InitUnits(const model::ModelConfig& config, model::UnitPoolPlan* plan);
  Status InitUnit(int u, float* init);
  Status InitBuffers(const model::ModelConfig& config, const model::UnitPoolPlan& plan);
  Status PlanActivations();
  // PlanActivations' steps (activations.cc).
  struct ActivationSizes;
  struct Placer;
  void PlanActivationSizes(ActivationSizes* z);
  void PlaceBlockActivations(const ActivationSizes& z, bool share, Placer* at, size_t* layer_bytes);
  void PlaceSharedBuffers(const ActivationSizes& z, Placer* at, void** fp8_slots);
  Status UploadRopeTable();
  Status CheckBatch(const model::TokenBatch& batch) const;
  // The finished pass's device spans (see SetTrace).
  Status EmitTrace();
  // Attention over this micro-batch's fused QKV rows, as every step calls it
  // (and as the memory plan sizes its workspace).
  kernels::cuda::AttentionParams StepAttentionParams() const;
  // Tokens of `batch` into the fixed device input buffers (waits on a staged
  // copy, or copies synchronously from the host pointers).
  Status LoadTokens(const model::TokenBatch& batch);
  Status ForwardPass(model::UnitHooks& hooks, bool for_backward);
  Status BackwardPass(model::UnitHooks& hooks);
  Status DeviceForwardBackward(model::UnitHooks& hooks);  // enqueue only
  Status BlockForward(int layer, bool write_output);
  // Packed rows: segments_ from the batch's positions (InvalidArgument for
  // positions that do not start at 0 and count up by 1 or restart at 0), and
  // RoPE + attention (forward; backward then inverse RoPE) per segment.
  Status SetSegments(const model::TokenBatch& batch);
  Status SegmentedRopeAttentionForward(const Acts& a);
  Status SegmentedAttentionRopeBackward(const Acts& a, const void* datt, void* dqkv);
  // PEFT: target t's adapter beside its frozen projection of `layer`:
  // out[:, :OF] (row stride ld) += s * dropout(x) A^T B^T; the backward adds
  // into dx and the adapter gradients. No-ops for a projection no adapter
  // targets (or without PEFT).
  Status AdapterForward(int layer, int t, const void* x, void* out, long ld);
  struct AdapterOperands {
    int unit = 0;
    kernels::cuda::LoraShape shape;
    int64_t a_offset = 0, b_offset = 0;  // A and B in the adapter unit (elements)
    const void* a = nullptr;             // compute-dtype A and B
    const void* b = nullptr;
  };
  AdapterOperands Adapter(int layer, int t, long ld) const;
  Status AdapterBackward(int layer, int t, const void* x, const void* dout, long ld, void* dx);
  model::DropoutMask AdapterMask(int layer, int t) const;
  Status InitBase();
  // QLoRA: quantise block unit u's projections (host, fp32 unit `host`) into
  // its NF4 buffers and its norms into base_[u]; dequantise unit u into
  // qlora_block_ unless it is there already.
  Status StoreQloraBlock(int u, const float* host);
  // model.peft.fp8_base (peft_fp8_base.cc).
  Status AllocFp8Base();
  Status StoreFp8Block(int u, const float* host, void* scratch);
  Status DequantizeFp8Block(int u, void* bf16_out);
  Status WriteFp8Block(int u, model::Range r, const float* host);
  Status ReadFp8Block(int u, model::Range r, float* host);
  // QLoRA: the dequantised block (qlora_block_) to e4m3 codes in
  // qlora_fp8_block_, with scales from its amax (once per stored values).
  Status CastQloraBlockToFp8(int u);
  // QLoRA with its scales known: the same codes straight from NF4 in one pass
  // (kernels/cuda/nf4_fp8.h), the bf16 projections left unwritten.
  Status Nf4BlockToFp8(int u);
  // amax (k 0), scale (1), scale_inv (2) of block `layer`'s weight of `g`.
  float* Fp8BaseSlot(int layer, model::Fp8Gemm g, int k) const;
  // QLoRA: unit u's weights as a pass reads them, into qlora_block_ (the
  // norms, and with an FP8 base whose scales are known the projections only
  // as codes); `whole`: the projections in the compute dtype too (ReadBase).
  Status MaterializeBlock(int u, bool whole = false);
  Status CheckBaseRange(int u, model::Range r) const;
  // Sharded base (peft_base.cc): the storage layout of unit u, every unit's
  // slice from the seed, unit u's slice from its whole fp32 values, and
  // compute-dtype values [r) into the slice.
  struct BaseBlob {
    int64_t bytes = 0;
    int64_t norms = 0;  // QLoRA block: the two norms; else 0 (the values)
    int64_t codes[model::kNumBlockTensors] = {};
    int64_t scale_codes[model::kNumBlockTensors] = {};
    int64_t scale_absmax[model::kNumBlockTensors] = {};
  };
  BaseBlob BlobLayout(int u) const;
  Status InitShardedBase(std::vector<float>& host);
  Status StoreBaseSlice(int u, const float* host);
  Status WriteBaseSlice(int u, model::Range r, const float* host);
  Status BlockBackward(int layer);
  // BlockBackward's steps (block.cc).
  struct BlockStep;
  Status DownProjBackward(const BlockStep& b);
  Status GateUpBackward(const BlockStep& b);
  Status AttentionBlockBackward(const BlockStep& b,
                                std::optional<Fp8Projections::CastTarget>* dqkv_fp8);
  Status QkvBackward(const BlockStep& b, bool dqkv_cast);
  // dres += the backward of block unit u's RMSNorm `norm` (kInputNorm or
  // kPostNorm) at `input` with its saved rstd; its dw into NormDw.
  Status NormBackward(int u, int norm, const void* input, const float* rstd);
  Status Recompute(int layer);
  Status HeadLoss(bool backward);
  StatusOr<double> ReadLoss();
  StatusOr<double> SumPartials(int n);
  void UpdatePeakMemory();
  // Unit u's tensor t, compute dtype / fp32 grad.
  void* W(int u, int t) const;
  float* G(int u, int t) const;  // nullptr with PEFT (a frozen base)
  // Where a norm's weight gradient goes: G(u, t), or with PEFT a scratch row
  // nobody reads (the kernel always writes one).
  float* NormDw(int u, int t) const { return peft_ ? frozen_dw_ : G(u, t); }
  float* State(int u, model::StateKind kind);
  Status RefreshCompute(int u, model::Range r);
  // Element i (in unit coordinates, inside Owned(u)) of the persistent
  // compute copy: the full compute_[u], or compute_shard_[u] with a pool.
  void* OwnedCompute(int u, int64_t i) const;
  Status CheckHeld(int u, bool grads) const;
  Status FreeGrads(int u, bool fold);
  // Lazy ZeroGrads (no unit pool, no CUDA graphs): the next pass writes every
  // weight gradient its GEMMs produce (beta 0) and zeroes only the rest (norm
  // weights, an untied embedding): the 4 B/param zeroing pass disappears.
  // Anything that reads gradients before that pass zeroes them for real.
  Status MaterializeZeroGrads();
  // unit < 0: every unit's unwritten ranges, except shared block gradients,
  // which the forward overwrites and which alias live activations until the
  // next block's backward ran: BackwardPass zeroes those, unit by unit, just
  // before the block's own backward.
  Status ZeroGradsNotWrittenByGemms(int unit = -1);
  // FailedPrecondition when shared gradients were overwritten by a forward.
  Status CheckGradsReadable() const;
  // cudaMalloc recorded in allocations_ and allocated_bytes_.
  Status Alloc(size_t bytes, void** p);
  // Unit u's own fp32 gradient buffer (grads_[u]) and, when the rank owns
  // only part of the unit, a separate shard buffer (shard_grads_[u]).
  Status AllocGrads(int u);

  model::ParamLayout layout_;
  model::BackendOptions options_;
  // PEFT: layout_ is the adapters'; the frozen base (compute dtype, whole
  // units of base_layout_) in base_; the adapter slots per target; this
  // pass's dropout counter (TokenBatch::rng_offset; no dropout in Loss).
  bool peft_ = false;
  model::ParamLayout base_layout_;
  std::vector<void*> base_;
  model::AdapterSlots adapter_slots_{};
  uint64_t pass_rng_offset_ = 0;
  bool pass_dropout_ = false;
  float* frozen_dw_ = nullptr;  // [C] fp32: where the frozen norms' dw goes
  // QLoRA: per block unit, one NF4 view per projection (by BlockTensor index,
  // numel 0 for the norms); base_[u] of a block unit holds only its two norms
  // ([C] input, then [C] post); the dequantised block and which unit it holds.
  bool qlora_ = false;
  std::vector<std::vector<kernels::cuda::Nf4View>> nf4_;
  void* qlora_block_ = nullptr;
  int materialized_ = -1;
  bool materialized_whole_ = false;  // qlora_block_'s projections hold unit materialized_
  // model.peft.fp8_base: per block unit its projections' e4m3 codes at the
  // base layout's offsets (one byte per element), base_[u] its two norms as
  // for QLoRA; per (layer, GEMM) amax | scale | scale_inv, 256 bytes apart.
  bool fp8_base_ = false;
  std::vector<uint8_t*> fp8_codes_;
  float* fp8_base_slots_ = nullptr;
  // QLoRA with fp8_base: the materialised block's codes (every layer's
  // FrozenWeight points here) and whether unit u's scales are current.
  uint8_t* qlora_fp8_block_ = nullptr;
  std::vector<bool> fp8_qlora_scaled_;
  // Sharded base (BackendOptions::base_shard, S > 1): per unit this rank's
  // slice (base_shard_bytes_[u] bytes of the BlobLayout, padded to S equal
  // slices); base_[u] and the NF4 views point into a slot while the unit is
  // acquired (nullptr otherwise). base_bytes_: the base held persistently.
  int64_t base_shard_ = 1, base_rank_ = 0, base_bytes_ = 0;
  std::vector<void*> base_slices_;
  std::vector<int64_t> base_shard_bytes_;
  std::vector<void*> base_slot_mem_[2];
  model::UnitSlots base_pool_[2];
  CudaOptions cuda_;
  kernels::cuda::DType dtype_ = kernels::cuda::DType::kBF16;
  model::DType model_dtype_ = model::DType::kBF16;
  std::vector<model::Range> owned_;
  int64_t B_ = 0, S_ = 0, N_ = 0;
  // This pass's packed samples (packed_segments.h). Empty: one sequence per
  // row (no positions, or every row a single sample).
  std::vector<PackedSegment> segments_;
  bool fused_qkv_ = false, fused_gu_ = false;

  cudaStream_t stream_ = nullptr;
  cudaStream_t h2d_stream_ = nullptr;
  std::unique_ptr<kernels::cuda::Gemm> gemm_;
  std::unique_ptr<Fp8Projections> fp8_;  // model.fp8: the block GEMMs in FP8
  // Device allocations (freed in the destructor).
  std::vector<void*> allocations_;
  std::vector<void*> compute_, master_, m_, v_;
  std::vector<float*> grads_, shard_grads_;
  // Unit pool: compute_[u] / grads_[u] point into slots while held, else null.
  bool pool_ = false;
  std::vector<void*> compute_shard_;
  std::vector<void*> param_slots_[2];   // [0] embedding, [1] blocks
  std::vector<float*> grad_slots_[2];
  model::UnitSlots param_pool_[2], grad_pool_[2];
  std::vector<int64_t> versions_;  // ParamsVersion per unit
  bool grads_zero_pending_ = false;  // ZeroGrads not carried out yet
  bool first_write_ = false;         // this pass writes (not adds) weight gradients
  // Block gradients inside the activation plan (CudaOptions::
  // share_grads_with_activations): a forward overwrites them, so a pass's
  // gradients are valid only until the next forward.
  bool shared_grads_ = false;
  bool grads_hold_pass_ = false;   // a pass wrote them since ZeroGrads
  bool grads_clobbered_ = false;   // ... and a later forward overwrote them
  // Attention backward's dout/dqkv in the layer's gate|up buffer (dead after
  // the SwiGLU backward), so the backward region holds max(dact + dgu,
  // attention workspace) instead of their sum.
  bool att_grads_in_gu_ = false;
  std::vector<std::pair<int, model::Range>> unwritten_grads_;  // UnwrittenGradRanges(layout_)
  std::vector<std::unique_ptr<Acts>> acts_;
  std::unique_ptr<Acts> scratch_;
  // Non-block activations and scratch (see PlanActivations).
  void *x_final_ = nullptr, *ln_f_ = nullptr, *dln_f_ = nullptr, *dres_ = nullptr;
  void *dact_ = nullptr, *dgu_ = nullptr, *dln_ = nullptr, *datt_ = nullptr, *dqkv_ = nullptr;
  void* logits_ = nullptr;
  void *lora_dt_ = nullptr, *lora_u_ = nullptr;  // PEFT scratch: [N, rank], [N, max(C, Q, F)]
  float *rstd_f_ = nullptr, *losses_ = nullptr, *norm_scratch_ = nullptr, *rope_table_ = nullptr;
  float* dscale_ = nullptr;
  double *loss_sum_ = nullptr, *sumsq_partials_ = nullptr, *sumsq_ = nullptr;
  int32_t *tokens_ = nullptr, *targets_ = nullptr;
  void* attn_ws_ = nullptr;
  size_t attn_ws_bytes_ = 0;
  void* emb_scratch_ = nullptr;
  size_t emb_scratch_bytes_ = 0;
  int emb_ranks_ = 0;              // split embedding gradient: shard-group size, else 0
  int32_t* all_tokens_ = nullptr;  // [R * N]
  void* all_dout_ = nullptr;       // [R * N, C] compute dtype
  int64_t chunk_rows_ = 0;
  // Pinned host scalars for per-step values.
  float* host_dscale_ = nullptr;
  double* host_result_ = nullptr;

  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<Stager> stager_;
  std::unique_ptr<PinnedAllocator> pinned_;
  const Slot* current_slot_ = nullptr;

  cudaEvent_t ev_data_ = nullptr, ev_start_ = nullptr, ev_fwd_ = nullptr, ev_end_ = nullptr;
  trace::Recorder* trace_ = nullptr;
  cudaEvent_t ev_anchor_ = nullptr;  // tracing: the idle stream's "now"
  int trace_phase_track_ = 0, trace_op_track_ = 0;
  bool trace_owns_profile_ = false;
  PhaseTimes phase_;
  OpProfile profile_;
  PhaseTimes phase_sum_;
  int64_t passes_ = 0, timed_passes_ = 0;
  cudaGraphExec_t graph_exec_ = nullptr;
  bool graph_failed_ = false;
  int64_t eager_steps_ = 0;

  int64_t activation_bytes_ = 0, state_bytes_ = 0, pool_bytes_ = 0, peak_memory_ = 0,
          allocated_bytes_ = 0;
  double peak_flops_ = 0;
  std::string device_name_;
};

}  // namespace hypertrain::cuda
