#pragma once
// Test helpers for CUDA kernel parity tests: RAII device buffers, random
// inputs rounded to the compute type (so the fp64 CPU reference sees exactly
// the values the kernel sees), and comparisons that report the worst element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/dtype.h"

namespace hypertrain::kernels::cuda::testing {

inline float HostToF(float x) { return x; }
inline float HostToF(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float HostToF(__half x) { return __half2float(x); }
template <typename T>
T HostFromF(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}

// Device buffer of n elements of T, freed on destruction. Filled with a NaN
// poison pattern (0xFF bytes) so unwritten outputs are caught.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (cudaMalloc(&p_, (n ? n : 1) * sizeof(T)) != cudaSuccess) p_ = nullptr;
    if (p_) cudaMemset(p_, 0xFF, (n ? n : 1) * sizeof(T));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  bool ok() const { return p_ != nullptr; }
  cudaError_t Upload(const std::vector<T>& h) {
    return cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Random values of T (normal * scale); `ref` receives the same values in double.
template <typename T>
std::vector<T> RandomVector(size_t n, std::mt19937& rng, float scale, std::vector<double>* ref) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> v(n);
  if (ref) ref->resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = HostFromF<T>(dist(rng) * scale);
    if (ref) (*ref)[i] = HostToF(v[i]);
  }
  return v;
}

template <typename T>
std::vector<double> ToDouble(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = HostToF(v[i]);
  return d;
}

// Relative L2 error tolerated per compute type for one kernel's output
// (accumulation in fp32; bf16 has 8 mantissa bits, fp16 11).
template <typename T>
double RelTol() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1e-2;
  else return 2e-3;
}

// Expects ||got - ref|| / ||ref|| <= rel_tol, no NaN, and reports the worst
// element (index, got, ref) on failure.
inline void ExpectClose(const std::vector<double>& got, const std::vector<double>& ref,
                        double rel_tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0, den = 0, worst = -1;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": NaN (or unwritten) at " << i << " ref " << ref[i];
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    if (std::abs(d) > worst) {
      worst = std::abs(d);
      worst_i = i;
    }
  }
  const double rel = std::sqrt(num / (den > 0 ? den : 1.0));
  EXPECT_LE(rel, rel_tol) << what << ": relative L2 error " << rel << " (tol " << rel_tol
                          << "); worst |diff| " << worst << " at " << worst_i << ": got "
                          << got[worst_i] << " ref " << ref[worst_i] << " (n=" << got.size()
                          << ")";
  EXPECT_GT(den, 0.0) << what << ": reference is all zeros, the test proves nothing";
}

}  // namespace hypertrain::kernels::cuda::testing

#define HT_CUDA_ASSERT(expr)                                                   \
  do {                                                                         \
    const cudaError_t ht_e = (expr);                                           \
    ASSERT_EQ(ht_e, cudaSuccess) << #expr << ": " << cudaGetErrorString(ht_e); \
  } while (0)
