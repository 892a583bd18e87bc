// Reference-grade CUDA attention: one warp per row, scalar fp32 math.
// Slow (no tensor cores, no tiling) but short enough to check by reading; it is
// the fallback path and a second device-side oracle for the tiled kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "runtime/kernels/cuda/attention_kernels.h"

namespace hypertrain::kernels::cuda::internal {
namespace {

template <typename T>
__device__ __forceinline__ float ToF(T x);
template <>
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float ToF(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float ToF(float x) { return x; }
template <typename T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 FromF(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half FromF(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ float FromF(float x) { return x; }

__device__ __forceinline__ float WarpSum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Each lane owns head_dim/32 (<= 4) consecutive-by-stride elements: d = lane + 32*i.
constexpr int kMaxPerLane = 4;

// One warp per (b, h, t). Online softmax over s <= t.
template <typename T>
__global__ void SimpleForwardKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
                                    const T* __restrict__ v, T* __restrict__ out,
                                    float* __restrict__ lse) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= int64_t(g.batch) * g.n_heads * g.seq) return;
  const int t = int(row % g.seq);
  const int h = int((row / g.seq) % g.n_heads);
  const int b = int(row / (int64_t(g.seq) * g.n_heads));
  const int kvh = h / g.group;
  const int per_lane = g.head_dim / 32;
  float qr[kMaxPerLane], acc[kMaxPerLane];
  const T* qp = q + (int64_t(b) * g.seq + t) * g.q_stride + int64_t(h) * g.head_dim;
  for (int i = 0; i < kMaxPerLane; ++i) {
    qr[i] = i < per_lane ? ToF(qp[lane + 32 * i]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int s = 0; s <= t; ++s) {
    const T* kp = k + (int64_t(b) * g.seq + s) * g.k_stride + int64_t(kvh) * g.head_dim;
    const T* vp = v + (int64_t(b) * g.seq + s) * g.v_stride + int64_t(kvh) * g.head_dim;
    float dot = 0.0f;
    for (int i = 0; i < per_lane; ++i) dot += qr[i] * ToF(kp[lane + 32 * i]);
    const float x = WarpSum(dot) * g.scale;
    const float m_new = fmaxf(m, x);
    const float corr = expf(m - m_new);  // exp(-inf) = 0 on the first key
    const float p = expf(x - m_new);
    l = l * corr + p;
    for (int i = 0; i < per_lane; ++i) acc[i] = acc[i] * corr + p * ToF(vp[lane + 32 * i]);
    m = m_new;
  }
  T* op = out + (int64_t(b) * g.seq + t) * g.o_stride + int64_t(h) * g.head_dim;
  const float inv_l = 1.0f / l;
  for (int i = 0; i < per_lane; ++i) op[lane + 32 * i] = FromF<T>(acc[i] * inv_l);
  if (lse != nullptr && lane == 0) lse[(int64_t(b) * g.n_heads + h) * g.seq + t] = m + logf(l);
}

// delta[b,h,t] = sum_d dout * out (in fp32 of the stored bf16/fp16 values).
template <typename T>
__global__ void SimpleDeltaKernel(Dims g, const T* __restrict__ out, const T* __restrict__ dout,
                                  float* __restrict__ delta) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= int64_t(g.batch) * g.n_heads * g.seq) return;
  const int t = int(row % g.seq);
  const int h = int((row / g.seq) % g.n_heads);
  const int b = int(row / (int64_t(g.seq) * g.n_heads));
  const int64_t off = (int64_t(b) * g.seq + t) * g.o_stride + int64_t(h) * g.head_dim;
  float sum = 0.0f;
  for (int d = lane; d < g.head_dim; d += 32) sum += ToF(out[off + d]) * ToF(dout[off + d]);
  sum = WarpSum(sum);
  if (lane == 0) delta[(int64_t(b) * g.n_heads + h) * g.seq + t] = sum;
}

// One warp per query row (b, h, t): dq = scale * sum_{s<=t} ds_s k_s.
template <typename T>
__global__ void SimpleDqKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
                               const T* __restrict__ v, const T* __restrict__ dout,
                               const float* __restrict__ lse, const float* __restrict__ delta,
                               T* __restrict__ dq) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= int64_t(g.batch) * g.n_heads * g.seq) return;
  const int t = int(row % g.seq);
  const int h = int((row / g.seq) % g.n_heads);
  const int b = int(row / (int64_t(g.seq) * g.n_heads));
  const int kvh = h / g.group;
  const int per_lane = g.head_dim / 32;
  const T* qp = q + (int64_t(b) * g.seq + t) * g.q_stride + int64_t(h) * g.head_dim;
  const T* dop = dout + (int64_t(b) * g.seq + t) * g.o_stride + int64_t(h) * g.head_dim;
  float qr[kMaxPerLane], dor[kMaxPerLane], acc[kMaxPerLane];
  for (int i = 0; i < kMaxPerLane; ++i) {
    qr[i] = i < per_lane ? ToF(qp[lane + 32 * i]) : 0.0f;
    dor[i] = i < per_lane ? ToF(dop[lane + 32 * i]) : 0.0f;
    acc[i] = 0.0f;
  }
  const int64_t stat = (int64_t(b) * g.n_heads + h) * g.seq + t;
  const float row_lse = lse[stat], row_delta = delta[stat];
  for (int s = 0; s <= t; ++s) {
    const T* kp = k + (int64_t(b) * g.seq + s) * g.k_stride + int64_t(kvh) * g.head_dim;
    const T* vp = v + (int64_t(b) * g.seq + s) * g.v_stride + int64_t(kvh) * g.head_dim;
    float qk = 0.0f, dov = 0.0f;
    for (int i = 0; i < per_lane; ++i) {
      qk += qr[i] * ToF(kp[lane + 32 * i]);
      dov += dor[i] * ToF(vp[lane + 32 * i]);
    }
    qk = WarpSum(qk);
    dov = WarpSum(dov);
    const float p = expf(qk * g.scale - row_lse);
    const float ds = p * (dov - row_delta);
    for (int i = 0; i < per_lane; ++i) acc[i] += ds * ToF(kp[lane + 32 * i]);
  }
  T* dqp = dq + (int64_t(b) * g.seq + t) * g.q_stride + int64_t(h) * g.head_dim;
  for (int i = 0; i < per_lane; ++i) dqp[lane + 32 * i] = FromF<T>(acc[i] * g.scale);
}

