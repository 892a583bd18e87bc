#include "runtime/backends/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/model/math.h"

namespace hypertrain::cpu {
namespace {

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

template <typename T>
void Matmul(T* out, const T* in, const T* w, int64_t N, int64_t IF, int64_t OF, bool accumulate) {
  if (N == 0 || OF == 0) return;
  Gemm(CblasNoTrans, CblasTrans, N, OF, IF, T(1), in, IF, w, IF, accumulate ? T(1) : T(0), out, OF);
}

template <typename T>
void MatmulBackward(T* din, T* dw, const T* dout, const T* in, const T* w, int64_t N, int64_t IF,
                    int64_t OF) {
  if (N == 0) return;
  if (din != nullptr) Gemm(CblasNoTrans, CblasNoTrans, N, IF, OF, T(1), dout, OF, w, IF, T(1), din, IF);
  if (dw != nullptr) Gemm(CblasTrans, CblasNoTrans, OF, IF, N, T(1), dout, OF, in, IF, T(1), dw, IF);
}

template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const T* table, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(out + n * C, table + static_cast<int64_t>(tokens[n]) * C, sizeof(T) * C);
  }
}

template <typename T>
void EmbeddingBackward(T* dtable, const T* dout, const int32_t* tokens, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    T* row = dtable + static_cast<int64_t>(tokens[n]) * C;
    const T* g = dout + n * C;
    for (int64_t c = 0; c < C; ++c) row[c] += g[c];
  }
}

namespace {
// fp32 -> bf16 -> fp32, round-to-nearest-even (NaN stays NaN).
float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
    u |= 0x00400000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
  }
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

template <typename T>
void EmbeddingBackwardRange(float* dst, int64_t lo, int64_t hi, const T* dout,
                            const int32_t* tokens, int64_t n, int ranks, int64_t C,
                            bool bf16_reduce) {
  const int64_t total = n * ranks;
  if (total <= 0 || C <= 0 || lo >= hi) return;
  // Rows grouped by token, each group in increasing row order (= rank order,
  // then token order within a rank).
  std::vector<int64_t> order(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return tokens[a] < tokens[b]; });
  const float inv = 1.0f / static_cast<float>(ranks);
  std::vector<float> acc, part;
  for (int64_t s = 0; s < total;) {
    const int32_t v = tokens[order[s]];
    int64_t e = s + 1;
    while (e < total && tokens[order[e]] == v) ++e;
    const int64_t row = static_cast<int64_t>(v) * C;
    const int64_t c0 = std::max<int64_t>(lo - row, 0), c1 = std::min<int64_t>(hi - row, C);
    if (c0 < c1) {
      const int64_t w = c1 - c0;
      acc.assign(w, 0.0f);
      part.assign(w, 0.0f);
      auto fold = [&] {
        for (int64_t c = 0; c < w; ++c) {
          acc[c] = bf16_reduce ? RoundBf16(acc[c] + RoundBf16(part[c])) : acc[c] + part[c];
          part[c] = 0.0f;
        }
      };
      int64_t rank = order[s] / n;
      for (int64_t j = s; j < e; ++j) {
        const int64_t p = order[j];
        if (p / n != rank) {
          fold();
          rank = p / n;
        }
        const T* g = dout + p * C + c0;
        for (int64_t c = 0; c < w; ++c) part[c] += static_cast<float>(g[c]);
      }
      fold();
      float* d = dst + (row + c0 - lo);
      for (int64_t c = 0; c < w; ++c) d[c] += acc[c] * inv;
    }
    s = e;
  }
}

template <typename T>
void RmsNormForward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const T r = static_cast<T>(1.0 / std::sqrt(ss / C + eps));
    if (rstd != nullptr) rstd[n] = r;
    T* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] = xr[c] * r * w[c];
  }
}

template <typename T>
void RmsNormBackward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int64_t N,
                     int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* g = dout + n * C;
    const double r = rstd[n];
    double dot = 0;  // sum_c w_c g_c x_c
    for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(w[c]) * g[c] * xr[c];
    const double k = r * r * r * dot / C;
    if (dx != nullptr) {
      T* d = dx + n * C;
      for (int64_t c = 0; c < C; ++c) d[c] += static_cast<T>(r * w[c] * g[c] - k * xr[c]);
    }
    if (dw != nullptr) {
      for (int64_t c = 0; c < C; ++c) dw[c] += static_cast<T>(g[c] * xr[c] * r);
    }
  }
}

