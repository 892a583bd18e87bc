// Parity of the fused CUDA AdamW with the CPU reference on random inputs.
#include "runtime/kernels/cuda/adamw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels {
namespace {

TEST(AdamWCuda, MatchesCpuReferenceOverSeveralSteps) {
  HT_SKIP_WITHOUT_GPU();
  constexpr size_t n = (1 << 20) + 37;  // not a multiple of the block size
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> param(n), m(n, 0.0f), v(n, 0.0f), grad(n);
  for (auto& x : param) x = dist(rng) * 0.02f;
  std::vector<float> ref_param = param, ref_m = m, ref_v = v;

  float *d_param, *d_grad, *d_m, *d_v;
  __nv_bfloat16* d_bf16;
  HT_CUDA_OK(cudaMalloc(&d_param, n * sizeof(float)));
  HT_CUDA_OK(cudaMalloc(&d_grad, n * sizeof(float)));
  HT_CUDA_OK(cudaMalloc(&d_m, n * sizeof(float)));
  HT_CUDA_OK(cudaMalloc(&d_v, n * sizeof(float)));
  HT_CUDA_OK(cudaMalloc(&d_bf16, n * sizeof(__nv_bfloat16)));
  HT_CUDA_OK(cudaMemcpy(d_param, param.data(), n * 4, cudaMemcpyHostToDevice));
  HT_CUDA_OK(cudaMemcpy(d_m, m.data(), n * 4, cudaMemcpyHostToDevice));
  HT_CUDA_OK(cudaMemcpy(d_v, v.data(), n * 4, cudaMemcpyHostToDevice));

  AdamWParams p;
  p.lr = 3e-3f;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.5f;
  for (int step = 1; step <= 5; ++step) {
    for (auto& g : grad) g = dist(rng);
    p.step = step;
    HT_CUDA_OK(cudaMemcpy(d_grad, grad.data(), n * 4, cudaMemcpyHostToDevice));
    cuda::AdamW(d_param, d_grad, d_m, d_v, d_bf16, n, p, nullptr);
    HT_CUDA_OK(cudaGetLastError());
    cpu::AdamW(ref_param.data(), grad.data(), ref_m.data(), ref_v.data(), n, p);
  }
  std::vector<__nv_bfloat16> bf16(n);
  HT_CUDA_OK(cudaMemcpy(param.data(), d_param, n * 4, cudaMemcpyDeviceToHost));
  HT_CUDA_OK(cudaMemcpy(bf16.data(), d_bf16, n * 2, cudaMemcpyDeviceToHost));
  double max_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, std::abs(double(param[i]) - double(ref_param[i])));
    const float b = __bfloat162float(bf16[i]);
    ASSERT_NEAR(b, param[i], std::abs(param[i]) * 1.0f / 128 + 1e-30f) << i;
  }
  // Five updates of lr 3e-3: fp32 rounding stays far below one update.
  EXPECT_LT(max_err, 1e-6);
  for (float* ptr : {d_param, d_grad, d_m, d_v}) cudaFree(ptr);
  cudaFree(d_bf16);
}

