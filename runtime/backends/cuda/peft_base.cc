// CudaBackend in PEFT mode (see backend.h): the frozen base store - whole
// units in the compute dtype (QLoRA: the block projections in NF4), or with
// BackendOptions::base_shard (S > 1) this rank's slice of every unit's
// storage bytes and the slots the hooks all-gather units into.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/nf4_dequant.h"
#include "runtime/model/init.h"
#include "runtime/model/nf4.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::ParamLayout;
using model::Range;

namespace {

// fp32 <-> compute dtype on the host, rounding as kc::Cast does (nearest even).
template <typename T>
T FromFloat(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return x;
  }
}
template <typename T>
float ToFloat(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return x;
  }
}

// model::InitUnitParams over [0, P) in chunks on all host cores: the init is
// counter-based, so the values do not depend on the split (an 8b base is
// ~8e9 normal draws, minutes on one core).
void InitParallel(const model::ParamLayout& layout, int unit, uint64_t seed, int64_t P,
                  float* dst) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  const int64_t chunk = std::max<int64_t>((P + threads - 1) / threads, int64_t{1} << 20);
  std::vector<std::thread> pool;
  for (int64_t b = 0; b < P; b += chunk) {
    const model::Range r{b, std::min(P, b + chunk)};
    pool.emplace_back([&layout, unit, seed, r, dst] {
      model::InitUnitParams(layout, unit, seed, r, dst + r.begin);
    });
  }
  for (std::thread& t : pool) t.join();
}

// The seven projections of a block unit quantised to NF4 on the host exactly
// as the CPU reference (model::QuantizeNf4), concurrently; index = BlockTensor,
// empty for the tensors that are no projection.
std::vector<model::Nf4Tensor> QuantizeBlockProjections(const model::UnitLayout& ul,
                                                       const float* host) {
  std::vector<model::Nf4Tensor> q(model::kNumBlockTensors);
  std::vector<std::thread> pool;
  for (int t = model::kQProj; t <= model::kDownProj; ++t) {
    if (ul.tensors[t].kind != model::TensorKind::kLinear) continue;
    pool.emplace_back([&q, &ul, host, t] {
      q[t] = model::QuantizeNf4(host + ul.tensors[t].offset, ul.tensors[t].numel);
    });
  }
  for (std::thread& th : pool) th.join();
  return q;
}

}  // namespace

// ---- The frozen base ---------------------------------------------------------

// Every base unit initialised from the seed like a model (the CPU backend's
// base, runtime/model/init.h), in the compute dtype.
Status CudaBackend::InitBase() {
  const size_t es = kc::DTypeSize(dtype_);
  int64_t max_p = 0;
  for (const model::UnitLayout& u : base_layout_.units()) max_p = std::max(max_p, u.padded_numel);
  std::vector<float> host(static_cast<size_t>(max_p));
  void* tmp = nullptr;  // fp32 of a unit (fp8_base: then its bf16, StoreFp8Block)
  const size_t tmp_bytes = max_p * (sizeof(float) + (fp8_base_ ? 2 : 0));
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tmp, std::max<size_t>(tmp_bytes, 256)));
  struct TmpFree {
    void* p;
    ~TmpFree() { cudaFree(p); }
  } tmp_free{tmp};
  base_.assign(base_layout_.num_units(), nullptr);
  if (qlora_) {  // the dequantised block the GEMMs read; gaps stay zero
    const int64_t P = base_layout_.unit(ParamLayout::BlockUnit(0)).padded_numel;
    HT_RETURN_IF_ERROR(Alloc(P * es, &qlora_block_));
    HT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(qlora_block_, 0, P * es, stream_));
    state_bytes_ += P * static_cast<int64_t>(es);
    nf4_.assign(base_layout_.num_units(), {});
  }
  if (options_.base_shard.size > 1) return InitShardedBase(host);
  if (fp8_base_) HT_RETURN_IF_ERROR(AllocFp8Base());
  for (const model::UnitLayout& u : base_layout_.units()) {
    const int64_t P = u.padded_numel;
    InitParallel(base_layout_, u.index, options_.seed, P, host.data());
    if (fp8_base_ && !qlora_ && u.index != ParamLayout::kEmbeddingUnit) {
      HT_RETURN_IF_ERROR(StoreFp8Block(u.index, host.data(), tmp));
      continue;
    }
    if (qlora_ && u.index != ParamLayout::kEmbeddingUnit) {
      HT_RETURN_IF_ERROR(StoreQloraBlock(u.index, host.data()));
      continue;
    }
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(P * es, &p));
    base_[u.index] = p;
    state_bytes_ += P * static_cast<int64_t>(es);
    base_bytes_ += P * static_cast<int64_t>(es);
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(tmp, host.data(), P * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(DispatchDType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      return kc::Cast<T, float>(static_cast<T*>(p), static_cast<const float*>(tmp), P, stream_);
    }));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  return Status::Ok();
}

