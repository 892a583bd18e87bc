#include "runtime/parallel/hsdp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

#include "contract/sharding.h"

namespace hypertrain::parallel {

using model::ParamLayout;
using model::Range;

StatusOr<model::BackendOptions> ShardedBackendOptions(const model::ModelConfig& config,
                                                      model::BackendOptions base,
                                                      const GroupLayout& groups) {
  const int D = groups.shard_degree;
  base.layout.pad_multiple = static_cast<int64_t>(D) * kShardAlignment;
  HT_ASSIGN_OR_RETURN(ParamLayout layout, ParamLayout::Build(config, base.layout));
  base.owned.clear();
  for (const auto& u : layout.units()) {
    if (u.padded_numel % D != 0) {
      return Internal("unit " + u.name + " is not padded to a multiple of the shard degree");
    }
    const int64_t S = u.padded_numel / D;
    base.owned.push_back({groups.shard_rank * S, (groups.shard_rank + 1) * S});
  }
  if (D == 1) base.owned.clear();  // whole units: ShardGrads aliases FullGrads
  // Full-size params/grads only in a pool: current + prefetched block, or
  // every block for strategies that keep params from forward to backward.
  base.unit_pool = D > 1;
  base.pool_param_slots =
      groups.reshard_after_forward ? 2 : std::max<int>(1, static_cast<int>(config.num_hidden_layers));
  // Gather buffers for the split embedding gradient (HsdpOptions), only while
  // they stay within a table's rows (contract::SplitsEmbeddingGrad); beyond
  // that the embedding unit is reduce-scattered whole, so no buffer grows
  // with the shard degree.
  const int64_t tokens =
      base.micro_batch_size * (base.seq_len > 0 ? base.seq_len : config.max_context_width);
  base.embedding_grad_ranks = contract::SplitsEmbeddingGrad(D, tokens, config.vocab_size) ? D : 0;
  return base;
}

StatusOr<std::unique_ptr<HsdpHooks>> HsdpHooks::Create(DistContext& ctx, model::Backend& backend,
                                                       HsdpOptions options) {
  const GroupLayout& g = ctx.layout();
  const ParamLayout& layout = backend.layout();
  if (ctx.shard().size() != g.shard_degree) return Internal("shard group size mismatch");
  for (int u = 0; u < layout.num_units(); ++u) {
    const int64_t n = layout.unit(u).padded_numel;
    if (n % g.shard_degree != 0) {
      return InvalidArgument("unit " + layout.unit(u).name + " (" + std::to_string(n) +
                             " elements) is not padded for shard degree " +
                             std::to_string(g.shard_degree) + ": create the backend with ShardedBackendOptions");
    }
    const int64_t S = n / g.shard_degree;
    const Range own = backend.Owned(u);
    if (own.begin != g.shard_rank * S || own.end != (g.shard_rank + 1) * S) {
      return InvalidArgument("backend owns [" + std::to_string(own.begin) + ", " +
                             std::to_string(own.end) + ") of unit " + layout.unit(u).name +
                             " but shard rank " + std::to_string(g.shard_rank) + " must own [" +
                             std::to_string(g.shard_rank * S) + ", " +
                             std::to_string((g.shard_rank + 1) * S) + ")");
    }
  }
  DType pd = DType::kF32;
  switch (backend.ComputeParams(0).dtype) {
    case model::DType::kF32: pd = DType::kF32; break;
    // An all-gather only moves bits: fp16 params travel as 16-bit words
    // (gradients are fp32 whatever the compute dtype). The fp16 loss scaler's
    // overflow check stays global: an inf in any rank's gradient survives the
    // reduce-scatter into some shard, and GlobalSumSquares sums the shard group.
    case model::DType::kBF16:
    case model::DType::kF16: pd = DType::kBF16; break;
  }
  if (backend.PoolsUnits() && g.shard_degree == 1) {
    return InvalidArgument("a pooling backend needs a shard degree > 1");
  }
  std::unique_ptr<HsdpHooks> h(new HsdpHooks(ctx, backend, options, pd));
  if (options.split_embedding_grad && h->pool_ && g.shard_degree > 1 &&
      backend.SplitsEmbeddingGrad()) {
    const model::EmbeddingGradIo io = backend.EmbeddingGrad();
    if (io.ranks != g.shard_degree || io.tokens == nullptr || io.dout == nullptr ||
        io.all_tokens == nullptr || io.all_dout == nullptr || io.tokens_per_rank <= 0) {
      return InvalidArgument("the backend's embedding gradient buffers are planned for " +
                             std::to_string(io.ranks) + " ranks, the shard group has " +
                             std::to_string(g.shard_degree) +
                             ": create the backend with ShardedBackendOptions");
    }
    h->split_emb_ = true;
    // An all-gather only moves bits: 16-bit gradients travel as bf16 words.
    h->emb_dout_dtype_ = io.dtype == model::DType::kF32 ? DType::kF32 : DType::kBF16;
  }
  if (h->device_ && backend.ComputeStream() != nullptr) {
    // Every collective first waits for the compute queued so far (it reads
    // what compute wrote, or overwrites what compute read); compute waits on
    // gathers with WaitOnStream. No host synchronisation in a pass.
    h->stream_ = backend.ComputeStream();
    ctx.shard().SetComputeStream(h->stream_);
    ctx.replica().SetComputeStream(h->stream_);
  }
  if (options.fp8_all_gather && h->pool_ && g.shard_degree > 1) {
    if (h->device_ || pd != DType::kF32) {
      if (ctx.rank() == 0) {
        spdlog::warn("hsdp: model.fp8: the FP8 all-gather runs on host (Gloo) groups; the {} groups "
                     "gather parameters in the compute dtype",
                     ctx.shard().backend());
      }
    } else {
      h->fp8_gather_ = true;
      for (int u = 0; u < h->num_units_; ++u) {
        h->wires_.push_back(Fp8Wire::ForUnit(layout, u, g.shard_degree));
      }
      h->wire_send_.resize(h->num_units_);
      h->wire_recv_.resize(h->num_units_);
      h->fp8_pending_.assign(h->num_units_, false);
    }
  }
  // Start sharded: nothing but the owned range is valid until gathered (a
  // pooling backend holds nothing full-size yet).
  for (int u = 0; u < h->num_units_ && !h->pool_; ++u) {
    h->gathered_[u] = true;
    HT_RETURN_IF_ERROR(h->Release(u));
  }
  return h;
}

HsdpHooks::HsdpHooks(DistContext& ctx, model::Backend& backend, HsdpOptions options, DType pd)
    : ctx_(ctx),
      backend_(backend),
      options_(options),
      param_dtype_(pd),
      shard_degree_(ctx.layout().shard_degree),
      num_units_(backend.layout().num_units()),
      reshard_after_forward_(ctx.layout().reshard_after_forward),
      gathered_(num_units_, false),
      gather_work_(num_units_),
      rs_work_(num_units_),
      device_(backend.name() != "cpu"),
      pool_(backend.PoolsUnits()),
      grads_pending_(num_units_, false),
      rs_final_(num_units_, false),
      rs_direct_(num_units_, false),
      early_version_(num_units_, -1),
      ar_work_(num_units_) {}

HsdpHooks::~HsdpHooks() {
  // Never leave a collective writing into buffers that outlive us unseen.
  for (auto& w : gather_work_)
    if (w) (void)w->Wait();
  for (auto& w : rs_work_)
    if (w) (void)w->Wait();
  for (auto& w : reap_)
    if (w) (void)w->Wait();
  for (auto& w : ar_work_)
    if (w) (void)w->Wait();
  if (emb_tokens_work_) (void)emb_tokens_work_->Wait();
  if (emb_dout_work_) (void)emb_dout_work_->Wait();
  if (stats_.all_gathers + stats_.reduce_scatters + stats_.all_reduces > 0) {
    spdlog::info(
        "hsdp: rank {}: {} steps, {} all-gathers ({} prefetched), {} reduce-scatters, {} all-reduces; "
        "host blocked on collectives {:.3f} s ({:.2f} ms/step, {} host waits, {} stream waits, {} "
        "replica all-reduces overlapped); {} gathers started during the optimizer step ({} stale), {} "
        "reduce-scatters straight into the gradient shard; embedding gradient {} ({} gathers, {:.1f} MB); "
        "{} FP8 all-gathers, {:.1f} MB ({:.1f} MB unquantized)",
        ctx_.rank(), stats_.steps, stats_.all_gathers, stats_.prefetch_hits, stats_.reduce_scatters,
        stats_.all_reduces, stats_.exposed_comm_s,
        stats_.steps > 0 ? 1e3 * stats_.exposed_comm_s / stats_.steps : 0.0, stats_.host_waits,
        stats_.stream_waits, stats_.early_all_reduces, stats_.early_gathers, stats_.stale_gathers,
        stats_.direct_reduce_scatters, split_emb_ ? "split" : "whole", stats_.embedding_grad_gathers,
        1e-6 * static_cast<double>(stats_.embedding_grad_gather_bytes), stats_.fp8_gathers,
        1e-6 * static_cast<double>(stats_.fp8_gather_bytes),
        1e-6 * static_cast<double>(stats_.fp8_gather_bytes_unquantized));
  }
}

Status HsdpHooks::WaitTimed(Work& w) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = w.Wait();
  stats_.exposed_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.host_waits;
  return s;
}

