#include "runtime/kernels/cuda/bit_hash.h"

namespace hypertrain::kernels::cuda {
namespace {

// splitmix64's finaliser: a bijection with full avalanche.
__device__ __forceinline__ unsigned long long Mix(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Sum (mod 2^64) of Mix(position, word): order-independent, so the result does
// not depend on the launch shape or the atomic order.
__global__ void BitHashKernel(const unsigned* __restrict__ words, size_t n_words,
                              const unsigned char* __restrict__ tail, int tail_bytes,
                              unsigned long long* out) {
  unsigned long long acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n_words; i += stride) {
    acc += Mix((static_cast<unsigned long long>(i) << 32) ^ words[i] ^ (static_cast<unsigned long long>(i) >> 32));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && tail_bytes > 0) {
    unsigned w = 0;
    for (int b = 0; b < tail_bytes; ++b) w |= static_cast<unsigned>(tail[b]) << (8 * b);
    acc += Mix((static_cast<unsigned long long>(n_words) << 32) ^ w ^ 0x9e3779b97f4a7c15ull);
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

}  // namespace

cudaError_t BitHash(const void* data, size_t bytes, unsigned long long* out, cudaStream_t stream) {
  if ((reinterpret_cast<size_t>(data) & 3) != 0) return cudaErrorMisalignedAddress;
  cudaError_t err = cudaMemsetAsync(out, 0, sizeof(*out), stream);
  if (err != cudaSuccess) return err;
  const size_t n_words = bytes / 4;
  const int tail = static_cast<int>(bytes % 4);
  const size_t blocks = (n_words + 255) / 256;
  BitHashKernel<<<static_cast<unsigned>(blocks == 0 ? 1 : (blocks < 2048 ? blocks : 2048)), 256, 0,
                  stream>>>(static_cast<const unsigned*>(data), n_words,
                            static_cast<const unsigned char*>(data) + n_words * 4, tail, out);
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
