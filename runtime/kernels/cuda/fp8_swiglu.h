#pragma once
// SwiGLU with its FP8 cast fused (the FP8 block path under delayed scaling,
// where the scale is known before the product exists; runtime/model/fp8.h).
// The math is swiglu.h's, each value rounded to bf16 as SwiGluForward /
// SwiGluBackward store it, then cast as Fp8Cast casts it, so the bytes equal
// SwiGLU followed by Fp8Cast / Fp8CastTranspose's row-major output:
//
//   SwiGluForwardFp8:  out[r, c] = bf16(silu(g) * u)          (out may be null:
//                      q[r, c]   = fp8(out[r, c] * *scale)    codes only)
//   SwiGluBackwardFp8: dq[r, c]        = fp8(bf16(dgate) * *scale)
//                      dq[r, cols + c] = fp8(bf16(dup) * *scale)
//                      (no bf16 gradient: the FP8 gate|up GEMMs are its only
//                      readers; Fp8Transpose gives their wgrad operand)
//   both:              *amax = max(*amax, max |bf16 value|)   (amax may be null)
//
// gate/up share the row stride `in_stride`; q has row stride q_stride, dq
// 2 * cols. The element-wise fallbacks run where cols or a stride is not a
// multiple of 8 or a pointer is misaligned.
//
// The *Transpose variants also write the codes transposed (the wgrad
// operand cuBLASLt needs) in the same pass (the backward's element fallback:
// the row-major kernel, then Fp8Transpose), as Fp8Transpose of the row-major
// codes would: qt[c, r] = q[r, c] ([cols, rows]; q, row stride cols, may be
// null), dqt[c, r] = dq[r, c] ([2 * cols, rows]).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

cudaError_t SwiGluForwardFp8(__nv_bfloat16* out, long out_stride, uint8_t* q, long q_stride,
                             const __nv_bfloat16* gate, const __nv_bfloat16* up, long in_stride,
                             int rows, int cols, const float* scale, float* amax,
                             model::Fp8Format format, cudaStream_t stream);

cudaError_t SwiGluBackwardFp8(uint8_t* dq, const __nv_bfloat16* dout, long dout_stride,
                              const __nv_bfloat16* gate, const __nv_bfloat16* up, long in_stride,
                              int rows, int cols, const float* scale, float* amax,
                              model::Fp8Format format, cudaStream_t stream);

cudaError_t SwiGluForwardFp8Transpose(uint8_t* q, uint8_t* qt, const __nv_bfloat16* gate,
                                      const __nv_bfloat16* up, long in_stride, int rows, int cols,
                                      const float* scale, float* amax, model::Fp8Format format,
                                      cudaStream_t stream);

cudaError_t SwiGluBackwardFp8Transpose(uint8_t* dq, uint8_t* dqt, const __nv_bfloat16* dout,
                                       long dout_stride, const __nv_bfloat16* gate,
                                       const __nv_bfloat16* up, long in_stride, int rows, int cols,
                                       const float* scale, float* amax, model::Fp8Format format,
                                       cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
