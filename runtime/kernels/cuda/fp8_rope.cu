// The RoPE backward with the FP8 cast fused (contract in fp8_rope.h).
#include "runtime/kernels/cuda/fp8_rope.h"

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"
#include "runtime/kernels/cuda/fp8_transpose.cuh"
#include "runtime/kernels/cuda/rope.cuh"

namespace hypertrain::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

// The gradient's codes as TransposeTileKernel reads them (fp8_transpose.cuh):
// each value rotated back (columns below rope_cols), rounded to bf16 as
// RopeBackward stores it, cast as Fp8Cast casts it; also stores the codes
// row-major into q (when not null) and folds |g| into *amax.
template <bool kE5M2>
struct RopeBackwardSource {
  uint8_t* q;
  const bf16* x;
  const float* table;  // [seq_len][half] cos, then the same of sin
  const float* scale_p;
  float* amax;
  int seq_len, half, rope_cols;
  float scale = 0.0f;
  float m = 0.0f;

  __device__ void Start() { scale = *scale_p; }

  // cos and -sin (the backward's rotation) of pair j at row gr's position.
  __device__ void CosSin(int gr, int j, float& c, float& s) const {
    const size_t at = size_t(gr % seq_len) * half + j;
    c = table[at];
    s = -table[size_t(seq_len) * half + at];
  }

  __device__ float Value(int gr, int gc, int cols) const {
    const bf16* row = x + size_t(gr) * cols;
    if (gc >= rope_cols) return ToF(row[gc]);
    const int i = gc % (2 * half), base = gc - i;
    const int j = i < half ? i : i - half;
    float c, s, o1, o2;
    CosSin(gr, j, c, s);
    RotateHalfPair(ToF(row[base + j]), ToF(row[base + j + half]), c, s, o1, o2);
    return ToF(FromF<bf16>(i < half ? o1 : o2));
  }

  // Vector path: gc % 8 == 0 and half % 8 == 0, so the eight columns lie in
  // one half of one head (or all in dv).
  __device__ uint2 Codes8(int gr, int gc, int cols) {
    const bf16* row = x + size_t(gr) * cols;
    float v[8];
    const Pack<bf16> self = LoadPack(row + gc);
    if (gc >= rope_cols) {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = ToF(self.v[k]);
    } else {
      const int i = gc % (2 * half);
      const bool first = i < half;
      const int j = first ? i : i - half;
      const Pack<bf16> other = LoadPack(row + (first ? gc + half : gc - half));
      // Eight cos and eight sin: 32-byte aligned (half % 8 == 0, j % 8 == 0).
      const size_t at = size_t(gr % seq_len) * half + j;
      const float4* cs = reinterpret_cast<const float4*>(table + at);
      const float4* sn = reinterpret_cast<const float4*>(table + size_t(seq_len) * half + at);
      const float4 c0 = cs[0], c1 = cs[1], s0 = sn[0], s1 = sn[1];
      const float cv[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
      const float sv[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float c = cv[k], s = -sv[k];
        float o1, o2;
        const float mine = ToF(self.v[k]), partner = ToF(other.v[k]);
        if (first) {
          RotateHalfPair(mine, partner, c, s, o1, o2);
          v[k] = ToF(FromF<bf16>(o1));
        } else {
          RotateHalfPair(partner, mine, c, s, o1, o2);
          v[k] = ToF(FromF<bf16>(o2));
        }
      }
    }
    const uint2 out = fp8::Cast8<kE5M2>(v, scale, m);
    if (q != nullptr) *reinterpret_cast<uint2*>(q + size_t(gr) * cols + gc) = out;
    return out;
  }

  __device__ uint8_t Code1(int gr, int gc, int cols) {
    const uint8_t b = fp8::Cast1<kE5M2>(Value(gr, gc, cols), scale, m);
    if (q != nullptr) q[size_t(gr) * cols + gc] = b;
    return b;
  }

  __device__ void Finish() {
    if (amax != nullptr) fp8::CommitAmax(m, amax);
  }
};

}  // namespace

cudaError_t RopeBackwardFp8Transpose(uint8_t* q, uint8_t* qt, const bf16* dqkv, int rows, int cols,
                                     const float* table, int seq_len, int rope_heads, int head_dim,
                                     const float* scale, float* amax, model::Fp8Format format,
                                     cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (seq_len <= 0 || rope_heads < 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      static_cast<long>(rope_heads) * head_dim > cols || qt == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int half = head_dim / 2;
  const bool vec = cols % 8 == 0 && half % 8 == 0 && rows % 16 == 0 && Aligned16(dqkv) &&
                   Aligned16(table) && Aligned16(qt) && (reinterpret_cast<uintptr_t>(q) & 7) == 0;
  const dim3 grid(CeilDiv(cols, fp8::kTile), CeilDiv(rows, fp8::kTile));
  const int rope_cols = rope_heads * head_dim;
  if (format == model::Fp8Format::kE5M2) {
    const RopeBackwardSource<true> src{q, dqkv, table, scale, amax, seq_len, half, rope_cols};
    fp8::TransposeTileKernel<<<grid, 256, 0, stream>>>(qt, src, rows, cols, vec);
  } else {
    const RopeBackwardSource<false> src{q, dqkv, table, scale, amax, seq_len, half, rope_cols};
    fp8::TransposeTileKernel<<<grid, 256, 0, stream>>>(qt, src, rows, cols, vec);
  }
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
