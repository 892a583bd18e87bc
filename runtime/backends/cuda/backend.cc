// CudaBackend: creation, gradient zeroing and norms, the optimizer, staging
// (the state buffers' accessors are in state.cc, the step itself in step.cc).
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/reduce.h"
#include "core/startup_phases.h"
#include "runtime/kernels/cuda/param_init.h"
#include "runtime/model/init.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::Range;
using model::StateKind;
using model::UnitBuffer;

class CudaBackend::PinnedAllocator final : public data::HostAllocator {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    return cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess ? p : nullptr;
  }
  void Free(void* p) override {
    if (p) cudaFreeHost(p);
  }
};

// Runs on the loader's prefetch thread: copies a filled batch to the next
// device slot on the H2D stream and records the slot's `ready` event.
class CudaBackend::Stager final : public data::BatchStager {
 public:
  explicit Stager(CudaBackend* b) : b_(b) {}
  Status Stage(data::Batch& batch) override {
    nvtxRangePushA("data.stage");
    Status st = DoStage(batch);
    nvtxRangePop();
    return st;
  }

 private:
  Status DoStage(data::Batch& batch) {
    HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(b_->cuda_.device));
    const int64_t n = batch.view.batch * batch.view.seq;
    if (n != b_->N_) {
      return InvalidArgument(fmt::format("staged batch has {} tokens, the CUDA backend was planned "
                                         "for {}", n, b_->N_));
    }
    Slot* slot = b_->slots_[next_++ % b_->slots_.size()].get();
    // The slot's previous batch must have been consumed before overwriting.
    HT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(b_->h2d_stream_, slot->done, 0));
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot->inputs, batch.view.inputs, n * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, b_->h2d_stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot->targets, batch.view.targets,
                                            n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                            b_->h2d_stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot->ready, b_->h2d_stream_));
    batch.view.staged = slot;
    return Status::Ok();
  }
  CudaBackend* b_;
  size_t next_ = 0;
};

namespace {

// Dense peak FLOP/s by device and precision. Datasheet figures: H100/H200
// SXM 989.4 TF bf16/fp16 dense, 494.7 TF tf32, 66.9 TF fp32; A100 312 / 156 /
// 19.5; A10 125 bf16 dense / 62.5 tf32 / 31.2 fp32 (A10G runs lower clocks;
// the A10 figure is used). Unknown devices report 0 (MFU not shown).
double PeakFlopsFor(const std::string& name, model::Precision p) {
  const bool half = p == model::Precision::kBF16 || p == model::Precision::kFP16;
  const bool tf32 = p == model::Precision::kTF32;
  auto pick = [&](double h, double t, double f) { return half ? h : (tf32 ? t : f); };
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
      name.find("GH200") != std::string::npos) {
    return pick(989.4e12, 494.7e12, 66.9e12);
  }
  if (name.find("A100") != std::string::npos) return pick(312e12, 156e12, 19.5e12);
  if (name.find("A10") != std::string::npos) return pick(125e12, 62.5e12, 31.2e12);
  return 0.0;
}

}  // namespace

std::vector<std::pair<int, model::Range>> UnwrittenGradRanges(const model::ParamLayout& layout) {
  const int E = model::ParamLayout::kEmbeddingUnit;
  const bool tied = layout.config().tie_word_embeddings;
  std::vector<std::pair<int, model::Range>> out;
  for (int u = 0; u < layout.num_units(); ++u) {
    const auto& tensors = layout.unit(u).tensors;
    // Ranges a pass writes (GEMM weight gradients), in offset order. Tied,
    // the LM head's GEMM writes embed_tokens first; untied, the lookup's
    // scatter-add is its only writer.
    std::vector<model::Range> written;
    for (int t = 0; t < static_cast<int>(tensors.size()); ++t) {
      const bool norm =
          u == E ? t == model::kFinalNorm : t == model::kInputNorm || t == model::kPostNorm;
      const bool lookup_only = u == E && t == model::kEmbedTokens && !tied;
      if (!norm && !lookup_only) written.push_back(tensors[t].range());
    }
    std::sort(written.begin(), written.end(),
              [](const model::Range& a, const model::Range& b) { return a.begin < b.begin; });
    const int64_t end = layout.unit(u).padded_numel;
    written.push_back({end, end});
    int64_t at = 0;
    for (const model::Range& r : written) {
      if (r.begin > at) out.push_back({u, {at, r.begin}});
      at = std::max(at, r.end);
    }
  }
  return out;
}

