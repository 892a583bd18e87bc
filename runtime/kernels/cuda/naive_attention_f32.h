#pragma once
// Causal GQA attention in fp32 for the CUDA backend's fp32/tf32 modes (the
// flash-attention kernels in attention.h are bf16/fp16 only). Same layout,
// strides and semantics as attention.h (AttentionParams; `dtype` ignored):
// q/out [B, S, H, D], k/v [B, S, KV, D], lse [B, H, S] natural-log.
// Straightforward O(S^2 D) kernels, one warp per query row (forward, dq) or
// per key row (dk, dv, summing its query heads in a fixed order): exact fp32,
// deterministic, no atomics. Meant for correctness runs, not speed.
// head_dim must be a multiple of 32 and at most 256.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/status.h"
#include "runtime/kernels/cuda/attention.h"

namespace hypertrain::kernels::cuda {

Status NaiveAttentionForwardF32(const AttentionParams& p, const float* q, const float* k,
                                const float* v, float* out, float* lse, cudaStream_t stream);

// Scratch floats the backward needs: B * H * S (rowwise dot(dout, out)).
size_t NaiveAttentionBackwardScratchFloats(const AttentionParams& p);

// dq, dk, dv are overwritten.
Status NaiveAttentionBackwardF32(const AttentionParams& p, const float* q, const float* k,
                                 const float* v, const float* out, const float* dout,
                                 const float* lse, float* dq, float* dk, float* dv,
                                 float* scratch, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
