#pragma once
// NF4 straight to e4m3 codes (QLoRA with model.peft.fp8_base): one pass over
// the NF4 store where Nf4Dequantize<bf16> then Fp8Cast made two, with the
// same value rounded the same way at every stage, so the codes are those two
// kernels' bit for bit. Element i:
//   v_i    = bf16(codebook[code_i] * m_b)          (nf4_dequant.h, fp32 then bf16, nearest even)
//   q[i]   = e4m3(v_i * scale)                     (saturating, nearest even; fp8_cast.h)
// with *scale read on the device (a per-weight scale the caller computed once
// from the dequantised values' amax).
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/kernels/cuda/nf4_dequant.h"

namespace hypertrain::kernels::cuda {

// q[0, v.numel) = e4m3(bf16(dequant(v)) * *scale); codebook: model::kNf4Codebook.
cudaError_t Nf4ToFp8E4m3(uint8_t* q, const Nf4View& v, const float (&codebook)[16],
                         const float* scale, cudaStream_t stream);

}  // namespace hypertrain::kernels::cuda