CudaBackend::CudaBackend() = default;

PhaseTimes CudaBackend::mean_phase_times() const {
  if (timed_passes_ == 0) return PhaseTimes{-1.0f, -1.0f, -1.0f};
  const float n = static_cast<float>(timed_passes_);
  return PhaseTimes{phase_sum_.data_ms / n, phase_sum_.forward_ms / n, phase_sum_.backward_ms / n};
}

CudaBackend::~CudaBackend() {
  if (timed_passes_ > 0) {
    const PhaseTimes m = mean_phase_times();
    spdlog::info("CUDA device {}: compute stream per forward+backward pass (mean of {} after the first): "
                 "forward {:.2f} ms, backward {:.2f} ms, data {:.2f} ms (includes stalls on collectives)",
                 cuda_.device, timed_passes_, m.forward_ms, m.backward_ms, m.data_ms);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  if (h2d_stream_) cudaStreamSynchronize(h2d_stream_);
  if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
  for (auto& s : slots_) {
    if (s->ready) cudaEventDestroy(s->ready);
    if (s->done) cudaEventDestroy(s->done);
  }
  for (cudaEvent_t e : {ev_data_, ev_start_, ev_fwd_, ev_end_, ev_anchor_})
    if (e) cudaEventDestroy(e);
  gemm_.reset();
  for (void* p : allocations_) cudaFree(p);
  if (host_dscale_) cudaFreeHost(host_dscale_);
  if (host_result_) cudaFreeHost(host_result_);
  if (stream_) cudaStreamDestroy(stream_);
  if (h2d_stream_) cudaStreamDestroy(h2d_stream_);
}

Status SetKernelOptions(kernels::AttentionImpl attention_impl, const std::string& gemm_autotune,
                        int64_t cudnn_bwd_workspace_mb, CudaOptions* o) {
  StatusOr<kc::GemmAutotune> tune = kc::ParseGemmAutotune(gemm_autotune);
  if (!tune.ok()) return InvalidArgument("cuda.gemm_autotune: " + tune.status().message());
  if (cudnn_bwd_workspace_mb < 1) {
    return InvalidArgument(fmt::format("cuda.cudnn_bwd_workspace_mb: {} must be >= 1", cudnn_bwd_workspace_mb));
  }
  o->attention_impl = attention_impl;
  o->gemm_autotune = *tune;
  o->cudnn_bwd_workspace_cap_bytes = static_cast<size_t>(cudnn_bwd_workspace_mb) << 20;
  return Status::Ok();
}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const model::ModelConfig& config,
                                                           const model::BackendOptions& options,
                                                           const CudaOptions& cuda) {
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  HT_RETURN_IF_ERROR(b->Init(config, options, cuda));
  return b;
}

Status CudaBackend::Init(const model::ModelConfig& config, const model::BackendOptions& options,
                         const CudaOptions& cuda) {
  HT_RETURN_IF_ERROR(InitOptions(config, options, cuda));
  HT_RETURN_IF_ERROR(InitDevice());
  HT_RETURN_IF_ERROR(InitFp8(config));
  model::UnitPoolPlan plan;
  HT_RETURN_IF_ERROR(InitUnits(config, &plan));
  HT_RETURN_IF_ERROR(InitBuffers(config, plan));
  startup::PhaseTimer plan_phase("activation_plan");  // cuDNN attention plans included
  HT_RETURN_IF_ERROR(PlanActivations());  // places shared block gradients
  plan_phase.End();
  HT_RETURN_IF_ERROR(ZeroGrads());
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());  // cudaMalloc'd: no garbage anywhere, padding included
  HT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  UpdatePeakMemory();
  return Status::Ok();
}

