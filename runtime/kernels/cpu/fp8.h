#pragma once
// FP8 reference codec and casts (the CPU reference of kernels/cuda/fp8_cast.h).
//
// Formats (OCP 8-bit floating point): e4m3 ("fn": bias 7, 3 mantissa bits, no
// infinities, max 448, smallest subnormal 2^-9) and e5m2 (bias 15, 2 mantissa
// bits, max 57344, smallest subnormal 2^-16). Encoding rounds to nearest, ties
// to even, and saturates: |x| beyond the max (infinities included) becomes
// +-max (CUDA's __NV_SATFINITE). NaN becomes the format's NaN (0x7F / 0x7E
// with the sign bit of x).
//
//   CastToFp8:          q[i] = fp8(x[i] * scale),  amax = max |x[i]|
//   CastTransposeToFp8: qt[c * rows + r] = fp8(x[r * cols + c] * scale)
#include <cstddef>
#include <cstdint>

#include "runtime/model/fp8.h"

namespace hypertrain::cpu {

uint8_t Fp8Encode(float x, model::Fp8Format f);
float Fp8Decode(uint8_t q, model::Fp8Format f);

// max |x[i]| over n values; NaN values are skipped (as the CUDA kernels do).
float AbsMax(const float* x, size_t n);
// q[i] = Fp8Encode(x[i] * scale); returns AbsMax(x, n).
float CastToFp8(uint8_t* q, const float* x, size_t n, float scale, model::Fp8Format f);
// x is [rows, cols] row-major; qt is [cols, rows]. Returns AbsMax.
float CastTransposeToFp8(uint8_t* qt, const float* x, int64_t rows, int64_t cols, float scale,
                         model::Fp8Format f);
// y[i] = Fp8Decode(q[i]) * scale_inv.
void Fp8Dequantize(float* y, const uint8_t* q, size_t n, float scale_inv, model::Fp8Format f);

}  // namespace hypertrain::cpu