// One warp per key row (b, kvh, s): sums over the group's query heads (in
// order) and over t >= s.
template <typename T>
__global__ void SimpleDkDvKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
                                 const T* __restrict__ v, const T* __restrict__ dout,
                                 const float* __restrict__ lse, const float* __restrict__ delta,
                                 T* __restrict__ dk, T* __restrict__ dv) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= int64_t(g.batch) * g.n_kv_heads * g.seq) return;
  const int s = int(row % g.seq);
  const int kvh = int((row / g.seq) % g.n_kv_heads);
  const int b = int(row / (int64_t(g.seq) * g.n_kv_heads));
  const int per_lane = g.head_dim / 32;
  const T* kp = k + (int64_t(b) * g.seq + s) * g.k_stride + int64_t(kvh) * g.head_dim;
  const T* vp = v + (int64_t(b) * g.seq + s) * g.v_stride + int64_t(kvh) * g.head_dim;
  float kr[kMaxPerLane], vr[kMaxPerLane], dk_acc[kMaxPerLane], dv_acc[kMaxPerLane];
  for (int i = 0; i < kMaxPerLane; ++i) {
    kr[i] = i < per_lane ? ToF(kp[lane + 32 * i]) : 0.0f;
    vr[i] = i < per_lane ? ToF(vp[lane + 32 * i]) : 0.0f;
    dk_acc[i] = dv_acc[i] = 0.0f;
  }
  for (int h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
    for (int t = s; t < g.seq; ++t) {
      const T* qp = q + (int64_t(b) * g.seq + t) * g.q_stride + int64_t(h) * g.head_dim;
      const T* dop = dout + (int64_t(b) * g.seq + t) * g.o_stride + int64_t(h) * g.head_dim;
      float qk = 0.0f, dov = 0.0f;
      for (int i = 0; i < per_lane; ++i) {
        qk += ToF(qp[lane + 32 * i]) * kr[i];
        dov += ToF(dop[lane + 32 * i]) * vr[i];
      }
      qk = WarpSum(qk);
      dov = WarpSum(dov);
      const int64_t stat = (int64_t(b) * g.n_heads + h) * g.seq + t;
      const float p = expf(qk * g.scale - lse[stat]);
      const float ds = p * (dov - delta[stat]);
      for (int i = 0; i < per_lane; ++i) {
        dv_acc[i] += p * ToF(dop[lane + 32 * i]);
        dk_acc[i] += ds * ToF(qp[lane + 32 * i]);
      }
    }
  }
  T* dkp = dk + (int64_t(b) * g.seq + s) * g.k_stride + int64_t(kvh) * g.head_dim;
  T* dvp = dv + (int64_t(b) * g.seq + s) * g.v_stride + int64_t(kvh) * g.head_dim;
  for (int i = 0; i < per_lane; ++i) {
    dkp[lane + 32 * i] = FromF<T>(dk_acc[i] * g.scale);
    dvp[lane + 32 * i] = FromF<T>(dv_acc[i]);
  }
}

