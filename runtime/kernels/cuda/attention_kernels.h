#pragma once
// Kernel launchers shared by the attention .cu files and the dispatcher
// (attention.cc). Plain CUDA types only, so nvcc needs no other headers.
#include <cuda_runtime.h>

#include <cstdint>

namespace hypertrain::kernels::cuda::internal {

// Validated problem description with dense strides resolved.
struct Dims {
  int batch, seq, n_heads, n_kv_heads, head_dim;
  int group;  // n_heads / n_kv_heads
  float scale;
  bool bf16;  // else fp16 (or fp32 when fp32 is set)
  bool fp32;  // scalar kernels only
  int64_t q_stride, k_stride, v_stride, o_stride;
};

// Warp-per-row scalar kernels (attention_simple.cu).
cudaError_t SimpleAttentionForward(const Dims& g, const void* q, const void* k, const void* v,
                                   void* out, float* lse, cudaStream_t stream);
cudaError_t SimpleAttentionBackward(const Dims& g, const void* q, const void* k, const void* v,
                                    const void* out, const void* dout, const float* lse,
                                    float* delta, void* dq, void* dk, void* dv,
                                    cudaStream_t stream);

// Largest dynamic shared memory one block may opt into on the current device
// (queried once: one device per process); picks tile variants that fit.
int MaxSmemPerBlock();

// Tensor-core flash-attention kernels (attention_forward.cu,
// attention_backward.cu); head_dim 32, 64 or 128.
// m_tiles: 16-row m-tiles per warp (1 or 2); 0 picks the default for the
// head_dim and device (the benchmark times both).
cudaError_t TiledAttentionForward(const Dims& g, const void* q, const void* k, const void* v,
                                  void* out, float* lse, cudaStream_t stream, int m_tiles = 0);
cudaError_t TiledAttentionBackward(const Dims& g, const void* q, const void* k, const void* v,
                                   const void* out, const void* dout, const float* lse,
                                   float* delta, void* dq, void* dk, void* dv,
                                   cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda::internal