Status HsdpHooks::WaitForCompute(std::unique_ptr<Work>& w) {
  if (!w) return Status::Ok();
  if (stream_ == nullptr) {
    Status s = WaitTimed(*w);
    w.reset();
    return s;
  }
  ++stats_.stream_waits;
  Status s = w->WaitOnStream(stream_);
  reap_.push_back(std::move(w));  // host-waited later, when surely complete
  return s;
}

Status HsdpHooks::Reap() {
  Status first;
  for (auto& w : reap_) {
    Status s = WaitTimed(*w);
    if (first.ok() && !s.ok()) first = s;
  }
  reap_.clear();
  return first;
}

Status HsdpHooks::Prefetch(int u) {
  if (!sharded() || u < 0 || u >= num_units_ || gathered_[u] || gather_work_[u]) return Status::Ok();
  // Pool: a slot whose previous unit's compute was queued before this call;
  // the gather waits for that compute (SetComputeStream), so reusing the
  // slot is safe without a host sync.
  if (pool_) HT_RETURN_IF_ERROR(backend_.AcquireParams(u));
  if (fp8_gather_ && !wires_[u].empty()) return StartFp8Gather(u);
  const model::UnitBuffer p = backend_.ComputeParams(u);
  const size_t S = static_cast<size_t>(p.numel / shard_degree_);
  const size_t esize = DTypeSize(param_dtype_);
  char* base = static_cast<char*>(p.data);
  const void* shard = pool_ ? backend_.ComputeShard(u).data
                            : base + ctx_.layout().shard_rank * S * esize;
  if (base == nullptr || shard == nullptr) return Internal("unit " + std::to_string(u) + " has no buffer to gather into");
  gather_work_[u] = ctx_.shard().AllGather(shard, base, S, param_dtype_);
  ++stats_.all_gathers;
  return Status::Ok();
}

