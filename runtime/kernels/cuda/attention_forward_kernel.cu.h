#pragma once
// Tiled causal GQA flash attention forward (FlashAttention-2 schedule):
// one block of 4 warps per (64-query block, head, batch); each warp owns 16
// query rows; K/V blocks of 64 keys stream through double-buffered shared
// memory (cp.async) while S = Q K^T and O += P V run on tensor cores
// (mma.sync m16n8k16, fp32 accumulators) with an online softmax in registers.
// A header so the host emulation test can compile the same kernel body.
#include <cmath>

#include "runtime/kernels/cuda/attention_kernels.h"
#include "runtime/kernels/cuda/attention_mma.cu.h"

namespace hypertrain::kernels::cuda::internal::fwd {


constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBr = 16 * kWarps;  // query rows per block
constexpr int kBc = 64;           // keys per step

template <int D>
constexpr int kFwdSmemBytes = (kBr + 4 * kBc) * kPitch<D> * 2;

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    TiledForwardKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
                       const T* __restrict__ v, T* __restrict__ out, float* __restrict__ lse) {
  HT_DYNAMIC_SMEM(smem);
  T* s_q = reinterpret_cast<T*>(smem);
  T* s_k = s_q + kBr * kPitch<D>;  // two buffers
  T* s_v = s_k + 2 * kBc * kPitch<D>;

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / g.group;
  const int q0 = qb * kBr;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;

  const T* q_plane = q + int64_t(b) * g.seq * g.q_stride + int64_t(h) * D;
  const T* k_plane = k + int64_t(b) * g.seq * g.k_stride + int64_t(kvh) * D;
  const T* v_plane = v + int64_t(b) * g.seq * g.v_stride + int64_t(kvh) * D;
  const int kv_end = min(g.seq, q0 + kBr);  // causal: keys [0, kv_end)
  const int n_kblocks = (kv_end + kBc - 1) / kBc;

  LoadTileAsync<kBr, D, kThreads>(s_q, q_plane, g.q_stride, q0, g.seq, tid);
  LoadTileAsync<kBc, D, kThreads>(s_k, k_plane, g.k_stride, 0, g.seq, tid);
  LoadTileAsync<kBc, D, kThreads>(s_v, v_plane, g.v_stride, 0, g.seq, tid);
  CpAsyncCommit();

  const float sl2 = g.scale * 1.4426950408889634f;  // scores to log2 units
  const int row_lo = q0 + warp * 16 + gid, row_hi = row_lo + 8;
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY;  // running max of raw scores
  float l_lo = 0.0f, l_hi = 0.0f;            // this thread's partial row sums

  for (int j = 0; j < n_kblocks; ++j) {
    const int buf = j & 1;
    if (j + 1 < n_kblocks) {
      LoadTileAsync<kBc, D, kThreads>(s_k + (buf ^ 1) * kBc * kPitch<D>, k_plane, g.k_stride,
                                      (j + 1) * kBc, g.seq, tid);
      LoadTileAsync<kBc, D, kThreads>(s_v + (buf ^ 1) * kBc * kPitch<D>, v_plane, g.v_stride,
                                      (j + 1) * kBc, g.seq, tid);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();  // everything but the prefetch just issued has landed
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) LoadA<D>(qf[kk], s_q, warp * 16, kk * 16, lane);
    }
    const T* kt = s_k + buf * kBc * kPitch<D>;
    const T* vt = s_v + buf * kBc * kPitch<D>;

    float s[kBc / 8][4];
#pragma unroll
    for (int i = 0; i < kBc / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < kBc / 16; ++nn) {
        uint32_t bf[4];
        LoadBNK<D>(bf, kt, nn * 16, kk * 16, lane);
        Mma16816<T>(s[2 * nn], qf[kk], bf[0], bf[1]);
        Mma16816<T>(s[2 * nn + 1], qf[kk], bf[2], bf[3]);
      }
    }
    const int k0 = j * kBc;
    if (k0 + kBc - 1 > q0 + warp * 16) {  // some key of this step lies past some row
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        const int col = k0 + nt * 8 + 2 * tig;
        if (col > row_lo) s[nt][0] = -INFINITY;
        if (col + 1 > row_lo) s[nt][1] = -INFINITY;
        if (col > row_hi) s[nt][2] = -INFINITY;
        if (col + 1 > row_hi) s[nt][3] = -INFINITY;
      }
    }
    float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
      mx_lo = fmaxf(mx_lo, fmaxf(s[nt][0], s[nt][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(s[nt][2], s[nt][3]));
    }
    mx_lo = QuadMax(mx_lo);
    mx_hi = QuadMax(mx_hi);
    // A row with no visible key yet keeps max -inf; use 0 there so that
    // exp2(-inf - 0) = 0 instead of NaN.
    const float ms_lo = mx_lo == -INFINITY ? 0.0f : mx_lo * sl2;
    const float ms_hi = mx_hi == -INFINITY ? 0.0f : mx_hi * sl2;
    const float corr_lo = exp2f(m_lo * sl2 - ms_lo);
    const float corr_hi = exp2f(m_hi * sl2 - ms_hi);
    m_lo = mx_lo;
    m_hi = mx_hi;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
      s[nt][0] = exp2f(fmaf(s[nt][0], sl2, -ms_lo));
      s[nt][1] = exp2f(fmaf(s[nt][1], sl2, -ms_lo));
      s[nt][2] = exp2f(fmaf(s[nt][2], sl2, -ms_hi));
      s[nt][3] = exp2f(fmaf(s[nt][3], sl2, -ms_hi));
      sum_lo += s[nt][0] + s[nt][1];
      sum_hi += s[nt][2] + s[nt][3];
    }
    l_lo = l_lo * corr_lo + sum_lo;
    l_hi = l_hi * corr_hi + sum_hi;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= corr_lo;
      o[dt][1] *= corr_lo;
      o[dt][2] *= corr_hi;
      o[dt][3] *= corr_hi;
    }
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pa[4];
      PackA<T>(pa, s, kk);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t bf[4];
        LoadBKN<D>(bf, vt, dd * 16, kk * 16, lane);
        Mma16816<T>(o[2 * dd], pa, bf[0], bf[1]);
        Mma16816<T>(o[2 * dd + 1], pa, bf[2], bf[3]);
      }
    }
    __syncthreads();  // this buffer is refilled two steps later
  }

  l_lo = QuadSum(l_lo);
  l_hi = QuadSum(l_hi);
  T* o_plane = out + int64_t(b) * g.seq * g.o_stride + int64_t(h) * D;
  StoreRows<T, D>(o_plane, g.o_stride, q0 + warp * 16, g.seq, o, 1.0f / l_lo, 1.0f / l_hi, lane);
  if (lse != nullptr && tig == 0) {
    float* lse_row = lse + (int64_t(b) * g.n_heads + h) * g.seq;
    if (row_lo < g.seq) lse_row[row_lo] = m_lo * g.scale + logf(l_lo);
    if (row_hi < g.seq) lse_row[row_hi] = m_hi * g.scale + logf(l_hi);
  }
}

}  // namespace hypertrain::kernels::cuda::internal::fwd