Status CudaBackend::CheckBaseRange(int u, Range r) const {
  if (u < 0 || u >= base_layout_.num_units()) return InvalidArgument(fmt::format("no unit {}", u));
  if (r.begin < 0 || r.end > base_layout_.unit(u).padded_numel || r.begin > r.end) {
    return InvalidArgument(fmt::format("base range [{}, {}) of unit {} is outside the unit", r.begin,
                                       r.end, u));
  }
  return Status::Ok();
}

Status CudaBackend::WriteBase(int u, Range r, const float* host) {
  if (!peft_) return Backend::WriteBase(u, r, host);
  HT_RETURN_IF_ERROR(CheckBaseRange(u, r));
  if (r.empty()) return Status::Ok();
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  if (qlora_ && u != ParamLayout::kEmbeddingUnit) {
    if (r.begin != 0 || r.end != base_layout_.unit(u).padded_numel) {
      return InvalidArgument(fmt::format(
          "QLoRA base: block unit {} is written whole (its projections are quantised per tensor), "
          "got [{}, {})", u, r.begin, r.end));
    }
    return base_shard_ > 1 ? StoreBaseSlice(u, host) : StoreQloraBlock(u, host);
  }
  if (base_shard_ > 1) return WriteBaseSlice(u, r, host);
  if (fp8_base_ && !qlora_ && u != ParamLayout::kEmbeddingUnit) return WriteFp8Block(u, r, host);
  // Queued passes may still read the base: the copy goes after them on stream_.
  return DispatchDType(dtype_, [&](auto tag) -> Status {
    using T = decltype(tag);
    std::vector<T> v(static_cast<size_t>(r.size()));
    for (int64_t i = 0; i < r.size(); ++i) v[i] = FromFloat<T>(host[i]);
    T* dst = static_cast<T*>(base_[u]) + r.begin;
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, v.data(), v.size() * sizeof(T),
                                            cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // before `v` goes
    return Status::Ok();
  });
}

