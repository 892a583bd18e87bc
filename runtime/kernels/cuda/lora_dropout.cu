// Counter-based LoRA dropout; the math is in lora_dropout.h.
#define HT_INIT_HOST_DEVICE __host__ __device__
#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/lora_dropout.h"
#include "runtime/numerics/counter_rng.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void DropoutForwardKernel(T* __restrict__ u, const T* __restrict__ x, int64_t n,
                                     uint64_t key, uint32_t threshold, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool keep = model::DropoutKeep(key, static_cast<uint64_t>(i), threshold);
    u[i] = FromF<T>(keep ? ToF(x[i]) * scale : 0.0f);
  }
}

template <typename T>
__global__ void DropoutBackwardKernel(T* __restrict__ dx, const T* __restrict__ du, int64_t n,
                                      uint64_t key, uint32_t threshold, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (model::DropoutKeep(key, static_cast<uint64_t>(i), threshold)) {
      // Rounded twice, as the host computes it (no FMA contraction).
      dx[i] = FromF<T>(__fadd_rn(ToF(dx[i]), __fmul_rn(ToF(du[i]), scale)));
    }
  }
}

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

}  // namespace

template <typename T>
cudaError_t LoraDropoutForward(T* u, const T* x, int64_t n, uint64_t key, uint32_t threshold,
                               float scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutForwardKernel<T><<<Blocks(n), kThreads, 0, stream>>>(u, x, n, key, threshold, scale);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LoraDropoutBackwardAccumulate(T* dx, const T* du, int64_t n, uint64_t key,
                                          uint32_t threshold, float scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutBackwardKernel<T><<<Blocks(n), kThreads, 0, stream>>>(dx, du, n, key, threshold, scale);
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                      \
  template cudaError_t LoraDropoutForward<T>(T*, const T*, int64_t, uint64_t, uint32_t, float, \
                                             cudaStream_t);                                    \
  template cudaError_t LoraDropoutBackwardAccumulate<T>(T*, const T*, int64_t, uint64_t,       \
                                                        uint32_t, float, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)

}  // namespace hypertrain::kernels::cuda
