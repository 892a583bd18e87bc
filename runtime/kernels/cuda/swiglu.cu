#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/swiglu.h"

namespace hypertrain::kernels::cuda {
namespace {

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

template <typename T>
__global__ void SwiGluForwardKernel(T* __restrict__ out, long out_stride, const T* gate,
                                    const T* up, long in_stride, int rows, int cols) {
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * cols) return;
  const size_t r = idx / cols, c = idx % cols;
  const float g = ToF(gate[r * in_stride + c]);
  const float u = ToF(up[r * in_stride + c]);
  out[r * out_stride + c] = FromF<T>(g * Sigmoid(g) * u);
}

template <typename T>
__global__ void SwiGluBackwardKernel(T* dgate, T* dup, long din_stride, const T* dout,
                                     long dout_stride, const T* gate, const T* up,
                                     long in_stride, int rows, int cols) {
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * cols) return;
  const size_t r = idx / cols, c = idx % cols;
  const float g = ToF(gate[r * in_stride + c]);
  const float u = ToF(up[r * in_stride + c]);
  const float d = ToF(dout[r * dout_stride + c]);
  const float s = Sigmoid(g);
  dgate[r * din_stride + c] = FromF<T>(d * u * s * (1.0f + g * (1.0f - s)));
  dup[r * din_stride + c] = FromF<T>(d * g * s);
}

}  // namespace

template <typename T>
cudaError_t SwiGluForward(T* out, long out_stride, const T* gate, const T* up, long in_stride,
                          int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  const size_t n = static_cast<size_t>(rows) * cols;
  SwiGluForwardKernel<T><<<CeilDiv(n, 256), 256, 0, stream>>>(out, out_stride, gate, up,
                                                              in_stride, rows, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t SwiGluBackward(T* dgate, T* dup, long din_stride, const T* dout, long dout_stride,
                           const T* gate, const T* up, long in_stride, int rows, int cols,
                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  const size_t n = static_cast<size_t>(rows) * cols;
  SwiGluBackwardKernel<T><<<CeilDiv(n, 256), 256, 0, stream>>>(
      dgate, dup, din_stride, dout, dout_stride, gate, up, in_stride, rows, cols);
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                     \
  template cudaError_t SwiGluForward<T>(T*, long, const T*, const T*, long, int, int,        \
                                        cudaStream_t);                                        \
  template cudaError_t SwiGluBackward<T>(T*, T*, long, const T*, long, const T*, const T*,   \
                                         long, int, int, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