Status HsdpHooks::Gather(int u) {
  if (!sharded() || gathered_[u]) return Status::Ok();
  if (gather_work_[u]) {
    ++stats_.prefetch_hits;
  } else {
    HT_RETURN_IF_ERROR(Prefetch(u));
  }
  HT_RETURN_IF_ERROR(WaitForCompute(gather_work_[u]));
  HT_RETURN_IF_ERROR(FinishFp8Gather(u));
  gathered_[u] = true;
  return Status::Ok();
}

Status HsdpHooks::StartFp8Gather(int u) {
  const Fp8Wire& w = wires_[u];
  const int rank = ctx_.layout().shard_rank;
  const auto* shard = static_cast<const float*>(backend_.ComputeShard(u).data);
  void* full = backend_.ComputeParams(u).data;
  if (shard == nullptr || full == nullptr) {
    return Internal("unit " + std::to_string(u) + " has no buffer to gather into");
  }
  // One scale per projection tensor from its amax over every shard.
  std::vector<float> amax = w.LocalAmax(rank, shard);
  const auto t0 = std::chrono::steady_clock::now();
  HT_RETURN_IF_ERROR(ctx_.shard().AllReduceHost(amax.data(), amax.size(), ReduceOp::kMax));
  stats_.exposed_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  wire_send_[u].resize(w.record_bytes());
  wire_recv_[u].resize(w.record_bytes() * shard_degree_);
  w.Encode(rank, shard, Fp8Wire::Scales(amax), wire_send_[u].data());
  gather_work_[u] = ctx_.shard().AllGather(wire_send_[u].data(), wire_recv_[u].data(),
                                           w.record_bytes(), DType::kU8);
  fp8_pending_[u] = true;
  ++stats_.all_gathers;
  ++stats_.fp8_gathers;
  stats_.fp8_gather_bytes += static_cast<int64_t>(wire_recv_[u].size());
  stats_.fp8_gather_bytes_unquantized +=
      static_cast<int64_t>(backend_.ComputeParams(u).numel * DTypeSize(param_dtype_));
  return Status::Ok();
}

