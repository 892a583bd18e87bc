#pragma once
// Warp-level building blocks for the tiled attention kernels (sm_80+):
// mma.sync m16n8k16 with fp32 accumulation, ldmatrix fragment loads, cp.async
// tile copies. Fragment layouts (PTX ISA, "mma.m16n8k16" for .bf16/.f16),
// with gid = lane / 4 and tig = lane % 4:
//   A 16x16 (row-major): a0 = A[gid][2tig..+1]   a1 = A[gid+8][2tig..+1]
//                        a2 = A[gid][2tig+8..+9] a3 = A[gid+8][2tig+8..+9]
//   B 16x8 (k x n):      b0 = B[2tig..+1][gid]   b1 = B[2tig+8..+9][gid]
//   C 16x8 fp32:         c0,c1 = C[gid][2tig..+1]  c2,c3 = C[gid+8][2tig..+1]
// The lower 16 bits of each 32-bit register hold the lower column (k) index.
// So the C fragments of two adjacent n-tiles, packed pairwise, are exactly the
// A fragment of one 16-wide k-tile (used for P·V, dS·K, P^T·dO, dS^T·Q).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace hypertrain::kernels::cuda::internal {

// Shared-memory tiles are row-major with rows padded by 8 elements (16 bytes):
// the 8 row addresses of one ldmatrix phase then fall into distinct banks.
template <int D>
constexpr int kPitch = D + 8;

#if defined(HT_ATTENTION_HOST_EMULATION)
// Mma16816, LdMatrixX4(Trans), CpAsync*, HT_DYNAMIC_SMEM, __syncthreads and
// __shfl_xor_sync come from attention_emulation.h (host threads stand in for
// the GPU's), which the emulation test includes first.
#else
#define HT_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);

template <>
__device__ __forceinline__ void Mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void Mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lane i gives the address of row i % 8 of matrix i / 8;
// register r[m] receives matrix m's row lane / 4, columns 2(lane % 4)..+1.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(smem_row))
               : "memory");
}

// Same with each matrix transposed: r[m] receives matrix m's rows
// 2(lane % 4)..+1 at column lane / 4.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(smem_row))
               : "memory");
}

// 16-byte global->shared copy; zero-fills the destination when !valid (the
// source is then not read).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif  // HT_ATTENTION_HOST_EMULATION

// A fragment of the 16x16 block at (row0, col0) of a row-major smem tile.
template <int D>
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const void* tile, int row0, int col0,
                                      int lane) {
  const auto* t = static_cast<const uint16_t*>(tile);
  LdMatrixX4(a, t + (row0 + (lane & 15)) * kPitch<D> + col0 + (lane >> 4) * 8);
}

// B fragments (b0,b1 of n-tile n0 in r[0..1], of n-tile n0+8 in r[2..3]) for
// the k-tile at k0 when the tile stores B transposed, i.e. as [n][k] rows
// (K for Q·K^T, V for dO·V^T, Q and dO for the key-major products).
template <int D>
__device__ __forceinline__ void LoadBNK(uint32_t (&r)[4], const void* tile, int n0, int k0,
                                        int lane) {
  const auto* t = static_cast<const uint16_t*>(tile);
  LdMatrixX4(r, t + (n0 + (lane & 7) + ((lane >> 4) << 3)) * kPitch<D> + k0 +
                    ((lane >> 3) & 1) * 8);
}

// Same when the tile stores B as [k][n] rows (V for P·V, K for dS·K, dO for
// P^T·dO, Q for dS^T·Q).
template <int D>
__device__ __forceinline__ void LoadBKN(uint32_t (&r)[4], const void* tile, int n0, int k0,
                                        int lane) {
  const auto* t = static_cast<const uint16_t*>(tile);
  LdMatrixX4Trans(r, t + (k0 + (lane & 15)) * kPitch<D> + n0 + (lane >> 4) * 8);
}

template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return bits;
}
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return bits;
}

// A fragment of k-tile kk from C fragments c[2kk], c[2kk+1] (see top).
template <typename T, int N>
__device__ __forceinline__ void PackA(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = PackPair<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = PackPair<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = PackPair<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = PackPair<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Starts copying rows [row0, row0 + ROWS) of a [seq, *] matrix (row stride
// `stride` elements, head columns starting at `plane`) into a padded tile;
// rows at or past `seq` become zeros.
template <int ROWS, int D, int THREADS, typename T>
__device__ __forceinline__ void LoadTileAsync(T* tile, const T* plane, int64_t stride, int row0,
                                              int seq, int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % THREADS == 0, "tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kChunks / THREADS; ++i) {
    const int c = tid + i * THREADS;
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    const bool valid = row0 + r < seq;
    const T* src = valid ? plane + int64_t(row0 + r) * stride + col : plane;
    CpAsync16(tile + r * kPitch<D> + col, src, valid);
  }
}

__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Stores a warp's 16 x D fp32 accumulator rows (row0 + gid, row0 + gid + 8)
// scaled per row, as T, skipping rows at or past seq.
template <typename T, int D>
__device__ __forceinline__ void StoreRows(T* plane, int64_t stride, int row0, int seq,
                                          const float (&acc)[D / 8][4], float scale_lo,
                                          float scale_hi, int lane) {
  const int gid = lane >> 2, tig = lane & 3;
  const int r_lo = row0 + gid, r_hi = r_lo + 8;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    const int col = nt * 8 + 2 * tig;
    if (r_lo < seq) {
      *reinterpret_cast<uint32_t*>(plane + int64_t(r_lo) * stride + col) =
          PackPair<T>(acc[nt][0] * scale_lo, acc[nt][1] * scale_lo);
    }
    if (r_hi < seq) {
      *reinterpret_cast<uint32_t*>(plane + int64_t(r_hi) * stride + col) =
          PackPair<T>(acc[nt][2] * scale_hi, acc[nt][3] * scale_hi);
    }
  }
}

}  // namespace hypertrain::kernels::cuda::internal
