// Every op's backward against central finite differences in fp64.
#include "runtime/backends/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace hypertrain::cpu {
namespace {

using Vec = std::vector<double>;

Vec Random(int64_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Compares `analytic` (gradient of f wrt x) with central differences.
void ExpectGradMatches(const char* what, Vec& x, const Vec& analytic,
                       const std::function<double()>& f, double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size());
  const double h = 1e-5;
  double max_err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double old = x[i];
    x[i] = old + h;
    const double fp = f();
    x[i] = old - h;
    const double fm = f();
    x[i] = old;
    const double num = (fp - fm) / (2 * h);
    const double err = std::abs(num - analytic[i]) / std::max(1.0, std::abs(num));
    max_err = std::max(max_err, err);
    ASSERT_LT(err, tol) << what << "[" << i << "] numeric " << num << " analytic " << analytic[i];
  }
  SUCCEED() << what << " max rel err " << max_err;
}

TEST(OpsGradTest, Matmul) {
  std::mt19937_64 rng(1);
  const int64_t N = 5, IF = 4, OF = 3;
  Vec in = Random(N * IF, rng), w = Random(OF * IF, rng), R = Random(N * OF, rng), out(N * OF);
  auto f = [&] {
    Matmul(out.data(), in.data(), w.data(), N, IF, OF);
    return Dot(out, R);
  };
  Vec din(N * IF, 0.0), dw(OF * IF, 0.0);
  MatmulBackward(din.data(), dw.data(), R.data(), in.data(), w.data(), N, IF, OF);
  ExpectGradMatches("din", in, din, f);
  ExpectGradMatches("dw", w, dw, f);
}

TEST(OpsGradTest, EmbeddingIsDeterministicScatterAdd) {
  std::mt19937_64 rng(2);
  const int64_t N = 6, C = 3, V = 4;
  std::vector<int32_t> tok = {1, 3, 1, 0, 1, 2};
  Vec table = Random(V * C, rng), R = Random(N * C, rng), out(N * C);
  auto f = [&] {
    EmbeddingForward(out.data(), tok.data(), table.data(), N, C);
    return Dot(out, R);
  };
  Vec dt(V * C, 0.0);
  EmbeddingBackward(dt.data(), R.data(), tok.data(), N, C);
  ExpectGradMatches("dtable", table, dt, f);
}

// bf16 round-to-nearest-even of a finite float (test-side, independent of ops.cc).
float Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1u;
  u = (u + 0x7fffu + lsb) & 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// The split embedding gradient: `ranks` ranks' rows, restricted to [lo, hi)
// cutting rows at both ends, against per-rank dense scatter-adds combined as
// a reduce-scatter would (rank order, then x 1/R), bit for bit.
void CheckEmbeddingBackwardRange(bool bf16_reduce) {
  std::mt19937_64 rng(9);
  const int R = 3;
  const int64_t n = 7, C = 5, V = 6, lo = 7, hi = 23;  // rows 1 (from col 2) .. 4 (to col 3)
  std::vector<int32_t> tok(R * n);
  for (int64_t i = 0; i < R * n; ++i) tok[i] = static_cast<int32_t>(rng() % V);
  tok[0] = tok[n] = tok[2 * n + 3] = 2;  // one row in every rank
  tok[1] = tok[2] = 4;                   // repeated within rank 0
  std::vector<float> dout(R * n * C);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : dout) x = d(rng);
  const int64_t guard = 3;
  std::vector<float> buf(guard + (hi - lo) + guard);
  for (float& x : buf) x = d(rng);
  const std::vector<float> before = buf;
  EmbeddingBackwardRange(buf.data() + guard, lo, hi, dout.data(), tok.data(), n, R, C, bf16_reduce);
  // Per rank: its partial sums P_r (a dense scatter-add from zero, row order).
  std::vector<std::vector<float>> part(R, std::vector<float>(V * C, 0.0f));
  for (int r = 0; r < R; ++r)
    EmbeddingBackward(part[r].data(), dout.data() + r * n * C, tok.data() + r * n, n, C);
  int differs_from_fp32 = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(buf.size()); ++i) {
    const int64_t e = lo + i - guard;
    if (e < lo || e >= hi) {
      EXPECT_EQ(buf[i], before[i]) << "outside the range: element " << e;
      continue;
    }
    float acc = 0.0f, acc32 = 0.0f;
    for (int r = 0; r < R; ++r) {
      acc = bf16_reduce ? Bf16(acc + Bf16(part[r][e])) : acc + part[r][e];
      acc32 += part[r][e];
    }
    EXPECT_EQ(buf[i], before[i] + acc * (1.0f / R)) << "element " << e;
    differs_from_fp32 += acc != acc32;
  }
  if (bf16_reduce) {
    EXPECT_GT(differs_from_fp32, 0) << "bf16 rounding left no trace";
  }
}