template <typename T>
void RopeTables(T* cos, T* sin, int64_t seq, int64_t D, double theta, const model::RopeScaling& s) {
  std::vector<double> inv(D / 2);
  model::RopeInvFreq(inv.data(), D, theta, s);
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = static_cast<double>(t) * inv[i];
      cos[t * (D / 2) + i] = static_cast<T>(std::cos(a));
      sin[t * (D / 2) + i] = static_cast<T>(std::sin(a));
    }
  }
}

namespace {
// Rotates every head vector of x by +angle (sign = 1) or -angle (sign = -1).
template <typename T>
void Rotate(T* out, const T* in, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t heads,
            int64_t D, T sign, const int32_t* positions) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t p = positions != nullptr ? positions[b * Tn + t] : t;
      const T* c = cos + p * half;
      const T* s = sin + p * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((b * Tn + t) * heads + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const T x1 = in[base + i];
          const T x2 = in[base + i + half];
          const T si = sign * s[i];
          out[base + i] = x1 * c[i] - x2 * si;
          out[base + i + half] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}
}  // namespace

template <typename T>
void RopeForward(T* out, const T* in, const T* cos, const T* sin, int64_t B, int64_t Tn,
                 int64_t heads, int64_t D, const int32_t* positions) {
  Rotate(out, in, cos, sin, B, Tn, heads, D, T(1), positions);
}

template <typename T>
void RopeBackward(T* din, const T* dout, const T* cos, const T* sin, int64_t B, int64_t Tn,
                  int64_t heads, int64_t D, const int32_t* positions) {
  // The rotation is orthogonal: its Jacobian transposed is the inverse rotation.
  Rotate(din, dout, cos, sin, B, Tn, heads, D, T(-1), positions);
}

template <typename T>
void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t Tn,
                      int64_t H, int64_t KV, int64_t D, const int32_t* positions) {
  const int64_t group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> s(Tn), acc(D);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < Tn; ++i) {
        const T* qi = q + ((b * Tn + i) * H + h) * D;
        const int64_t j0 = positions != nullptr ? i - positions[b * Tn + i] : 0;
        double m = -INFINITY;
        for (int64_t j = j0; j <= i; ++j) {
          const T* kj = k + ((b * Tn + j) * KV + kh) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = j0; j <= i; ++j) {
          const double p = std::exp(s[j] - m);
          l += p;
          const T* vj = v + ((b * Tn + j) * KV + kh) * D;
          for (int64_t d = 0; d < D; ++d) acc[d] += p * vj[d];
        }
        T* oi = out + ((b * Tn + i) * H + h) * D;
        for (int64_t d = 0; d < D; ++d) oi[d] = static_cast<T>(acc[d] / l);
        lse[(b * H + h) * Tn + i] = static_cast<T>(m + std::log(l));
      }
    }
  }
}

template <typename T>
void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                       const T* out, const T* lse, int64_t B, int64_t Tn, int64_t H, int64_t KV,
                       int64_t D, const int32_t* positions) {
  const int64_t group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> dqi(D), p(Tn), ds(Tn);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < Tn; ++i) {
        const int64_t qrow = ((b * Tn + i) * H + h) * D;
        const T* qi = q + qrow;
        const T* doi = dout + qrow;
        const T* oi = out + qrow;
        double delta = 0;  // sum_j P_ij dP_ij = dout_i . out_i
        for (int64_t d = 0; d < D; ++d) delta += static_cast<double>(doi[d]) * oi[d];
        const double li = lse[(b * H + h) * Tn + i];
        const int64_t j0 = positions != nullptr ? i - positions[b * Tn + i] : 0;
        // P_ij from the saved log-sum-exp; dS_ij = P_ij (dP_ij - delta) * scale.
        for (int64_t j = j0; j <= i; ++j) {
          const int64_t krow = ((b * Tn + j) * KV + kh) * D;
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += static_cast<double>(qi[d]) * k[krow + d];
            dp += static_cast<double>(doi[d]) * v[krow + d];
          }
          p[j] = std::exp(dot * scale - li);
          ds[j] = p[j] * (dp - delta) * scale;
        }
        if (dq != nullptr) {
          std::fill(dqi.begin(), dqi.end(), 0.0);
          for (int64_t j = j0; j <= i; ++j) {
            const T* kj = k + ((b * Tn + j) * KV + kh) * D;
            for (int64_t d = 0; d < D; ++d) dqi[d] += ds[j] * kj[d];
          }
          for (int64_t d = 0; d < D; ++d) dq[qrow + d] += static_cast<T>(dqi[d]);
        }
        for (int64_t j = j0; j <= i; ++j) {
          const int64_t krow = ((b * Tn + j) * KV + kh) * D;
          if (dk != nullptr) {
            for (int64_t d = 0; d < D; ++d) dk[krow + d] += static_cast<T>(ds[j] * qi[d]);
          }
          if (dv != nullptr) {
            for (int64_t d = 0; d < D; ++d) dv[krow + d] += static_cast<T>(p[j] * doi[d]);
          }
        }
      }
    }
  }
}

