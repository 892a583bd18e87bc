#pragma once
// RMSNorm over rows of a [rows, cols] tensor, with the residual add fused in.
//   forward:  r = a + b (or r = a when b is null; r stored to `res_out` when
//             non-null), rstd = 1/sqrt(mean(r^2) + eps) (fp32, saved),
//             y = r * rstd * w.
//   backward: dx = dres + rstd*w*dy - r * rstd^3/cols * sum(dy*w*r)
//             (dres may be null or alias dx), dw += sum_rows dy * r * rstd
//             into fp32, deterministic (fixed-order two-pass reduction).
// Statistics are fp32 whatever T is. Launches on `stream`, returns the
// launch error.
//
// RmsNormBackwardFp8 (bf16): the backward with dx's FP8 cast fused (the
// o-projection's output gradient under delayed scaling, runtime/model/fp8.h):
// dx and dw as RmsNormBackward, and
//   q[r, c] = qt[c, r] = fp8(dx[r, c] * *scale)   (dx as stored, bf16)
//   *amax = max(*amax, max |dx|)                  (amax may be null)
// q [rows, cols], qt [cols, rows]: the bytes of RmsNormBackward followed by
// Fp8CastTranspose(q, qt, dx, ...), which it runs where its one-pass kernel
// (RmsNormBackward's fused path, rows % 8 == 0, q and qt 8-byte aligned)
// does not apply.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/model/fp8_scale.h"

namespace hypertrain::kernels::cuda {

template <typename T>
cudaError_t RmsNormForward(T* y, float* rstd, T* res_out, const T* a, const T* b, const T* w,
                           int rows, int cols, float eps, cudaStream_t stream);

// Floats of scratch RmsNormBackward needs for `cols` (independent of rows).
size_t RmsNormBackwardScratchFloats(int cols);

// `r` is the normalised input saved by the forward pass (res_out, or a).
template <typename T>
cudaError_t RmsNormBackward(T* dx, const T* dres, float* dw, float* scratch, const T* dy,
                            const T* r, const T* w, const float* rstd, int rows, int cols,
                            cudaStream_t stream);

struct RmsNormFp8Grad {
  uint8_t* q = nullptr;
  uint8_t* qt = nullptr;
  const float* scale = nullptr;
  float* amax = nullptr;
  model::Fp8Format format = model::Fp8Format::kE5M2;
};
cudaError_t RmsNormBackwardFp8(__nv_bfloat16* dx, const __nv_bfloat16* dres, float* dw,
                               float* scratch, const __nv_bfloat16* dy, const __nv_bfloat16* r,
                               const __nv_bfloat16* w, const float* rstd, int rows, int cols,
                               const RmsNormFp8Grad& out, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
