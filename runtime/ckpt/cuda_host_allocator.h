#pragma once
// Pinned (page-locked) host memory through cudaHostAlloc, for snapshots of
// device state. Only CUDA builds link this.
#include "runtime/ckpt/host_allocator.h"

namespace hypertrain::ckpt {

// Process-wide pinned allocator.
HostAllocator* CudaPinnedHostAllocator();

}  // namespace hypertrain::ckpt