template <typename T>
void SwiGluForward(T* out, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T sig = T(1) / (T(1) + std::exp(-g));
    out[i] = g * sig * up[i];
  }
}

template <typename T>
void SwiGluBackward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T sig = T(1) / (T(1) + std::exp(-g));
    const T silu = g * sig;
    if (dgate != nullptr) dgate[i] += dout[i] * up[i] * sig * (T(1) + g * (T(1) - sig));
    if (dup != nullptr) dup[i] += dout[i] * silu;
  }
}

template <typename T>
void DropoutForward(T* u, const T* x, int64_t n, const model::DropoutMask& mask) {
  const T scale = static_cast<T>(mask.scale);
  for (int64_t i = 0; i < n; ++i) {
    u[i] = model::DropoutKeep(mask.key, static_cast<uint64_t>(i), mask.threshold) ? x[i] * scale
                                                                                  : T(0);
  }
}

template <typename T>
void LoraForward(T* out, T* t, T* u_scratch, const T* x, const T* a, const T* b, int64_t N,
                 int64_t IF, int64_t OF, int64_t r, double scaling,
                 const model::DropoutMask& mask) {
  const T* u = x;
  if (mask.active()) {
    DropoutForward(u_scratch, x, N * IF, mask);
    u = u_scratch;
  }
  Matmul(t, u, a, N, IF, r);
  const T s = static_cast<T>(scaling);
  for (int64_t i = 0; i < N * r; ++i) t[i] *= s;
  Matmul(out, t, b, N, r, OF, /*accumulate=*/true);
}

template <typename T>
void LoraBackward(T* dx, T* da, T* db, T* dt, T* u_scratch, const T* dout, const T* x, const T* t,
                  const T* a, const T* b, int64_t N, int64_t IF, int64_t OF, int64_t r,
                  double scaling, const model::DropoutMask& mask) {
  // out += t B^T: dB += dout^T t, dt = dout B.
  std::fill(dt, dt + N * r, T(0));
  MatmulBackward(dt, db, dout, t, b, N, r, OF);
  const T s = static_cast<T>(scaling);
  for (int64_t i = 0; i < N * r; ++i) dt[i] *= s;
  // t = s * u A^T: dA += dt^T u, du = dt A.
  const T* u = x;
  if (mask.active()) {
    DropoutForward(u_scratch, x, N * IF, mask);
    u = u_scratch;
  }
  MatmulBackward<T>(nullptr, da, dt, u, a, N, IF, r);
  if (dx == nullptr) return;
  if (!mask.active()) {
    MatmulBackward<T>(dx, nullptr, dt, u, a, N, IF, r);
    return;
  }
  // du into the scratch (u is no longer needed), then dx += du * keep * scale.
  std::fill(u_scratch, u_scratch + N * IF, T(0));
  MatmulBackward<T>(u_scratch, nullptr, dt, x, a, N, IF, r);
  const T sc = static_cast<T>(mask.scale);
  for (int64_t i = 0; i < N * IF; ++i) {
    if (model::DropoutKeep(mask.key, static_cast<uint64_t>(i), mask.threshold)) {
      dx[i] += u_scratch[i] * sc;
    }
  }
}

template <typename T>
void Add(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

namespace {
// Loss of one row; when grad != nullptr writes dloss * (softmax - onehot)
// into it (grad may alias logits).
template <typename T>
double RowCrossEntropy(T* grad, const T* logits, int32_t target, int64_t V, double dloss) {
  double m = -INFINITY;
  for (int64_t j = 0; j < V; ++j) m = std::max(m, static_cast<double>(logits[j]));
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(logits[j]) - m);
  const double lse = m + std::log(sum);
  const double loss = lse - static_cast<double>(logits[target]);
  if (grad != nullptr) {
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(static_cast<double>(logits[j]) - lse);
      grad[j] = static_cast<T>(dloss * (p - (j == target ? 1.0 : 0.0)));
    }
  }
  return loss;
}
}  // namespace

