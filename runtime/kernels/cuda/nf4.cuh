#pragma once
// Device pieces both NF4 kernels share (nf4_dequant.cu, nf4_fp8.cu): the
// format's constants, the codebook as a kernel argument and in shared memory,
// and a block's scale m_b rounded step by step as model::DequantizeNf4.
#include <cstdint>

namespace hypertrain::kernels::cuda::nf4 {

constexpr int kBlockSize = 64;    // model::kNf4BlockSize
constexpr int kScaleGroup = 256;  // model::kNf4ScaleGroup

// The 16 codebook values, passed by value to a kernel.
struct Codebook {
  float v[16];
};

inline Codebook MakeCodebook(const float (&codebook)[16]) {
  Codebook book;
  for (int c = 0; c < 16; ++c) book.v[c] = codebook[c];
  return book;
}

// The codebook in shared memory, `table` __shared__ float[16]; every thread
// of the block must call it. Indexed by a runtime code, the by-value
// parameter would be read from a local-memory copy per element.
__device__ __forceinline__ void LoadCodebook(const Codebook& book, float* table) {
  if (threadIdx.x < 16) table[threadIdx.x] = book.v[threadIdx.x];
  __syncthreads();
}

// m_b = offset + (scale_code[b] / 127) * scale_absmax[b / 256], no contraction.
__device__ __forceinline__ float BlockScale(const int8_t* scale_codes, const float* scale_absmax,
                                            float offset, int64_t b) {
  return __fadd_rn(offset, __fmul_rn(__fdiv_rn(static_cast<float>(scale_codes[b]), 127.0f),
                                     scale_absmax[b / kScaleGroup]));
}

}  // namespace hypertrain::kernels::cuda::nf4