// The 16-byte path (aligned pointers) and the scalar path (pointers one
// element off) must give bit-identical state; n is not a multiple of 4 so the
// vector launch also runs its scalar tail.
TEST(AdamWCuda, VectorAndScalarPathsAreBitIdentical) {
  HT_SKIP_WITHOUT_GPU();
  constexpr size_t n = 100003;
  std::mt19937 rng(99);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> param(n), grad(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    param[i] = dist(rng) * 0.02f;
    grad[i] = dist(rng);
    m[i] = dist(rng) * 0.1f;
    v[i] = std::abs(dist(rng)) * 0.01f;
  }
  AdamWParams p;
  p.lr = 1e-3f;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.7f;
  p.step = 3;
  struct Run {
    std::vector<float> param, m, v;
    std::vector<__nv_bfloat16> bf16;
  };
  auto run = [&](size_t offset, Run& r) {
    float *d_param, *d_grad, *d_m, *d_v;
    __nv_bfloat16* d_bf16;
    const size_t cap = n + 4;
    HT_CUDA_OK(cudaMalloc(&d_param, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_grad, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_m, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_v, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_bf16, cap * 2));
    HT_CUDA_OK(cudaMemcpy(d_param + offset, param.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_grad + offset, grad.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_m + offset, m.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_v + offset, v.data(), n * 4, cudaMemcpyHostToDevice));
    cuda::AdamW(d_param + offset, d_grad + offset, d_m + offset, d_v + offset, d_bf16 + offset, n,
                p, nullptr);
    HT_CUDA_OK(cudaGetLastError());
    r = Run{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
            std::vector<__nv_bfloat16>(n)};
    HT_CUDA_OK(cudaMemcpy(r.param.data(), d_param + offset, n * 4, cudaMemcpyDeviceToHost));
    HT_CUDA_OK(cudaMemcpy(r.m.data(), d_m + offset, n * 4, cudaMemcpyDeviceToHost));
    HT_CUDA_OK(cudaMemcpy(r.v.data(), d_v + offset, n * 4, cudaMemcpyDeviceToHost));
    HT_CUDA_OK(cudaMemcpy(r.bf16.data(), d_bf16 + offset, n * 2, cudaMemcpyDeviceToHost));
    for (float* ptr : {d_param, d_grad, d_m, d_v}) cudaFree(ptr);
    cudaFree(d_bf16);
  };
  Run vec, scalar;
  run(0, vec);
  run(1, scalar);
  if (HasFatalFailure()) return;
  std::vector<float> ref_param = param, ref_m = m, ref_v = v;
  cpu::AdamW(ref_param.data(), grad.data(), ref_m.data(), ref_v.data(), n, p);
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(vec.param[i], scalar.param[i]) << i;
    ASSERT_EQ(vec.m[i], scalar.m[i]) << i;
    ASSERT_EQ(vec.v[i], scalar.v[i]) << i;
    ASSERT_EQ(__bfloat162float(vec.bf16[i]), __bfloat162float(scalar.bf16[i])) << i;
    ASSERT_EQ(__bfloat162float(vec.bf16[i]), __bfloat162float(__float2bfloat16_rn(vec.param[i])))
        << i;
    ASSERT_NEAR(vec.param[i], ref_param[i], 1e-6f) << i;
    moved += vec.param[i] != param[i];
  }
  EXPECT_GT(moved, n * 9 / 10);  // the update really ran everywhere
}