constexpr int kWarpsPerBlock = 4;

unsigned BlocksFor(int64_t rows) {
  return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

template <typename T>
void LaunchForward(const Dims& g, const void* q, const void* k, const void* v, void* out,
                   float* lse, cudaStream_t stream) {
  const int64_t rows = int64_t(g.batch) * g.n_heads * g.seq;
  SimpleForwardKernel<T><<<BlocksFor(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      g, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<T*>(out), lse);
}

template <typename T>
void LaunchBackward(const Dims& g, const void* q, const void* k, const void* v, const void* out,
                    const void* dout, const float* lse, float* delta, void* dq, void* dk, void* dv,
                    cudaStream_t stream) {
  const int64_t q_rows = int64_t(g.batch) * g.n_heads * g.seq;
  const int64_t kv_rows = int64_t(g.batch) * g.n_kv_heads * g.seq;
  const T* qt = static_cast<const T*>(q);
  const T* kt = static_cast<const T*>(k);
  const T* vt = static_cast<const T*>(v);
  const T* dot = static_cast<const T*>(dout);
  SimpleDeltaKernel<T><<<BlocksFor(q_rows), 32 * kWarpsPerBlock, 0, stream>>>(
      g, static_cast<const T*>(out), dot, delta);
  SimpleDqKernel<T><<<BlocksFor(q_rows), 32 * kWarpsPerBlock, 0, stream>>>(
      g, qt, kt, vt, dot, lse, delta, static_cast<T*>(dq));
  SimpleDkDvKernel<T><<<BlocksFor(kv_rows), 32 * kWarpsPerBlock, 0, stream>>>(
      g, qt, kt, vt, dot, lse, delta, static_cast<T*>(dk), static_cast<T*>(dv));
}

}  // namespace

cudaError_t SimpleAttentionForward(const Dims& g, const void* q, const void* k, const void* v,
                                   void* out, float* lse, cudaStream_t stream) {
  if (g.fp32) {
    LaunchForward<float>(g, q, k, v, out, lse, stream);
  } else if (g.bf16) {
    LaunchForward<__nv_bfloat16>(g, q, k, v, out, lse, stream);
  } else {
    LaunchForward<__half>(g, q, k, v, out, lse, stream);
  }
  return cudaGetLastError();
}

cudaError_t SimpleAttentionBackward(const Dims& g, const void* q, const void* k, const void* v,
                                    const void* out, const void* dout, const float* lse,
                                    float* delta, void* dq, void* dk, void* dv,
                                    cudaStream_t stream) {
  if (g.fp32) {
    LaunchBackward<float>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  } else if (g.bf16) {
    LaunchBackward<__nv_bfloat16>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  } else {
    LaunchBackward<__half>(g, q, k, v, out, dout, lse, delta, dq, dk, dv, stream);
  }
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda::internal
