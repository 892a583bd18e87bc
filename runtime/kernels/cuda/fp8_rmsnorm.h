#pragma once
// RMSNorm forward with its FP8 cast fused (the FP8 block path under delayed
// scaling: the q|k|v and gate|up GEMMs' input scale is known before the
// normalised tensor exists; runtime/model/fp8.h). Per row of x [rows, cols]:
//
//   rstd[r] = 1 / sqrt(mean_c(x[r, c]^2) + eps)             (fp32, saved)
//   y       = bf16(x[r, c] * rstd[r] * w[c])                (not stored)
//   q[r, c] = fp8(y * *scale)                               (row stride cols)
//   *amax   = max(*amax, max |y|)                           (amax may be null)
//
// rmsnorm.h's arithmetic term for term (same per-lane order, same warp sum),
// so rstd and the codes are byte-identical to RmsNormForward (no residual)
// followed by Fp8Cast. No bf16 output: under FP8 the GEMM's codes (and their
// transpose for wgrad) are the normalised tensor's only readers.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

cudaError_t RmsNormForwardFp8(uint8_t* q, float* rstd, const __nv_bfloat16* x,
                              const __nv_bfloat16* w, int rows, int cols, float eps,
                              const float* scale, float* amax, model::Fp8Format format,
                              cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
