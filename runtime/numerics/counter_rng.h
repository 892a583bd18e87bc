#pragma once
// Counter-based random bits shared by the host and device code: the value for
// (key, index) is a pure function, so every backend, every rank and every
// recomputation draws the same. Dependency-free so nvcc-compiled kernels can
// include it (define HT_INIT_HOST_DEVICE as __host__ __device__ first).
#include <cstdint>

#ifndef HT_INIT_HOST_DEVICE
#define HT_INIT_HOST_DEVICE
#endif

namespace hypertrain::model {

HT_INIT_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// LoRA adapter dropout (runtime/model/peft.h): the key of one adapter input
// in one pass, and keep iff the 32-bit hash of (key, index) >= threshold =
// p * 2^32.
HT_INIT_HOST_DEVICE inline uint64_t DropoutKey(uint64_t seed, uint64_t pass, uint32_t layer,
                                               uint32_t target) {
  return SplitMix64(SplitMix64(SplitMix64(seed ^ 0x6C6F7261ull) + pass) +
                    ((static_cast<uint64_t>(layer) << 8) | target));
}
HT_INIT_HOST_DEVICE inline bool DropoutKeep(uint64_t key, uint64_t index, uint32_t threshold) {
  return static_cast<uint32_t>(SplitMix64(key + index) >> 32) >= threshold;
}

}  // namespace hypertrain::model
