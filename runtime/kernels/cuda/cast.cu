#include "runtime/kernels/cuda/cast.h"
#include "runtime/kernels/cuda/common.cuh"

namespace hypertrain::kernels::cuda {
namespace {

template <typename To, typename From>
__global__ void CastKernel(To* __restrict__ out, const From* __restrict__ in, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    out[i] = FromF<To>(ToF(in[i]));
  }
}

}  // namespace

template <typename To, typename From>
cudaError_t Cast(To* out, const From* in, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = (n + 255) / 256;
  CastKernel<To, From><<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
      out, in, n);
  return cudaGetLastError();
}

template cudaError_t Cast<__nv_bfloat16, float>(__nv_bfloat16*, const float*, size_t, cudaStream_t);
template cudaError_t Cast<__half, float>(__half*, const float*, size_t, cudaStream_t);
template cudaError_t Cast<float, float>(float*, const float*, size_t, cudaStream_t);
template cudaError_t Cast<float, __nv_bfloat16>(float*, const __nv_bfloat16*, size_t, cudaStream_t);
template cudaError_t Cast<float, __half>(float*, const __half*, size_t, cudaStream_t);

}  // namespace hypertrain::kernels::cuda
