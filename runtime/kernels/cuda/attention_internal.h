#pragma once
// Host-side entry points with an explicit implementation (attention.cc); the
// public functions call these with DefaultImpl(). Tests use them to check each
// implementation against the reference. Not part of the public contract.
#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/core/status.h"
#include "runtime/kernels/cuda/attention.h"

namespace hypertrain::kernels::cuda::internal {

enum class Impl {
  kTiled,   // tensor-core flash attention (default)
  kSimple,  // warp-per-row scalar kernels: slow, a fallback and cross-check
};
const char* ImplName(Impl impl);
// kTiled unless the environment sets HT_ATTENTION_IMPL=simple (an escape
// hatch for debugging a GPU the tiled kernels misbehave on).
Impl DefaultImpl();
// fwd_m_tiles: tiled forward variant (see TiledAttentionForward); 0 = default.
Status Forward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
               void* out, float* lse, cudaStream_t stream, int fwd_m_tiles = 0);
Status Backward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
                const void* out, const void* dout, const float* lse, void* dq, void* dk, void* dv,
                void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda::internal