// Layouts (PEFT: adapters and the frozen base), options, and the checks that
// need no device.
Status CudaBackend::InitOptions(const model::ModelConfig& config, const model::BackendOptions& options,
                                const CudaOptions& cuda) {
  peft_ = options.peft.enabled();
  if (peft_) {
    HT_RETURN_IF_ERROR(options.peft.Validate());
    qlora_ = options.peft.quantized();
    if (options.fp8.enabled) {
      return InvalidArgument("model.fp8 with model.peft: the frozen base stays in bf16 (FP8 "
                             "training of adapters is not supported, as in the recipes)");
    }
    fp8_base_ = options.peft.fp8_base;
    if (fp8_base_ && options.base_shard.size > 1) {
      return InvalidArgument("model.peft.fp8_base with a frozen base sharded over ranks "
                             "(full_shard / hybrid_shard) is not supported: use "
                             "model.sharding_strategy: no_shard or model.peft.fp8_base: false");
    }
    if (options.unit_pool) {
      return InvalidArgument("model.peft: the CUDA backend keeps the adapters whole on every rank "
                             "(no unit pool; the frozen base is sharded by base_shard instead)");
    }
    HT_ASSIGN_OR_RETURN(layout_, model::BuildAdapterLayout(config, options.peft, options.layout));
    HT_ASSIGN_OR_RETURN(base_layout_,
                        model::ParamLayout::Build(
                            config, {.tensor_alignment = options.layout.tensor_alignment}));
    adapter_slots_ = model::AdapterSlots::For(options.peft.targets);
  } else {
    HT_ASSIGN_OR_RETURN(layout_, model::ParamLayout::Build(config, options.layout));
  }
  options_ = options;
  cuda_ = cuda;
  if (options_.seq_len == 0) options_.seq_len = config.max_context_width;
  if (options_.seq_len < 1 || options_.seq_len > config.max_context_width) {
    return InvalidArgument(fmt::format("sequence length {} must be in [1, model.max_context_width={}]",
                                       options_.seq_len, config.max_context_width));
  }
  if (options_.micro_batch_size < 1) {
    return InvalidArgument(
        fmt::format("micro_batch_size must be >= 1, got {}", options_.micro_batch_size));
  }
  switch (options_.precision) {
    case model::Precision::kBF16:
      dtype_ = kc::DType::kBF16, model_dtype_ = model::DType::kBF16;
      break;
    case model::Precision::kFP16:
      dtype_ = kc::DType::kF16, model_dtype_ = model::DType::kF16;
      break;
    case model::Precision::kFP32:
    case model::Precision::kTF32:
      dtype_ = kc::DType::kF32, model_dtype_ = model::DType::kF32;
      break;
  }
  const int64_t D = config.head_dim();
  if (dtype_ != kc::DType::kF32 && D != 64 && D != 128) {
    return InvalidArgument(fmt::format(
        "head_dim {} (hidden_size / num_attention_heads): the CUDA flash-attention kernel "
        "(bf16/fp16) supports 64 or 128", D));
  }
  if (dtype_ == kc::DType::kF32 && (D % 32 != 0 || D > 256)) {
    return InvalidArgument(fmt::format(
        "head_dim {} (hidden_size / num_attention_heads): the CUDA fp32 attention kernel needs a "
        "multiple of 32, at most 256", D));
  }
  if (cuda_.staging_slots < 1) return InvalidArgument("staging_slots must be >= 1");
  B_ = options_.micro_batch_size;
  S_ = options_.seq_len;
  N_ = B_ * S_;
  if (N_ * std::max(config.hidden_size, config.intermediate_size * 2) > (int64_t{1} << 31)) {
    return InvalidArgument("micro-batch too large: tensors past 2^31 elements");
  }
  return Status::Ok();
}

