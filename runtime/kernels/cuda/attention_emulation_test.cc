// Runs the tiled attention kernels' own source on the CPU (host emulation of
// warps, shared memory, ldmatrix and mma.sync; see attention_emulation.h) and
// compares forward and backward with the CPU reference ops. Needs no GPU, so
// CI checks the kernels' tiling, causal/length masking, online softmax, GQA
// grouping and fragment indexing on every run.
#define HT_ATTENTION_HOST_EMULATION 1
#include "runtime/kernels/cuda/attention_emulation.h"
// (the emulation header must come first)
#include "runtime/kernels/cuda/attention_backward_kernel.cu.h"
#include "runtime/kernels/cuda/attention_forward_kernel.cu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/backends/cpu/ops.h"

namespace hypertrain::kernels::cuda::internal {
namespace {

struct Shape {
  int b, t, h, kv, d;
  float q_gain = 1.0f;
};

template <typename T>
T FromFloat(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}
template <typename T>
double ToDouble(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return __half2float(x);
  }
}

template <typename T>
void Random(std::mt19937& rng, size_t n, float gain, std::vector<T>* dev, std::vector<double>* ref) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  dev->resize(n);
  ref->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*dev)[i] = FromFloat<T>(dist(rng) * gain);
    (*ref)[i] = ToDouble((*dev)[i]);
  }
}

void ExpectClose(const std::string& what, const std::vector<double>& got,
                 const std::vector<double>& ref, double rel_l2_tol, double elem_tol) {
  ASSERT_EQ(got.size(), ref.size());
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  // Floors keep an all-zero reference (e.g. dq, dk at T = 1) comparable.
  const double rms = std::max(std::sqrt(ref2 / ref.size()), 1e-3);
  size_t worst = 0;
  double worst_err = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(got[i] - ref[i]) / (rms + std::abs(ref[i]));
    if (std::isnan(e) || e > worst_err) {
      worst_err = std::isnan(e) ? INFINITY : e;
      worst = i;
    }
  }
  const double rel = std::sqrt(err2) / std::max(std::sqrt(ref2), 1e-3 * std::sqrt(ref.size()));
  std::printf("  %-4s rel_l2 %.2e  worst %.2e\n", what.c_str(), rel, worst_err);
  EXPECT_LE(rel, rel_l2_tol) << what << ": relative L2 error";
  EXPECT_LE(worst_err, elem_tol) << what << ": worst element " << worst << " got " << got[worst]
                                 << " want " << ref[worst] << " (rms " << rms << ")";
}