Status CudaBackend::ReadBase(int u, Range r, float* host) {
  if (!peft_) return Backend::ReadBase(u, r, host);
  HT_RETURN_IF_ERROR(CheckBaseRange(u, r));
  if (r.empty()) return Status::Ok();
  if (base_[u] == nullptr) {
    return FailedPrecondition(fmt::format(
        "base unit {} is sharded over {} ranks: all-gather it (GatherBase) before reading it", u,
        base_shard_));
  }
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  if (fp8_base_ && !qlora_ && u != ParamLayout::kEmbeddingUnit) return ReadFp8Block(u, r, host);
  // QLoRA: a block as the forward sees it, dequantised.
  const bool block = qlora_ && u != ParamLayout::kEmbeddingUnit;
  if (block) HT_RETURN_IF_ERROR(MaterializeBlock(u, /*whole=*/true));
  return DispatchDType(dtype_, [&](auto tag) -> Status {
    using T = decltype(tag);
    std::vector<T> v(static_cast<size_t>(r.size()));
    const T* src = static_cast<const T*>(block ? qlora_block_ : base_[u]) + r.begin;
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(v.data(), src, v.size() * sizeof(T),
                                            cudaMemcpyDeviceToHost, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    for (int64_t i = 0; i < r.size(); ++i) host[i] = ToFloat<T>(v[i]);
    return Status::Ok();
  });
}

// ---- QLoRA: NF4 block projections ----------------------------------------------

Status CudaBackend::StoreQloraBlock(int u, const float* host) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t C = base_layout_.config().hidden_size;
  const size_t es = kc::DTypeSize(dtype_);
  const int T = model::kNumBlockTensors;
  const std::vector<model::Nf4Tensor> q = QuantizeBlockProjections(ul, host);
  if (nf4_[u].empty()) {  // sizes depend only on the shapes: allocated once
    nf4_[u].assign(T, {});
    for (int t = 0; t < T; ++t) {
      if (q[t].numel == 0) continue;
      kc::Nf4View& v = nf4_[u][t];
      void* p = nullptr;
      HT_RETURN_IF_ERROR(Alloc(q[t].codes.size(), &p));
      v.codes = static_cast<const uint8_t*>(p);
      HT_RETURN_IF_ERROR(Alloc(q[t].scale_codes.size(), &p));
      v.scale_codes = static_cast<const int8_t*>(p);
      HT_RETURN_IF_ERROR(Alloc(q[t].scale_absmax.size() * sizeof(float), &p));
      v.scale_absmax = static_cast<const float*>(p);
      state_bytes_ += q[t].bytes();
      base_bytes_ += q[t].bytes();
    }
    HT_RETURN_IF_ERROR(Alloc(2 * C * es, &base_[u]));  // the two norms
    state_bytes_ += 2 * C * static_cast<int64_t>(es);
    base_bytes_ += 2 * C * static_cast<int64_t>(es);
  }
  for (int t = 0; t < T; ++t) {
    if (q[t].numel == 0) continue;
    kc::Nf4View& v = nf4_[u][t];
    v.numel = q[t].numel;
    v.scale_offset = q[t].scale_offset;
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<uint8_t*>(v.codes), q[t].codes.data(),
                                            q[t].codes.size(), cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<int8_t*>(v.scale_codes),
                                            q[t].scale_codes.data(), q[t].scale_codes.size(),
                                            cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<float*>(v.scale_absmax),
                                            q[t].scale_absmax.data(),
                                            q[t].scale_absmax.size() * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
  }
  const Status norms = DispatchDType(dtype_, [&](auto tag) -> Status {
    using TT = decltype(tag);
    std::vector<TT> v(static_cast<size_t>(2 * C));
    const float* in = host + ul.tensors[model::kInputNorm].offset;
    const float* post = host + ul.tensors[model::kPostNorm].offset;
    for (int64_t i = 0; i < C; ++i) v[i] = FromFloat<TT>(in[i]), v[C + i] = FromFloat<TT>(post[i]);
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base_[u], v.data(), v.size() * sizeof(TT),
                                            cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // before `q` and `v` go
    return Status::Ok();
  });
  HT_RETURN_IF_ERROR(norms);
  if (materialized_ == u) materialized_ = -1;
  if (fp8_base_) fp8_qlora_scaled_[u] = false;  // new values: new scales
  return Status::Ok();
}