template <typename T>
LossSum CrossEntropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                     int64_t V, int32_t ignore_index, double dloss) {
  LossSum r;
  std::vector<T> g(dlogits != nullptr ? V : 0);
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) {
      if (losses != nullptr) losses[n] = T(0);
      continue;
    }
    const double l = RowCrossEntropy(dlogits != nullptr ? g.data() : static_cast<T*>(nullptr),
                                     logits + n * V, targets[n], V, dloss);
    if (dlogits != nullptr) {
      for (int64_t j = 0; j < V; ++j) dlogits[n * V + j] += g[j];
    }
    if (losses != nullptr) losses[n] = static_cast<T>(l);
    r.loss_sum += l;
    ++r.count;
  }
  return r;
}

template <typename T>
LossSum FusedClassifier(T* dh, T* dw, const T* h, const T* w, const int32_t* targets, int64_t N,
                        int64_t C, int64_t V, int32_t ignore_index, double dloss,
                        int64_t chunk_rows) {
  LossSum r;
  chunk_rows = std::max<int64_t>(1, std::min(chunk_rows, N));
  std::vector<T> logits(chunk_rows * V);
  const bool backward = dh != nullptr || dw != nullptr;
  for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, N - r0);
    Matmul(logits.data(), h + r0 * C, w, rows, C, V);
    for (int64_t n = 0; n < rows; ++n) {
      T* row = logits.data() + n * V;
      const int32_t t = targets[r0 + n];
      if (t == ignore_index) {
        std::fill(row, row + V, T(0));
        continue;
      }
      r.loss_sum += RowCrossEntropy(backward ? row : static_cast<T*>(nullptr), row, t, V, dloss);
      ++r.count;
    }
    if (backward) MatmulBackward(dh != nullptr ? dh + r0 * C : dh, dw, logits.data(), h + r0 * C, w, rows, C, V);
  }
  return r;
}

template <typename T>
double SumSquares(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

#define HT_INSTANTIATE(T)                                                                        \
  template void Matmul<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, bool);              \
  template void MatmulBackward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t,        \
                                  int64_t);                                                      \
  template void EmbeddingForward<T>(T*, const int32_t*, const T*, int64_t, int64_t);             \
  template void EmbeddingBackward<T>(T*, const T*, const int32_t*, int64_t, int64_t);            \
  template void EmbeddingBackwardRange<T>(float*, int64_t, int64_t, const T*, const int32_t*,   \
                                          int64_t, int, int64_t, bool);                         \
  template void RmsNormForward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);         \
  template void RmsNormBackward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t,      \
                                   int64_t);                                                     \
  template void RopeTables<T>(T*, T*, int64_t, int64_t, double, const model::RopeScaling&);      \
  template void RopeForward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,      \
                               int64_t, const int32_t*);                                         \
  template void RopeBackward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,     \
                                int64_t, const int32_t*);                                        \
  template void AttentionForward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t,      \
                                    int64_t, int64_t, int64_t, const int32_t*);                  \
  template void AttentionBackward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,         \
                                     const T*, const T*, int64_t, int64_t, int64_t, int64_t,     \
                                     int64_t, const int32_t*);                                   \
  template void DropoutForward<T>(T*, const T*, int64_t, const model::DropoutMask&);             \
  template void LoraForward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,       \
                               int64_t, int64_t, double, const model::DropoutMask&);             \
  template void LoraBackward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,       \
                                const T*, int64_t, int64_t, int64_t, int64_t, double,            \
                                const model::DropoutMask&);                                      \
  template void SwiGluForward<T>(T*, const T*, const T*, int64_t);                               \
  template void SwiGluBackward<T>(T*, T*, const T*, const T*, const T*, int64_t);                \
  template void Add<T>(T*, const T*, const T*, int64_t);                                         \
  template LossSum CrossEntropy<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t, int32_t,  \
                                   double);                                                      \
  template LossSum FusedClassifier<T>(T*, T*, const T*, const T*, const int32_t*, int64_t,       \
                                      int64_t, int64_t, int32_t, double, int64_t);               \
  template double SumSquares<T>(const T*, int64_t);

HT_INSTANTIATE(float)
HT_INSTANTIATE(double)

}  // namespace hypertrain::cpu
