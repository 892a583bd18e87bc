#pragma once
// NF4: the 4-bit NormalFloat storage of QLoRA's frozen base (peft_type qlora;
// Dettmers et al. 2023, the layout bitsandbytes uses).
//
// A weight tensor (row-major, n values) is cut into blocks of 64. Each block
// keeps its absmax m_b and one 4-bit code per value: the index of the
// codebook entry nearest to w / m_b (kNf4Codebook: 16 quantiles of N(0, 1)
// scaled to [-1, 1], with an exact 0). Two codes per byte, the even element in
// the high nibble. The absmaxes are double-quantised: their mean is kept as
// an fp32 offset and (m_b - offset) is stored as a signed 8-bit code per
// block, in groups of 256 blocks each with its own fp32 absmax s_g:
//   m_b ~= offset + code_b / 127 * s_g
//   w_i ~= kNf4Codebook[code_i] * m_b
// (bitsandbytes stores the 8-bit scale codes with its dynamic 8-bit map; here
// they are linear, which the same 8 bits hold to within s_g / 254.)
// About 4.127 bits per value: the 8B model's block projections (6.98 B
// values) take 3.6 GB, the whole QLoRA base with bf16 embeddings, norms and
// LM head about 5.7 GB.
#include <cstdint>
#include <vector>

namespace hypertrain::model {

inline constexpr int kNf4BlockSize = 64;
inline constexpr int kNf4ScaleGroup = 256;  // blocks per double-quantisation group
extern const float kNf4Codebook[16];

// Index of the codebook entry nearest to v (v in [-1, 1]; clamped outside).
int Nf4Encode(float v);

struct Nf4Tensor {
  int64_t numel = 0;
  std::vector<uint8_t> codes;        // (numel + 1) / 2 bytes
  std::vector<int8_t> scale_codes;   // one per block
  std::vector<float> scale_absmax;   // one per group of kNf4ScaleGroup blocks
  float scale_offset = 0;            // mean of the blocks' absmax

  int64_t blocks() const { return (numel + kNf4BlockSize - 1) / kNf4BlockSize; }
  // The block's dequantised absmax m_b.
  float BlockScale(int64_t block) const;
  int Code(int64_t i) const { return i % 2 == 0 ? codes[i / 2] >> 4 : codes[i / 2] & 0xF; }
  // Storage bytes (codes, scale codes, group absmaxes, offset).
  int64_t bytes() const;
};

Nf4Tensor QuantizeNf4(const float* w, int64_t n);

// out[k] = dequantised value of element begin + k, k < count.
void DequantizeNf4(const Nf4Tensor& q, int64_t begin, int64_t count, float* out);

}  // namespace hypertrain::model