Status HsdpHooks::FinishFp8Gather(int u) {
  if (!fp8_gather_ || !fp8_pending_[u]) return Status::Ok();
  fp8_pending_[u] = false;
  HT_RETURN_IF_ERROR(
      wires_[u].Decode(wire_recv_[u].data(), static_cast<float*>(backend_.ComputeParams(u).data)));
  std::vector<uint8_t>().swap(wire_send_[u]);
  std::vector<uint8_t>().swap(wire_recv_[u]);
  return Status::Ok();
}

Status HsdpHooks::Release(int u) {
  if (!sharded() || !gathered_[u]) return Status::Ok();
  gathered_[u] = false;
  if (pool_) return backend_.ReleaseParams(u);
  if (!options_.poison_released || backend_.name() != "cpu" || param_dtype_ != DType::kF32) {
    return Status::Ok();
  }
  const model::UnitBuffer p = backend_.ComputeParams(u);
  const Range own = backend_.Owned(u);
  float* x = static_cast<float*>(p.data);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill(x, x + own.begin, nan);
  std::fill(x + own.end, x + p.numel, nan);
  return Status::Ok();
}

Status HsdpHooks::WaitReduceScatter(int u) {
  if (!rs_work_[u]) return Status::Ok();
  Status s = WaitTimed(*rs_work_[u]);
  rs_work_[u].reset();
  return s;
}

Status HsdpHooks::BeginMicroBatch(int micro_batch, bool last) {
  last_micro_batch_ = last;
  final_pass_ = last;
  first_micro_batch_ = micro_batch == 0;
  return Status::Ok();
}

Status HsdpHooks::AfterOptimizerStep(int u) {
  // The next pass opens with the embedding, then block 0 (unit 1): gather
  // each right after its own optimizer step. Every rank steps the same units
  // in the same order (and skips the same steps), so the shard group sees the
  // same collectives everywhere. Device groups wait for the compute stream
  // queued so far (this unit's update of ComputeShard, the previous pass's
  // last use of the slot), then run beside the remaining units' updates.
  if (!sharded() || !options_.prefetch || (u != ParamLayout::kEmbeddingUnit && u != 1) ||
      u >= num_units_ || gathered_[u] || gather_work_[u]) {
    return Status::Ok();
  }
  const int64_t version = backend_.ParamsVersion(u);
  if (version < 0) return Status::Ok();  // staleness not trackable: gather at the pass start
  HT_RETURN_IF_ERROR(Prefetch(u));
  early_version_[u] = version;
  ++stats_.early_gathers;
  return Status::Ok();
}

Status HsdpHooks::CompleteGather(int u) {
  if (!gather_work_[u]) return Status::Ok();
  HT_RETURN_IF_ERROR(WaitTimed(*gather_work_[u]));
  gather_work_[u].reset();
  HT_RETURN_IF_ERROR(FinishFp8Gather(u));
  gathered_[u] = true;
  return Status::Ok();
}

Status HsdpHooks::WaitForPrefetches() {
  for (int u = 0; u < num_units_; ++u) {
    if (early_version_[u] >= 0) HT_RETURN_IF_ERROR(CompleteGather(u));
  }
  return Status::Ok();
}

Status HsdpHooks::StartReplicaReduce(int u) {
  if (ctx_.replica().size() == 1 || ar_work_[u]) return Status::Ok();
  // Device groups wait for the compute stream first (the fold into / the
  // backward that wrote ShardGrads(u)).
  const model::UnitBuffer sg = backend_.ShardGrads(u);
  ar_work_[u] = ctx_.replica().AllReduce(sg.data, static_cast<size_t>(sg.numel), DType::kF32,
                                         ReduceOp::kAvg, options_.reduce_dtype);
  ++stats_.all_reduces;
  return Status::Ok();
}