TEST(OpsTest, EmbeddingBackwardRangeFp32) { CheckEmbeddingBackwardRange(false); }
TEST(OpsTest, EmbeddingBackwardRangeBf16Reduce) { CheckEmbeddingBackwardRange(true); }

TEST(OpsGradTest, RmsNorm) {
  std::mt19937_64 rng(3);
  const int64_t N = 4, C = 6;
  Vec x = Random(N * C, rng), w = Random(C, rng), R = Random(N * C, rng), out(N * C), rstd(N);
  auto f = [&] {
    RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
    return Dot(out, R);
  };
  f();
  Vec dx(N * C, 0.0), dw(C, 0.0);
  RmsNormBackward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  ExpectGradMatches("dx", x, dx, f);
  ExpectGradMatches("dw", w, dw, f);
}

TEST(OpsGradTest, RopeWithLlama3Scaling) {
  std::mt19937_64 rng(4);
  const int64_t B = 2, T = 5, H = 3, D = 8;
  model::RopeScaling s{model::RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 16};
  Vec cs(T * D / 2), sn(T * D / 2);
  RopeTables(cs.data(), sn.data(), T, D, 10000.0, s);
  Vec x = Random(B * T * H * D, rng), R = Random(x.size(), rng), out(x.size());
  auto f = [&] {
    RopeForward(out.data(), x.data(), cs.data(), sn.data(), B, T, H, D);
    return Dot(out, R);
  };
  f();
  // Rotation preserves each head vector's norm.
  EXPECT_NEAR(Dot(out, out), Dot(x, x), 1e-9);
  Vec dx(x.size());
  RopeBackward(dx.data(), R.data(), cs.data(), sn.data(), B, T, H, D);
  ExpectGradMatches("dx", x, dx, f);
}

TEST(OpsGradTest, CausalGqaAttention) {
  std::mt19937_64 rng(5);
  const int64_t B = 2, T = 4, H = 4, KV = 2, D = 3;
  Vec q = Random(B * T * H * D, rng), k = Random(B * T * KV * D, rng), v = Random(k.size(), rng);
  Vec R = Random(q.size(), rng), out(q.size()), lse(B * H * T);
  auto f = [&] {
    AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H, KV, D);
    return Dot(out, R);
  };
  f();
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  AttentionBackward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(),
                    out.data(), lse.data(), B, T, H, KV, D);
  ExpectGradMatches("dq", q, dq, f);
  ExpectGradMatches("dk", k, dk, f);
  ExpectGradMatches("dv", v, dv, f);
}

TEST(OpsTest, AttentionIsCausalAndFirstTokenCopiesValue) {
  std::mt19937_64 rng(6);
  const int64_t T = 3, H = 2, KV = 1, D = 2;
  Vec q = Random(T * H * D, rng), k = Random(T * KV * D, rng), v = Random(T * KV * D, rng);
  Vec out(q.size()), lse(H * T);
  AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), 1, T, H, KV, D);
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < D; ++d) EXPECT_DOUBLE_EQ(out[h * D + d], v[d]);
  }
  Vec out2(q.size());
  v[(T - 1) * D] += 10;  // the last key's value must not affect earlier queries
  AttentionForward(out2.data(), lse.data(), q.data(), k.data(), v.data(), 1, T, H, KV, D);
  for (int64_t i = 0; i < (T - 1) * H * D; ++i) EXPECT_DOUBLE_EQ(out[i], out2[i]);
}

