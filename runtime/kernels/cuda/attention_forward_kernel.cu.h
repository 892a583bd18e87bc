#pragma once
// Tiled causal GQA flash attention forward (FlashAttention-2 schedule):
// one block of 4 warps per (query block, head, batch); each warp owns MT
// m-tiles of 16 query rows (rows q0 + mt*64 + warp*16 ..+15), so every K/V
// fragment loaded from shared memory feeds MT tensor-core products. K/V
// blocks of 64 keys stream through double-buffered shared memory (cp.async)
// while S = Q K^T and O += P V run on tensor cores (mma.sync m16n8k16, fp32
// accumulators) with an online softmax in registers.
// A header so the host emulation test can compile the same kernel body.
#include <cmath>

#include "runtime/kernels/cuda/attention_kernels.h"
#include "runtime/kernels/cuda/attention_mma.cu.h"

namespace hypertrain::kernels::cuda::internal::fwd {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBc = 64;  // keys per step

// Query rows per block.
template <int MT>
constexpr int kBr = 16 * kWarps * MT;

template <int D, int MT>
constexpr int kFwdSmemBytes = (kBr<MT> + 4 * kBc) * kPitch<D> * 2;

template <typename T, int D, int MT>
__global__ void __launch_bounds__(kThreads)
    TiledForwardKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
                       const T* __restrict__ v, T* __restrict__ out, float* __restrict__ lse) {
  constexpr int BR = kBr<MT>;
  HT_DYNAMIC_SMEM(smem);
  T* s_q = reinterpret_cast<T*>(smem);
  T* s_k = s_q + BR * kPitch<D>;  // two buffers
  T* s_v = s_k + 2 * kBc * kPitch<D>;

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / g.group;
  const int q0 = qb * BR;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;

  const T* q_plane = q + int64_t(b) * g.seq * g.q_stride + int64_t(h) * D;
  const T* k_plane = k + int64_t(b) * g.seq * g.k_stride + int64_t(kvh) * D;
  const T* v_plane = v + int64_t(b) * g.seq * g.v_stride + int64_t(kvh) * D;
  const int kv_end = min(g.seq, q0 + BR);  // causal: keys [0, kv_end)
  const int n_kblocks = (kv_end + kBc - 1) / kBc;

  LoadTileAsync<BR, D, kThreads>(s_q, q_plane, g.q_stride, q0, g.seq, tid);
  LoadTileAsync<kBc, D, kThreads>(s_k, k_plane, g.k_stride, 0, g.seq, tid);
  LoadTileAsync<kBc, D, kThreads>(s_v, v_plane, g.v_stride, 0, g.seq, tid);
  CpAsyncCommit();

  const float sl2 = g.scale * 1.4426950408889634f;  // scores to log2 units
  // Tile rows of m-tile mt: first row of this warp's 16, and this thread's two.
  auto tile_row0 = [&](int mt) { return mt * 16 * kWarps + warp * 16; };
  // With one m-tile the warp's Q fragments stay in registers for the whole
  // kernel; with two they are reloaded per step (registers are the limit).
  uint32_t q_keep[MT == 1 ? D / 16 : 1][4];
  float o[MT][D / 8][4];
  float m_lo[MT], m_hi[MT];  // running max of raw scores
  float l_lo[MT], l_hi[MT];  // this thread's partial row sums
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    m_lo[mt] = m_hi[mt] = -INFINITY;
    l_lo[mt] = l_hi[mt] = 0.0f;
  }

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
    if constexpr (MT == 1) {
      if (j == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) LoadA<D>(q_keep[kk], s_q, tile_row0(0), kk * 16, lane);
      }
    }
    const T* kt = s_k + buf * kBc * kPitch<D>;
    const T* vt = s_v + buf * kBc * kPitch<D>;
    const int k0 = j * kBc;
    // m-tiles whose rows all precede this key block see none of it: skipping
    // them is exact (their max, sum and output would not change).
    bool live[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) live[mt] = k0 <= q0 + tile_row0(mt) + 15;

    float s[MT][kBc / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < kBc / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (MT == 1) {
#pragma unroll
          for (int r = 0; r < 4; ++r) qa[mt][r] = q_keep[kk][r];
        } else if (live[mt]) {
          LoadA<D>(qa[mt], s_q, tile_row0(mt), kk * 16, lane);
        }
      }
