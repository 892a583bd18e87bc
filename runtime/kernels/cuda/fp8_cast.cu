// FP8 casts, amax and scales (contract in fp8_cast.h).
#include "runtime/kernels/cuda/fp8_cast.h"

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"
#include "runtime/kernels/cuda/fp8_transpose.cuh"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

using fp8::Cast1;
using fp8::Cast8;
using fp8::CommitAmax;
using fp8::FromFp8;
using fp8::kTile;
using fp8::TransposeTileKernel;

template <typename T>
__global__ void AmaxKernel(const T* __restrict__ x, size_t n, float* amax) {
  float m = 0.0f;
  constexpr int V = Pack<T>::kSize;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool vec = Aligned16(x);
  const size_t nv = vec ? n / V : 0;
  for (size_t i = tid; i < nv; i += stride) {
    const Pack<T> p = LoadPack(x + i * V);
#pragma unroll
    for (int k = 0; k < V; ++k) m = fmaxf(m, fabsf(ToF(p.v[k])));
  }
  for (size_t i = nv * V + tid; i < n; i += stride) {
    const float v = ToF(x[i]);
    m = fmaxf(m, fabsf(v));
  }
  CommitAmax(m, amax);
}

__global__ void ScalesKernel(const float* amax, float* scale, float* scale_inv, int n, int stride,
                             float fp8_max, int margin) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int s = i * stride;
  const float sc = model::Fp8ScaleFromAmax(amax[s], fp8_max, margin, scale[s]);
  scale[s] = sc;
  scale_inv[s] = 1.0f / sc;  // exact: a power of two
}

template <typename T, bool kE5M2>
__global__ void CastKernel(uint8_t* __restrict__ q, const T* __restrict__ x, size_t n,
                           const float* scale_p, float* amax) {
  const float scale = *scale_p;
  float m = 0.0f;
  constexpr int V = Pack<T>::kSize;  // 8 for bf16: 16 B in, 8 B out
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t nv = 0;
  if constexpr (V == 8) {
    if (Aligned16(x) && (reinterpret_cast<uintptr_t>(q) & 7) == 0) nv = n / V;
    for (size_t i = tid; i < nv; i += stride) {
      const Pack<T> p = LoadPack(x + i * V);
      *reinterpret_cast<uint2*>(q + i * V) = Cast8<kE5M2>(p.v, scale, m);
    }
  }
  for (size_t i = nv * V + tid; i < n; i += stride) q[i] = Cast1<kE5M2>(ToF(x[i]), scale, m);
  if (amax != nullptr) CommitAmax(m, amax);
}

// The FP8 codes of a [rows, cols] row-major tensor, as TransposeTileKernel
// reads them: Codes8 gives columns gc .. gc + 7 of row gr packed into 8 bytes
// (vector path: gc % 8 == 0, aligned), Code1 one element; Finish runs once
// per thread at the end.
//
// CastSource: the codes of x * scale, computed on the fly; also stores them
// row-major into q when q is not null, and folds |x| into *amax.
template <typename T, bool kE5M2>
struct CastSource {
  uint8_t* q;
  const T* x;
  const float* scale_p;
  float* amax;
  float scale = 0.0f;
  float m = 0.0f;

  __device__ void Start() { scale = *scale_p; }
  __device__ uint2 Codes8(int gr, int gc, int cols) {
    const T* src = x + size_t(gr) * cols + gc;
    float v[8];
    if constexpr (sizeof(T) == 2) {
      const Pack<T> p = LoadPack(src);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = ToF(p.v[k]);
    } else {
      const Pack<T> p0 = LoadPack(src), p1 = LoadPack(src + 4);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = ToF(p0.v[k]), v[k + 4] = ToF(p1.v[k]);
    }
    const uint2 out = Cast8<kE5M2>(v, scale, m);
    if (q != nullptr) *reinterpret_cast<uint2*>(q + size_t(gr) * cols + gc) = out;
    return out;
  }
  __device__ uint8_t Code1(int gr, int gc, int cols) {
    const uint8_t b = Cast1<kE5M2>(ToF(x[size_t(gr) * cols + gc]), scale, m);
    if (q != nullptr) q[size_t(gr) * cols + gc] = b;
    return b;
  }
  __device__ void Finish() {
    if (amax != nullptr) CommitAmax(m, amax);
  }
};

// CodeSource: codes already cast (Fp8Transpose), read as they are.
struct CodeSource {
  const uint8_t* q;
  long ld;  // row stride in bytes

  __device__ void Start() {}
  __device__ uint2 Codes8(int gr, int gc, int) {
    return *reinterpret_cast<const uint2*>(q + size_t(gr) * ld + gc);
  }
  __device__ uint8_t Code1(int gr, int gc, int) { return q[size_t(gr) * ld + gc]; }
  __device__ void Finish() {}
};

