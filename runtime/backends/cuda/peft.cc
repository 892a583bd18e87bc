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
#include "runtime/model/init.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::ParamLayout;
using model::Range;

namespace {

const void* Off(const void* p, int64_t elems, size_t es) {
  return static_cast<const char*>(p) + elems * es;
}

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
  for (const model::UnitLayout& u : base_layout_.units()) {
    const int64_t P = u.padded_numel;
    void* p = nullptr;
    HT_RETURN_IF_ERROR(Alloc(P * es, &p));
    base_.push_back(p);
    state_bytes_ += P * static_cast<int64_t>(es);
    InitParallel(base_layout_, u.index, options_.seed, P, host.data());
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
  return DispatchDType(dtype_, [&](auto tag) -> Status {
    using T = decltype(tag);
    std::vector<T> v(static_cast<size_t>(r.size()));
    const T* src = static_cast<const T*>(base_[u]) + r.begin;
    HT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(v.data(), src, v.size() * sizeof(T),
                                            cudaMemcpyDeviceToHost, stream_));
    HT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    for (int64_t i = 0; i < r.size(); ++i) host[i] = ToFloat<T>(v[i]);
    return Status::Ok();
  });
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
