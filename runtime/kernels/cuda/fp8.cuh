#pragma once
// Device helpers shared by the FP8 kernels (fp8_cast.cu, fp8_swiglu.cu):
// the saturating e4m3 / e5m2 conversions (round to nearest even, __NV_SATFINITE)
// and the block amax committed with one atomic per block.
#include <cuda_fp8.h>

#include <cstdint>

#include "runtime/kernels/cuda/common.cuh"

namespace hypertrain::kernels::cuda::fp8 {

template <bool kE5M2>
__device__ __forceinline__ uint16_t ToFp8x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kE5M2 ? __NV_E5M2 : __NV_E4M3);
}
template <bool kE5M2>
__device__ __forceinline__ uint8_t ToFp8(float a) {
  return __nv_cvt_float_to_fp8(a, __NV_SATFINITE, kE5M2 ? __NV_E5M2 : __NV_E4M3);
}
template <bool kE5M2>
__device__ __forceinline__ float FromFp8(uint8_t q) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(q, kE5M2 ? __NV_E5M2 : __NV_E4M3);
  return __half2float(__half(h));
}

// Non-negative floats order like their bit patterns as ints.
__device__ __forceinline__ void AtomicMaxNonNegative(float* addr, float v) {
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

// Block max of |x| into *amax (one atomic per block). Every thread of the
// block must call it. NaN inputs are skipped (fmaxf), infinities count.
__device__ __forceinline__ void CommitAmax(float local, float* amax) {
  __shared__ float scratch[32];
  const float m = BlockMax(local, scratch);
  if (threadIdx.x == 0) AtomicMaxNonNegative(amax, m);
}

// Four packed fp8 pairs as one 8-byte word.
__device__ __forceinline__ uint2 PackWords(const uint16_t w[4]) {
  uint2 out;
  out.x = uint32_t(w[0]) | (uint32_t(w[1]) << 16);
  out.y = uint32_t(w[2]) | (uint32_t(w[3]) << 16);
  return out;
}

// Eight values (already rounded as their tensor stores them: float, or bf16
// read as float) as one 8-byte word of codes, v[0] in the lowest byte; |v|
// folded into m. The cast every FP8 producer shares, so their codes and
// amaxes agree byte for byte.
template <bool kE5M2, typename T>
__device__ __forceinline__ uint2 Cast8(const T v[8], float scale, float& m) {
  uint16_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = ToF(v[2 * k]), b = ToF(v[2 * k + 1]);
    m = fmaxf(m, fmaxf(fabsf(a), fabsf(b)));
    w[k] = ToFp8x2<kE5M2>(a * scale, b * scale);
  }
  return PackWords(w);
}

// One value's code; |v| folded into m.
template <bool kE5M2>
__device__ __forceinline__ uint8_t Cast1(float v, float scale, float& m) {
  m = fmaxf(m, fabsf(v));
  return ToFp8<kE5M2>(v * scale);
}

}  // namespace hypertrain::kernels::cuda::fp8
