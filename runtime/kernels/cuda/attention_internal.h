#pragma once
// Host-side entry points with an explicit implementation (attention.cc); the
// public functions call these with AttentionParams::impl. Tests use them to check each
// implementation against the reference. Not part of the public contract.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/status.h"
#include "runtime/kernels/cuda/attention.h"

namespace hypertrain::kernels::cuda::internal {

using Impl = AttentionImpl;
// The implementation `impl` runs for p in the forward (backward = false) or
// backward: kAuto becomes kCudnn or kTiled (the reason for kTiled is logged
// once), kCudnnForward kCudnn forward and kTiled backward, fp32 always
// kSimple; other values are returned unchanged.
Impl Resolve(Impl impl, const AttentionParams& p, bool backward);
// Backward scratch `impl` needs for p (max of ours and cuDNN's where cuDNN
// runs it).
size_t BackwardWorkspaceBytes(Impl impl, const AttentionParams& p);
// fwd_m_tiles: tiled forward variant (see TiledAttentionForward); 0 = default.
Status Forward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
               void* out, float* lse, cudaStream_t stream, int fwd_m_tiles = 0);
Status Backward(Impl impl, const AttentionParams& p, const void* q, const void* k, const void* v,
                const void* out, const void* dout, const float* lse, void* dq, void* dk, void* dv,
                void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda::internal