Status CudaBackend::MaterializeBlock(int u, bool whole) {
  if (materialized_ == u && (materialized_whole_ || !whole)) return Status::Ok();
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t C = base_layout_.config().hidden_size;
  const size_t es = kc::DTypeSize(dtype_);
  char* block = static_cast<char*>(qlora_block_);
  // An FP8 base's passes read only the codes: once its scales are known (the
  // first store's amax), NF4 goes straight to them, one pass instead of two.
  const bool codes_only = fp8_base_ && !whole && fp8_qlora_scaled_[u];
  if (!codes_only) {
    for (int t = 0; t < static_cast<int>(nf4_[u].size()); ++t) {
      const kc::Nf4View& v = nf4_[u][t];
      if (v.numel == 0) continue;
      void* out = block + ul.tensors[t].offset * es;
      HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
        using TT = decltype(tag);
        return kc::Nf4Dequantize<TT>(static_cast<TT*>(out), v, model::kNf4Codebook, stream_);
      }));
    }
  }
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block + ul.tensors[model::kInputNorm].offset * es,
                                          base_[u], C * es, cudaMemcpyDeviceToDevice, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block + ul.tensors[model::kPostNorm].offset * es,
                                          static_cast<char*>(base_[u]) + C * es, C * es,
                                          cudaMemcpyDeviceToDevice, stream_));
  profile_.Mark(Op::kLora, stream_);
  if (codes_only) {
    HT_RETURN_IF_ERROR(Nf4BlockToFp8(u));
  } else if (fp8_base_) {
    HT_RETURN_IF_ERROR(CastQloraBlockToFp8(u));
  }
  materialized_ = u;
  materialized_whole_ = !codes_only;
  return Status::Ok();
}

// ---- The sharded base (BackendOptions::base_shard) -------------------------

// A unit's storage bytes: the compute-dtype values, or for a QLoRA block its
// two norms then each projection's NF4 codes, scale codes and group
// absmaxes (model::Nf4Tensor's arrays), every piece 256-byte aligned.
CudaBackend::BaseBlob CudaBackend::BlobLayout(int u) const {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t es = static_cast<int64_t>(kc::DTypeSize(dtype_));
  BaseBlob b;
  if (!qlora_ || u == ParamLayout::kEmbeddingUnit) {
    b.bytes = ul.padded_numel * es;
    return b;
  }
  auto take = [&b](int64_t n) {
    const int64_t at = b.bytes;
    b.bytes += (n + 255) / 256 * 256;
    return at;
  };
  b.norms = take(2 * base_layout_.config().hidden_size * es);
  for (int t = model::kQProj; t <= model::kDownProj; ++t) {
    if (ul.tensors[t].kind != model::TensorKind::kLinear) continue;
    const int64_t n = ul.tensors[t].numel;
    const int64_t blocks = (n + model::kNf4BlockSize - 1) / model::kNf4BlockSize;
    b.codes[t] = take((n + 1) / 2);
    b.scale_codes[t] = take(blocks);
    b.scale_absmax[t] = take((blocks + model::kNf4ScaleGroup - 1) / model::kNf4ScaleGroup * 4);
  }
  return b;
}

Status CudaBackend::InitShardedBase(std::vector<float>& host) {
  const model::BackendOptions::BaseShard bs = options_.base_shard;
  if (bs.rank < 0 || bs.rank >= bs.size) {
    return InvalidArgument(fmt::format("base shard {} of {} is not a shard", bs.rank, bs.size));
  }
  base_shard_ = bs.size;
  base_rank_ = bs.rank;
  const int U = base_layout_.num_units();
  base_slices_.assign(U, nullptr);
  base_shard_bytes_.assign(U, 0);
  int64_t slot_bytes[2] = {0, 0};
  for (const model::UnitLayout& u : base_layout_.units()) {
    InitParallel(base_layout_, u.index, options_.seed, u.padded_numel, host.data());
    HT_RETURN_IF_ERROR(StoreBaseSlice(u.index, host.data()));
    int64_t& n = slot_bytes[model::PoolKind(u.index)];
    n = std::max(n, base_shard_ * base_shard_bytes_[u.index]);
  }
  for (int k = 0; k < 2; ++k) {  // the embedding's; the current and the prefetched block's
    const int slots = k == 0 ? 1 : 2;
    for (int i = 0; i < slots; ++i) {
      void* p = nullptr;
      HT_RETURN_IF_ERROR(Alloc(std::max<int64_t>(slot_bytes[k], 256), &p));
      base_slot_mem_[k].push_back(p);
      pool_bytes_ += slot_bytes[k];
    }
    base_pool_[k] = model::UnitSlots(U, slots, k == 0 ? "CUDA base embedding slot"
                                                      : "CUDA base block slots");
  }
  return Status::Ok();
}

