#include <cmath>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/rope.cuh"

namespace hypertrain::kernels::cuda {
namespace {

// One thread per (token, head, i < D/2) pair; reads both halves before
// writing, so in-place is safe.
template <typename T>
__global__ void RopeKernel(T* out, long out_stride, const T* in, long in_stride,
                           const float* __restrict__ table, int tokens, int seq_len, int heads,
                           int half, float sin_sign) {
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t total = static_cast<size_t>(tokens) * heads * half;
  if (idx >= total) return;
  const int i = static_cast<int>(idx % half);
  const int h = static_cast<int>((idx / half) % heads);
  const int t = static_cast<int>(idx / (static_cast<size_t>(half) * heads));
  const int pos = t % seq_len;
  const float c = table[static_cast<size_t>(pos) * half + i];
  const float s = sin_sign * table[static_cast<size_t>(seq_len) * half + static_cast<size_t>(pos) * half + i];
  const T* src = in + static_cast<size_t>(t) * in_stride + static_cast<size_t>(h) * 2 * half;
  T* dst = out + static_cast<size_t>(t) * out_stride + static_cast<size_t>(h) * 2 * half;
  float o1, o2;
  RotateHalfPair(ToF(src[i]), ToF(src[i + half]), c, s, o1, o2);
  dst[i] = FromF<T>(o1);
  dst[i + half] = FromF<T>(o2);
}

// 16-byte variant: each thread rotates P consecutive pairs.
template <typename T>
__global__ void RopeVecKernel(T* out, long out_stride, const T* in, long in_stride,
                              const float* __restrict__ table, int tokens, int seq_len, int heads,
                              int half, float sin_sign) {
  constexpr int P = Pack<T>::kSize;
  const int packs = half / P;
  const size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t total = static_cast<size_t>(tokens) * heads * packs;
  if (idx >= total) return;
  const int i = static_cast<int>(idx % packs) * P;
  const int h = static_cast<int>((idx / packs) % heads);
  const int t = static_cast<int>(idx / (static_cast<size_t>(packs) * heads));
  const int pos = t % seq_len;
  const float* cs = table + static_cast<size_t>(pos) * half + i;
  const float* sn = table + static_cast<size_t>(seq_len) * half + static_cast<size_t>(pos) * half + i;
  const T* src = in + static_cast<size_t>(t) * in_stride + static_cast<size_t>(h) * 2 * half;
  T* dst = out + static_cast<size_t>(t) * out_stride + static_cast<size_t>(h) * 2 * half;
  const Pack<T> a = LoadPack(src + i), b = LoadPack(src + i + half);
  Pack<T> oa, ob;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const float c = cs[j], s = sin_sign * sn[j];
    float o1, o2;
    RotateHalfPair(ToF(a.v[j]), ToF(b.v[j]), c, s, o1, o2);
    oa.v[j] = FromF<T>(o1);
    ob.v[j] = FromF<T>(o2);
  }
  StorePack(dst + i, oa);
  StorePack(dst + i + half, ob);
}

template <typename T>
cudaError_t Launch(T* out, long out_stride, const T* in, long in_stride, const float* table,
                   int tokens, int seq_len, int heads, int head_dim, float sign,
                   cudaStream_t stream) {
  if (tokens <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0 || head_dim % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  const int half = head_dim / 2;
  constexpr int P = Pack<T>::kSize;
  if (half % P == 0 && out_stride % P == 0 && in_stride % P == 0 && Aligned16(out) &&
      Aligned16(in)) {
    const size_t total = static_cast<size_t>(tokens) * heads * (half / P);
    RopeVecKernel<T><<<CeilDiv(total, 256), 256, 0, stream>>>(out, out_stride, in, in_stride, table,
                                                             tokens, seq_len, heads, half, sign);
    return cudaGetLastError();
  }
  const size_t total = static_cast<size_t>(tokens) * heads * half;
  RopeKernel<T><<<CeilDiv(total, 256), 256, 0, stream>>>(out, out_stride, in, in_stride, table,
                                                        tokens, seq_len, heads, half, sign);
  return cudaGetLastError();
}

}  // namespace

std::vector<float> RopeCosSinTable(const std::vector<double>& inv_freq, int seq_len) {
  const size_t half = inv_freq.size();
  std::vector<float> t(2 * static_cast<size_t>(seq_len) * half);
  for (int p = 0; p < seq_len; ++p) {
    for (size_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv_freq[i];
      t[p * half + i] = static_cast<float>(std::cos(a));
      t[static_cast<size_t>(seq_len) * half + p * half + i] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

template <typename T>
cudaError_t RopeForward(T* out, long out_stride, const T* in, long in_stride, const float* table,
                        int tokens, int seq_len, int heads, int head_dim, cudaStream_t stream) {
  return Launch(out, out_stride, in, in_stride, table, tokens, seq_len, heads, head_dim, 1.0f,
                stream);
}

template <typename T>
cudaError_t RopeBackward(T* dx, long dx_stride, const T* dy, long dy_stride, const float* table,
                         int tokens, int seq_len, int heads, int head_dim, cudaStream_t stream) {
  return Launch(dx, dx_stride, dy, dy_stride, table, tokens, seq_len, heads, head_dim, -1.0f,
                stream);
}

#define HT_INSTANTIATE(T)                                                                      \
  template cudaError_t RopeForward<T>(T*, long, const T*, long, const float*, int, int, int,   \
                                      int, cudaStream_t);                                      \
  template cudaError_t RopeBackward<T>(T*, long, const T*, long, const float*, int, int, int,  \
                                       int, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
