#pragma once
// The tile transpose shared by the FP8 kernels that write a transposed
// operand (fp8_cast.cu, fp8_swiglu.cu, fp8_rmsnorm.cu):
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
// else element by element.
constexpr int kTile = 64;

// The 64x64 tile at rows r0.., columns c0.. of `src` into qt, through `tile`
// (shared). All 256 threads of the block call it; a caller that reuses
// `tile` for another tile must __syncthreads() first (the store phase reads it).
template <typename Source>
__device__ __forceinline__ void TransposeTile(uint8_t (&tile)[kTile][kTile + 8],
                                              uint8_t* __restrict__ qt, Source& src, int r0,
                                              int c0, int rows, int cols, bool vec) {
  const int t = threadIdx.x;
  if (vec) {
    // Load: thread t takes 8 consecutive columns of rows (t / 8) and (t / 8) + 32.
    const int cg = (t % 8) * 8, rr = t / 8;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rr + h * 32;
      const int gr = r0 + r, gc = c0 + cg;
      if (gr < rows && gc < cols) *reinterpret_cast<uint2*>(&tile[r][cg]) = src.Codes8(gr, gc, cols);
    }
    __syncthreads();
    // Store: thread t writes 16 consecutive rows (t % 4) * 16 .. of output row
    // (column) t / 4: one 16-byte store.
    const int oc = t / 4, seg = (t % 4) * 16;
    const int gc = c0 + oc, gr = r0 + seg;
    if (gc < cols && gr < rows) {
      uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        w[k] = uint32_t(tile[seg + 4 * k][oc]) | (uint32_t(tile[seg + 4 * k + 1][oc]) << 8) |
               (uint32_t(tile[seg + 4 * k + 2][oc]) << 16) | (uint32_t(tile[seg + 4 * k + 3][oc]) << 24);
      }
      *reinterpret_cast<uint4*>(qt + size_t(gc) * rows + gr) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
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
}

// One tile per block: blockIdx.y = row tile, blockIdx.x = column tile.
template <typename Source>
__global__ void TransposeTileKernel(uint8_t* __restrict__ qt, Source src, int rows, int cols, bool vec) {
  // Rows padded to a multiple of 8 bytes: the load phase stores 8 bytes at once.
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 8];
  src.Start();
  TransposeTile(tile, qt, src, blockIdx.y * kTile, blockIdx.x * kTile, rows, cols, vec);
  src.Finish();
}

}  // namespace hypertrain::kernels::cuda::fp8
