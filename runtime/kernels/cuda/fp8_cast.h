#pragma once
// FP8 casts with fused amax for the FP8 GEMMs (runtime/model/fp8.h). CPU
// reference: runtime/kernels/cpu/fp8.h (bit-exact).
//
//   Fp8Amax:           *amax = max(*amax, max_i |x[i]|)
//   Fp8ScalesFromAmax: scale[s] = Fp8ScaleFromAmax(amax[s], ...) (previous
//                      scale[s] kept for amax 0 / inf / NaN), scale_inv[s] = 1 / scale[s]
//   Fp8Cast:           q[i] = fp8(x[i] * *scale)            (+ amax as Fp8Amax)
//   Fp8CastTranspose:  q[r, c] = qt[c, r] = fp8(x[r, c] * *scale)  (+ amax)
//                      x is [rows, cols] row-major; q (optional) [rows, cols],
//                      qt [cols, rows]: the K-major operands cuBLASLt's FP8
//                      GEMMs need for dgrad / wgrad.
//   Fp8Transpose:      qt[c, r] = q[r, c] (FP8 codes, no rescaling): the
//                      transposed operand of a tensor cast by a fused producer;
//                      q's rows `ld` bytes apart (0: cols), qt packed [cols, rows]
//   Fp8Dequantize:     y[i] = fp8_decode(q[i]) * *scale_inv
// fp8() rounds to nearest even and saturates to +-max (CUDA's
// __NV_SATFINITE); amax pointers may be null (no amax). Amax slots are
// float, updated with an atomic max (non-negative floats order as ints), so
// zero them before a pass. Scales are device pointers, read inside the
// kernel, so the host never waits for a scale and graphs can replay.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

using model::Fp8Format;

template <typename T>
cudaError_t Fp8Amax(const T* x, size_t n, float* amax, cudaStream_t stream);

// For `n` slots at stride `stride` (slot i at index i * stride).
cudaError_t Fp8ScalesFromAmax(const float* amax, float* scale, float* scale_inv, int n,
                              int stride, Fp8Format format, int margin, cudaStream_t stream);

template <typename T>
cudaError_t Fp8Cast(uint8_t* q, const T* x, size_t n, const float* scale, float* amax,
                    Fp8Format format, cudaStream_t stream);

template <typename T>
cudaError_t Fp8CastTranspose(uint8_t* q, uint8_t* qt, const T* x, int rows, int cols,
                             const float* scale, float* amax, Fp8Format format,
                             cudaStream_t stream);

cudaError_t Fp8Transpose(uint8_t* qt, const uint8_t* q, int rows, int cols, cudaStream_t stream,
                         long ld = 0);

template <typename T>
cudaError_t Fp8Dequantize(T* y, const uint8_t* q, size_t n, const float* scale_inv,
                          Fp8Format format, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