// Builds unit u's whole storage from its fp32 values on the host (QLoRA:
// quantised exactly as StoreQloraBlock does) and keeps this rank's slice.
Status CudaBackend::StoreBaseSlice(int u, const float* host) {
  const model::UnitLayout& ul = base_layout_.unit(u);
  const BaseBlob layout = BlobLayout(u);
  const int64_t k = (layout.bytes + base_shard_ * 256 - 1) / (base_shard_ * 256) * 256;
  std::vector<char> blob(static_cast<size_t>(k * base_shard_), 0);
  const size_t es = kc::DTypeSize(dtype_);
  auto put_values = [&](const float* src, int64_t n, char* dst) {
    return DispatchDType(dtype_, [&](auto tag) -> Status {
      using T = decltype(tag);
      T* out = reinterpret_cast<T*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = FromFloat<T>(src[i]);
      return Status::Ok();
    });
  };
  if (!qlora_ || u == ParamLayout::kEmbeddingUnit) {
    HT_RETURN_IF_ERROR(put_values(host, ul.padded_numel, blob.data()));
  } else {
    const int T = model::kNumBlockTensors;
    const int64_t C = base_layout_.config().hidden_size;
    const std::vector<model::Nf4Tensor> q = QuantizeBlockProjections(ul, host);
    HT_RETURN_IF_ERROR(put_values(host + ul.tensors[model::kInputNorm].offset, C,
                                  blob.data() + layout.norms));
    HT_RETURN_IF_ERROR(put_values(host + ul.tensors[model::kPostNorm].offset, C,
                                  blob.data() + layout.norms + C * es));
    nf4_[u].assign(T, {});
    for (int t = 0; t < T; ++t) {
      if (q[t].numel == 0) continue;
      nf4_[u][t].numel = q[t].numel;  // pointers: AcquireBase
      nf4_[u][t].scale_offset = q[t].scale_offset;
      std::memcpy(blob.data() + layout.codes[t], q[t].codes.data(), q[t].codes.size());
      std::memcpy(blob.data() + layout.scale_codes[t], q[t].scale_codes.data(),
                  q[t].scale_codes.size());
      std::memcpy(blob.data() + layout.scale_absmax[t], q[t].scale_absmax.data(),
                  q[t].scale_absmax.size() * sizeof(float));
    }
  }
  if (base_slices_[u] == nullptr) {  // sizes depend only on the shapes: allocated once
    HT_RETURN_IF_ERROR(Alloc(k, &base_slices_[u]));
    base_shard_bytes_[u] = k;
    state_bytes_ += k;
    base_bytes_ += k;
  }
  // Queued passes may still read the slice (a gather): the copy goes after them.
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base_slices_[u], blob.data() + base_rank_ * k, k,
                                          cudaMemcpyHostToDevice, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // before `blob` goes
  if (materialized_ == u) materialized_ = -1;
  return Status::Ok();
}

