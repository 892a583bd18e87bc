// CudaBackend in PEFT mode (see backend.h): the frozen base store and the
// LoRA adapters beside the frozen projections (kernels/cuda/lora.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <type_traits>
#include <vector>

#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/lora.h"
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

}  // namespace

// ---- The frozen base ---------------------------------------------------------

// Every base unit initialised from the seed like a model (the CPU backend's
// base, runtime/model/init.h), in the compute dtype.
Status CudaBackend::InitBase() {
  const size_t es = kc::DTypeSize(dtype_);
  int64_t max_p = 0;
  for (const model::UnitLayout& u : base_layout_.units()) max_p = std::max(max_p, u.padded_numel);
  std::vector<float> host(static_cast<size_t>(max_p));
  void* tmp = nullptr;
  HT_CUDA_RETURN_IF_ERROR(cudaMalloc(&tmp, std::max<size_t>(max_p * sizeof(float), 256)));
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
  for (const model::UnitLayout& u : base_layout_.units()) {
    const int64_t P = u.padded_numel;
    InitParallel(base_layout_, u.index, options_.seed, P, host.data());
    if (qlora_ && u.index != ParamLayout::kEmbeddingUnit) {
      HT_RETURN_IF_ERROR(StoreQloraBlock(u.index, host.data()));
      continue;
    }
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(P * es, &p));
    base_[u.index] = p;
    state_bytes_ += P * static_cast<int64_t>(es);
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
    return StoreQloraBlock(u, host);
  }
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
  HT_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_.device));
  // QLoRA: a block as the forward sees it, dequantised.
  const bool block = qlora_ && u != ParamLayout::kEmbeddingUnit;
  if (block) HT_RETURN_IF_ERROR(MaterializeBlock(u));
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
  // Quantised on the host exactly as the CPU reference (model::QuantizeNf4),
  // the seven projections concurrently.
  std::vector<model::Nf4Tensor> q(T);
  std::vector<std::thread> pool;
  for (int t = model::kQProj; t <= model::kDownProj; ++t) {
    if (ul.tensors[t].kind != model::TensorKind::kLinear) continue;
    pool.emplace_back([&q, &ul, host, t] {
      q[t] = model::QuantizeNf4(host + ul.tensors[t].offset, ul.tensors[t].numel);
    });
  }
  for (std::thread& th : pool) th.join();
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
    }
    HT_RETURN_IF_ERROR(Alloc(2 * C * es, &base_[u]));  // the two norms
    state_bytes_ += 2 * C * static_cast<int64_t>(es);
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
  return Status::Ok();
}

Status CudaBackend::MaterializeBlock(int u) {
  if (materialized_ == u) return Status::Ok();
  const model::UnitLayout& ul = base_layout_.unit(u);
  const int64_t C = base_layout_.config().hidden_size;
  const size_t es = kc::DTypeSize(dtype_);
  char* block = static_cast<char*>(qlora_block_);
  for (int t = 0; t < static_cast<int>(nf4_[u].size()); ++t) {
    const kc::Nf4View& v = nf4_[u][t];
    if (v.numel == 0) continue;
    void* out = block + ul.tensors[t].offset * es;
    HT_LAUNCH(DispatchDType(dtype_, [&](auto tag) {
      using TT = decltype(tag);
      return kc::Nf4Dequantize<TT>(static_cast<TT*>(out), v, model::kNf4Codebook, stream_);
    }));
  }
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block + ul.tensors[model::kInputNorm].offset * es,
                                          base_[u], C * es, cudaMemcpyDeviceToDevice, stream_));
  HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block + ul.tensors[model::kPostNorm].offset * es,
                                          static_cast<char*>(base_[u]) + C * es, C * es,
                                          cudaMemcpyDeviceToDevice, stream_));
  profile_.Mark(Op::kLora, stream_);
  materialized_ = u;
  return Status::Ok();
}

// ---- The adapters ------------------------------------------------------------

model::DropoutMask CudaBackend::AdapterMask(int layer, int t) const {
  if (!pass_dropout_) return {};  // Loss() evaluates: no dropout
  return model::MakeDropoutMask(options_.peft, options_.seed, pass_rng_offset_, layer, t);
}

Status CudaBackend::AdapterForward(int layer, int t, const void* x, void* out, long ld) {
  if (!peft_ || !adapter_slots_.has(t)) return Status::Ok();
  const int u = ParamLayout::BlockUnit(layer);
  const model::TensorSlot& w = base_layout_.unit(u).tensors[t];
  const model::UnitLayout& au = layout_.unit(u);
  const size_t es = kc::DTypeSize(dtype_);
  kc::LoraShape s;
  s.n = static_cast<int>(N_);
  s.in_features = static_cast<int>(w.shape[1]);
  s.out_features = static_cast<int>(w.shape[0]);
  s.rank = static_cast<int>(options_.peft.rank);
  s.scaling = static_cast<float>(options_.peft.scaling());
  s.out_ld = ld;
  const void* A = Off(compute_[u], au.tensors[adapter_slots_.lora_a[t]].offset, es);
  const void* B = Off(compute_[u], au.tensors[adapter_slots_.lora_b[t]].offset, es);
  const model::DropoutMask mask = AdapterMask(layer, t);
  return DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::LoraForward<T>(*gemm_, s, static_cast<T*>(out),
                              static_cast<T*>(acts_[layer]->lora_t[t]), static_cast<T*>(lora_u_),
                              static_cast<const T*>(x), static_cast<const T*>(A),
                              static_cast<const T*>(B), mask, stream_);
  });
}

Status CudaBackend::AdapterBackward(int layer, int t, const void* x, const void* dout, long ld,
                                    void* dx) {
  if (!peft_ || !adapter_slots_.has(t)) return Status::Ok();
  const int u = ParamLayout::BlockUnit(layer);
  const model::TensorSlot& w = base_layout_.unit(u).tensors[t];
  const model::UnitLayout& au = layout_.unit(u);
  const size_t es = kc::DTypeSize(dtype_);
  kc::LoraShape s;
  s.n = static_cast<int>(N_);
  s.in_features = static_cast<int>(w.shape[1]);
  s.out_features = static_cast<int>(w.shape[0]);
  s.rank = static_cast<int>(options_.peft.rank);
  s.scaling = static_cast<float>(options_.peft.scaling());
  s.out_ld = ld;
  const int64_t ao = au.tensors[adapter_slots_.lora_a[t]].offset;
  const int64_t bo = au.tensors[adapter_slots_.lora_b[t]].offset;
  const void* A = Off(compute_[u], ao, es);
  const void* B = Off(compute_[u], bo, es);
  const model::DropoutMask mask = AdapterMask(layer, t);
  return DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::LoraBackward<T>(*gemm_, s, static_cast<T*>(dx), grads_[u] + ao, grads_[u] + bo,
                               static_cast<T*>(lora_dt_), static_cast<T*>(lora_u_),
                               static_cast<const T*>(dout), static_cast<const T*>(x),
                               static_cast<const T*>(acts_[layer]->lora_t[t]),
                               static_cast<const T*>(A), static_cast<const T*>(B), mask, stream_);
  });
}

}  // namespace hypertrain::cuda