Status CudaBackend::InitDevice() {
  // The CUDA context (driver, module loading) and the libraries' handles.
  startup::PhaseTimer cuda_init("cuda_init");
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  HT_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the context now, not in the next call
  cudaDeviceProp prop{};
  HT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, cuda_.device));
  device_name_ = prop.name;
  peak_flops_ = PeakFlopsFor(device_name_, options_.precision);
  HT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&h2d_stream_, cudaStreamNonBlocking));
  HT_ASSIGN_OR_RETURN(gemm_, kc::Gemm::Create(options_.precision == model::Precision::kTF32,
                                                kc::Gemm::kDefaultWorkspaceBytes, cuda_.gemm_autotune));
  allocated_bytes_ += static_cast<int64_t>(kc::Gemm::kDefaultWorkspaceBytes);
  if (!cuda_.tune_cache_path.empty() && cuda_.gemm_autotune != kc::GemmAutotune::kOff) {
    spdlog::debug("gemm autotune: tune cache {}: {}", cuda_.tune_cache_path,
                  gemm_->UseTuneCache(cuda_.tune_cache_path, device_name_));
  }
  for (cudaEvent_t* e : {&ev_data_, &ev_start_, &ev_fwd_, &ev_end_})
    HT_CUDA_RETURN_IF_ERROR(cudaEventCreate(e));
  HT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&host_dscale_), sizeof(float), 0));
  HT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&host_result_), sizeof(double), 0));
  cuda_init.End();
  return Status::Ok();
}

Status CudaBackend::InitFp8(const model::ModelConfig& config) {
  // Which projections can run as one GEMM (weights stored back to back).
  const auto& bt =
      (peft_ ? base_layout_ : layout_).unit(model::ParamLayout::BlockUnit(0)).tensors;
  fused_qkv_ = bt[model::kKProj].offset == bt[model::kQProj].offset + bt[model::kQProj].numel &&
               bt[model::kVProj].offset == bt[model::kKProj].offset + bt[model::kKProj].numel;
  fused_gu_ = bt[model::kUpProj].offset == bt[model::kGateProj].offset + bt[model::kGateProj].numel;
  if (options_.fp8.enabled || fp8_base_) {
    const char* key = fp8_base_ ? "model.peft.fp8_base" : "model.fp8";
    if (dtype_ != kc::DType::kBF16) {
      return InvalidArgument(fmt::format("{}: FP8 GEMMs run inside bf16 training, the "
                                         "precision is {}", key, model::PrecisionName(options_.precision)));
    }
    if (!fused_qkv_ || !fused_gu_) {
      return InvalidArgument(fmt::format("{}: the FP8 path needs q|k|v and gate|up stored back to back "
                                         "(a layout tensor_alignment that divides their sizes)", key));
    }
    // Fails here, before any large allocation, on a GPU without FP8 tensor cores.
    HT_ASSIGN_OR_RETURN(fp8_, Fp8Projections::Create(
                                  options_.fp8, config, cuda_.device, &profile_,
                                  gemm_->workspace(), gemm_->workspace_bytes()));
    fp8_->set_gemm_autotune(cuda_.gemm_autotune != kc::GemmAutotune::kOff);
    fp8_->set_frozen_base(fp8_base_);
  }
  return Status::Ok();
}

