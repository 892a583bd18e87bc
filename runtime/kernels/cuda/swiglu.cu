#include <initializer_list>

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

// Vectorised variants: 16 bytes per access; used when every row start is
// 16-byte aligned (cols and strides multiples of the pack size).
template <typename T>
__global__ void SwiGluForwardVecKernel(T* __restrict__ out, long out_stride, const T* gate,
                                       const T* up, long in_stride, int rows, int cols) {
  constexpr int V = Pack<T>::kSize;
  const int packs = cols / V;
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * packs) return;
  const size_t r = idx / packs, c = (idx % packs) * V;
  const Pack<T> g = LoadPack(gate + r * in_stride + c);
  const Pack<T> u = LoadPack(up + r * in_stride + c);
  Pack<T> o;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float gj = ToF(g.v[j]);
    o.v[j] = FromF<T>(gj * Sigmoid(gj) * ToF(u.v[j]));
  }
  StorePack(out + r * out_stride + c, o);
}

template <typename T>
__global__ void SwiGluBackwardVecKernel(T* dgate, T* dup, long din_stride, const T* dout,
                                        long dout_stride, const T* gate, const T* up,
                                        long in_stride, int rows, int cols) {
  constexpr int V = Pack<T>::kSize;
  const int packs = cols / V;
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * packs) return;
  const size_t r = idx / packs, c = (idx % packs) * V;
  const Pack<T> g = LoadPack(gate + r * in_stride + c);
  const Pack<T> u = LoadPack(up + r * in_stride + c);
  const Pack<T> d = LoadPack(dout + r * dout_stride + c);
  Pack<T> dg, du;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float gj = ToF(g.v[j]), uj = ToF(u.v[j]), dj = ToF(d.v[j]);
    const float s = Sigmoid(gj);
    dg.v[j] = FromF<T>(dj * uj * s * (1.0f + gj * (1.0f - s)));
    du.v[j] = FromF<T>(dj * gj * s);
  }
  StorePack(dgate + r * din_stride + c, dg);
  StorePack(dup + r * din_stride + c, du);
}

template <typename T>
bool CanVectorize(int cols, std::initializer_list<long> strides,
                  std::initializer_list<const void*> ptrs) {
  constexpr int V = Pack<T>::kSize;
  if (cols % V != 0) return false;
  for (long s : strides)
    if (s % V != 0) return false;
  for (const void* p : ptrs)
    if (!Aligned16(p)) return false;
  return true;
}

}  // namespace

template <typename T>
cudaError_t SwiGluForward(T* out, long out_stride, const T* gate, const T* up, long in_stride,
                          int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  if (CanVectorize<T>(cols, {out_stride, in_stride}, {out, gate, up})) {
    const size_t n = static_cast<size_t>(rows) * (cols / Pack<T>::kSize);
    SwiGluForwardVecKernel<T><<<CeilDiv(n, 256), 256, 0, stream>>>(out, out_stride, gate, up,
                                                                   in_stride, rows, cols);
    return cudaGetLastError();
  }
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
  if (CanVectorize<T>(cols, {din_stride, dout_stride, in_stride}, {dgate, dup, dout, gate, up})) {
    const size_t n = static_cast<size_t>(rows) * (cols / Pack<T>::kSize);
    SwiGluBackwardVecKernel<T><<<CeilDiv(n, 256), 256, 0, stream>>>(
        dgate, dup, din_stride, dout, dout_stride, gate, up, in_stride, rows, cols);
    return cudaGetLastError();
  }
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