Status HsdpHooks::BeforeForward(int u) {
  if (u == ParamLayout::kEmbeddingUnit) {
    // A new pass. The previous one ended with the backend synchronising its
    // stream (the loss read-back), so the collectives its compute waited on
    // are complete: reap them (the watchdog saw any that hung). Anything
    // still gathered (an evaluation, zero2 leftovers) may predate the last
    // optimizer step and is released.
    HT_RETURN_IF_ERROR(Reap());
    if (!step_open_) {  // first micro-batch of a step: the step a hang report names
      step_open_ = true;
      ctx_.watchdog().SetStep(++step_);
      ++stats_.steps;
    }
    // Gathers started in AfterOptimizerStep are kept while the unit's
    // params have not changed since (a WriteState would make them stale).
    for (int v = 0; v < num_units_; ++v) {
      const bool early = early_version_[v] >= 0;
      const bool current = early && (gather_work_[v] || gathered_[v]) &&
                           backend_.ParamsVersion(v) == early_version_[v];
      early_version_[v] = -1;
      if (current) continue;
      if (early) ++stats_.stale_gathers;
      HT_RETURN_IF_ERROR(CompleteGather(v));
      HT_RETURN_IF_ERROR(Release(v));
    }
  }
  HT_RETURN_IF_ERROR(Gather(u));
  if (options_.prefetch && u + 1 < num_units_) HT_RETURN_IF_ERROR(Prefetch(u + 1));
  return Status::Ok();
}

Status HsdpHooks::AfterForward(int u) {
  if (reshard_after_forward_ && u != ParamLayout::kEmbeddingUnit) return Release(u);
  return Status::Ok();
}

Status HsdpHooks::FlushGrads(int u) {
  if (!grads_pending_[u]) return Status::Ok();
  // Compute waits for the reduce-scatter (the host only without a stream),
  // then adds this rank's reduced shard into ShardGrads and frees the slot.
  HT_RETURN_IF_ERROR(WaitForCompute(rs_work_[u]));
  grads_pending_[u] = false;
  // A reduce-scatter straight into ShardGrads (first micro-batch) leaves
  // nothing to add: the wait above only orders the slot's reuse after it.
  HT_RETURN_IF_ERROR(rs_direct_[u] ? backend_.DiscardGrads(u) : backend_.ReleaseGrads(u));
  // Last micro-batch: ShardGrads(u) is final, so its replica all-reduce can
  // run now, overlapping the rest of the backward.
  return rs_final_[u] ? StartReplicaReduceDuringBackward(u) : Status::Ok();
}

Status HsdpHooks::BeforeBackward(int u) {
  if (pool_) {
    // The embedding's slot may still hold the previous micro-batch's
    // gradient (its reduce-scatter long done): fold it in first.
    HT_RETURN_IF_ERROR(FlushGrads(u));
    HT_RETURN_IF_ERROR(backend_.AcquireGrads(u));
  } else {
    // A reduce-scatter of an earlier micro-batch must be done reading
    // FullGrads(u) before this backward adds into it.
    HT_RETURN_IF_ERROR(WaitForCompute(rs_work_[u]));
  }
  HT_RETURN_IF_ERROR(Gather(u));
  if (options_.prefetch) {
    // Backward order: embedding, then blocks L..1.
    const int next = u == ParamLayout::kEmbeddingUnit ? num_units_ - 1 : u - 1;
    if (next >= 1) HT_RETURN_IF_ERROR(Prefetch(next));
  }
  return Status::Ok();
}

