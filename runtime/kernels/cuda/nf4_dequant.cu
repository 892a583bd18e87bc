// NF4 dequantisation; the math is in nf4_dequant.h.
#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/nf4.cuh"
#include "runtime/kernels/cuda/nf4_dequant.h"

namespace hypertrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;
using nf4::Codebook;

template <typename T>
__global__ void Nf4DequantizeKernel(T* __restrict__ out, const uint8_t* __restrict__ codes,
                                    const int8_t* __restrict__ scale_codes,
                                    const float* __restrict__ scale_absmax, float offset,
                                    int64_t n, Codebook book) {
  __shared__ float table[16];
  nf4::LoadCodebook(book, table);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int byte = codes[i / 2];
    const int code = i % 2 == 0 ? byte >> 4 : byte & 0xF;
    const float m = nf4::BlockScale(scale_codes, scale_absmax, offset, i / nf4::kBlockSize);
    out[i] = FromF<T>(__fmul_rn(table[code], m));
  }
}

}  // namespace

template <typename T>
cudaError_t Nf4Dequantize(T* out, const Nf4View& q, const float (&codebook)[16],
                          cudaStream_t stream) {
  if (q.numel <= 0) return cudaSuccess;
  const Codebook book = nf4::MakeCodebook(codebook);
  const int64_t want = (q.numel + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(want < 65535 * 8 ? want : 65535 * 8);
  Nf4DequantizeKernel<T><<<blocks, kThreads, 0, stream>>>(out, q.codes, q.scale_codes,
                                                          q.scale_absmax, q.scale_offset, q.numel,
                                                          book);
  return cudaGetLastError();
}

template cudaError_t Nf4Dequantize<float>(float*, const Nf4View&, const float (&)[16], cudaStream_t);
template cudaError_t Nf4Dequantize<__nv_bfloat16>(__nv_bfloat16*, const Nf4View&,
                                                  const float (&)[16], cudaStream_t);
template cudaError_t Nf4Dequantize<__half>(__half*, const Nf4View&, const float (&)[16],
                                           cudaStream_t);

}  // namespace hypertrain::kernels::cuda
