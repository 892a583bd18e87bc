#pragma once
// cuda.attention_impl: which attention kernels run (docs/ATTENTION.md). One
// enum for the config, the CUDA backend's options and the kernels' dispatch;
// no CUDA dependency, so the config can parse it in a CPU-only build.

#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::kernels {

// kAuto = cuDNN where it runs these params on this device, else kTiled.
// The values' meaning is fixed (the CUDA backend compares with kSimple/kTiled).
enum class AttentionImpl {
  kTiled,         // our tensor-core flash attention
  kSimple,        // warp-per-row scalar kernels: slow, a fallback and cross-check
  kCudnn,         // cuDNN fused attention, deterministic backward (attention_cudnn.h)
  kCudnnFast,     // cuDNN fused attention, nondeterministic (atomic dQ) backward
  kCudnnForward,  // cuDNN forward, our tiled backward (no cuDNN backward workspace)
  kAuto,
};

// The accepted names (auto, cudnn, cudnn-fast, cudnn-fwd, tiled, simple), in
// the order error messages list them.
const std::vector<std::string>& AttentionImplNames();
const char* AttentionImplName(AttentionImpl impl);
// InvalidArgument naming the key (cuda.attention_impl) and the accepted names.
StatusOr<AttentionImpl> ParseAttentionImpl(const std::string& name);

}  // namespace hypertrain::kernels
