// SwiGLU with the FP8 cast fused (contract in fp8_swiglu.h).
#include "runtime/kernels/cuda/fp8_swiglu.h"

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"
#include "runtime/kernels/cuda/fp8_cast.h"
#include "runtime/kernels/cuda/fp8_transpose.cuh"

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

using fp8::Cast8;

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
      q[r * q_stride + c] = fp8::Cast1<kE5M2>(ToF(o), scale, m);
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
      dq[r * dq_stride + c] = fp8::Cast1<kE5M2>(ToF(DGate(d, g, u)), scale, m);
      dq[r * dq_stride + cols + c] = fp8::Cast1<kE5M2>(ToF(DUp(d, g, u)), scale, m);
    }
  }
  if (amax != nullptr) fp8::CommitAmax(m, amax);
}

// Sources for fp8::TransposeTileKernel (the transposing variants): the codes
// the kernels above compute, for one (row, column) of the [rows, width]
// output; also stored row-major into q when not null.
//
// Forward: width = cols, q[r, c] = fp8(bf16(silu(g) * u) * scale).
template <bool kE5M2>
struct ForwardSource {
  uint8_t* q;
  const bf16* gate;
  const bf16* up;
  long in_stride;
  const float* scale_p;
  float* amax;
  float scale = 0.0f, m = 0.0f;

  __device__ void Start() { scale = *scale_p; }
  __device__ uint2 Codes8(int gr, int gc, int cols) {
    const size_t at = size_t(gr) * in_stride + gc;
    const Pack<bf16> g = LoadPack(gate + at), u = LoadPack(up + at);
    bf16 o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = Silu(ToF(g.v[j]), ToF(u.v[j]));
    const uint2 w = Cast8<kE5M2>(o, scale, m);
    if (q != nullptr) *reinterpret_cast<uint2*>(q + size_t(gr) * cols + gc) = w;
    return w;
  }
  __device__ uint8_t Code1(int gr, int gc, int cols) {
    const size_t at = size_t(gr) * in_stride + gc;
    const uint8_t b = fp8::Cast1<kE5M2>(ToF(Silu(ToF(gate[at]), ToF(up[at]))), scale, m);
    if (q != nullptr) q[size_t(gr) * cols + gc] = b;
    return b;
  }
  __device__ void Finish() {
    if (amax != nullptr) fp8::CommitAmax(m, amax);
  }
};

// The transposing backward's vector path: one block owns 64 rows x 64
// columns of both halves, reads g, u and dout once, and writes the dgate and
// the dup tile (codes row-major, then both transposed through shared memory):
// the bytes of two BackwardSource tiles, without the second read and the
// second sigmoid. cols % 8 == 0, rows % 16 == 0, aligned pointers.
template <bool kE5M2>
__global__ void __launch_bounds__(kThreads)
    BackwardPairKernel(uint8_t* __restrict__ dq, uint8_t* __restrict__ dqt,
                       const bf16* __restrict__ dout, long dout_stride,
                       const bf16* __restrict__ gate, const bf16* __restrict__ up,
                       long in_stride, int rows, int cols, const float* scale_p, float* amax) {
  __shared__ __align__(16) fp8::WordTile tiles[2];
  const float scale = *scale_p;
  float m = 0.0f;
  const int r0 = blockIdx.y * fp8::kTile, c0 = blockIdx.x * fp8::kTile;
  const int t = threadIdx.x, cw = (t % 8) * 2, rr = t / 8;
  const size_t dq_stride = 2 * size_t(cols);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rr + h * 32;
    const int gr = r0 + r, gc = c0 + cw * 4;
    if (gr >= rows || gc >= cols) continue;
    const size_t at = size_t(gr) * in_stride + gc;
    const Pack<bf16> g = LoadPack(gate + at), u = LoadPack(up + at);
    const Pack<bf16> d = LoadPack(dout + size_t(gr) * dout_stride + gc);
    bf16 dg[8], du[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gj = ToF(g.v[j]), uj = ToF(u.v[j]), dj = ToF(d.v[j]);
      dg[j] = DGate(dj, gj, uj);
      du[j] = DUp(dj, gj, uj);
    }
    const uint2 wg = Cast8<kE5M2>(dg, scale, m), wu = Cast8<kE5M2>(du, scale, m);
    uint8_t* row = dq + size_t(gr) * dq_stride;
    *reinterpret_cast<uint2*>(row + gc) = wg;
    *reinterpret_cast<uint2*>(row + cols + gc) = wu;
    fp8::PutCodes8(tiles[0], r, cw, wg);
    fp8::PutCodes8(tiles[1], r, cw, wu);
  }
  __syncthreads();
  fp8::StoreTransposed(tiles[0], dqt, r0, c0, rows, cols);
  fp8::StoreTransposed(tiles[1], dqt, r0, cols + c0, rows, 2 * cols);
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

cudaError_t SwiGluForwardFp8Transpose(uint8_t* q, uint8_t* qt, const bf16* gate, const bf16* up,
                                      long in_stride, int rows, int cols, const float* scale,
                                      float* amax, model::Fp8Format format, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  const bool vec = cols % 8 == 0 && rows % 16 == 0 && in_stride % 8 == 0 && Aligned16(gate) &&
                   Aligned16(up) && Aligned16(qt) && (q == nullptr || Aligned8(q));
  const dim3 grid(CeilDiv(cols, fp8::kTile), CeilDiv(rows, fp8::kTile));
  if (format == model::Fp8Format::kE5M2) {
    fp8::TransposeTileKernel<<<grid, kThreads, 0, stream>>>(
        qt, ForwardSource<true>{q, gate, up, in_stride, scale, amax}, rows, cols, vec);
  } else {
    fp8::TransposeTileKernel<<<grid, kThreads, 0, stream>>>(
        qt, ForwardSource<false>{q, gate, up, in_stride, scale, amax}, rows, cols, vec);
  }
  return cudaGetLastError();
}

cudaError_t SwiGluBackwardFp8Transpose(uint8_t* dq, uint8_t* dqt, const bf16* dout,
                                       long dout_stride, const bf16* gate, const bf16* up,
                                       long in_stride, int rows, int cols, const float* scale,
                                       float* amax, model::Fp8Format format, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  // Vector packs must not straddle the dgate | dup boundary: cols % 8 == 0.
  const bool vec = cols % 8 == 0 && rows % 16 == 0 && in_stride % 8 == 0 && dout_stride % 8 == 0 &&
                   Aligned16(gate) && Aligned16(up) && Aligned16(dout) && Aligned16(dqt) &&
                   Aligned8(dq);
  if (vec) {
    const dim3 grid(CeilDiv(cols, fp8::kTile), CeilDiv(rows, fp8::kTile));
    if (format == model::Fp8Format::kE5M2) {
      BackwardPairKernel<true><<<grid, kThreads, 0, stream>>>(dq, dqt, dout, dout_stride, gate, up,
                                                              in_stride, rows, cols, scale, amax);
    } else {
      BackwardPairKernel<false><<<grid, kThreads, 0, stream>>>(dq, dqt, dout, dout_stride, gate,
                                                               up, in_stride, rows, cols, scale,
                                                               amax);
    }
    return cudaGetLastError();
  }
  // Other shapes: the row-major kernel, then the codes transposed (the same bytes).
  const cudaError_t err = SwiGluBackwardFp8(dq, dout, dout_stride, gate, up, in_stride, rows, cols,
                                            scale, amax, format, stream);
  if (err != cudaSuccess) return err;
  return Fp8Transpose(dqt, dq, rows, 2 * cols, stream);
}

}  // namespace hypertrain::kernels::cuda
