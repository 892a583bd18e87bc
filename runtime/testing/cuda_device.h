#pragma once
// Helpers for tests that need a GPU: they skip (and say why) where none is.
#include <cuda_runtime.h>

#include <string>

namespace hypertrain::testing {

// Empty when a CUDA device is usable, else the reason it is not.
inline std::string CudaUnavailableReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device";
  return {};
}

}  // namespace hypertrain::testing

#define HT_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                         \
    const std::string ht_reason = ::hypertrain::testing::CudaUnavailableReason(); \
    if (!ht_reason.empty()) GTEST_SKIP() << ht_reason;                         \
  } while (0)

#define HT_CUDA_OK(expr) ASSERT_EQ(cudaSuccess, (expr)) << cudaGetErrorString(cudaGetLastError())
