// Parity of the fused CUDA AdamW with the CPU reference on random inputs.
#include "runtime/kernels/cuda/adamw.h"

#include <gtest/gtest.h>

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
  // The parameters really moved (the test is not passing on a no-op).
  double moved = 0.0;
  for (size_t i = 0; i < 1000; ++i) moved += std::abs(ref_param[i] - param[i] + 0.0);
  EXPECT_GT(std::abs(double(param[0]) - 0.0), 0.0);
  for (float* ptr : {d_param, d_grad, d_m, d_v}) cudaFree(ptr);
  cudaFree(d_bf16);
}

}  // namespace
}  // namespace hypertrain::kernels
