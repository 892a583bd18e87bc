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

__device__ __forceinline__ float RoundBf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

// As EmbeddingBackwardKernel, for the elements of the run's row inside
// [lo, hi), with per-rank partial sums folded in rank order.
template <typename T>
__global__ void EmbeddingBackwardRangeKernel(float* __restrict__ dst, int64_t lo, int64_t hi,
                                             const T* __restrict__ dout,
                                             const int32_t* __restrict__ sorted_tokens,
                                             const int32_t* __restrict__ sorted_pos, int n,
                                             int n_per_rank, int cols, float inv_ranks,
                                             bool bf16_reduce) {
  const int start = blockIdx.x;
  const int tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;
  const int64_t row = static_cast<int64_t>(tok) * cols;
  const int64_t c0 = lo - row > 0 ? lo - row : 0;
  const int64_t c1 = hi - row < cols ? hi - row : cols;
  if (c0 >= c1) return;
  int end = start + 1;
  while (end < n && sorted_tokens[end] == tok) ++end;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    float acc = 0.0f, part = 0.0f;
    int rank = sorted_pos[start] / n_per_rank;
    for (int j = start; j < end; ++j) {
      const int p = sorted_pos[j];
      if (p / n_per_rank != rank) {
        acc = bf16_reduce ? RoundBf16(acc + RoundBf16(part)) : acc + part;
        part = 0.0f;
        rank = p / n_per_rank;
      }
      part += ToF(dout[static_cast<size_t>(p) * cols + c]);
    }
    acc = bf16_reduce ? RoundBf16(acc + RoundBf16(part)) : acc + part;
    // __fmul_rn: no FMA contraction with the add, as on the CPU.
    dst[row + c - lo] += __fmul_rn(acc, inv_ranks);
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

namespace {

// Sorts the n token ids (with their positions) into the scratch laid out as
// [positions][sorted ids][sorted positions][cub temp], so each backward kernel
// walks runs of equal ids in a fixed order (deterministic, no atomics).
struct SortedTokens {
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
};
cudaError_t SortTokens(const int32_t* tokens, int n, int vocab, void* scratch,
                       size_t scratch_bytes, cudaStream_t stream, SortedTokens* sorted) {
  char* p = static_cast<char*>(scratch);
  const size_t ints = Align256(sizeof(int32_t) * static_cast<size_t>(n));
  auto* pos = reinterpret_cast<int32_t*>(p);
  auto* sorted_tokens = reinterpret_cast<int32_t*>(p + ints);
  auto* sorted_pos = reinterpret_cast<int32_t*>(p + 2 * ints);
  void* cub_tmp = p + 3 * ints;
  size_t cub_bytes = scratch_bytes - 3 * ints;
  IotaKernel<<<CeilDiv(n, 256), 256, 0, stream>>>(pos, n);
  const cudaError_t err = cub::DeviceRadixSort::SortPairs(
      cub_tmp, cub_bytes, tokens, sorted_tokens, pos, sorted_pos, n, 0, KeyBits(vocab), stream);
  sorted->tokens = sorted_tokens;
  sorted->positions = sorted_pos;
  return err;
}

}  // namespace

template <typename T>
cudaError_t EmbeddingBackward(float* dtable, const T* dout, const int32_t* tokens, int n,
                              int cols, int vocab, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
  if (n <= 0 || cols <= 0 || vocab <= 0) return cudaErrorInvalidValue;
  if (scratch_bytes < EmbeddingBackwardScratchBytes(n, vocab)) return cudaErrorInvalidValue;
  SortedTokens sorted;
  const cudaError_t err = SortTokens(tokens, n, vocab, scratch, scratch_bytes, stream, &sorted);
  if (err != cudaSuccess) return err;
  EmbeddingBackwardKernel<T><<<n, 256, 0, stream>>>(dtable, dout, sorted.tokens, sorted.positions,
                                                    n, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t EmbeddingBackwardRange(float* dst, int64_t lo, int64_t hi, const T* dout,
                                   const int32_t* tokens, int n_per_rank, int ranks, int cols,
                                   int vocab, bool bf16_reduce, void* scratch, size_t scratch_bytes,
                                   cudaStream_t stream) {
  if (n_per_rank <= 0 || ranks <= 0 || cols <= 0 || vocab <= 0 || lo < 0 ||
      hi > static_cast<int64_t>(vocab) * cols) {
    return cudaErrorInvalidValue;
  }
  if (lo >= hi) return cudaSuccess;
  const int n = n_per_rank * ranks;
  if (scratch_bytes < EmbeddingBackwardScratchBytes(n, vocab)) return cudaErrorInvalidValue;
  SortedTokens sorted;
  const cudaError_t err = SortTokens(tokens, n, vocab, scratch, scratch_bytes, stream, &sorted);
  if (err != cudaSuccess) return err;
  EmbeddingBackwardRangeKernel<T>
      <<<n, 256, 0, stream>>>(dst, lo, hi, dout, sorted.tokens, sorted.positions, n, n_per_rank, cols,
                              1.0f / static_cast<float>(ranks), bf16_reduce);
  return cudaGetLastError();
}

#define HT_INSTANTIATE(T)                                                                         \
  template cudaError_t EmbeddingForward<T>(T*, const int32_t*, const T*, int, int, cudaStream_t); \
  template cudaError_t EmbeddingBackward<T>(float*, const T*, const int32_t*, int, int, int,      \
                                            void*, size_t, cudaStream_t);                         \
  template cudaError_t EmbeddingBackwardRange<T>(float*, int64_t, int64_t, const T*,              \
                                                 const int32_t*, int, int, int, int, bool, void*, \
                                                 size_t, cudaStream_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(__nv_bfloat16)
HT_INSTANTIATE(__half)
#undef HT_INSTANTIATE

}  // namespace hypertrain::kernels::cuda
