#include <cub/device/device_radix_sort.cuh>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/embedding.h"

namespace hypertrain::kernels::cuda {
namespace {

template <typename T>
__global__ void EmbeddingForwardKernel(T* __restrict__ out, const int32_t* __restrict__ tokens,
                                       const T* __restrict__ table, int cols) {
  const int n = blockIdx.x;
  const size_t src = static_cast<size_t>(tokens[n]) * cols;
  const size_t dst = static_cast<size_t>(n) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[dst + c] = table[src + c];
}

__global__ void IotaKernel(int32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

// Block i owns the run of equal sorted tokens that starts at i (if one does).
template <typename T>
__global__ void EmbeddingBackwardKernel(float* __restrict__ dtable, const T* __restrict__ dout,
                                        const int32_t* __restrict__ sorted_tokens,
                                        const int32_t* __restrict__ sorted_pos, int n, int cols) {
  const int start = blockIdx.x;
  const int tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;
  int end = start + 1;
  while (end < n && sorted_tokens[end] == tok) ++end;
  float* row = dtable + static_cast<size_t>(tok) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.0f;
    for (int j = start; j < end; ++j) s += ToF(dout[static_cast<size_t>(sorted_pos[j]) * cols + c]);
    row[c] += s;
  }
}

int KeyBits(int vocab) {
  int bits = 1;
  while (bits < 31 && (1 << bits) < vocab) ++bits;
  return bits;
}

size_t Align256(size_t b) { return (b + 255) & ~size_t{255}; }

size_t CubBytes(int n, int vocab) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr),
                                  static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), n, 0, KeyBits(vocab));
  return bytes;
}

}  // namespace

template <typename T>
cudaError_t EmbeddingForward(T* out, const int32_t* tokens, const T* table, int n, int cols,
                             cudaStream_t stream) {
  if (n <= 0 || cols <= 0) return cudaErrorInvalidValue;
  EmbeddingForwardKernel<T><<<n, 256, 0, stream>>>(out, tokens, table, cols);
  return cudaGetLastError();
}

size_t EmbeddingBackwardScratchBytes(int n, int vocab) {
  return 3 * Align256(sizeof(int32_t) * static_cast<size_t>(n)) + Align256(CubBytes(n, vocab));
}

template <typename T>
cudaError_t EmbeddingBackward(float* dtable, const T* dout, const int32_t* tokens, int n,
                              int cols, int vocab, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
  if (n <= 0 || cols <= 0 || vocab <= 0) return cudaErrorInvalidValue;
  if (scratch_bytes < EmbeddingBackwardScratchBytes(n, vocab)) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(scratch);
  const size_t ints = Align256(sizeof(int32_t) * static_cast<size_t>(n));
  auto* pos = reinterpret_cast<int32_t*>(p);
  auto* sorted_tokens = reinterpret_cast<int32_t*>(p + ints);
  auto* sorted_pos = reinterpret_cast<int32_t*>(p + 2 * ints);
  void* cub_tmp = p + 3 * ints;
  size_t cub_bytes = scratch_bytes - 3 * ints;
  IotaKernel<<<CeilDiv(n, 256), 256, 0, stream>>>(pos, n);
  cudaError_t err = cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, tokens, sorted_tokens, pos,
                                                    sorted_pos, n, 0, KeyBits(vocab), stream);
  if (err != cudaSuccess) return err;
  EmbeddingBackwardKernel<T><<<n, 256, 0, stream>>>(dtable, dout, sorted_tokens, sorted_pos, n,
                                                    cols);
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                     \
  template cudaError_t EmbeddingForward<T>(T*, const int32_t*, const T*, int, int,           \
                                           cudaStream_t);                                     \
  template cudaError_t EmbeddingBackward<T>(float*, const T*, const int32_t*, int, int, int, \
                                            void*, size_t, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
