#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/naive_attention_f32_launch.h"

namespace hypertrain::kernels::cuda::naive_attention {
namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ const float* Row(const float* base, long stride, int b, int t, int S,
                                            int head, int D) {
  return base + (static_cast<size_t>(b) * S + t) * stride + static_cast<size_t>(head) * D;
}

// One warp per (b, t, h): online softmax over keys 0..t.
template <int P>  // P = D / 32 elements per lane
__global__ void ForwardKernel(Geometry g, const float* q, const float* k, const float* v,
                              float* out, float* lse) {
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (warp >= g.B * g.S * g.H) return;
  const int h = warp % g.H, t = (warp / g.H) % g.S, b = warp / (g.H * g.S);
  const int kvh = h / (g.H / g.KV);
  const float* qr = Row(q, g.qs, b, t, g.S, h, g.D);
  float qv[P], acc[P];
#pragma unroll
  for (int i = 0; i < P; ++i) qv[i] = qr[lane + 32 * i], acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int s = 0; s <= t; ++s) {
    const float* kr = Row(k, g.ks, b, s, g.S, kvh, g.D);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < P; ++i) dot += qv[i] * kr[lane + 32 * i];
    const float sc = WarpSum(dot) * g.scale;
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new), e = expf(sc - m_new);
    l = l * corr + e;
    const float* vr = Row(v, g.vs, b, s, g.S, kvh, g.D);
#pragma unroll
    for (int i = 0; i < P; ++i) acc[i] = acc[i] * corr + e * vr[lane + 32 * i];
    m = m_new;
  }
  float* orow = out + (static_cast<size_t>(b) * g.S + t) * g.os + static_cast<size_t>(h) * g.D;
#pragma unroll
  for (int i = 0; i < P; ++i) orow[lane + 32 * i] = acc[i] / l;
  if (lane == 0 && lse != nullptr) lse[(static_cast<size_t>(b) * g.H + h) * g.S + t] = m + logf(l);
}

// delta[b, h, t] = dot(dout, out) of that row.
template <int P>
__global__ void DeltaKernel(Geometry g, const float* out, const float* dout, float* delta) {
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (warp >= g.B * g.S * g.H) return;
  const int h = warp % g.H, t = (warp / g.H) % g.S, b = warp / (g.H * g.S);
  const float* o = Row(out, g.os, b, t, g.S, h, g.D);
  const float* d = Row(dout, g.os, b, t, g.S, h, g.D);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) s += o[lane + 32 * i] * d[lane + 32 * i];
  s = WarpSum(s);
  if (lane == 0) delta[(static_cast<size_t>(b) * g.H + h) * g.S + t] = s;
}

// One warp per query row: dq = scale * sum_s p * (dp - delta) * k_s.
template <int P>
__global__ void DqKernel(Geometry g, const float* q, const float* k, const float* v,
                         const float* dout, const float* lse, const float* delta, float* dq) {
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (warp >= g.B * g.S * g.H) return;
  const int h = warp % g.H, t = (warp / g.H) % g.S, b = warp / (g.H * g.S);
  const int kvh = h / (g.H / g.KV);
  const size_t stat = (static_cast<size_t>(b) * g.H + h) * g.S + t;
  const float L = lse[stat], Dl = delta[stat];
  const float* qr = Row(q, g.qs, b, t, g.S, h, g.D);
  const float* dr = Row(dout, g.os, b, t, g.S, h, g.D);
  float qv[P], dv_[P], acc[P];
#pragma unroll
  for (int i = 0; i < P; ++i) qv[i] = qr[lane + 32 * i], dv_[i] = dr[lane + 32 * i], acc[i] = 0.0f;
  for (int s = 0; s <= t; ++s) {
    const float* kr = Row(k, g.ks, b, s, g.S, kvh, g.D);
    const float* vr = Row(v, g.vs, b, s, g.S, kvh, g.D);
    float sc = 0.0f, dp = 0.0f;
#pragma unroll
    for (int i = 0; i < P; ++i) sc += qv[i] * kr[lane + 32 * i], dp += dv_[i] * vr[lane + 32 * i];
    sc = WarpSum(sc);
    dp = WarpSum(dp);
    const float p = expf(sc * g.scale - L);
    const float ds = p * (dp - Dl) * g.scale;
#pragma unroll
    for (int i = 0; i < P; ++i) acc[i] += ds * kr[lane + 32 * i];
  }
  float* o = dq + (static_cast<size_t>(b) * g.S + t) * g.qs + static_cast<size_t>(h) * g.D;
#pragma unroll
  for (int i = 0; i < P; ++i) o[lane + 32 * i] = acc[i];
}