TEST(OpsGradTest, SwiGlu) {
  std::mt19937_64 rng(7);
  const int64_t n = 12;
  Vec g = Random(n, rng, 2.0), u = Random(n, rng), R = Random(n, rng), out(n);
  auto f = [&] {
    SwiGluForward(out.data(), g.data(), u.data(), n);
    return Dot(out, R);
  };
  Vec dg(n, 0.0), du(n, 0.0);
  SwiGluBackward(dg.data(), du.data(), R.data(), g.data(), u.data(), n);
  ExpectGradMatches("dgate", g, dg, f);
  ExpectGradMatches("dup", u, du, f);
}

TEST(OpsGradTest, CrossEntropyWithIgnoreIndex) {
  std::mt19937_64 rng(8);
  const int64_t N = 4, V = 7;
  std::vector<int32_t> t = {3, -100, 0, 6};
  Vec logits = Random(N * V, rng, 3.0);
  auto f = [&] { return CrossEntropy<double>(nullptr, nullptr, logits.data(), t.data(), N, V, -100, 0).loss_sum; };
  Vec dl(N * V, 0.0);
  LossSum r = CrossEntropy<double>(nullptr, dl.data(), logits.data(), t.data(), N, V, -100, 1.0);
  EXPECT_EQ(r.count, 3);
  for (int j = 0; j < V; ++j) EXPECT_EQ(dl[V + j], 0.0);
  ExpectGradMatches("dlogits", logits, dl, f);
}

TEST(OpsGradTest, FusedClassifierMatchesMaterialisedLogits) {
  std::mt19937_64 rng(9);
  const int64_t N = 7, C = 5, V = 11;
  std::vector<int32_t> t = {1, 10, -100, 4, 4, 0, 9};
  Vec h = Random(N * C, rng), w = Random(V * C, rng);
  Vec logits(N * V);
  Matmul(logits.data(), h.data(), w.data(), N, C, V);
  const LossSum ref = CrossEntropy<double>(nullptr, nullptr, logits.data(), t.data(), N, V, -100, 0);
  for (int64_t chunk : {1, 3, 7, 100}) {
    const LossSum got = FusedClassifier<double>(nullptr, nullptr, h.data(), w.data(), t.data(), N, C, V, -100, 0, chunk);
    EXPECT_NEAR(got.loss_sum, ref.loss_sum, 1e-12);
    EXPECT_EQ(got.count, 6);
  }
  const double dloss = 0.37;
  auto f = [&] {
    return dloss * FusedClassifier<double>(nullptr, nullptr, h.data(), w.data(), t.data(), N, C, V, -100, 0, 3).loss_sum;
  };
  Vec dh(N * C, 0.0), dw(V * C, 0.0);
  FusedClassifier<double>(dh.data(), dw.data(), h.data(), w.data(), t.data(), N, C, V, -100, dloss, 3);
  ExpectGradMatches("dh", h, dh, f);
  ExpectGradMatches("dw", w, dw, f);
}

TEST(OpsTest, FloatAndDoubleAgree) {
  std::mt19937_64 rng(10);
  const int64_t N = 3, C = 8;
  Vec x = Random(N * C, rng), w = Random(C, rng), out(N * C);
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), outf(N * C);
  RmsNormForward(out.data(), static_cast<double*>(nullptr), x.data(), w.data(), N, C, 1e-5);
  RmsNormForward(outf.data(), static_cast<float*>(nullptr), xf.data(), wf.data(), N, C, 1e-5);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(out[i], outf[i], 1e-5);
  EXPECT_NEAR(SumSquares(x.data(), N * C), Dot(x, x), 1e-9);
}

}  // namespace
}  // namespace hypertrain::cpu
