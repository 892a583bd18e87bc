#pragma once
// The RoPE backward with the q|k|v GEMMs' FP8 output-gradient cast fused (the
// FP8 block path under delayed scaling, where the gradient's scale is known
// before the tensor exists; runtime/model/fp8.h). dqkv [rows, cols] is the
// attention backward's output, row-major: its first rope_heads * head_dim
// columns hold dq|dk before the inverse rotation (rope.h), the rest dv.
//
//   g[r, c]  = bf16(RopeBackward(dqkv)[r, c])    c < rope_heads * head_dim
//              dqkv[r, c]                        otherwise
//   q[r, c]  = fp8(g[r, c] * *scale)             (q may be null)
//   qt[c, r] = q[r, c]                           [cols, rows]: the wgrad operand
//   *amax    = max(*amax, max |g|)               (amax may be null)
//
// The bytes equal RopeBackward (in place) followed by Fp8CastTranspose (the
// rotation is rope.cuh's, the cast fp8_cast.cu's); dqkv itself is only read
// (no rotated bf16 copy: the FP8 GEMMs are its only readers). Token r sits at
// position r % seq_len. The 16-byte path needs head_dim / 2 and cols to be
// multiples of 8, rows of 16 and aligned pointers (table included); else
// element by element.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/numerics/fp8_scale.h"

namespace hypertrain::kernels::cuda {

cudaError_t RopeBackwardFp8Transpose(uint8_t* q, uint8_t* qt, const __nv_bfloat16* dqkv, int rows,
                                     int cols, const float* table, int seq_len, int rope_heads,
                                     int head_dim, const float* scale, float* amax,
                                     model::Fp8Format format, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
