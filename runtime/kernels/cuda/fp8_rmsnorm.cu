// RMSNorm forward with the FP8 cast fused (contract in fp8_rmsnorm.h).
#include "runtime/kernels/cuda/fp8_rmsnorm.h"

#include <type_traits>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarpsPerBlock = 8;  // one warp per row, as rmsnorm.cu
constexpr int V = 8;               // bf16 values per 16-byte pack

// Eight normalised values (rounded to bf16 as RmsNormForward stores them),
// cast and stored at q[c .. c + 7].
template <bool kE5M2>
__device__ __forceinline__ void CastStore8(uint8_t* q, const Pack<bf16>& r, const Pack<bf16>& pw,
                                           float rs, float scale, float& m, bool q_vec) {
  uint16_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = ToF(FromF<bf16>(ToF(r.v[2 * k]) * rs * ToF(pw.v[2 * k])));
    const float b = ToF(FromF<bf16>(ToF(r.v[2 * k + 1]) * rs * ToF(pw.v[2 * k + 1])));
    m = fmaxf(m, fmaxf(fabsf(a), fabsf(b)));
    w[k] = fp8::ToFp8x2<kE5M2>(a * scale, b * scale);
  }
  const uint2 packed = fp8::PackWords(w);
  if (q_vec) {
    *reinterpret_cast<uint2*>(q) = packed;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) q[2 * k] = w[k] & 0xFF, q[2 * k + 1] = w[k] >> 8;
  }
}

// Vector path, P packs per lane kept in registers (RmsNormForwardRowKernel's
// order), or P == 0: any cols % 8 == 0, re-reading the row
// (RmsNormForwardVecKernel's order; the two sum alike).
template <int P, bool kE5M2>
__global__ void VecKernel(uint8_t* __restrict__ q, float* __restrict__ rstd,
                          const bf16* __restrict__ x, const bf16* __restrict__ w, int rows,
                          int cols, float eps, const float* scale_p, float* amax, bool q_vec) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  float m = 0.0f;
  if (row < rows) {  // no early return: CommitAmax syncs the block
    const float scale = *scale_p;
    const size_t base = static_cast<size_t>(row) * cols;
    float ss = 0.0f;
    if constexpr (P > 0) {
      Pack<bf16> r[P];
#pragma unroll
      for (int k = 0; k < P; ++k) r[k] = LoadPack(x + base + (k * 32 + lane) * V);
#pragma unroll
      for (int k = 0; k < P; ++k) {
#pragma unroll
        for (int j = 0; j < V; ++j) ss += ToF(r[k].v[j]) * ToF(r[k].v[j]);
      }
      ss = WarpSum(ss);
      const float rs = rsqrtf(ss / cols + eps);
      if (lane == 0) rstd[row] = rs;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int c = (k * 32 + lane) * V;
        CastStore8<kE5M2>(q + base + c, r[k], LoadPack(w + c), rs, scale, m, q_vec);
      }
    } else {
      for (int c = lane * V; c < cols; c += 32 * V) {
        const Pack<bf16> r = LoadPack(x + base + c);
#pragma unroll
        for (int j = 0; j < V; ++j) ss += ToF(r.v[j]) * ToF(r.v[j]);
      }
      ss = WarpSum(ss);
      const float rs = rsqrtf(ss / cols + eps);
      if (lane == 0) rstd[row] = rs;
      for (int c = lane * V; c < cols; c += 32 * V) {
        CastStore8<kE5M2>(q + base + c, LoadPack(x + base + c), LoadPack(w + c), rs, scale, m, q_vec);
      }
    }
  }
  if (amax != nullptr) fp8::CommitAmax(m, amax);
}

// Element path (RmsNormForwardKernel's order).
template <bool kE5M2>
__global__ void ElementKernel(uint8_t* __restrict__ q, float* __restrict__ rstd,
                              const bf16* __restrict__ x, const bf16* __restrict__ w, int rows,
                              int cols, float eps, const float* scale_p, float* amax) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  float m = 0.0f;
  if (row < rows) {
    const float scale = *scale_p;
    const size_t base = static_cast<size_t>(row) * cols;
    float ss = 0.0f;
    for (int c = lane; c < cols; c += 32) {
      const float r = ToF(x[base + c]);
      ss += r * r;
    }
    ss = WarpSum(ss);
    const float rs = rsqrtf(ss / cols + eps);
    if (lane == 0) rstd[row] = rs;
    for (int c = lane; c < cols; c += 32) {
      const float y = ToF(FromF<bf16>(ToF(x[base + c]) * rs * ToF(w[c])));
      q[base + c] = fp8::Cast1<kE5M2>(y, scale, m);
    }
  }
  if (amax != nullptr) fp8::CommitAmax(m, amax);
}

template <bool kE5M2>
void Launch(uint8_t* q, float* rstd, const bf16* x, const bf16* w, int rows, int cols, float eps,
            const float* scale, float* amax, cudaStream_t stream) {
  const dim3 grid(CeilDiv(rows, kWarpsPerBlock)), block(kWarpsPerBlock * 32);
  // RmsNormForward's choice of path (its vector test on x, w; y is aligned
  // in the model), so the sums run in its order.
  const bool vec = cols % V == 0 && Aligned16(x) && Aligned16(w);
  if (!vec) {
    ElementKernel<kE5M2><<<grid, block, 0, stream>>>(q, rstd, x, w, rows, cols, eps, scale, amax);
    return;
  }
  const bool q_vec = (reinterpret_cast<uintptr_t>(q) & 7) == 0;
  const int packs = cols % (32 * V) == 0 ? cols / (32 * V) : 0;
  auto run = [&](auto p) {
    VecKernel<decltype(p)::value, kE5M2>
        <<<grid, block, 0, stream>>>(q, rstd, x, w, rows, cols, eps, scale, amax, q_vec);
  };
  switch (packs) {
    case 1: run(std::integral_constant<int, 1>{}); break;
    case 2: run(std::integral_constant<int, 2>{}); break;
    case 3: run(std::integral_constant<int, 3>{}); break;
    case 4: run(std::integral_constant<int, 4>{}); break;
    case 6: run(std::integral_constant<int, 6>{}); break;
    case 8: run(std::integral_constant<int, 8>{}); break;
    default: run(std::integral_constant<int, 0>{}); break;
  }
}

}  // namespace

cudaError_t RmsNormForwardFp8(uint8_t* q, float* rstd, const bf16* x, const bf16* w, int rows,
                              int cols, float eps, const float* scale, float* amax,
                              model::Fp8Format format, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  if (format == model::Fp8Format::kE5M2) {
    Launch<true>(q, rstd, x, w, rows, cols, eps, scale, amax, stream);
  } else {
    Launch<false>(q, rstd, x, w, rows, cols, eps, scale, amax, stream);
  }
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
