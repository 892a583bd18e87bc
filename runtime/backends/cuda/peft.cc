// CudaBackend in PEFT mode (see backend.h): the LoRA adapters beside the
// frozen projections (kernels/cuda/lora.h); the base store is peft_base.cc.
#include "runtime/backends/cuda/backend_internal.h"
#include "runtime/kernels/cuda/lora.h"

namespace hypertrain::cuda {

namespace kc = ::hypertrain::kernels::cuda;
using model::ParamLayout;

// ---- The adapters ------------------------------------------------------------

model::DropoutMask CudaBackend::AdapterMask(int layer, int t) const {
  if (!pass_dropout_) return {};  // Loss() evaluates: no dropout
  return model::MakeDropoutMask(options_.peft, options_.seed, pass_rng_offset_, layer, t);
}

// Target t of `layer`: the LoRA op's shape (rows N, the frozen projection's
// features, output row stride ld) and where A and B sit in the adapter unit.
CudaBackend::AdapterOperands CudaBackend::Adapter(int layer, int t, long ld) const {
  const int u = ParamLayout::BlockUnit(layer);
  const model::TensorSlot& w = base_layout_.unit(u).tensors[t];
  const model::UnitLayout& au = layout_.unit(u);
  AdapterOperands op;
  op.unit = u;
  op.shape.n = static_cast<int>(N_);
  op.shape.in_features = static_cast<int>(w.shape[1]);
  op.shape.out_features = static_cast<int>(w.shape[0]);
  op.shape.rank = static_cast<int>(options_.peft.rank);
  op.shape.scaling = static_cast<float>(options_.peft.scaling());
  op.shape.out_ld = ld;
  op.a_offset = au.tensors[adapter_slots_.lora_a[t]].offset;
  op.b_offset = au.tensors[adapter_slots_.lora_b[t]].offset;
  const size_t es = kc::DTypeSize(dtype_);
  op.a = Off(compute_[u], op.a_offset, es);
  op.b = Off(compute_[u], op.b_offset, es);
  return op;
}

Status CudaBackend::AdapterForward(int layer, int t, const void* x, void* out, long ld) {
  if (!peft_ || !adapter_slots_.has(t)) return Status::Ok();
  const AdapterOperands op = Adapter(layer, t, ld);
  const model::DropoutMask mask = AdapterMask(layer, t);
  return DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::LoraForward<T>(*gemm_, op.shape, static_cast<T*>(out),
                              static_cast<T*>(acts_[layer]->lora_t[t]), static_cast<T*>(lora_u_),
                              static_cast<const T*>(x), static_cast<const T*>(op.a),
                              static_cast<const T*>(op.b), mask, stream_);
  });
}

Status CudaBackend::AdapterBackward(int layer, int t, const void* x, const void* dout, long ld,
                                    void* dx) {
  if (!peft_ || !adapter_slots_.has(t)) return Status::Ok();
  const AdapterOperands op = Adapter(layer, t, ld);
  const model::DropoutMask mask = AdapterMask(layer, t);
  float* g = grads_[op.unit];
  return DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return kc::LoraBackward<T>(*gemm_, op.shape, static_cast<T*>(dx), g + op.a_offset,
                               g + op.b_offset, static_cast<T*>(lora_dt_),
                               static_cast<T*>(lora_u_), static_cast<const T*>(dout),
                               static_cast<const T*>(x),
                               static_cast<const T*>(acts_[layer]->lora_t[t]),
                               static_cast<const T*>(op.a), static_cast<const T*>(op.b), mask,
                               stream_);
  });
}

}  // namespace hypertrain::cuda