Status HsdpHooks::AfterBackward(int u) {
  if (!sharded()) {
    // no_shard: ShardGrads aliases FullGrads, final after the last
    // micro-batch's backward of u: all-reduce it now (DDP-style overlap).
    return final_pass_ ? StartReplicaReduceDuringBackward(u) : Status::Ok();
  }
  if (pool_) {
    // Every micro-batch: reduce-scatter the slot — the first micro-batch of
    // a step straight into ShardGrads(u) (overwriting it: no add, no zeroed
    // shard needed), later ones in place (this rank's reduced shard lands at
    // its owned range, added into ShardGrads when folded) — then fold the
    // PREVIOUS unit's shard, so compute never waits on the collective it
    // just issued. Without the split, the embedding's stays pending until
    // its slot is needed again or FinishGradients, where the host waits.
    if (split_emb_ && u == ParamLayout::kEmbeddingUnit) {
      // Its slot was reduce-scattered after the head's backward (and folded
      // after the last block's, unless there is none); what is left is the
      // lookup's gradient, added into the owned rows directly. Block 0's
      // slot is folded only after that, so the add overlaps its
      // reduce-scatter, and the embedding's replica all-reduce does not
      // wait for it either.
      HT_RETURN_IF_ERROR(FlushGrads(u));
      HT_RETURN_IF_ERROR(AccumulateEmbeddingGrad());
      if (final_pass_) HT_RETURN_IF_ERROR(StartReplicaReduceDuringBackward(u));
      for (int v = 0; v < num_units_; ++v) HT_RETURN_IF_ERROR(FlushGrads(v));
    } else {
      // The embedding output's gradient is final after block 0's backward:
      // gather it ahead of block 0's reduce-scatter on the shard group's
      // FIFO queue/stream.
      if (split_emb_ && u == 1) HT_RETURN_IF_ERROR(StartEmbeddingGradGather());
      HT_RETURN_IF_ERROR(ReduceScatterSlot(u));
      // Fold every other pending slot (with the split embedding gradient
      // that includes the embedding's, after the last block's backward).
      for (int v = 0; v < num_units_; ++v) {
        if (v != u) HT_RETURN_IF_ERROR(FlushGrads(v));
      }
    }
    // The embedding's backward ends the pass: a later pass without its own
    // BeginMicroBatch(0, ...) must accumulate, not overwrite.
    if (u == ParamLayout::kEmbeddingUnit) first_micro_batch_ = false;
    return Release(u);
  }
  if (last_micro_batch_) {
    // FullGrads(u) holds the sum over this step's micro-batches (the backend
    // adds into it); each reduce-scatter overwrites ShardGrads(u), so an
    // extra one (no BeginMicroBatch calls) is redundant, never wrong.
    // Device groups wait for the compute stream (this unit's backward) first.
    const model::UnitBuffer fg = backend_.FullGrads(u);
    const model::UnitBuffer sg = backend_.ShardGrads(u);
    const size_t S = static_cast<size_t>(fg.numel / shard_degree_);
    if (static_cast<size_t>(sg.numel) != S) return Internal("shard gradient size mismatch");
    rs_work_[u] = ctx_.shard().ReduceScatter(fg.data, sg.data, S, DType::kF32, ReduceOp::kAvg,
                                             options_.reduce_dtype);
    ++stats_.reduce_scatters;
  }
  return Release(u);
}

Status HsdpHooks::ReduceScatterSlot(int u) {
  const model::UnitBuffer fg = backend_.FullGrads(u);
  const size_t S = static_cast<size_t>(fg.numel / shard_degree_);
  if (fg.data == nullptr) return Internal("unit " + std::to_string(u) + " has no gradient slot");
  float* full = static_cast<float*>(fg.data);
  const bool direct = first_micro_batch_;
  float* out = full + ctx_.layout().shard_rank * S;
  if (direct) {
    const model::UnitBuffer sg = backend_.ShardGrads(u);
    if (static_cast<size_t>(sg.numel) != S) return Internal("shard gradient size mismatch");
    out = static_cast<float*>(sg.data);
    ++stats_.direct_reduce_scatters;
  }
  rs_work_[u] =
      ctx_.shard().ReduceScatter(full, out, S, DType::kF32, ReduceOp::kAvg, options_.reduce_dtype);
  ++stats_.reduce_scatters;
  rs_final_[u] = final_pass_;
  rs_direct_[u] = direct;
  grads_pending_[u] = true;
  return Status::Ok();
}

Status HsdpHooks::AfterHeadBackward() {
  if (!split_emb_) return Status::Ok();
  const int E = ParamLayout::kEmbeddingUnit;
  HT_RETURN_IF_ERROR(ReduceScatterSlot(E));
  // ShardGrads(E) is final only once the lookup's gradient is added
  // (AfterBackward(E)): its replica all-reduce starts there, not at the fold.
  rs_final_[E] = false;
  // The token ids are known already: gather them now, off the pass's tail.
  // int32 ids travel as 32-bit words (an all-gather only moves bits); device
  // groups first wait for the compute queued so far, which includes the
  // previous micro-batch's last read of all_tokens.
  const model::EmbeddingGradIo io = backend_.EmbeddingGrad();
  emb_tokens_work_ = ctx_.shard().AllGather(io.tokens, io.all_tokens,
                                            static_cast<size_t>(io.tokens_per_rank), DType::kF32);
  return Status::Ok();
}

