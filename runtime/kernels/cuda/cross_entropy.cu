#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/cross_entropy.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// kVec: 16-byte accesses (vocab and ld multiples of the pack, row 0 aligned).
template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    SoftmaxCrossEntropyKernel(T* logits, long ld, float* __restrict__ losses,
                              const int32_t* __restrict__ targets, int vocab,
                              int32_t ignore_index, const float* __restrict__ dscale) {
  constexpr int P = kVec ? Pack<T>::kSize : 1;
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  T* x = logits + static_cast<size_t>(row) * ld;
  const int32_t target = targets[row];
  const bool ignored = target == ignore_index;
  if (ignored) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (dscale != nullptr) {
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

#define HT_INSTANTIATE(T)                                                                     \
  template cudaError_t SoftmaxCrossEntropy<T>(T*, long, float*, const int32_t*, int, int,    \
                                              int32_t, const float*, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
