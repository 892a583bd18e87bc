#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/numerics/adamw_params.h"

namespace hypertrain::kernels::cuda {

// Fused AdamW over a flat fp32 range on the device: one read of param, grad,
// m, v and one write of param, m, v (plus an optional bf16 copy of the updated
// parameters for the next forward pass). Memory-bound: 28 B/element (+2 for
// the bf16 copy). Launch on `stream`; no synchronisation.
//
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2           (g = grad * grad_scale)
//   w = w - lr (wd w + (m / bc1) / (sqrt(v) / sqrt(bc2) + eps))
//   param_bf16 = bf16(w);  *amax = max(*amax, max |param_bf16|)   (per tensor)
//
// `amax` (optional, with param_bf16): the FP8 weight scales' input
// (runtime/model/fp8.h), recorded while the copy is written instead of by
// another read of it. Two tensors of one launch keep separate maxima:
// elements [0, split) go to *lo, [split, n) to *hi (either may be null).
// Running maxima (atomic), so zero them first.
struct AdamWAmax {
  float* lo = nullptr;
  float* hi = nullptr;
  size_t split = 0;
};
void AdamW(float* param, const float* grad, float* m, float* v,
           __nv_bfloat16* param_bf16, size_t n, const AdamWParams& p,
           cudaStream_t stream, const AdamWAmax& amax = {});

}  // namespace hypertrain::kernels::cuda