// Every unit's parameters, gradients and optimizer state, initialised on the
// device; `plan` gets the unit pool's plan when there is one.
Status CudaBackend::InitUnits(const model::ModelConfig& config, model::UnitPoolPlan* plan) {
  // Parameter, gradient and optimizer state per unit.
  const int U = layout_.num_units();
  if (!options_.owned.empty() && static_cast<int>(options_.owned.size()) != U) {
    return InvalidArgument(fmt::format("owned ranges: {} given for {} units", options_.owned.size(), U));
  }
  bool whole_units = true;
  for (size_t u = 0; u < options_.owned.size(); ++u) {
    whole_units = whole_units && options_.owned[u].begin == 0 &&
                  options_.owned[u].end == layout_.unit(static_cast<int>(u)).padded_numel;
  }
  // PlanActivations places the block gradients (or allocates them if the
  // plan's per-layer activations are too small to hold one).
  shared_grads_ = options_.single_pass_grads && cuda_.share_grads_with_activations &&
                  !options_.unit_pool && !cuda_.cuda_graphs && whole_units && !peft_ &&
                  config.num_hidden_layers >= 2;
  // The fp32 init scratch holds what a rank keeps in compute dtype: its owned
  // range with a unit pool, else the whole unit.
  int64_t max_p = 0;
  for (int u = 0; u < U; ++u) {
    const int64_t P = layout_.unit(u).padded_numel;
    const bool sharded = options_.unit_pool && !options_.owned.empty();
    max_p = std::max(max_p, sharded ? std::min(P, options_.owned[u].size()) : P);
  }
  startup::PhaseTimer init_phase("weight_init");
  void* tmp = nullptr;
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tmp, std::max<int64_t>(max_p, 1) * sizeof(float)));
  struct TmpFree {
    void* p;
    ~TmpFree() { cudaFree(p); }
  } tmp_free{tmp};
  pool_ = options_.unit_pool;
  // A weight's FP8 scale is kept while ParamsVersion says it is unchanged;
  // pooled slots and replayed graphs recompute it every forward.
  if (fp8_) fp8_->set_cache_weight_scales(!pool_ && !cuda_.cuda_graphs);
  if (options_.embedding_grad_ranks < 0) {
    return InvalidArgument(
        fmt::format("embedding_grad_ranks must be >= 0, got {}", options_.embedding_grad_ranks));
  }
  emb_ranks_ = pool_ && options_.embedding_grad_ranks > 1 ? options_.embedding_grad_ranks : 0;
  if (pool_) {
    HT_ASSIGN_OR_RETURN(*plan, model::PlanUnitPool(layout_, options_));
  }
  compute_.assign(U, nullptr), master_.resize(U), m_.resize(U), v_.resize(U);
  grads_.assign(U, nullptr), shard_grads_.resize(U), compute_shard_.assign(U, nullptr);
  versions_.assign(U, 0);
  for (int u = 0; u < U; ++u) HT_RETURN_IF_ERROR(InitUnit(u, static_cast<float*>(tmp)));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  init_phase.End();
  // The init scratch (a whole fp32 unit, ~1 GB for 1b) goes before the
  // activation plan is allocated, so it never counts toward the peak.
  cudaFree(tmp);
  tmp_free.p = nullptr;
  return Status::Ok();
}