template <typename T, bool kE5M2>
__global__ void DequantizeKernel(T* __restrict__ y, const uint8_t* __restrict__ q, size_t n,
                                 const float* scale_inv_p) {
  const float s = *scale_inv_p;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = FromF<T>(FromFp8<kE5M2>(q[i]) * s);
  }
}

unsigned int Blocks(size_t work) {
  const unsigned int b = CeilDiv(work, kThreads);
  return b == 0 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

}  // namespace

template <typename T>
cudaError_t Fp8Amax(const T* x, size_t n, float* amax, cudaStream_t stream) {
  AmaxKernel<T><<<Blocks(n / Pack<T>::kSize + 1), kThreads, 0, stream>>>(x, n, amax);
  return cudaGetLastError();
}

cudaError_t Fp8ScalesFromAmax(const float* amax, float* scale, float* scale_inv, int n,
                              int stride, Fp8Format format, int margin, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScalesKernel<<<CeilDiv(n, 128), 128, 0, stream>>>(amax, scale, scale_inv, n, stride,
                                                     model::Fp8MaxOf(format), margin);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Fp8Cast(uint8_t* q, const T* x, size_t n, const float* scale, float* amax,
                    Fp8Format format, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned int blocks = Blocks(n / 8 + 1);
  if (format == Fp8Format::kE5M2) {
    CastKernel<T, true><<<blocks, kThreads, 0, stream>>>(q, x, n, scale, amax);
  } else {
    CastKernel<T, false><<<blocks, kThreads, 0, stream>>>(q, x, n, scale, amax);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t Fp8CastTranspose(uint8_t* q, uint8_t* qt, const T* x, int rows, int cols,
                             const float* scale, float* amax, Fp8Format format,
                             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const bool vec = cols % 8 == 0 && rows % 16 == 0 && Aligned16(x) && Aligned16(qt) &&
                   (q == nullptr || (reinterpret_cast<uintptr_t>(q) & 7) == 0);
  const dim3 grid(CeilDiv(cols, kTile), CeilDiv(rows, kTile));
  if (format == Fp8Format::kE5M2) {
    TransposeTileKernel<<<grid, kThreads, 0, stream>>>(qt, CastSource<T, true>{q, x, scale, amax}, rows, cols, vec);
  } else {
    TransposeTileKernel<<<grid, kThreads, 0, stream>>>(qt, CastSource<T, false>{q, x, scale, amax}, rows, cols, vec);
  }
  return cudaGetLastError();
}

cudaError_t Fp8Transpose(uint8_t* qt, const uint8_t* q, int rows, int cols, cudaStream_t stream,
                         long ld) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (ld == 0) ld = cols;
  if (ld < cols) return cudaErrorInvalidValue;
  const bool vec = cols % 8 == 0 && ld % 8 == 0 && rows % 16 == 0 && Aligned16(qt) &&
                   (reinterpret_cast<uintptr_t>(q) & 7) == 0;
  const dim3 grid(CeilDiv(cols, kTile), CeilDiv(rows, kTile));
  TransposeTileKernel<<<grid, kThreads, 0, stream>>>(qt, CodeSource{q, ld}, rows, cols, vec);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Fp8Dequantize(T* y, const uint8_t* q, size_t n, const float* scale_inv,
                          Fp8Format format, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (format == Fp8Format::kE5M2) {
    DequantizeKernel<T, true><<<Blocks(n), kThreads, 0, stream>>>(y, q, n, scale_inv);
  } else {
    DequantizeKernel<T, false><<<Blocks(n), kThreads, 0, stream>>>(y, q, n, scale_inv);
  }
  return cudaGetLastError();
}

#define HT_FP8_INSTANTIATE(T)                                                                    \
  template cudaError_t Fp8Amax<T>(const T*, size_t, float*, cudaStream_t);                       \
  template cudaError_t Fp8Cast<T>(uint8_t*, const T*, size_t, const float*, float*, Fp8Format,   \
                                  cudaStream_t);                                                 \
  template cudaError_t Fp8CastTranspose<T>(uint8_t*, uint8_t*, const T*, int, int, const float*, \
                                           float*, Fp8Format, cudaStream_t);                     \
  template cudaError_t Fp8Dequantize<T>(T*, const uint8_t*, size_t, const float*, Fp8Format,     \
                                        cudaStream_t);
HT_FP8_INSTANTIATE(float)
HT_FP8_INSTANTIATE(__nv_bfloat16)
HT_FP8_INSTANTIATE(__half)
#undef HT_FP8_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
