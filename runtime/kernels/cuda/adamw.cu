#include <cmath>
#include <cstdint>

#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/common.cuh"

namespace hypertrain::kernels::cuda {
namespace {

struct Coeffs {
  AdamWParams p;
  float inv_bc1;
  float inv_sqrt_bc2;
};

// One element's update; both kernels share it. Every rounding step is an
// explicit intrinsic so that nvcc cannot contract differently in the two
// kernels: the vectorised and scalar paths stay bit-identical.
__device__ __forceinline__ float Update(float w, float g_raw, float& m, float& v,
                                        const Coeffs& c) {
  const float g = __fmul_rn(g_raw, c.p.grad_scale);
  m = __fmaf_rn(c.p.beta1, m, __fmul_rn(1.0f - c.p.beta1, g));
  v = __fmaf_rn(c.p.beta2, v, __fmul_rn(__fmul_rn(1.0f - c.p.beta2, g), g));
  const float denom = __fmaf_rn(__fsqrt_rn(v), c.inv_sqrt_bc2, c.p.eps);
  const float update = __fdiv_rn(__fmul_rn(m, c.inv_bc1), denom);
  return __fmaf_rn(-c.p.lr, __fmaf_rn(c.p.weight_decay, w, update), w);
}

// max |bf16 copy| of the block into *amax (non-negative floats order as
// ints); every thread of the block calls it.
__device__ __forceinline__ void CommitAmax(float local, float* amax) {
  __shared__ float scratch[32];
  const float block = BlockMax(local, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(block));
}

__global__ void AdamWKernel(float* __restrict__ param, const float* __restrict__ grad,
                            float* __restrict__ m, float* __restrict__ v,
                            __nv_bfloat16* __restrict__ param_bf16, size_t begin, size_t n,
                            Coeffs c, AdamWAmax amax) {
  float lo = 0.0f, hi = 0.0f;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = begin + blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    float mi = m[i], vi = v[i];
    const float w = Update(param[i], grad[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
    param[i] = w;
    if (param_bf16 != nullptr) {
      const __nv_bfloat16 b = __float2bfloat16_rn(w);
      param_bf16[i] = b;
      float& mx = i < amax.split ? lo : hi;
      mx = fmaxf(mx, fabsf(__bfloat162float(b)));
    }
  }
  if (amax.lo != nullptr) CommitAmax(lo, amax.lo);
  if (amax.hi != nullptr) CommitAmax(hi, amax.hi);
}

// 16-byte loads and stores: the kernel is memory-bound (28-30 B/element),
// and 4-byte accesses leave a third of the bandwidth unused.
__global__ void AdamWVec4Kernel(float4* __restrict__ param, const float4* __restrict__ grad,
                                float4* __restrict__ m, float4* __restrict__ v,
                                uint2* __restrict__ param_bf16, size_t n4, Coeffs c,
                                AdamWAmax amax) {
  float lo_max = 0.0f, hi_max = 0.0f;
  const size_t split4 = amax.split / 4;  // a multiple of 4 here
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += stride) {
    const float4 g = grad[i];
    float4 w = param[i], mi = m[i], vi = v[i];
    w.x = Update(w.x, g.x, mi.x, vi.x, c);
    w.y = Update(w.y, g.y, mi.y, vi.y, c);
    w.z = Update(w.z, g.z, mi.z, vi.z, c);
    w.w = Update(w.w, g.w, mi.w, vi.w, c);
    m[i] = mi;
    v[i] = vi;
    param[i] = w;
    if (param_bf16 != nullptr) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(w.x, w.y);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(w.z, w.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const uint32_t*>(&hi);
      param_bf16[i] = packed;
      float& mx = i < split4 ? lo_max : hi_max;
      mx = fmaxf(mx, fmaxf(fmaxf(fabsf(__low2float(lo)), fabsf(__high2float(lo))),
                           fmaxf(fabsf(__low2float(hi)), fabsf(__high2float(hi)))));
    }
  }
  if (amax.lo != nullptr) CommitAmax(lo_max, amax.lo);
  if (amax.hi != nullptr) CommitAmax(hi_max, amax.hi);
}

bool Aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

// With an amax, fewer blocks (grid-stride) keep the same-address atomics few.
int GridFor(size_t work, int threads, bool amax) {
  const size_t cap = amax ? 4096 : 65536;
  const size_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < cap ? blocks : cap);
}

}  // namespace

void AdamW(float* param, const float* grad, float* m, float* v,
           __nv_bfloat16* param_bf16, size_t n, const AdamWParams& p,
           cudaStream_t stream, const AdamWAmax& amax_in) {
  if (n == 0) return;
  AdamWAmax amax = amax_in;
  if (param_bf16 == nullptr) amax = {};  // the amax is the bf16 copy's
  const bool with_amax = amax.lo != nullptr || amax.hi != nullptr;
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), p.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), p.step);
  const Coeffs c{p, static_cast<float>(1.0 / bc1), static_cast<float>(1.0 / std::sqrt(bc2))};
  constexpr int kThreads = 256;
  // The vector path keeps whole float4s on one side of the amax split.
  const bool vec = Aligned(param, 16) && Aligned(grad, 16) && Aligned(m, 16) && Aligned(v, 16) &&
                   (param_bf16 == nullptr || Aligned(param_bf16, 8)) && amax.split % 4 == 0;
  size_t done = 0;
  if (vec && n >= 4) {
    const size_t n4 = n / 4;
    AdamWVec4Kernel<<<GridFor(n4, kThreads, with_amax), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(param), reinterpret_cast<const float4*>(grad),
        reinterpret_cast<float4*>(m), reinterpret_cast<float4*>(v),
        reinterpret_cast<uint2*>(param_bf16), n4, c, amax);
    done = n4 * 4;
  }
  if (done < n) {
    AdamWKernel<<<GridFor(n - done, kThreads, with_amax), kThreads, 0, stream>>>(
        param, grad, m, v, param_bf16, done, n, c, amax);
  }
}

}  // namespace hypertrain::kernels::cuda
