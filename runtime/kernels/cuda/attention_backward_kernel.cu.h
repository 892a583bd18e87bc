#pragma once
// Tiled causal GQA flash attention backward, deterministic (no atomics):
//  1. delta[b,h,t] = sum_d dout * out                       (DeltaKernel)
//  2. per (64-key block, kv head, batch): dK, dV accumulated in registers
//     over every query head of the group and every query block at or after
//     the key block, in a fixed order                     (DkDvKernel)
//  3. per (64-query block, head, batch): dQ over the key blocks at or before
//     the query block                                     (DqKernel)
// P is recomputed from lse; dS = P * (dP - delta). Compared with FA2's
// atomic dQ this recomputes S and dP once more (7 instead of 5 products per
// tile) in exchange for bitwise-reproducible gradients.
// A header so the host emulation test can compile the same kernel bodies.
#include <cmath>

#include "runtime/kernels/cuda/attention_kernels.h"
#include "runtime/kernels/cuda/attention_mma.cu.h"

namespace hypertrain::kernels::cuda::internal::bwd {


constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsPerBlock = 16 * kWarps;  // rows a block owns (keys or queries)
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ float2 ToFloat2(uint32_t bits);
template <>
__device__ __forceinline__ float2 ToFloat2<__nv_bfloat16>(uint32_t bits) {
  __nv_bfloat162_raw raw;
  raw.x = static_cast<unsigned short>(bits & 0xFFFFu);
  raw.y = static_cast<unsigned short>(bits >> 16);
  return __bfloat1622float2(__nv_bfloat162(raw));
}
template <>
__device__ __forceinline__ float2 ToFloat2<__half>(uint32_t bits) {
  __half2_raw raw;
  raw.x = static_cast<unsigned short>(bits & 0xFFFFu);
  raw.y = static_cast<unsigned short>(bits >> 16);
  return __half22float2(__half2(raw));
}

// D/8 threads per row, each dotting 8 elements (one 16-byte load per tensor).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    DeltaKernel(Dims g, const T* __restrict__ out, const T* __restrict__ dout,
                float* __restrict__ delta) {
  constexpr int kLanesPerRow = D / 8;
  const int64_t row = int64_t(blockIdx.x) * (kThreads / kLanesPerRow) + threadIdx.x / kLanesPerRow;
  const int part = threadIdx.x % kLanesPerRow;
  const int64_t rows = int64_t(g.batch) * g.seq * g.n_heads;
  float sum = 0.0f;
  int64_t bt = 0;
  int h = 0;
  if (row < rows) {
    bt = row / g.n_heads;  // rows enumerate (b, t, h) in memory order
    h = int(row % g.n_heads);
    const int64_t off = bt * g.o_stride + int64_t(h) * D + part * 8;
    const uint4 o4 = *reinterpret_cast<const uint4*>(out + off);
    const uint4 d4 = *reinterpret_cast<const uint4*>(dout + off);
    const uint32_t ow[4] = {o4.x, o4.y, o4.z, o4.w}, dw[4] = {d4.x, d4.y, d4.z, d4.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 a = ToFloat2<T>(ow[i]), c = ToFloat2<T>(dw[i]);
      sum = fmaf(a.x, c.x, fmaf(a.y, c.y, sum));
    }
  }
#pragma unroll
  for (int o = kLanesPerRow / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (row < rows && part == 0) {
    const int64_t b = bt / g.seq, t = bt % g.seq;
    delta[(b * g.n_heads + h) * g.seq + t] = sum;
  }
}

// ---- dK, dV ---------------------------------------------------------------
// Query block size per step: the key-major products keep dK and dV (2 x D/8 x 4
// floats) plus S^T and dP^T (2 x kBq/8 x 4) in registers.
template <int D>
constexpr int kBq = D <= 64 ? 64 : 32;

template <int D>
constexpr int kDkDvSmemBytes =
    (2 * kRowsPerBlock + 4 * kBq<D>) * kPitch<D> * 2 + 2 * 2 * kBq<D> * int(sizeof(float));

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    DkDvKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k,
               const T* __restrict__ v, const T* __restrict__ dout,
               const float* __restrict__ lse, const float* __restrict__ delta,
               T* __restrict__ dk, T* __restrict__ dv) {
  constexpr int BQ = kBq<D>;
  HT_DYNAMIC_SMEM(smem);
  T* s_k = reinterpret_cast<T*>(smem);
  T* s_v = s_k + kRowsPerBlock * kPitch<D>;
  T* s_q = s_v + kRowsPerBlock * kPitch<D>;  // two buffers
  T* s_do = s_q + 2 * BQ * kPitch<D>;        // two buffers
  float* s_lse = reinterpret_cast<float*>(s_do + 2 * BQ * kPitch<D>);  // [2][BQ], log2 units
  float* s_delta = s_lse + 2 * BQ;                                     // [2][BQ]

  const int kb = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int k0 = kb * kRowsPerBlock;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int key_lo = k0 + warp * 16 + gid, key_hi = key_lo + 8;

  const T* k_plane = k + int64_t(b) * g.seq * g.k_stride + int64_t(kvh) * D;
  const T* v_plane = v + int64_t(b) * g.seq * g.v_stride + int64_t(kvh) * D;
  const int first_qb = k0 / BQ;  // causal: queries >= k0
  const int n_qb = (g.seq + BQ - 1) / BQ - first_qb;
  const int steps = g.group * n_qb;

  // Step s covers query head kvh*group + s / n_qb, query block first_qb + s % n_qb.
  auto load_step = [&](int step, int buf) {
    const int h = kvh * g.group + step / n_qb;
    const int q_start = (first_qb + step % n_qb) * BQ;
    const T* q_plane = q + int64_t(b) * g.seq * g.q_stride + int64_t(h) * D;
    const T* do_plane = dout + int64_t(b) * g.seq * g.o_stride + int64_t(h) * D;
    LoadTileAsync<BQ, D, kThreads>(s_q + buf * BQ * kPitch<D>, q_plane, g.q_stride, q_start,
                                   g.seq, tid);
    LoadTileAsync<BQ, D, kThreads>(s_do + buf * BQ * kPitch<D>, do_plane, g.o_stride, q_start,
                                   g.seq, tid);
    if (tid < BQ) {
      const int t = q_start + tid;
      const int64_t stat = (int64_t(b) * g.n_heads + h) * g.seq + t;
      s_lse[buf * BQ + tid] = t < g.seq ? lse[stat] * kLog2e : 0.0f;
      s_delta[buf * BQ + tid] = t < g.seq ? delta[stat] : 0.0f;
    }
  };

  LoadTileAsync<kRowsPerBlock, D, kThreads>(s_k, k_plane, g.k_stride, k0, g.seq, tid);
  LoadTileAsync<kRowsPerBlock, D, kThreads>(s_v, v_plane, g.v_stride, k0, g.seq, tid);
  if (steps > 0) load_step(0, 0);
  CpAsyncCommit();

  const float sl2 = g.scale * kLog2e;
  float acc_dk[D / 8][4], acc_dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dk[i][e] = acc_dv[i][e] = 0.0f;
  }

  for (int step = 0; step < steps; ++step) {
    const int buf = step & 1;
    if (step + 1 < steps) load_step(step + 1, buf ^ 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const T* qt = s_q + buf * BQ * kPitch<D>;
    const T* dot = s_do + buf * BQ * kPitch<D>;
    const float* lse_t = s_lse + buf * BQ;
    const float* delta_t = s_delta + buf * BQ;
    const int q_start = (first_qb + step % n_qb) * BQ;

    // S^T (16 keys x BQ queries per warp) = K Q^T; dP^T = V dO^T.
    float st[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
    for (int i = 0; i < BQ / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) st[i][e] = dpt[i][e] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      LoadA<D>(ka, s_k, warp * 16, kk * 16, lane);
      LoadA<D>(va, s_v, warp * 16, kk * 16, lane);
#pragma unroll
      for (int nn = 0; nn < BQ / 16; ++nn) {
        uint32_t bq[4], bd[4];
        LoadBNK<D>(bq, qt, nn * 16, kk * 16, lane);
        LoadBNK<D>(bd, dot, nn * 16, kk * 16, lane);
        Mma16816<T>(st[2 * nn], ka, bq[0], bq[1]);
        Mma16816<T>(st[2 * nn + 1], ka, bq[2], bq[3]);
        Mma16816<T>(dpt[2 * nn], va, bd[0], bd[1]);
        Mma16816<T>(dpt[2 * nn + 1], va, bd[2], bd[3]);
      }
    }
    // P^T = exp(scale S^T - lse[query]), zero where query < key or query >= seq;
    // dS^T = P^T (dP^T - delta[query]) (dpt becomes dS^T).
    const bool need_mask = q_start < k0 + kRowsPerBlock || q_start + BQ > g.seq;
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = nt * 8 + 2 * tig + (e & 1);  // query column within the step
        const int key = e < 2 ? key_lo : key_hi;
        float p = exp2f(fmaf(st[nt][e], sl2, -lse_t[qc]));
        if (need_mask && (q_start + qc < key || q_start + qc >= g.seq)) p = 0.0f;
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - delta_t[qc]);
      }
    }
    // dV += P^T dO;  dK += dS^T Q  (query index is the reduction dimension).
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
      uint32_t pa[4], dsa[4];
      PackA<T>(pa, st, kk);
      PackA<T>(dsa, dpt, kk);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t bdo[4], bq[4];
        LoadBKN<D>(bdo, dot, dd * 16, kk * 16, lane);
        LoadBKN<D>(bq, qt, dd * 16, kk * 16, lane);
        Mma16816<T>(acc_dv[2 * dd], pa, bdo[0], bdo[1]);
        Mma16816<T>(acc_dv[2 * dd + 1], pa, bdo[2], bdo[3]);
        Mma16816<T>(acc_dk[2 * dd], dsa, bq[0], bq[1]);
        Mma16816<T>(acc_dk[2 * dd + 1], dsa, bq[2], bq[3]);
      }
    }
    __syncthreads();  // this buffer is refilled two steps later
  }
  CpAsyncWait<0>();

  T* dk_plane = dk + int64_t(b) * g.seq * g.k_stride + int64_t(kvh) * D;
  T* dv_plane = dv + int64_t(b) * g.seq * g.v_stride + int64_t(kvh) * D;
  StoreRows<T, D>(dk_plane, g.k_stride, k0 + warp * 16, g.seq, acc_dk, g.scale, g.scale, lane);
  StoreRows<T, D>(dv_plane, g.v_stride, k0 + warp * 16, g.seq, acc_dv, 1.0f, 1.0f, lane);
}

