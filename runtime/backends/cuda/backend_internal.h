#pragma once
// Private pieces of CudaBackend shared by its .cc files.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstdint>

#include "runtime/backends/cuda/backend.h"
#include "runtime/kernels/cuda/cuda_status.h"

namespace hypertrain::cuda {

// Per-block activation pointers (compute dtype unless noted). With
// checkpointing, the ones not kept point into the shared scratch block.
struct CudaBackend::Acts {
  void* x = nullptr;    // block input (residual stream) [N, C]
  void* ln1 = nullptr;  // [N, C]
  float* rstd1 = nullptr;
  void* qkv = nullptr;  // [N, Q + 2K], q and k rotated in place
  void* att = nullptr;  // [N, Q]
  float* lse = nullptr;  // [B, H, S]
  void* h = nullptr;    // [N, C]
  void* ln2 = nullptr;  // [N, C]
  float* rstd2 = nullptr;
  void* gu = nullptr;   // [N, 2F] gate | up
  void* act = nullptr;  // [N, F]
  // PEFT: t = s (u A^T) [N, rank] per adapter target (null otherwise),
  // always kept per layer (a full recompute skips the down projection).
  void* lora_t[model::kNumBlockTensors] = {};
};

// Device slot of a staged batch: tokens copied on the H2D stream; `ready`
// is recorded after the copy, `done` after the step that consumed it.
struct CudaBackend::Slot {
  int32_t* inputs = nullptr;
  int32_t* targets = nullptr;
  cudaEvent_t ready = nullptr;
  cudaEvent_t done = nullptr;
};

// Byte offset into a compute-dtype buffer.
inline void* Off(void* p, int64_t elems, size_t es) { return static_cast<char*>(p) + elems * es; }
inline const void* Off(const void* p, int64_t elems, size_t es) {
  return static_cast<const char*>(p) + elems * es;
}

// Alignment of every buffer in the activation plan.
inline size_t PlanRoundUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// Where the attention backward's dqkv starts in a layer's gate|up buffer
// (after dout) when att_grads_in_gu_.
inline size_t DqkvOffsetInGu(int64_t N, int64_t Q, size_t es) { return PlanRoundUp(size_t(N * Q) * es); }

// The bf16 view of a compute-dtype buffer (the FP8 path runs in bf16 only).
inline __nv_bfloat16* Bf16(void* p) { return static_cast<__nv_bfloat16*>(p); }
inline const __nv_bfloat16* Bf16(const void* p) { return static_cast<const __nv_bfloat16*>(p); }

// An NVTX range for the profiler's timeline.
struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

// Calls f(T{}) with T the C++ type of `t`.
template <typename F>
auto DispatchDType(kernels::cuda::DType t, F&& f) {
  switch (t) {
    case kernels::cuda::DType::kBF16: return f(__nv_bfloat16{});
    case kernels::cuda::DType::kF16: return f(__half{});
    case kernels::cuda::DType::kF32: break;
  }
  return f(float{});
}

}  // namespace hypertrain::cuda

#define HT_LAUNCH(expr) HT_CUDA_RETURN_IF_ERROR(expr)
