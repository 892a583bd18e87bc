#pragma once
// One target projection's LoRA adapter on the device, beside its frozen
// weight (runtime/model/peft.h; CPU reference: cpu::LoraForward/Backward).
// x [N, IF], A [r, IF], B [OF, r] in the compute type T, s = alpha / rank:
//   u   = dropout(x)                 (mask.active(); else u = x)
//   t   = s * (u A^T)                [N, r]  T, kept for the backward
//   out += t B^T                     [N, OF]
// Backward (adapter gradients in fp32, accumulated):
//   dB += dout^T t
//   dt  = s * (dout B)               [N, r]  scratch
//   dA += dt^T u                     (u drawn again from x and the mask)
//   dx += dropout'(dt A)             (dx null: not needed)
// Four (five with dx) cuBLASLt GEMMs with fp32 accumulation, the scaling in
// their alpha; dropout is the counter-based kernel of lora_dropout.h, so a
// recomputation draws the mask of the forward. `u_scratch` [N, IF] is needed
// only with an active mask. `out` (forward) and `dout` (backward) may be
// column slices of a wider row (LoraShape::out_ld, e.g. q inside a fused
// q|k|v row); x, dx, t and the scratch are packed.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/model/peft.h"

namespace hypertrain::kernels::cuda {

struct LoraShape {
  int n = 0;             // rows (tokens)
  int in_features = 0;   // IF
  int out_features = 0;  // OF
  int rank = 0;          // r
  float scaling = 1.0f;  // alpha / rank
  long out_ld = 0;       // row stride of out / dout in elements (0 = out_features)
};

template <typename T>
Status LoraForward(Gemm& gemm, const LoraShape& s, T* out, T* t, T* u_scratch, const T* x,
                   const T* a, const T* b, const model::DropoutMask& mask, cudaStream_t stream);

template <typename T>
Status LoraBackward(Gemm& gemm, const LoraShape& s, T* dx, float* da, float* db, T* dt_scratch,
                    T* u_scratch, const T* dout, const T* x, const T* t, const T* a, const T* b,
                    const model::DropoutMask& mask, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