// Unit u's buffers and initial values (`init`: fp32 scratch of a unit).
Status CudaBackend::InitUnit(int u, float* init) {
  const int64_t P = layout_.unit(u).padded_numel;
  const Range r = options_.owned.empty() ? Range{0, P} : options_.owned[u];
  if (r.begin < 0 || r.end > P || r.begin > r.end) {
    return InvalidArgument(
        fmt::format("owned range [{}, {}) of unit {} is outside [0, {})", r.begin, r.end, u, P));
  }
  owned_.push_back(r);
  const size_t es = kc::DTypeSize(dtype_);
  void* p = nullptr;
  if (pool_) {
    HT_RETURN_IF_ERROR(Alloc(r.size() * sizeof(float), &p));
    shard_grads_[u] = static_cast<float*>(p);
    HT_RETURN_IF_ERROR(Alloc(r.size() * es, &compute_shard_[u]));
    state_bytes_ += r.size() * (sizeof(float) + es);
  } else {
    // Shared block gradients get their place in PlanActivations.
    if (!shared_grads_ || u == model::ParamLayout::kEmbeddingUnit) {
      HT_RETURN_IF_ERROR(AllocGrads(u));
    }
    HT_RETURN_IF_ERROR(Alloc(P * es, &compute_[u]));
    state_bytes_ += P * es;
  }
  HT_RETURN_IF_ERROR(Alloc(r.size() * sizeof(float), &master_[u]));
  HT_RETURN_IF_ERROR(Alloc(r.size() * sizeof(float), &m_[u]));
  HT_RETURN_IF_ERROR(Alloc(r.size() * sizeof(float), &v_[u]));
  HT_CUDA_RETURN_IF_ERROR(cudaMemset(m_[u], 0, r.size() * sizeof(float)));
  HT_CUDA_RETURN_IF_ERROR(cudaMemset(v_[u], 0, r.size() * sizeof(float)));
  state_bytes_ += r.size() * 3 * sizeof(float);
  // Only what this rank keeps, made on the device: the init is counter-based
  // (model/init.h), bit for bit the CPU's for any sharding. All on stream_
  // (non-blocking: it does not order with the legacy stream), which orders
  // the reuse of `init` by the next unit.
  const Range keep = pool_ ? r : Range{0, P};
  const std::vector<model::InitSegment> segments = model::InitSegments(layout_, u, keep);
  HT_CUDA_RETURN_IF_ERROR(kc::InitParams(segments.data(), static_cast<int>(segments.size()),
                                         options_.seed, static_cast<uint64_t>(u), keep.begin,
                                         keep.size(), init, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(master_[u], init + (r.begin - keep.begin),
                                          r.size() * sizeof(float), cudaMemcpyDeviceToDevice,
                                          stream_));
  HT_CUDA_RETURN_IF_ERROR(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::Cast<T, float>(static_cast<T*>(pool_ ? compute_shard_[u] : compute_[u]), init,
                              keep.size(), stream_);
  }));
  return Status::Ok();
}

// The frozen base (PEFT), the unit pool's slots, the staging slots.
Status CudaBackend::InitBuffers(const model::ModelConfig& config, const model::UnitPoolPlan& plan) {
  const int U = layout_.num_units();
  const size_t es = kc::DTypeSize(dtype_);
  if (peft_) {
    HT_RETURN_IF_ERROR(InitBase());
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(config.hidden_size * sizeof(float), &p));
    frozen_dw_ = static_cast<float*>(p);
  }
  if (pool_) {  // slot counts and sizes: model::PlanUnitPool
    for (int k = 0; k < 2; ++k) {
      const int64_t n = plan.slot_numel[k];
      for (int i = 0; i < plan.param_slots[k]; ++i) {
        void* p = nullptr;
        HT_RETURN_IF_ERROR(Alloc(n * es, &p));
        param_slots_[k].push_back(p);
        pool_bytes_ += n * es;
      }
      for (int i = 0; i < plan.grad_slots[k]; ++i) {
        void* p = nullptr;
        HT_RETURN_IF_ERROR(Alloc(n * sizeof(float), &p));
        grad_slots_[k].push_back(static_cast<float*>(p));
        pool_bytes_ += n * sizeof(float);
      }
      param_pool_[k] = plan.ParamSlots(k, U);
      grad_pool_[k] = plan.GradSlots(k, U);
    }
  }
  if (peft_) {  // the adapter ops accumulate: a first pass zeroes every adapter gradient
    for (const model::UnitLayout& u : layout_.units()) {
      if (u.padded_numel > 0) unwritten_grads_.push_back({u.index, {0, u.padded_numel}});
    }
  } else {
    unwritten_grads_ = UnwrittenGradRanges(layout_);
  }

  for (int i = 0; i < cuda_.staging_slots; ++i) {
    auto s = std::make_unique<Slot>();
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(N_ * sizeof(int32_t), &p));
    s->inputs = static_cast<int32_t*>(p);
    HT_RETURN_IF_ERROR(Alloc(N_ * sizeof(int32_t), &p));
    s->targets = static_cast<int32_t*>(p);
    HT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    HT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    slots_.push_back(std::move(s));
  }
  stager_ = std::make_unique<Stager>(this);
  pinned_ = std::make_unique<PinnedAllocator>();
  return Status::Ok();
}

