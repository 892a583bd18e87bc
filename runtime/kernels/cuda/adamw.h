#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/kernels/adamw_params.h"

namespace hypertrain::kernels::cuda {

// Fused AdamW over a flat fp32 range on the device: one read of param, grad,
// m, v and one write of param, m, v (plus an optional bf16 copy of the updated
// parameters for the next forward pass). Memory-bound: 28 B/element (+2 for
// the bf16 copy). Launch on `stream`; no synchronisation.
void AdamW(float* param, const float* grad, float* m, float* v,
           __nv_bfloat16* param_bf16, size_t n, const AdamWParams& p,
           cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