// ---- dQ -------------------------------------------------------------------
// BK = keys per step: 64, or 32 where a block cannot get the shared memory
// (sm_86 allows 99 KB per block; D = 128 with BK = 64 needs 102 KB).
template <int D, int BK>
constexpr int kDqSmemBytes = (2 * kRowsPerBlock + 4 * BK) * kPitch<D> * 2;

template <typename T, int D, int BK>
__global__ void __launch_bounds__(kThreads)
    DqKernel(Dims g, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             const T* __restrict__ dout, const float* __restrict__ lse,
             const float* __restrict__ delta, T* __restrict__ dq) {
  HT_DYNAMIC_SMEM(smem);
  T* s_q = reinterpret_cast<T*>(smem);
  T* s_do = s_q + kRowsPerBlock * kPitch<D>;
  T* s_k = s_do + kRowsPerBlock * kPitch<D>;  // two buffers
  T* s_v = s_k + 2 * BK * kPitch<D>;         // two buffers

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / g.group;
  const int q0 = qb * kRowsPerBlock;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int row_lo = q0 + warp * 16 + gid, row_hi = row_lo + 8;

  const T* q_plane = q + int64_t(b) * g.seq * g.q_stride + int64_t(h) * D;
  const T* do_plane = dout + int64_t(b) * g.seq * g.o_stride + int64_t(h) * D;
  const T* k_plane = k + int64_t(b) * g.seq * g.k_stride + int64_t(kvh) * D;
  const T* v_plane = v + int64_t(b) * g.seq * g.v_stride + int64_t(kvh) * D;
  const int kv_end = min(g.seq, q0 + kRowsPerBlock);
  const int n_kblocks = (kv_end + BK - 1) / BK;

  LoadTileAsync<kRowsPerBlock, D, kThreads>(s_q, q_plane, g.q_stride, q0, g.seq, tid);
  LoadTileAsync<kRowsPerBlock, D, kThreads>(s_do, do_plane, g.o_stride, q0, g.seq, tid);
  LoadTileAsync<BK, D, kThreads>(s_k, k_plane, g.k_stride, 0, g.seq, tid);
  LoadTileAsync<BK, D, kThreads>(s_v, v_plane, g.v_stride, 0, g.seq, tid);
  CpAsyncCommit();

  const float sl2 = g.scale * kLog2e;
  const float* stat = lse + (int64_t(b) * g.n_heads + h) * g.seq;
  const float* dstat = delta + (int64_t(b) * g.n_heads + h) * g.seq;
  const float lse_lo = row_lo < g.seq ? stat[row_lo] * kLog2e : 0.0f;
  const float lse_hi = row_hi < g.seq ? stat[row_hi] * kLog2e : 0.0f;
  const float dl_lo = row_lo < g.seq ? dstat[row_lo] : 0.0f;
  const float dl_hi = row_hi < g.seq ? dstat[row_hi] : 0.0f;

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

  for (int j = 0; j < n_kblocks; ++j) {
    const int buf = j & 1;
    if (j + 1 < n_kblocks) {
      LoadTileAsync<BK, D, kThreads>(s_k + (buf ^ 1) * BK * kPitch<D>, k_plane, g.k_stride,
                                      (j + 1) * BK, g.seq, tid);
      LoadTileAsync<BK, D, kThreads>(s_v + (buf ^ 1) * BK * kPitch<D>, v_plane, g.v_stride,
                                      (j + 1) * BK, g.seq, tid);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const T* kt = s_k + buf * BK * kPitch<D>;
    const T* vt = s_v + buf * BK * kPitch<D>;

    float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
    for (int i = 0; i < BK / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = dp[i][e] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], da[4];
      LoadA<D>(qa, s_q, warp * 16, kk * 16, lane);
      LoadA<D>(da, s_do, warp * 16, kk * 16, lane);
#pragma unroll
      for (int nn = 0; nn < BK / 16; ++nn) {
        uint32_t bk[4], bv[4];
        LoadBNK<D>(bk, kt, nn * 16, kk * 16, lane);
        LoadBNK<D>(bv, vt, nn * 16, kk * 16, lane);
        Mma16816<T>(s[2 * nn], qa, bk[0], bk[1]);
        Mma16816<T>(s[2 * nn + 1], qa, bk[2], bk[3]);
        Mma16816<T>(dp[2 * nn], da, bv[0], bv[1]);
        Mma16816<T>(dp[2 * nn + 1], da, bv[2], bv[3]);
      }
    }
    const int k0 = j * BK;
    const bool need_mask = k0 + BK - 1 > q0 + warp * 16;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + 2 * tig + (e & 1);
        const int row = e < 2 ? row_lo : row_hi;
        float p = exp2f(fmaf(s[nt][e], sl2, -(e < 2 ? lse_lo : lse_hi)));
        if (need_mask && key > row) p = 0.0f;
        dp[nt][e] = p * (dp[nt][e] - (e < 2 ? dl_lo : dl_hi));  // dS
      }
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t dsa[4];
      PackA<T>(dsa, dp, kk);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t bk[4];
        LoadBKN<D>(bk, kt, dd * 16, kk * 16, lane);
        Mma16816<T>(acc[2 * dd], dsa, bk[0], bk[1]);
        Mma16816<T>(acc[2 * dd + 1], dsa, bk[2], bk[3]);
      }
    }
    __syncthreads();
  }

  T* dq_plane = dq + int64_t(b) * g.seq * g.q_stride + int64_t(h) * D;
  StoreRows<T, D>(dq_plane, g.q_stride, q0 + warp * 16, g.seq, acc, g.scale, g.scale, lane);
}

}  // namespace hypertrain::kernels::cuda::internal::bwd
