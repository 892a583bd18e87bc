#pragma once
// Host-side entry points with an explicit implementation (attention.cc); the
// public functions call these with DefaultImpl(). Tests use them to check each
// implementation against the reference. Not part of the public contract.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/status.h"
#include "runtime/kernels/cuda/attention.h"

namespace hypertrain::kernels::cuda::internal {

enum class Impl {
  kTiled,       // our tensor-core flash attention
  kSimple,      // warp-per-row scalar kernels: slow, a fallback and cross-check
  kCudnn,       // cuDNN fused attention, deterministic backward (attention_cudnn.h)
  kCudnnFast,   // cuDNN fused attention, nondeterministic (atomic dQ) backward
  kCudnnForward,  // cuDNN forward, our tiled backward (no cuDNN backward workspace)
  kAuto,        // kCudnn where cuDNN runs these params on this device, else kTiled
};
const char* ImplName(Impl impl);
// Parses auto|cudnn|cudnn-fast|cudnn-fwd|tiled|simple; InvalidArgument otherwise.
StatusOr<Impl> ParseImpl(const std::string& name);
// From HT_ATTENTION_IMPL (default auto); an unknown value is reported once on
// stderr and auto is used.
Impl DefaultImpl();
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