data::HostAllocator* CudaBackend::host_allocator() { return pinned_.get(); }
data::BatchStager* CudaBackend::stager() { return stager_.get(); }

Status CudaBackend::Alloc(size_t bytes, void** p) {
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(p, std::max<size_t>(bytes, 256)));
  allocations_.push_back(*p);
  allocated_bytes_ += static_cast<int64_t>(std::max<size_t>(bytes, 256));
  return Status::Ok();
}

Status CudaBackend::AllocGrads(int u) {
  const int64_t P = layout_.unit(u).padded_numel;
  const Range r = owned_[u];
  void* p = nullptr;
  HT_RETURN_IF_ERROR(Alloc(P * sizeof(float), &p));
  grads_[u] = static_cast<float*>(p);
  state_bytes_ += P * sizeof(float);
  if (r.size() == P) {
    shard_grads_[u] = grads_[u] + r.begin;
  } else {
    HT_RETURN_IF_ERROR(Alloc(r.size() * sizeof(float), &p));
    shard_grads_[u] = static_cast<float*>(p);
    state_bytes_ += r.size() * sizeof(float);
  }
  return Status::Ok();
}

Status CudaBackend::CheckGradsReadable() const {
  if (!grads_clobbered_) return Status::Ok();
  return FailedPrecondition(
      "the gradients were overwritten by a later forward-only pass (Loss): this backend keeps "
      "block gradients in activation memory (single_pass_grads); read them before the next "
      "forward, or create it with CudaOptions::share_grads_with_activations = false");
}

Status CudaBackend::ZeroGrads() {
  grads_hold_pass_ = false;
  grads_clobbered_ = false;
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (owned_[u].size() != layout_.unit(u).padded_numel) {  // a separate shard buffer
      HT_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(shard_grads_[u], 0, owned_[u].size() * sizeof(float), stream_));
    }
  }
  grads_zero_pending_ = true;
  // A pooled slot is zeroed when acquired, and a captured graph must not
  // depend on whether its pass is the first after ZeroGrads: zero now.
  return pool_ || cuda_.cuda_graphs ? MaterializeZeroGrads() : Status::Ok();
}

Status CudaBackend::MaterializeZeroGrads() {
  if (!grads_zero_pending_) return Status::Ok();
  grads_zero_pending_ = false;
  for (int u = 0; u < layout_.num_units(); ++u) {
    if (grads_[u] != nullptr) {  // pool: only a held slot
      HT_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(grads_[u], 0, layout_.unit(u).padded_numel * sizeof(float), stream_));
    }
  }
  return Status::Ok();
}

Status CudaBackend::ZeroGradsNotWrittenByGemms(int unit) {
  for (const auto& [u, r] : unwritten_grads_) {
    const bool in_plan = shared_grads_ && u != model::ParamLayout::kEmbeddingUnit;
    if (unit >= 0 ? u != unit : in_plan) continue;
    HT_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(grads_[u] + r.begin, 0, r.size() * sizeof(float), stream_));
  }
  return Status::Ok();
}

StatusOr<double> CudaBackend::GradSumSquares(int u) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  HT_RETURN_IF_ERROR(CheckGradsReadable());
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());
  HT_LAUNCH(kc::SumSquaresPartials(shard_grads_[u], owned_[u].size(), sumsq_partials_, stream_));
  return SumPartials(kc::kSumSquaresPartials);
}

// Every unit's partials side by side, one fixed-order sum, one device sync.
StatusOr<double> CudaBackend::TotalGradSumSquares() {
  const int U = layout_.num_units();
  HT_RETURN_IF_ERROR(CheckGradsReadable());
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());
  for (int u = 0; u < U; ++u) {
    HT_LAUNCH(kc::SumSquaresPartials(shard_grads_[u], owned_[u].size(),
                                     sumsq_partials_ + static_cast<size_t>(u) * kc::kSumSquaresPartials,
                                     stream_));
  }
  return SumPartials(kc::kSumSquaresPartials * U);
}

