#pragma once
// NF4 dequantisation on the device (QLoRA's frozen base; the format and the
// CPU reference are runtime/model/nf4.h). Element i of an NF4 tensor:
//   m_b    = offset + (scale_code[b] / 127) * scale_absmax[b / 256],  b = i / 64
//   out[i] = codebook[code_i] * m_b
// in fp32 with every operation rounded separately (no contraction), so it is
// bit for bit model::DequantizeNf4; then rounded to T (nearest even).
#include <cuda_runtime.h>

#include <cstdint>

namespace hypertrain::kernels::cuda {

struct Nf4View {
  const uint8_t* codes = nullptr;        // (numel + 1) / 2 bytes, even element high nibble
  const int8_t* scale_codes = nullptr;   // one per block of 64
  const float* scale_absmax = nullptr;   // one per 256 blocks
  float scale_offset = 0;
  int64_t numel = 0;
};

// out[0, numel) = dequant(q); codebook: model::kNf4Codebook.
template <typename T>
cudaError_t Nf4Dequantize(T* out, const Nf4View& q, const float (&codebook)[16],
                          cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
