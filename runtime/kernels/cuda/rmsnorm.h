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
#include <cuda_runtime.h>

#include <cstddef>

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

}  // namespace hypertrain::kernels::cuda