// The first `n` of sumsq_partials_, summed in fixed order, read back.
StatusOr<double> CudaBackend::SumPartials(int n) {
  HT_LAUNCH(kc::SumDoubles(sumsq_partials_, n, sumsq_, stream_));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_result_, sumsq_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return *host_result_;
}

Status CudaBackend::OptimizerStep(int u, const kernels::AdamWParams& p) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  HT_RETURN_IF_ERROR(CheckGradsReadable());
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());
  nvtxRangePushA("optimizer");
  ++versions_[u];
  const Range own = owned_[u];
  float* w = static_cast<float*>(master_[u]);
  // One launch per run of back-to-back tensors with the same decay setting
  // (a block unit is 4 runs: norm, attention, norm, MLP), not one per tensor.
  // With FP8 the attention and MLP launches also record their projection
  // weights' amaxes (q|k|v and o, gate|up and down) from the new bf16 copy,
  // for the next FP8 scales (no extra read of the weights).
  const auto& tensors = layout_.unit(u).tensors;
  const int fp8_layer = u - model::ParamLayout::BlockUnit(0);
  const bool fp8_amax = fp8_ && !pool_ && !cuda_.cuda_graphs && dtype_ == kc::DType::kBF16 &&
                        fp8_layer >= 0 &&
                        fp8_layer < static_cast<int>(layout_.config().num_hidden_layers);
  if (fp8_amax) HT_RETURN_IF_ERROR(fp8_->ZeroWeightAmax(fp8_layer, stream_));
  Status st;
  for (size_t t = 0; t < tensors.size() && st.ok();) {
    const bool decay = tensors[t].weight_decay;
    const size_t first = t;
    Range run = tensors[t].range();
    size_t next = t + 1;
    while (next < tensors.size() && tensors[next].weight_decay == decay &&
           tensors[next].range().begin == run.end) {
      run.end = tensors[next].range().end;
      ++next;
    }
    t = next;
    const Range r = model::Intersect(run, own);
    if (r.empty()) continue;
    kernels::AdamWParams q = p;
    if (!decay) q.weight_decay = 0.0f;
    const int64_t i = r.begin - own.begin;
    __nv_bfloat16* bf16 = dtype_ == kc::DType::kBF16
                              ? static_cast<__nv_bfloat16*>(OwnedCompute(u, r.begin))
                              : nullptr;
    // Only a whole weight's amax is its amax (not a shard's).
    const Fp8Projections::RunWeights fw = fp8_amax && r.begin == run.begin && r.end == run.end
                                 ? Fp8Projections::FindRunWeights(tensors, first, next)
                                 : Fp8Projections::RunWeights{};
    kc::AdamWAmax amax;
    if (fw.count > 0) {
      amax.lo = fp8_->WeightAmaxSlot(fp8_layer, fw.gemm[0]);
      amax.split = fw.count == 2 ? size_t(fw.split - run.begin) : size_t(run.size());
      if (fw.count == 2) amax.hi = fp8_->WeightAmaxSlot(fp8_layer, fw.gemm[1]);
    }
    kc::AdamW(w + i, shard_grads_[u] + i, static_cast<float*>(m_[u]) + i,
              static_cast<float*>(v_[u]) + i, bf16, r.size(), q, stream_, amax);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      st = kc::CudaStatus(err, "AdamW");
    } else if (dtype_ != kc::DType::kBF16) {
      st = RefreshCompute(u, r);
    } else {
      for (int k = 0; k < fw.count; ++k) {
        fp8_->WeightAmaxRecorded(fp8_layer, fw.gemm[k], versions_[u]);
      }
    }
  }
  nvtxRangePop();
  return st;
}

Status CudaBackend::Synchronize() {
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

void CudaBackend::UpdatePeakMemory() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    peak_memory_ = std::max<int64_t>(peak_memory_, static_cast<int64_t>(total_b - free_b));
  }
}

}  // namespace hypertrain::cuda
