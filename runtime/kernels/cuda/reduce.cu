#include <cstdint>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/reduce.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Fixed grid and a fixed element-to-thread assignment: deterministic. 16-byte
// loads when x is aligned (this pass reads every gradient once per step).
__global__ void SumSquaresKernel(const float* __restrict__ x, size_t n,
                                 double* __restrict__ partials) {
  __shared__ double scratch[32];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  double acc = 0.0;
  size_t tail = 0;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const size_t n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (size_t i = first; i < n4; i += stride) {
      const float4 v = x4[i];
      acc += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
             static_cast<double>(v.z) * v.z + static_cast<double>(v.w) * v.w;
    }
    tail = n4 * 4;
  }
  for (size_t i = tail + first; i < n; i += stride) {
    const double v = x[i];
    acc += v * v;
  }
  acc = BlockSum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <typename In>
__global__ void SumKernel(const In* __restrict__ x, int n, double* __restrict__ out) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += static_cast<double>(x[i]);
  acc = BlockSum(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

__global__ void FlagNonFiniteKernel(const float* __restrict__ x, size_t n, int* flag) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    bad |= !isfinite(x[i]);
  }
  if (bad) *flag = 1;
}

}  // namespace

cudaError_t SumSquaresPartials(const float* x, size_t n, double* partials, cudaStream_t stream) {
  SumSquaresKernel<<<kSumSquaresPartials, kThreads, 0, stream>>>(x, n, partials);
  return cudaGetLastError();
}

cudaError_t SumDoubles(const double* x, int n, double* out, cudaStream_t stream) {
  SumKernel<double><<<1, 1024, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t SumFloats(const float* x, int n, double* out, cudaStream_t stream) {
  SumKernel<float><<<1, 1024, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t FlagNonFinite(const float* x, size_t n, int* flag, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = CeilDiv(n, kThreads) < 1024 ? CeilDiv(n, kThreads) : 1024;
  FlagNonFiniteKernel<<<blocks, kThreads, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
