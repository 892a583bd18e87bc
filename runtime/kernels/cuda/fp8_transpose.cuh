#pragma once
// The tile transpose shared by the FP8 kernels that write a transposed
// operand (fp8_cast.cu, fp8_swiglu.cu):
//
//   qt[c, r] = src.code(r, c)      for x [rows, cols] row-major, qt [cols, rows]
//
// `Source` produces the codes of a [rows, cols] tensor: Codes8(gr, gc, cols)
// gives columns gc .. gc + 7 of row gr packed into 8 bytes (vector path:
// gc % 8 == 0, aligned), Code1 one element; Start / Finish run once per
// thread before and after (scale load, amax commit). A source may also store
// the codes row-major itself.
#include <cstdint>

#include "runtime/kernels/cuda/common.cuh"

namespace hypertrain::kernels::cuda::fp8 {

// qt[c, r] = code(r, c) of `Source`, 64x64 tiles, 256 threads. Vector path:
// cols % 8 == 0, rows % 16 == 0 and aligned pointers (the model's shapes);
// else element by element. The vector path moves 4-byte words through shared
// memory and transposes 4 x 4 bytes in registers (byte permutes): one byte
// load per output byte made it shared-memory bound, below the DRAM rate.
constexpr int kTile = 64;

// The 4 x 4 byte transpose of words a[0..3] (a[k] = bytes 0..3 of row k):
// out[j] = bytes j of a[0], a[1], a[2], a[3].
__device__ __forceinline__ void Transpose4x4Bytes(const uint32_t a[4], uint32_t out[4]) {
  const uint32_t t0 = __byte_perm(a[0], a[1], 0x5140), t1 = __byte_perm(a[0], a[1], 0x7362);
  const uint32_t t2 = __byte_perm(a[2], a[3], 0x5140), t3 = __byte_perm(a[2], a[3], 0x7362);
  out[0] = __byte_perm(t0, t2, 0x5410);
  out[1] = __byte_perm(t0, t2, 0x7632);
  out[2] = __byte_perm(t1, t3, 0x5410);
  out[3] = __byte_perm(t1, t3, 0x7632);
}

// A 64 x 64 tile of codes in shared memory as 4-byte words, word w of row r
// at [r][w ^ ((r / 4) % 16)]: the swizzle keeps both phases' shared-memory
// accesses (nearly) free of bank conflicts without padding.
using WordTile = uint32_t[kTile][kTile / 4];

// Columns 4 cw .. 4 cw + 7 (cw even) of tile row r: one Codes8 word pair.
__device__ __forceinline__ void PutCodes8(WordTile& words, int r, int cw, uint2 codes) {
  const int swz = (r >> 2) & 15;
  words[r][cw ^ swz] = codes.x;
  words[r][(cw + 1) ^ swz] = codes.y;
}

// The store phase (all 256 threads, after a __syncthreads): qt[c, r] for the
// tile's rows r0 .. and output columns c0 .. (below col_end; col_end - c0 a
// multiple of 4 or past the tile). Thread t transposes the 4 x 4 bytes of
// rows 4 (t % 16) .. + 3, columns 4 (t / 16) .. + 3 (4 word loads, byte
// permutes) and writes 4 bytes into each of those 4 output rows: a warp
// writes 64 contiguous bytes of two output rows per store. The two
// half-warps read their rows in opposite order of parity (the rows' bank
// halves differ). rows % 4 == 0, qt 4-byte aligned.
__device__ __forceinline__ void StoreTransposed(const WordTile& words, uint8_t* __restrict__ qt,
                                                int r0, int c0, int rows, int col_end) {
  const int t = threadIdx.x;
  const int rg = t % 16, ow = t / 16, flip = (t / 16) & 1;
  const int gr = r0 + rg * 4, gc = c0 + ow * 4;
  if (gr >= rows || gc >= col_end) return;
  uint32_t v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = words[rg * 4 + (i ^ flip)][ow ^ rg];
  // a[k]: row 4 rg + k (v[i] holds row i ^ flip).
  const uint32_t a[4] = {flip ? v[1] : v[0], flip ? v[0] : v[1], flip ? v[3] : v[2],
                         flip ? v[2] : v[3]};
  uint32_t out[4];
  Transpose4x4Bytes(a, out);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    *reinterpret_cast<uint32_t*>(qt + size_t(gc + j) * rows + gr) = out[j];
  }
}

template <typename Source>
__global__ void TransposeTileKernel(uint8_t* __restrict__ qt, Source src, int rows, int cols,
                                    bool vec) {
  // One buffer for both paths' layouts.
  __shared__ __align__(16) uint8_t smem[kTile * (kTile + 8)];
  src.Start();
  const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  const int t = threadIdx.x;
  if (vec) {
    WordTile& words = *reinterpret_cast<WordTile*>(smem);
    // Load: thread t takes 8 consecutive columns (words 2 (t % 8) and
    // 2 (t % 8) + 1) of rows t / 8 and t / 8 + 32, both before any shared
    // store (so a source that only loads has both loads in flight).
    const int cw = (t % 8) * 2, rr = t / 8, gc = c0 + cw * 4;
    uint2 codes[2] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = r0 + rr + h * 32;
      if (gr < rows && gc < cols) codes[h] = src.Codes8(gr, gc, cols);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (r0 + rr + h * 32 < rows && gc < cols) PutCodes8(words, rr + h * 32, cw, codes[h]);
    }
    __syncthreads();
    StoreTransposed(words, qt, r0, c0, rows, cols);  // cols % 8 == 0
  } else {
    auto tile = reinterpret_cast<uint8_t(*)[kTile + 8]>(smem);
    for (int i = t; i < kTile * kTile; i += blockDim.x) {
      const int r = i / kTile, c = i % kTile;
      const int gr = r0 + r, gc = c0 + c;
      if (gr < rows && gc < cols) tile[r][c] = src.Code1(gr, gc, cols);
    }
    __syncthreads();
    for (int i = t; i < kTile * kTile; i += blockDim.x) {
      const int c = i / kTile, r = i % kTile;  // consecutive threads: consecutive output bytes
      const int gr = r0 + r, gc = c0 + c;
      if (gr < rows && gc < cols) qt[size_t(gc) * rows + gr] = tile[r][c];
    }
  }
  src.Finish();
}

}  // namespace hypertrain::kernels::cuda::fp8
