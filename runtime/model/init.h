#pragma once
// Deterministic parameter initialisation shared by every backend.
//
// The value of element i of unit u depends only on (seed, u, i): a
// counter-based hash, not a sequential RNG, so any rank can initialise any
// owned range of any unit and get the same numbers as a single process, on
// CPU or GPU (InitValue is plain integer/float math, usable from device code
// when HT_INIT_HOST_DEVICE is defined as __host__ __device__).
// Linear and embedding weights ~ N(0, 0.02) (HF initializer_range); norm
// weights = 1; alignment gaps and padding = 0. LoRA adapters as PEFT
// initialises them: lora_A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with
// a = sqrt(5)), lora_B = 0, so a fresh adapter changes nothing.
#include <cmath>
#include <cstdint>

#include "runtime/model/counter_rng.h"
#include "runtime/model/layout.h"

namespace hypertrain::model {

inline constexpr float kInitStd = 0.02f;

// Standard normal sample for counter (seed, unit, index) via Box-Muller.
HT_INIT_HOST_DEVICE inline float NormalAt(uint64_t seed, uint64_t unit, uint64_t index) {
  const uint64_t h = SplitMix64(SplitMix64(seed ^ (unit * 0xD1B54A32D192ED03ull)) + index);
  const double u1 = (static_cast<double>(h >> 40) + 1.0) / 16777217.0;  // (0, 1]
  const double u2 = static_cast<double>(h & 0xFFFFFF) / 16777216.0;     // [0, 1)
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Uniform sample in [-1, 1) for counter (seed, unit, index).
HT_INIT_HOST_DEVICE inline float UniformAt(uint64_t seed, uint64_t unit, uint64_t index) {
  const uint64_t h = SplitMix64(SplitMix64(seed ^ (unit * 0xD1B54A32D192ED03ull)) + index);
  return static_cast<float>(static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

// Fills dst[0 .. range.size()) with the initial values of unit elements
// [range.begin, range.end).
void InitUnitParams(const ParamLayout& layout, int unit, uint64_t seed, Range range, float* dst);

}  // namespace hypertrain::model
