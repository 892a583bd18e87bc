#pragma once
// Kernel launchers behind naive_attention_f32.h (no Status: compiled by nvcc).
#include <cuda_runtime.h>

namespace hypertrain::kernels::cuda::naive_attention {

struct Geometry {
  int B, S, H, KV, D;    // D a multiple of 32, at most 256
  long qs, ks, vs, os;   // row strides (elements)
  float scale;
};

cudaError_t Forward(const Geometry& g, const float* q, const float* k, const float* v, float* out,
                    float* lse, cudaStream_t stream);
cudaError_t Backward(const Geometry& g, const float* q, const float* k, const float* v,
                     const float* out, const float* dout, const float* lse, float* dq, float* dk,
                     float* dv, float* delta, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda::naive_attention
