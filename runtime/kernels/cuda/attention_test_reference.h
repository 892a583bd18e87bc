#pragma once
// fp64 O(T^2) causal GQA attention for the CUDA parity tests (same signature
// and conventions as the CPU backend's ops: [B, T, heads, D] rows, lse
// [B, H, T] natural log, scale 1/sqrt(D), backward adds into gradients).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hypertrain::kernels::cuda::test_reference {

inline void AttentionForward(double* out, double* lse, const double* q, const double* k,
                             const double* v, int64_t B, int64_t T, int64_t H, int64_t KV,
                             int64_t D) {
  const double scale = 1.0 / std::sqrt(double(D));
  const int64_t group = H / KV;
  std::vector<double> s(T);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const double* qi = q + ((b * T + i) * H + h) * D;
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const double* kj = k + ((b * T + j) * KV + g) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (int64_t j = 0; j <= i; ++j) l += std::exp(s[j] - m);
        double* oi = out + ((b * T + i) * H + h) * D;
        std::fill(oi, oi + D, 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - m) / l;
          const double* vj = v + ((b * T + j) * KV + g) * D;
          for (int64_t d = 0; d < D; ++d) oi[d] += p * vj[d];
        }
        lse[(b * H + h) * T + i] = m + std::log(l);
      }
    }
  }
}

inline void AttentionBackward(double* dq, double* dk, double* dv, const double* dout,
                              const double* q, const double* k, const double* v,
                              const double* out, const double* lse, int64_t B, int64_t T,
                              int64_t H, int64_t KV, int64_t D) {
  const double scale = 1.0 / std::sqrt(double(D));
  const int64_t group = H / KV;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (b * T + i) * H + h;
        const double* qi = q + row * D;
        const double* doi = dout + row * D;
        const double* oi = out + row * D;
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += doi[d] * oi[d];
        const double row_lse = lse[(b * H + h) * T + i];
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kv_row = (b * T + j) * KV + g;
          const double* kj = k + kv_row * D;
          const double* vj = v + kv_row * D;
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += qi[d] * kj[d];
            dp += doi[d] * vj[d];
          }
          const double p = std::exp(dot * scale - row_lse);
          const double ds = p * (dp - delta) * scale;
          for (int64_t d = 0; d < D; ++d) {
            dv[kv_row * D + d] += p * doi[d];
            dk[kv_row * D + d] += ds * qi[d];
            dq[row * D + d] += ds * kj[d];
          }
        }
      }
    }
  }
}

}  // namespace hypertrain::kernels::cuda::test_reference
