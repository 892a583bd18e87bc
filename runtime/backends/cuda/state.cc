// CudaBackend: the per-unit state buffers (compute copy, fp32 gradients,
// master weights, AdamW m and v) and their accessors, the unit pool's
// acquire/release, ReadState/WriteState and the compute-copy refresh; the
// weights a pass reads (W, G). Creation and the optimizer are backend.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/backends/cuda/accumulate.h"
#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/cast.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::Range;
using model::StateKind;
using model::UnitBuffer;

UnitBuffer CudaBackend::ComputeParams(int u) {
  return {compute_.at(u), model_dtype_, layout_.unit(u).padded_numel};
}
UnitBuffer CudaBackend::FullGrads(int u) {
  (void)MaterializeZeroGrads();  // a failed launch resurfaces at the next sync
  return {grads_.at(u), model::DType::kF32, layout_.unit(u).padded_numel};
}
UnitBuffer CudaBackend::ComputeShard(int u) {
  if (!pool_) return {};
  return {compute_shard_.at(u), model_dtype_, owned_[u].size()};
}

// Acquire/release only re-point the unit at a slot: whoever used the slot
// before queued that work on stream_ earlier, and the next writer (a
// collective that waits for stream_, or a kernel on stream_) comes after it.
Status CudaBackend::AcquireParams(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CUDA"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, param_pool_[k].Acquire(u));
  compute_[u] = param_slots_[k][s];
  return Status::Ok();
}

Status CudaBackend::ReleaseParams(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CUDA"));
  HT_RETURN_IF_ERROR(param_pool_[model::PoolKind(u)].Release(u).status());
  compute_[u] = nullptr;
  return Status::Ok();
}

Status CudaBackend::AcquireGrads(int u) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CUDA"));
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, grad_pool_[k].Acquire(u));
  grads_[u] = grad_slots_[k][s];
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  HT_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(grads_[u], 0, layout_.unit(u).padded_numel * sizeof(float), stream_));
  return Status::Ok();
}

Status CudaBackend::ReleaseGrads(int u) { return FreeGrads(u, /*fold=*/true); }
Status CudaBackend::DiscardGrads(int u) { return FreeGrads(u, /*fold=*/false); }

Status CudaBackend::FreeGrads(int u, bool fold) {
  HT_RETURN_IF_ERROR(model::CheckPoolUnit(layout_, pool_, u, "CUDA"));
  if (grads_[u] == nullptr) return FailedPrecondition(fmt::format("unit {} holds no gradient slot", u));
  if (fold) {
    HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
    HT_CUDA_RETURN_IF_ERROR(
        AddInto(shard_grads_[u], grads_[u] + owned_[u].begin, owned_[u].size(), stream_));
  }
  HT_RETURN_IF_ERROR(grad_pool_[model::PoolKind(u)].Release(u).status());
  grads_[u] = nullptr;
  return Status::Ok();
}

UnitBuffer CudaBackend::MasterParams(int u) {
  return {master_.at(u), model::DType::kF32, owned_[u].size()};
}
UnitBuffer CudaBackend::ShardGrads(int u) {
  (void)MaterializeZeroGrads();
  return {shard_grads_.at(u), model::DType::kF32, owned_[u].size()};
}
UnitBuffer CudaBackend::AdamM(int u) { return {m_.at(u), model::DType::kF32, owned_[u].size()}; }
UnitBuffer CudaBackend::AdamV(int u) { return {v_.at(u), model::DType::kF32, owned_[u].size()}; }

float* CudaBackend::State(int u, StateKind kind) {
  switch (kind) {
    case StateKind::kMasterParams: return static_cast<float*>(master_[u]);
    case StateKind::kShardGrads: return shard_grads_[u];
    case StateKind::kAdamM: return static_cast<float*>(m_[u]);
    case StateKind::kAdamV: return static_cast<float*>(v_[u]);
  }
  return nullptr;
}

Status CudaBackend::ReadState(int u, StateKind kind, float* host) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  if (kind == StateKind::kShardGrads) HT_RETURN_IF_ERROR(CheckGradsReadable());
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, State(u, kind), owned_[u].size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CudaBackend::WriteState(int u, StateKind kind, const float* host) {
  if (u < 0 || u >= layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  HT_RETURN_IF_ERROR(MaterializeZeroGrads());
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(State(u, kind), host, owned_[u].size() * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
  if (kind == StateKind::kMasterParams) {
    HT_RETURN_IF_ERROR(RefreshCompute(u, owned_[u]));
    ++versions_[u];
  }
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

// compute[r] = cast(master[r - owned.begin]).
Status CudaBackend::RefreshCompute(int u, Range r) {
  if (r.empty()) return Status::Ok();
  const float* src = static_cast<const float*>(master_[u]) + (r.begin - owned_[u].begin);
  HT_CUDA_RETURN_IF_ERROR(DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::Cast<T, float>(static_cast<T*>(OwnedCompute(u, r.begin)), src, r.size(), stream_);
  }));
  return Status::Ok();
}

void* CudaBackend::OwnedCompute(int u, int64_t i) const {
  const size_t es = kc::DTypeSize(dtype_);
  if (pool_) return static_cast<char*>(compute_shard_[u]) + (i - owned_[u].begin) * es;
  return static_cast<char*>(compute_[u]) + i * es;
}

void* CudaBackend::W(int u, int t) const {
  if (peft_ && fp8_base_ && !qlora_ && u != model::ParamLayout::kEmbeddingUnit) {
    // FP8 base: only the norms are held in the compute dtype; the projections
    // are read as codes by Fp8Projections (FrozenWeight), never through W().
    if (t != model::kInputNorm && t != model::kPostNorm) return nullptr;
    return static_cast<char*>(base_[u]) +
           (t == model::kPostNorm ? base_layout_.config().hidden_size : 0) * kc::DTypeSize(dtype_);
  }
  if (peft_) {
    // QLoRA: a block's weights are read from its dequantised copy
    // (MaterializeBlock(u) ran for the block being computed).
    void* unit = qlora_ && u != model::ParamLayout::kEmbeddingUnit ? qlora_block_ : base_[u];
    return static_cast<char*>(unit) + base_layout_.unit(u).tensors[t].offset * kc::DTypeSize(dtype_);
  }
  return static_cast<char*>(compute_[u]) +
         layout_.unit(u).tensors[t].offset * kc::DTypeSize(dtype_);
}
float* CudaBackend::G(int u, int t) const {
  if (peft_) return nullptr;  // the base is frozen: no weight gradients
  return grads_[u] + layout_.unit(u).tensors[t].offset;
}

}  // namespace hypertrain::cuda