// The optional amax of the bf16 copy (the FP8 weight scale's input): equal
// to max |bf16(w)| over the updated weights, on the vector path (a grid that
// strides: more elements than the capped grid's threads) and the scalar one,
// and a running max over calls.
TEST(AdamWCuda, AmaxOfTheBf16CopyMatchesItsMaximum) {
  HT_SKIP_WITHOUT_GPU();
  constexpr size_t n = (5 << 20) + 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> param(n), grad(n), m(n, 0.0f), v(n, 0.0f);
  for (size_t i = 0; i < n; ++i) param[i] = dist(rng) * 0.02f, grad[i] = dist(rng);
  param[n / 3] = -0.75f;  // one clear maximum, negative
  AdamWParams p;
  p.lr = 1e-3f;
  p.weight_decay = 0.1f;
  p.step = 1;
  for (size_t offset : {size_t{0}, size_t{1}}) {
    SCOPED_TRACE(offset == 0 ? "vector path" : "scalar path");
    float *d_param, *d_grad, *d_m, *d_v, *d_amax;
    __nv_bfloat16* d_bf16;
    const size_t cap = n + 4;
    HT_CUDA_OK(cudaMalloc(&d_param, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_grad, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_m, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_v, cap * 4));
    HT_CUDA_OK(cudaMalloc(&d_bf16, cap * 2));
    HT_CUDA_OK(cudaMalloc(&d_amax, 4));
    HT_CUDA_OK(cudaMemcpy(d_param + offset, param.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_grad + offset, grad.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_m + offset, m.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_v + offset, v.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemset(d_amax, 0, 4));
    cuda::AdamW(d_param + offset, d_grad + offset, d_m + offset, d_v + offset, d_bf16 + offset, n,
                p, nullptr, {nullptr, d_amax, 0});
    HT_CUDA_OK(cudaGetLastError());
    std::vector<__nv_bfloat16> bf16(n);
    float amax = 0;
    HT_CUDA_OK(cudaMemcpy(bf16.data(), d_bf16 + offset, n * 2, cudaMemcpyDeviceToHost));
    HT_CUDA_OK(cudaMemcpy(&amax, d_amax, 4, cudaMemcpyDeviceToHost));
    float want = 0;
    for (const auto& b : bf16) want = std::max(want, std::fabs(__bfloat162float(b)));
    EXPECT_EQ(amax, want);
    EXPECT_GT(want, 0.7f);
    // A running max: a larger value already in the slot stays.
    const float big = 1e3f;
    HT_CUDA_OK(cudaMemcpy(d_amax, &big, 4, cudaMemcpyHostToDevice));
    p.step = 2;
    cuda::AdamW(d_param + offset, d_grad + offset, d_m + offset, d_v + offset, d_bf16 + offset, n,
                p, nullptr, {nullptr, d_amax, 0});
    p.step = 1;
    HT_CUDA_OK(cudaMemcpy(&amax, d_amax, 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(amax, big);
    for (float* ptr : {d_param, d_grad, d_m, d_v, d_amax}) cudaFree(ptr);
    cudaFree(d_bf16);
  }
}

// Two tensors in one launch (q|k|v then o): each its own maximum, split at a
// multiple of 4 (vector path) and elsewhere (scalar path).
TEST(AdamWCuda, AmaxSplitsBetweenTwoTensors) {
  HT_SKIP_WITHOUT_GPU();
  constexpr size_t n = 300000;
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> param(n), grad(n), zeros(n, 0.0f);
  for (size_t i = 0; i < n; ++i) param[i] = dist(rng) * 0.02f, grad[i] = dist(rng);
  AdamWParams p;
  p.lr = 1e-3f;
  p.step = 1;
  for (size_t split : {size_t{200000}, size_t{123457}}) {
    SCOPED_TRACE(split);
    std::vector<float> x = param;
    x[split - 1] = 0.5f;  // the first tensor's maximum, just before the split
    x[split] = -0.25f;    // the second's, just after
    float *d_param, *d_grad, *d_m, *d_v, *d_amax;
    __nv_bfloat16* d_bf16;
    HT_CUDA_OK(cudaMalloc(&d_param, n * 4));
    HT_CUDA_OK(cudaMalloc(&d_grad, n * 4));
    HT_CUDA_OK(cudaMalloc(&d_m, n * 4));
    HT_CUDA_OK(cudaMalloc(&d_v, n * 4));
    HT_CUDA_OK(cudaMalloc(&d_bf16, n * 2));
    HT_CUDA_OK(cudaMalloc(&d_amax, 2 * 4));
    HT_CUDA_OK(cudaMemcpy(d_param, x.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_grad, grad.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_m, zeros.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemcpy(d_v, zeros.data(), n * 4, cudaMemcpyHostToDevice));
    HT_CUDA_OK(cudaMemset(d_amax, 0, 2 * 4));
    cuda::AdamW(d_param, d_grad, d_m, d_v, d_bf16, n, p, nullptr, {d_amax, d_amax + 1, split});
    HT_CUDA_OK(cudaGetLastError());
    std::vector<__nv_bfloat16> bf16(n);
    float got[2] = {0, 0};
    HT_CUDA_OK(cudaMemcpy(bf16.data(), d_bf16, n * 2, cudaMemcpyDeviceToHost));
    HT_CUDA_OK(cudaMemcpy(got, d_amax, 2 * 4, cudaMemcpyDeviceToHost));
    float want[2] = {0, 0};
    for (size_t i = 0; i < n; ++i) {
      float& w = want[i < split ? 0 : 1];
      w = std::max(w, std::fabs(__bfloat162float(bf16[i])));
    }
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
    EXPECT_GT(want[0], 0.45f);
    EXPECT_LT(want[1], 0.45f);
    for (float* ptr : {d_param, d_grad, d_m, d_v, d_amax}) cudaFree(ptr);
    cudaFree(d_bf16);
  }
}

}  // namespace
}  // namespace hypertrain::kernels