#pragma unroll
      for (int nn = 0; nn < kBc / 16; ++nn) {
        uint32_t bf[4];
        LoadBNK<D>(bf, kt, nn * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          Mma16816<T>(s[mt][2 * nn], qa[mt], bf[0], bf[1]);
          Mma16816<T>(s[mt][2 * nn + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (!live[mt]) continue;
      const int row_lo = q0 + tile_row0(mt) + gid, row_hi = row_lo + 8;
      if (k0 + kBc - 1 > q0 + tile_row0(mt)) {  // some key of this step lies past some row
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
          const int col = k0 + nt * 8 + 2 * tig;
          if (col > row_lo) s[mt][nt][0] = -INFINITY;
          if (col + 1 > row_lo) s[mt][nt][1] = -INFINITY;
          if (col > row_hi) s[mt][nt][2] = -INFINITY;
          if (col + 1 > row_hi) s[mt][nt][3] = -INFINITY;
        }
      }
      float mx_lo = m_lo[mt], mx_hi = m_hi[mt];
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[mt][nt][0], s[mt][nt][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[mt][nt][2], s[mt][nt][3]));
      }
      mx_lo = QuadMax(mx_lo);
      mx_hi = QuadMax(mx_hi);
      // A row with no visible key yet keeps max -inf; use 0 there so that
      // exp2(-inf - 0) = 0 instead of NaN.
      const float ms_lo = mx_lo == -INFINITY ? 0.0f : mx_lo * sl2;
      const float ms_hi = mx_hi == -INFINITY ? 0.0f : mx_hi * sl2;
      const float corr_lo = exp2f(m_lo[mt] * sl2 - ms_lo);
      const float corr_hi = exp2f(m_hi[mt] * sl2 - ms_hi);
      m_lo[mt] = mx_lo;
      m_hi[mt] = mx_hi;
      float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        s[mt][nt][0] = exp2f(fmaf(s[mt][nt][0], sl2, -ms_lo));
        s[mt][nt][1] = exp2f(fmaf(s[mt][nt][1], sl2, -ms_lo));
        s[mt][nt][2] = exp2f(fmaf(s[mt][nt][2], sl2, -ms_hi));
        s[mt][nt][3] = exp2f(fmaf(s[mt][nt][3], sl2, -ms_hi));
        sum_lo += s[mt][nt][0] + s[mt][nt][1];
        sum_hi += s[mt][nt][2] + s[mt][nt][3];
      }
      l_lo[mt] = l_lo[mt] * corr_lo + sum_lo;
      l_hi[mt] = l_hi[mt] * corr_hi + sum_hi;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[mt][dt][0] *= corr_lo;
        o[mt][dt][1] *= corr_lo;
        o[mt][dt][2] *= corr_hi;
        o[mt][dt][3] *= corr_hi;
      }
    }
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (live[mt]) PackA<T>(pa[mt], s[mt], kk);
      }
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t bf[4];
        LoadBKN<D>(bf, vt, dd * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          Mma16816<T>(o[mt][2 * dd], pa[mt], bf[0], bf[1]);
          Mma16816<T>(o[mt][2 * dd + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled two steps later
  }

  T* o_plane = out + int64_t(b) * g.seq * g.o_stride + int64_t(h) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const float l_lo_sum = QuadSum(l_lo[mt]), l_hi_sum = QuadSum(l_hi[mt]);
    StoreRows<T, D>(o_plane, g.o_stride, q0 + tile_row0(mt), g.seq, o[mt], 1.0f / l_lo_sum,
                    1.0f / l_hi_sum, lane);
    const int row_lo = q0 + tile_row0(mt) + gid, row_hi = row_lo + 8;
    if (lse != nullptr && tig == 0) {
      float* lse_row = lse + (int64_t(b) * g.n_heads + h) * g.seq;
      if (row_lo < g.seq) lse_row[row_lo] = m_lo[mt] * g.scale + logf(l_lo_sum);
      if (row_hi < g.seq) lse_row[row_hi] = m_hi[mt] * g.scale + logf(l_hi_sum);
    }
  }
}

}  // namespace hypertrain::kernels::cuda::internal::fwd
