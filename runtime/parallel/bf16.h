#pragma once
// bfloat16 on the host, as raw uint16 bits: round-to-nearest-even from fp32
// (NaN stays NaN), exact widening to fp32. Used by the Gloo backend to emulate
// NCCL's bf16 reductions on CPU.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hypertrain::parallel {

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// out[i] = bf16(a[i] + b[i]), the sum computed in fp32 and rounded once.
inline void Bf16Add(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
}

}  // namespace hypertrain::parallel
