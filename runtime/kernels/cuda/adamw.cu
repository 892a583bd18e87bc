#include <cmath>

#include "runtime/kernels/cuda/adamw.h"

namespace hypertrain::kernels::cuda {
namespace {

__global__ void AdamWKernel(float* __restrict__ param,
                            const float* __restrict__ grad,
                            float* __restrict__ m, float* __restrict__ v,
                            __nv_bfloat16* __restrict__ param_bf16, size_t n,
                            AdamWParams p, float inv_bc1, float inv_sqrt_bc2) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    const float g = grad[i] * p.grad_scale;
    const float mi = p.beta1 * m[i] + (1.0f - p.beta1) * g;
    const float vi = p.beta2 * v[i] + (1.0f - p.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi * inv_bc1) / (sqrtf(vi) * inv_sqrt_bc2 + p.eps);
    const float w = param[i];
    const float w_new = w - p.lr * (update + p.weight_decay * w);
    param[i] = w_new;
    if (param_bf16 != nullptr) param_bf16[i] = __float2bfloat16_rn(w_new);
  }
}

}  // namespace

void AdamW(float* param, const float* grad, float* m, float* v,
           __nv_bfloat16* param_bf16, size_t n, const AdamWParams& p,
           cudaStream_t stream) {
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), p.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), p.step);
  constexpr int kThreads = 256;
  const size_t blocks_needed = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks_needed < 65536 ? blocks_needed : 65536);
  AdamWKernel<<<blocks, kThreads, 0, stream>>>(
      param, grad, m, v, param_bf16, n, p, static_cast<float>(1.0 / bc1),
      static_cast<float>(1.0 / std::sqrt(bc2)));
}

}  // namespace hypertrain::kernels::cuda
