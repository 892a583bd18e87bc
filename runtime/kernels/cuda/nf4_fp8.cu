// NF4 -> bf16 -> e4m3 in one pass; the math is in nf4_fp8.h. Sixteen
// elements per thread: 8 code bytes in, 16 codes out, all in one block of 64,
// so one block scale (m_b, its fp32 division) per 16 elements. The codebook
// sits in shared memory (nf4.cuh).
#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8.cuh"
#include "runtime/kernels/cuda/nf4.cuh"
#include "runtime/kernels/cuda/nf4_fp8.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;
using nf4::BlockScale;
using nf4::Codebook;

// The dequantised value as the bf16 block would hold it, read back as float.
__device__ __forceinline__ float Value(const float* book, uint32_t code, float m) {
  return __bfloat162float(__float2bfloat16_rn(__fmul_rn(book[code], m)));
}

// Four code bytes (8 elements, element 2k in byte k's high nibble) as 8 codes.
__device__ __forceinline__ uint2 Eight(const float* book, uint32_t bytes, float m, float scale) {
  uint16_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t byte = (bytes >> (8 * k)) & 0xFF;
    w[k] = fp8::ToFp8x2<false>(Value(book, byte >> 4, m) * scale, Value(book, byte & 0xF, m) * scale);
  }
  return fp8::PackWords(w);
}

__global__ void Nf4ToFp8Kernel(uint8_t* __restrict__ q, const uint8_t* __restrict__ codes,
                               const int8_t* __restrict__ scale_codes,
                               const float* __restrict__ scale_absmax, float offset, int64_t n,
                               bool vec, const float* __restrict__ scale_p, Codebook book) {
  __shared__ float table[16];
  nf4::LoadCodebook(book, table);
  const float scale = *scale_p;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n16 = vec ? n / 16 : 0;
  for (int64_t g = tid; g < n16; g += stride) {  // elements 16g .. 16g + 15: one block of 64
    const uint2 bytes = reinterpret_cast<const uint2*>(codes)[g];
    const float m = BlockScale(scale_codes, scale_absmax, offset, (g * 16) / nf4::kBlockSize);
    const uint2 lo = Eight(table, bytes.x, m, scale), hi = Eight(table, bytes.y, m, scale);
    reinterpret_cast<uint4*>(q)[g] = make_uint4(lo.x, lo.y, hi.x, hi.y);
  }
  for (int64_t i = n16 * 16 + tid; i < n; i += stride) {
    const uint32_t byte = codes[i / 2];
    const uint32_t code = i % 2 == 0 ? byte >> 4 : byte & 0xF;
    const float m = BlockScale(scale_codes, scale_absmax, offset, i / nf4::kBlockSize);
    q[i] = fp8::ToFp8<false>(Value(table, code, m) * scale);
  }
}

}  // namespace

cudaError_t Nf4ToFp8E4m3(uint8_t* q, const Nf4View& v, const float (&codebook)[16],
                         const float* scale, cudaStream_t stream) {
  if (v.numel <= 0) return cudaSuccess;
  const Codebook book = nf4::MakeCodebook(codebook);
  // The vector path loads 8 code bytes and stores 16 codes per thread.
  const bool vec = (reinterpret_cast<uintptr_t>(v.codes) & 7) == 0 &&
                   (reinterpret_cast<uintptr_t>(q) & 15) == 0;
  const int64_t units = vec ? (v.numel + 15) / 16 : v.numel;
  const int64_t want = (units + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(want < 65535 * 8 ? want : 65535 * 8);
  Nf4ToFp8Kernel<<<blocks, kThreads, 0, stream>>>(q, v.codes, v.scale_codes, v.scale_absmax,
                                                   v.scale_offset, v.numel, vec, scale, book);
  return cudaGetLastError();
}

}  // namespace hypertrain::kernels::cuda