// Compute-dtype values [r) of a unit stored as values: the part in this
// rank's byte slice.
Status CudaBackend::WriteBaseSlice(int u, Range r, const float* host) {
  const int64_t es = static_cast<int64_t>(kc::DTypeSize(dtype_));
  const int64_t k = base_shard_bytes_[u];
  const int64_t lo = std::max(r.begin * es, base_rank_ * k);
  const int64_t hi = std::min(r.end * es, (base_rank_ + 1) * k);
  if (lo >= hi) return Status::Ok();
  return DispatchDType(dtype_, [&](auto tag) -> Status {
    using T = decltype(tag);
    std::vector<T> v(static_cast<size_t>(r.size()));
    for (int64_t i = 0; i < r.size(); ++i) v[i] = FromFloat<T>(host[i]);
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        static_cast<char*>(base_slices_[u]) + (lo - base_rank_ * k),
        reinterpret_cast<const char*>(v.data()) + (lo - r.begin * es), hi - lo,
        cudaMemcpyHostToDevice, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // before `v` goes
    return Status::Ok();
  });
}

// The values whose bytes overlap this rank's slice (whole for a QLoRA block).
Range CudaBackend::BaseNeeded(int u) const {
  const Range whole = Backend::BaseNeeded(u);
  if (base_shard_ <= 1 || whole.empty()) return whole;
  if (qlora_ && u != ParamLayout::kEmbeddingUnit) return whole;
  const int64_t es = static_cast<int64_t>(kc::DTypeSize(dtype_)), k = base_shard_bytes_[u];
  return model::Intersect({base_rank_ * k / es, ((base_rank_ + 1) * k + es - 1) / es}, whole);
}

int64_t CudaBackend::BaseShardBytes(int u) const {
  if (base_shard_ <= 1 || u < 0 || u >= base_layout_.num_units()) return 0;
  return base_shard_bytes_[u];
}
void* CudaBackend::BaseShard(int u) {
  if (base_shard_ <= 1 || u < 0 || u >= base_layout_.num_units()) return nullptr;
  return base_slices_[u];
}
void* CudaBackend::BaseSlot(int u) {
  if (base_shard_ <= 1 || u < 0 || u >= base_layout_.num_units()) return nullptr;
  const int s = base_pool_[model::PoolKind(u)].slot(u);
  return s < 0 ? nullptr : base_slot_mem_[model::PoolKind(u)][s];
}

// Acquire/release only re-point the unit (base_[u], its NF4 views) at a
// slot; the ordering is the unit pool's (see AcquireParams in backend.cc).
Status CudaBackend::AcquireBase(int u) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, {0, 0}));
  if (base_shard_ <= 1) return Status::Ok();
  const int k = model::PoolKind(u);
  HT_ASSIGN_OR_RETURN(int s, base_pool_[k].Acquire(u));
  char* slot = static_cast<char*>(base_slot_mem_[k][s]);
  const BaseBlob layout = BlobLayout(u);
  base_[u] = slot + layout.norms;  // a QLoRA block's norms; else the whole unit
  if (qlora_ && u != ParamLayout::kEmbeddingUnit) {
    for (int t = 0; t < static_cast<int>(nf4_[u].size()); ++t) {
      kc::Nf4View& v = nf4_[u][t];
      if (v.numel == 0) continue;
      v.codes = reinterpret_cast<const uint8_t*>(slot + layout.codes[t]);
      v.scale_codes = reinterpret_cast<const int8_t*>(slot + layout.scale_codes[t]);
      v.scale_absmax = reinterpret_cast<const float*>(slot + layout.scale_absmax[t]);
    }
  }
  return Status::Ok();
}

Status CudaBackend::ReleaseBase(int u) {
  HT_RETURN_IF_ERROR(CheckBaseRange(u, {0, 0}));
  if (base_shard_ <= 1) return Status::Ok();
  HT_RETURN_IF_ERROR(base_pool_[model::PoolKind(u)].Release(u).status());
  base_[u] = nullptr;
  if (u < static_cast<int>(nf4_.size())) {
    for (kc::Nf4View& v : nf4_[u]) v.codes = nullptr, v.scale_codes = nullptr, v.scale_absmax = nullptr;
  }
  return Status::Ok();
}

}  // namespace hypertrain::cuda
