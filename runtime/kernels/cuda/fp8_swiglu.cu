// SwiGLU with the FP8 cast fused (contract in fp8_swiglu.h).
#include "runtime/kernels/cuda/fp8_swiglu.h"

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

// swiglu.cu's expressions, term for term (the bytes must match).
__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ bf16 Silu(float g, float u) { return FromF<bf16>(g * Sigmoid(g) * u); }
__device__ __forceinline__ bf16 DGate(float d, float g, float u) {
  const float s = Sigmoid(g);
  return FromF<bf16>(d * u * s * (1.0f + g * (1.0f - s)));
}
__device__ __forceinline__ bf16 DUp(float d, float g, float u) {
  const float s = Sigmoid(g);
  return FromF<bf16>(d * g * s);
}

// Casts 8 bf16 values (already rounded) into one 8-byte word, tracking amax.
template <bool kE5M2>
__device__ __forceinline__ uint2 Cast8(const bf16 v[8], float scale, float& m) {
  uint16_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = ToF(v[2 * k]), b = ToF(v[2 * k + 1]);
    m = fmaxf(m, fmaxf(fabsf(a), fabsf(b)));
    w[k] = fp8::ToFp8x2<kE5M2>(a * scale, b * scale);
  }
  return fp8::PackWords(w);
}

template <bool kE5M2>
__global__ void ForwardKernel(bf16* __restrict__ out, long out_stride, uint8_t* __restrict__ q,
                              long q_stride, const bf16* __restrict__ gate,
                              const bf16* __restrict__ up, long in_stride, int rows, int cols,
                              const float* scale_p, float* amax, bool vec) {
  const float scale = *scale_p;
  float m = 0.0f;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int packs = cols / 8;
    const size_t n = size_t(rows) * packs;
    for (size_t i = tid; i < n; i += stride) {
      const size_t r = i / packs, c = (i % packs) * 8;
      const Pack<bf16> g = LoadPack(gate + r * in_stride + c);
      const Pack<bf16> u = LoadPack(up + r * in_stride + c);
      Pack<bf16> o;
#pragma unroll
      for (int j = 0; j < 8; ++j) o.v[j] = Silu(ToF(g.v[j]), ToF(u.v[j]));
      if (out != nullptr) StorePack(out + r * out_stride + c, o);
      *reinterpret_cast<uint2*>(q + r * q_stride + c) = Cast8<kE5M2>(o.v, scale, m);
    }
  } else {
    const size_t n = size_t(rows) * cols;
    for (size_t i = tid; i < n; i += stride) {
      const size_t r = i / cols, c = i % cols;
      const bf16 o = Silu(ToF(gate[r * in_stride + c]), ToF(up[r * in_stride + c]));
      if (out != nullptr) out[r * out_stride + c] = o;
      const float a = ToF(o);
      m = fmaxf(m, fabsf(a));
      q[r * q_stride + c] = fp8::ToFp8<kE5M2>(a * scale);
    }
  }
  if (amax != nullptr) fp8::CommitAmax(m, amax);
}

template <bool kE5M2>
__global__ void BackwardKernel(uint8_t* __restrict__ dq, const bf16* __restrict__ dout,
                               long dout_stride, const bf16* __restrict__ gate,
                               const bf16* __restrict__ up, long in_stride, int rows, int cols,
                               const float* scale_p, float* amax, bool vec) {
  const float scale = *scale_p;
  float m = 0.0f;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t dq_stride = 2 * size_t(cols);
  if (vec) {
    const int packs = cols / 8;
    const size_t n = size_t(rows) * packs;
    for (size_t i = tid; i < n; i += stride) {
      const size_t r = i / packs, c = (i % packs) * 8;
      const Pack<bf16> g = LoadPack(gate + r * in_stride + c);
      const Pack<bf16> u = LoadPack(up + r * in_stride + c);
      const Pack<bf16> d = LoadPack(dout + r * dout_stride + c);
      bf16 dg[8], du[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float gj = ToF(g.v[j]), uj = ToF(u.v[j]), dj = ToF(d.v[j]);
        dg[j] = DGate(dj, gj, uj);
        du[j] = DUp(dj, gj, uj);
      }
      uint8_t* row = dq + r * dq_stride;
      *reinterpret_cast<uint2*>(row + c) = Cast8<kE5M2>(dg, scale, m);
      *reinterpret_cast<uint2*>(row + cols + c) = Cast8<kE5M2>(du, scale, m);
    }
  } else {
    const size_t n = size_t(rows) * cols;
    for (size_t i = tid; i < n; i += stride) {
      const size_t r = i / cols, c = i % cols;
      const float g = ToF(gate[r * in_stride + c]), u = ToF(up[r * in_stride + c]),
                  d = ToF(dout[r * dout_stride + c]);
      const float a = ToF(DGate(d, g, u)), b = ToF(DUp(d, g, u));
      m = fmaxf(m, fmaxf(fabsf(a), fabsf(b)));
      dq[r * dq_stride + c] = fp8::ToFp8<kE5M2>(a * scale);
      dq[r * dq_stride + cols + c] = fp8::ToFp8<kE5M2>(b * scale);
    }
  }
  if (amax != nullptr) fp8::CommitAmax(m, amax);
}

bool Aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; }

unsigned int Blocks(size_t work) {
  const unsigned int b = CeilDiv(work, kThreads);
  return b == 0 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

}  // namespace

cudaError_t SwiGluForwardFp8(bf16* out, long out_stride, uint8_t* q, long q_stride,
                             const bf16* gate, const bf16* up, long in_stride, int rows, int cols,
                             const float* scale, float* amax, model::Fp8Format format,
                             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  const bool vec = cols % 8 == 0 && out_stride % 8 == 0 && q_stride % 8 == 0 &&
                   in_stride % 8 == 0 && Aligned16(out) && Aligned16(gate) && Aligned16(up) &&
                   Aligned8(q);
  const unsigned int blocks = Blocks(size_t(rows) * cols / (vec ? 8 : 1));
  if (format == model::Fp8Format::kE5M2) {
    ForwardKernel<true><<<blocks, kThreads, 0, stream>>>(out, out_stride, q, q_stride, gate, up,
                                                         in_stride, rows, cols, scale, amax, vec);
  } else {
    ForwardKernel<false><<<blocks, kThreads, 0, stream>>>(out, out_stride, q, q_stride, gate, up,
                                                          in_stride, rows, cols, scale, amax, vec);
  }
  return cudaGetLastError();
}

cudaError_t SwiGluBackwardFp8(uint8_t* dq, const bf16* dout, long dout_stride, const bf16* gate,
                              const bf16* up, long in_stride, int rows, int cols,
                              const float* scale, float* amax, model::Fp8Format format,
                              cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  const bool vec = cols % 8 == 0 && dout_stride % 8 == 0 && in_stride % 8 == 0 &&
                   Aligned16(dout) && Aligned16(gate) && Aligned16(up) && Aligned8(dq);
  const unsigned int blocks = Blocks(size_t(rows) * cols / (vec ? 8 : 1));
  if (format == model::Fp8Format::kE5M2) {
    BackwardKernel<true><<<blocks, kThreads, 0, stream>>>(dq, dout, dout_stride, gate, up,
                                                          in_stride, rows, cols, scale, amax, vec);
  } else {
    BackwardKernel<false><<<blocks, kThreads, 0, stream>>>(dq, dout, dout_stride, gate, up,
                                                           in_stride, rows, cols, scale, amax, vec);
  }
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