// One warp per key row (b, s, kv head): sums over its query heads (fixed
// order) and queries t >= s.
template <int P>
__global__ void DkDvKernel(Geometry g, const float* q, const float* k, const float* v,
                           const float* dout, const float* lse, const float* delta, float* dk,
                           float* dv) {
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (warp >= g.B * g.S * g.KV) return;
  const int kvh = warp % g.KV, s = (warp / g.KV) % g.S, b = warp / (g.KV * g.S);
  const int group = g.H / g.KV;
  const float* kr = Row(k, g.ks, b, s, g.S, kvh, g.D);
  const float* vr = Row(v, g.vs, b, s, g.S, kvh, g.D);
  float kv[P], vv[P], dka[P], dva[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    kv[i] = kr[lane + 32 * i], vv[i] = vr[lane + 32 * i];
    dka[i] = 0.0f, dva[i] = 0.0f;
  }
  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int t = s; t < g.S; ++t) {
      const float* qr = Row(q, g.qs, b, t, g.S, h, g.D);
      const float* dr = Row(dout, g.os, b, t, g.S, h, g.D);
      float sc = 0.0f, dp = 0.0f;
#pragma unroll
      for (int i = 0; i < P; ++i) sc += qr[lane + 32 * i] * kv[i], dp += dr[lane + 32 * i] * vv[i];
      sc = WarpSum(sc);
      dp = WarpSum(dp);
      const size_t stat = (static_cast<size_t>(b) * g.H + h) * g.S + t;
      const float p = expf(sc * g.scale - lse[stat]);
      const float ds = p * (dp - delta[stat]) * g.scale;
#pragma unroll
      for (int i = 0; i < P; ++i) {
        dva[i] += p * dr[lane + 32 * i];
        dka[i] += ds * qr[lane + 32 * i];
      }
    }
  }
  float* dko = dk + (static_cast<size_t>(b) * g.S + s) * g.ks + static_cast<size_t>(kvh) * g.D;
  float* dvo = dv + (static_cast<size_t>(b) * g.S + s) * g.vs + static_cast<size_t>(kvh) * g.D;
#pragma unroll
  for (int i = 0; i < P; ++i) dko[lane + 32 * i] = dka[i], dvo[lane + 32 * i] = dva[i];
}

template <template <int> class K, typename... Args>
cudaError_t LaunchByP(int D, unsigned blocks, cudaStream_t stream, Args... args) {
  switch (D / 32) {
    case 1: K<1>::Launch(blocks, stream, args...); break;
    case 2: K<2>::Launch(blocks, stream, args...); break;
    case 3: K<3>::Launch(blocks, stream, args...); break;
    case 4: K<4>::Launch(blocks, stream, args...); break;
    case 5: K<5>::Launch(blocks, stream, args...); break;
    case 6: K<6>::Launch(blocks, stream, args...); break;
    case 7: K<7>::Launch(blocks, stream, args...); break;
    case 8: K<8>::Launch(blocks, stream, args...); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

#define HT_KERNEL_LAUNCHER(Name, Kernel)                                     \
  template <int P>                                                           \
  struct Name {                                                              \
    template <typename... A>                                                 \
    static void Launch(unsigned blocks, cudaStream_t s, A... a) {            \
      Kernel<P><<<blocks, kWarps * 32, 0, s>>>(a...);                        \
    }                                                                        \
  };
HT_KERNEL_LAUNCHER(FwdL, ForwardKernel)
HT_KERNEL_LAUNCHER(DeltaL, DeltaKernel)
HT_KERNEL_LAUNCHER(DqL, DqKernel)
HT_KERNEL_LAUNCHER(DkDvL, DkDvKernel)
#undef HT_KERNEL_LAUNCHER

}  // namespace

cudaError_t Forward(const Geometry& g, const float* q, const float* k, const float* v, float* out,
                    float* lse, cudaStream_t stream) {
  const unsigned blocks = CeilDiv(static_cast<size_t>(g.B) * g.S * g.H, kWarps);
  return LaunchByP<FwdL>(g.D, blocks, stream, g, q, k, v, out, lse);
}

cudaError_t Backward(const Geometry& g, const float* q, const float* k, const float* v,
                     const float* out, const float* dout, const float* lse, float* dq, float* dk,
                     float* dv, float* delta, cudaStream_t stream) {
  const unsigned rows = CeilDiv(static_cast<size_t>(g.B) * g.S * g.H, kWarps);
  cudaError_t e = LaunchByP<DeltaL>(g.D, rows, stream, g, out, dout, delta);
  if (e != cudaSuccess) return e;
  e = LaunchByP<DqL>(g.D, rows, stream, g, q, k, v, dout, lse, static_cast<const float*>(delta), dq);
  if (e != cudaSuccess) return e;
  const unsigned krows = CeilDiv(static_cast<size_t>(g.B) * g.S * g.KV, kWarps);
  return LaunchByP<DkDvL>(g.D, krows, stream, g, q, k, v, dout, lse,
                          static_cast<const float*>(delta), dk, dv);
}

}  // namespace hypertrain::kernels::cuda::naive_attention
