#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/fp8.cuh"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// kVec: 16-byte accesses (vocab and ld multiples of the pack, row 0 aligned).
// The FP8 gradient (kFp8, T = bf16): codes of the bf16-rounded gradient go
// to shared memory first (the row's codes overwrite the start of its own
// logits, which other threads are still reading), then to the row's start.
struct Fp8Grad {
  const float* scale = nullptr;
  float* amax = nullptr;
};

template <typename T, bool kVec, bool kFp8 = false, bool kE5M2 = true>
__global__ void __launch_bounds__(kThreads)
    SoftmaxCrossEntropyKernel(T* logits, long ld, float* __restrict__ losses,
                              const int32_t* __restrict__ targets, int vocab,
                              int32_t ignore_index, const float* __restrict__ dscale,
                              Fp8Grad f8 = {}) {
  constexpr int P = kVec ? Pack<T>::kSize : 1;
  __shared__ float scratch[32];
  extern __shared__ __align__(16) uint8_t codes[];
  const int row = blockIdx.x;
  T* x = logits + static_cast<size_t>(row) * ld;
  const int32_t target = targets[row];
  const bool ignored = target == ignore_index;
  if (ignored) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if constexpr (kFp8) {
      uint8_t* out = reinterpret_cast<uint8_t*>(x);
      for (int v = threadIdx.x; v < vocab; v += kThreads) out[v] = 0;
      fp8::CommitAmax(0.0f, f8.amax);
    } else if (dscale != nullptr) {
      for (int v = threadIdx.x; v < vocab; v += kThreads) x[v] = FromF<T>(0.0f);
    }
    return;
  }
  float m = -INFINITY, s = 0.0f;
  auto online = [&](float xv) {
    if (xv > m) {
      s = s * __expf(m - xv) + 1.0f;
      m = xv;
    } else {
      s += __expf(xv - m);
    }
  };
  for (int v = threadIdx.x * P; v < vocab; v += kThreads * P) {
    if constexpr (kVec) {
      const Pack<T> pk = LoadPack(x + v);
#pragma unroll
      for (int j = 0; j < P; ++j) online(ToF(pk.v[j]));
    } else {
      online(ToF(x[v]));
    }
  }
  const float row_max = BlockMax(m, scratch);
  const float sum = BlockSum(m == -INFINITY ? 0.0f : s * __expf(m - row_max), scratch);
  const float lse = row_max + logf(sum);
  if (threadIdx.x == 0) losses[row] = lse - ToF(x[target]);
  if (dscale == nullptr) return;
  // All threads must have read x[target] before anyone overwrites it.
  __syncthreads();
  const float scale = *dscale;
  const float inv_sum = 1.0f / sum;
  if constexpr (kFp8) {
    const float s8 = *f8.scale;
    float amax = 0.0f;
    for (int v = threadIdx.x * P; v < vocab; v += kThreads * P) {
      if constexpr (kVec) {
        const Pack<T> pk = LoadPack(x + v);
        float g[P];
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const float p = __expf(ToF(pk.v[j]) - row_max) * inv_sum;
          g[j] = ToF(FromF<T>((p - (v + j == target ? 1.0f : 0.0f)) * scale));
          amax = fmaxf(amax, fabsf(g[j]));
        }
        uint16_t w[P / 2];
#pragma unroll
        for (int j = 0; j < P / 2; ++j) w[j] = fp8::ToFp8x2<kE5M2>(g[2 * j] * s8, g[2 * j + 1] * s8);
        *reinterpret_cast<uint2*>(codes + v) = fp8::PackWords(w);
      } else {
        const float p = __expf(ToF(x[v]) - row_max) * inv_sum;
        const float g = ToF(FromF<T>((p - (v == target ? 1.0f : 0.0f)) * scale));
        amax = fmaxf(amax, fabsf(g));
        codes[v] = fp8::ToFp8<kE5M2>(g * s8);
      }
    }
    __syncthreads();  // every read of the row is done: its start may be overwritten
    uint8_t* out = reinterpret_cast<uint8_t*>(x);
    if (kVec && vocab % 16 == 0) {
      for (int v = threadIdx.x * 16; v < vocab; v += kThreads * 16) {
        *reinterpret_cast<uint4*>(out + v) = *reinterpret_cast<const uint4*>(codes + v);
      }
    } else {
      for (int v = threadIdx.x; v < vocab; v += kThreads) out[v] = codes[v];
    }
    fp8::CommitAmax(amax, f8.amax);
  } else {
    for (int v = threadIdx.x * P; v < vocab; v += kThreads * P) {
      if constexpr (kVec) {
        Pack<T> pk = LoadPack(x + v);
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const float p = __expf(ToF(pk.v[j]) - row_max) * inv_sum;
          pk.v[j] = FromF<T>((p - (v + j == target ? 1.0f : 0.0f)) * scale);
        }
        StorePack(x + v, pk);
      } else {
        const float p = __expf(ToF(x[v]) - row_max) * inv_sum;
        x[v] = FromF<T>((p - (v == target ? 1.0f : 0.0f)) * scale);
      }
    }
  }
}

}  // namespace

template <typename T>
cudaError_t SoftmaxCrossEntropy(T* logits, long ld, float* losses, const int32_t* targets,
                                int rows, int vocab, int32_t ignore_index, const float* dscale,
                                cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0 || ld < vocab) return cudaErrorInvalidValue;
  constexpr int P = Pack<T>::kSize;
  if (vocab % P == 0 && ld % P == 0 && Aligned16(logits)) {
    SoftmaxCrossEntropyKernel<T, true><<<rows, kThreads, 0, stream>>>(
        logits, ld, losses, targets, vocab, ignore_index, dscale);
  } else {
    SoftmaxCrossEntropyKernel<T, false><<<rows, kThreads, 0, stream>>>(
        logits, ld, losses, targets, vocab, ignore_index, dscale);
  }
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropyFp8Grad(__nv_bfloat16* logits, long ld, float* losses,
                                       const int32_t* targets, int rows, int vocab,
                                       int32_t ignore_index, const float* dscale,
                                       const float* scale, float* amax, model::Fp8Format format,
                                       cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0 || ld < vocab || dscale == nullptr || scale == nullptr ||
      amax == nullptr) {
    return cudaErrorInvalidValue;
  }
  const size_t smem = (static_cast<size_t>(vocab) + 15) / 16 * 16;
  if (smem > kMaxFp8GradVocab) return cudaErrorInvalidValue;
  using T = __nv_bfloat16;
  constexpr int P = Pack<T>::kSize;
  const bool vec = vocab % P == 0 && ld % P == 0 && Aligned16(logits);
  const bool e5m2 = format == model::Fp8Format::kE5M2;
  auto kernel = vec ? (e5m2 ? SoftmaxCrossEntropyKernel<T, true, true, true>
                            : SoftmaxCrossEntropyKernel<T, true, true, false>)
                    : (e5m2 ? SoftmaxCrossEntropyKernel<T, false, true, true>
                            : SoftmaxCrossEntropyKernel<T, false, true, false>);
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  kernel<<<rows, kThreads, smem, stream>>>(logits, ld, losses, targets, vocab, ignore_index,
                                            dscale, Fp8Grad{scale, amax});
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                     \
  template cudaError_t SoftmaxCrossEntropy<T>(T*, long, float*, const int32_t*, int, int,    \
                                              int32_t, const float*, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
