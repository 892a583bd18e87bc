#include "runtime/backends/cuda/accumulate.h"

namespace hypertrain::cuda {
namespace {

__global__ void AddIntoKernel(float* __restrict__ y, const float* __restrict__ x, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    y[i] += x[i];
  }
}

}  // namespace

cudaError_t AddInto(float* y, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = (n + 255) / 256;
  AddIntoKernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

}  // namespace hypertrain::cuda
