#pragma once
// The rotate-half rotation of one (x[i], x[i + D/2]) pair (rope.h), shared by
// the RoPE kernels and the FP8 RoPE backward (fp8_rope.cu) so both round
// alike: explicit fma / mul keep the compiler from contracting them
// differently in different kernels.
//
//   o1 = x1 * c - x2 * s        o2 = x2 * c + x1 * s
//
// (s carries the sign: the backward rotates by -angle.)
namespace hypertrain::kernels::cuda {

__device__ __forceinline__ void RotateHalfPair(float x1, float x2, float c, float s, float& o1,
                                               float& o2) {
  o1 = __fmaf_rn(x1, c, -__fmul_rn(x2, s));
  o2 = __fmaf_rn(x2, c, __fmul_rn(x1, s));
}

}  // namespace hypertrain::kernels::cuda