Status HsdpHooks::StartEmbeddingGradGather() {
  if (emb_dout_work_) return Status::Ok();
  const model::EmbeddingGradIo io = backend_.EmbeddingGrad();
  // Ordered after block 0's backward, which wrote dout (SetComputeStream),
  // and after the previous micro-batch's add, the last reader of all_dout.
  const size_t count = static_cast<size_t>(io.tokens_per_rank * io.cols);
  emb_dout_work_ = ctx_.shard().AllGather(io.dout, io.all_dout, count, emb_dout_dtype_);
  ++stats_.embedding_grad_gathers;
  stats_.embedding_grad_gather_bytes +=
      static_cast<int64_t>(shard_degree_) *
      (io.tokens_per_rank * 4 + static_cast<int64_t>(count * DTypeSize(emb_dout_dtype_)));
  return Status::Ok();
}

Status HsdpHooks::AccumulateEmbeddingGrad() {
  if (!emb_tokens_work_) return Internal("embedding backward without AfterHeadBackward");
  HT_RETURN_IF_ERROR(StartEmbeddingGradGather());  // no blocks: not issued yet
  HT_RETURN_IF_ERROR(WaitForCompute(emb_tokens_work_));
  HT_RETURN_IF_ERROR(WaitForCompute(emb_dout_work_));
  // The replaced reduce-scatter's semantics: average over the shard group,
  // in the reduce dtype.
  return backend_.AccumulateEmbeddingGrad(options_.reduce_dtype == DType::kBF16);
}

Status HsdpHooks::FinishGradients() {
  for (const auto& w : ar_work_) stats_.early_all_reduces += w != nullptr;
  // The host waits here: the tail of the last reduce-scatters is exposed.
  for (int u = 0; u < num_units_; ++u) HT_RETURN_IF_ERROR(WaitReduceScatter(u));
  for (int u = 0; u < num_units_; ++u) HT_RETURN_IF_ERROR(FlushGrads(u));
  HT_RETURN_IF_ERROR(Reap());
  // A prefetch nobody consumed must not race the optimizer's writes.
  for (int u = 0; u < num_units_; ++u) HT_RETURN_IF_ERROR(CompleteGather(u));
  step_open_ = false;
  last_micro_batch_ = true;
  final_pass_ = false;
  first_micro_batch_ = false;
  std::fill(rs_final_.begin(), rs_final_.end(), false);
  if (ctx_.replica().size() == 1) return Status::Ok();
  // The replica all-reduces not started during the backward (all of them
  // without BeginMicroBatch or without a pool; the embedding's otherwise).
  // no_shard: ShardGrads aliases FullGrads; the replica group waits for the
  // compute stream before reading it.
  for (int u = 0; u < num_units_; ++u) HT_RETURN_IF_ERROR(StartReplicaReduce(u));
  Status first;
  for (auto& w : ar_work_) {
    if (!w) continue;
    Status s = WaitTimed(*w);
    if (first.ok() && !s.ok()) first = s;
    w.reset();
  }
  return first;
}

// fp64 scalars travel as two fp32 words (hi + lo) so sums keep ~48 bits.
StatusOr<double> HsdpHooks::SumScalar(ProcessGroup& g, double x, ReduceOp op) {
  if (g.size() == 1) return x;
  float v[2];
  v[0] = static_cast<float>(x);
  v[1] = std::isfinite(x) ? static_cast<float>(x - static_cast<double>(v[0])) : 0.0f;
  const auto t0 = std::chrono::steady_clock::now();
  HT_RETURN_IF_ERROR(g.AllReduceHost(v, 2, ReduceOp::kSum));
  stats_.exposed_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double sum = static_cast<double>(v[0]) + static_cast<double>(v[1]);
  return op == ReduceOp::kAvg ? sum / g.size() : sum;
}

StatusOr<double> HsdpHooks::GlobalSumSquares(double local) {
  return SumScalar(ctx_.shard(), local, ReduceOp::kSum);
}

StatusOr<double> HsdpHooks::MeanAcrossDataParallel(double local) {
  return SumScalar(ctx_.world(), local, ReduceOp::kAvg);
}

StatusOr<bool> HsdpHooks::AnyAcrossRanks(bool local) {
  if (ctx_.world().size() == 1) return local;
  float v = local ? 1.0f : 0.0f;
  HT_RETURN_IF_ERROR(ctx_.world().AllReduceHost(&v, 1, ReduceOp::kMax));
  return v > 0.5f;
}

Status HsdpHooks::ReduceAmax(float* amax, size_t n) {
  if (ctx_.world().size() == 1 || n == 0) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  HT_RETURN_IF_ERROR(ctx_.world().AllReduceHost(amax, n, ReduceOp::kMax));
  stats_.exposed_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

}  // namespace hypertrain::parallel