template <typename T, int D, int DQ_BK = 64>
void Check(const Shape& s, uint32_t seed, double tol) {
  SCOPED_TRACE("B=" + std::to_string(s.b) + " T=" + std::to_string(s.t) + " H=" +
               std::to_string(s.h) + " KV=" + std::to_string(s.kv) + " D=" + std::to_string(D));
  ASSERT_EQ(s.d, D);
  std::mt19937 rng(seed);
  const size_t nq = size_t(s.b) * s.t * s.h * D, nkv = size_t(s.b) * s.t * s.kv * D;
  const size_t nstat = size_t(s.b) * s.h * s.t;
  std::vector<T> q, k, v, dout;
  std::vector<double> rq, rk, rv, rdout;
  Random(rng, nq, s.q_gain, &q, &rq);
  Random(rng, nkv, 1.0f, &k, &rk);
  Random(rng, nkv, 1.0f, &v, &rv);
  Random(rng, nq, 1.0f, &dout, &rdout);

  Dims g;
  g.batch = s.b;
  g.seq = s.t;
  g.n_heads = s.h;
  g.n_kv_heads = s.kv;
  g.head_dim = D;
  g.group = s.h / s.kv;
  g.scale = 1.0f / std::sqrt(float(D));
  g.bf16 = std::is_same_v<T, __nv_bfloat16>;
  g.fp32 = false;
  g.q_stride = int64_t(s.h) * D;
  g.k_stride = g.v_stride = int64_t(s.kv) * D;
  g.o_stride = int64_t(s.h) * D;

  const T nan_t = FromFloat<T>(NAN);
  std::vector<T> out(nq, nan_t), dq(nq, nan_t), dk(nkv, nan_t), dv(nkv, nan_t);
  std::vector<float> lse(nstat, NAN), delta(nstat, NAN);

  std::vector<double> ref_out(nq), ref_lse(nstat), ref_dq(nq, 0.0), ref_dk(nkv, 0.0),
      ref_dv(nkv, 0.0);
  ::hypertrain::cpu::AttentionForward<double>(ref_out.data(), ref_lse.data(), rq.data(),
                                              rk.data(), rv.data(), s.b, s.t, s.h, s.kv, D);
  ::hypertrain::cpu::AttentionBackward<double>(ref_dq.data(), ref_dk.data(), ref_dv.data(),
                                               rdout.data(), rq.data(), rk.data(), rv.data(),
                                               ref_out.data(), ref_lse.data(), s.b, s.t, s.h,
                                               s.kv, D);
  auto as_double = [](const std::vector<T>& x) {
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = ToDouble(x[i]);
    return r;
  };
  // Both forward variants (1 and 2 m-tiles per warp); the last one's output
  // feeds the backward kernels.
  auto forward = [&](auto mt_tag) {
    constexpr int MT = decltype(mt_tag)::value;
    std::printf(" forward, %d m-tile(s) per warp\n", MT);
    std::fill(out.begin(), out.end(), nan_t);
    std::fill(lse.begin(), lse.end(), NAN);
    ht_emu::LaunchGrid(dim3((s.t + fwd::kBr<MT> - 1) / fwd::kBr<MT>, s.h, s.b), fwd::kThreads,
                       fwd::kFwdSmemBytes<D, MT>, [&] {
                         fwd::TiledForwardKernel<T, D, MT>(g, q.data(), k.data(), v.data(),
                                                           out.data(), lse.data());
                       });
    ExpectClose("out", as_double(out), ref_out, tol, 4 * tol);
    ExpectClose("lse", std::vector<double>(lse.begin(), lse.end()), ref_lse, 1e-5, 1e-5);
  };
  forward(std::integral_constant<int, 2>());
  forward(std::integral_constant<int, 1>());
  const int64_t rows = nstat;
  constexpr int kRowsPerDeltaBlock = bwd::kThreads / (D / 8);
  ht_emu::LaunchGrid(dim3(unsigned((rows + kRowsPerDeltaBlock - 1) / kRowsPerDeltaBlock)),
                     bwd::kThreads, 0, [&] {
                       bwd::DeltaKernel<T, D>(g, out.data(), dout.data(), delta.data());
                     });
  const unsigned n_blocks = (s.t + bwd::kRowsPerBlock - 1) / bwd::kRowsPerBlock;
  ht_emu::LaunchGrid(dim3(n_blocks, s.kv, s.b), bwd::kThreads, bwd::kDkDvSmemBytes<D>, [&] {
    bwd::DkDvKernel<T, D>(g, q.data(), k.data(), v.data(), dout.data(), lse.data(), delta.data(),
                          dk.data(), dv.data());
  });
  ht_emu::LaunchGrid(dim3(n_blocks, s.h, s.b), bwd::kThreads, bwd::kDqSmemBytes<D, DQ_BK>, [&] {
    bwd::DqKernel<T, D, DQ_BK>(g, q.data(), k.data(), v.data(), dout.data(), lse.data(), delta.data(),
                        dq.data());
  });

  std::printf(" backward\n");
  ExpectClose("dq", as_double(dq), ref_dq, tol, 4 * tol);
  ExpectClose("dk", as_double(dk), ref_dk, tol, 4 * tol);
  ExpectClose("dv", as_double(dv), ref_dv, tol, 4 * tol);
}

TEST(AttentionEmulation, Bf16HeadDim64GqaThreeOddLength) {
  Check<__nv_bfloat16, 64>({1, 130, 3, 1, 64}, 1, 1.5e-2);
}

TEST(AttentionEmulation, Fp16HeadDim128GqaTwoSharpSoftmax) {
  Check<__half, 128>({1, 100, 4, 2, 128, 4.0f}, 2, 3e-3);
}

TEST(AttentionEmulation, Bf16HeadDim128TwoBatchesNoGqa) {
  Check<__nv_bfloat16, 128>({2, 70, 2, 2, 128}, 3, 1.5e-2);
}

// The dQ kernel's 32-key variant (devices with under 102 KB of shared memory
// per block, e.g. sm_86).
TEST(AttentionEmulation, Bf16HeadDim128NarrowDqSteps) {
  Check<__nv_bfloat16, 128, 32>({1, 150, 2, 1, 128}, 7, 1.5e-2);
}

TEST(AttentionEmulation, Fp16HeadDim32TinyModelShape) {
  Check<__half, 32>({2, 97, 4, 2, 32}, 6, 3e-3);
}

TEST(AttentionEmulation, Bf16LongerGqaFourSharpAndSingleToken) {
  Check<__nv_bfloat16, 64>({1, 260, 4, 1, 64, 3.0f}, 4, 1.5e-2);
  Check<__nv_bfloat16, 64>({1, 1, 2, 1, 64}, 5, 1.5e-2);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda::internal
