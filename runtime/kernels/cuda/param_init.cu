// Counter-based parameter initialisation; the math is model/init_math.h.
#define HT_INIT_HOST_DEVICE __host__ __device__
#include "runtime/kernels/cuda/param_init.h"

#include <algorithm>

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Elements [s.begin, s.end) of the unit into dst (dst[0] is element `base`).
__global__ void InitSegmentKernel(model::InitSegment s, uint64_t seed, uint64_t unit, int64_t base,
                                  float* __restrict__ dst) {
  const int64_t n = s.end - s.begin;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = s.begin + k;
    dst[i - base] = model::InitValueAt(s.rule, s.divisor, seed, unit, static_cast<uint64_t>(i));
  }
}

}  // namespace

cudaError_t InitParams(const model::InitSegment* segments, int num_segments, uint64_t seed,
                       uint64_t unit, int64_t begin, int64_t n, float* dst, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (cudaError_t e = cudaMemsetAsync(dst, 0, n * sizeof(float), stream); e != cudaSuccess) return e;
  for (int j = 0; j < num_segments; ++j) {
    const model::InitSegment& s = segments[j];
    if (s.begin < begin || s.end > begin + n || s.begin > s.end) return cudaErrorInvalidValue;
    if (s.rule == model::InitRule::kZero || s.end == s.begin) continue;
    const int64_t blocks = std::min<int64_t>((s.end - s.begin + kThreads - 1) / kThreads, 65536);
    InitSegmentKernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(s, seed, unit, begin, dst);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace hypertrain::kernels::cuda
