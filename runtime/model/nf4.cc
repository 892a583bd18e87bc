#include "runtime/model/nf4.h"

#include <algorithm>
#include <cmath>

namespace hypertrain::model {

// The NF4 data type of QLoRA (bitsandbytes' NF4 table).
const float kNf4Codebook[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

int Nf4Encode(float v) {
  // Nearest entry: the codebook is sorted, so compare against the midpoints.
  int code = 0;
  for (int c = 1; c < 16; ++c) {
    if (v > 0.5f * (kNf4Codebook[c - 1] + kNf4Codebook[c])) code = c;
  }
  return code;
}

float Nf4Tensor::BlockScale(int64_t block) const {
  return scale_offset +
         static_cast<float>(scale_codes[block]) / 127.0f * scale_absmax[block / kNf4ScaleGroup];
}

int64_t Nf4Tensor::bytes() const {
  return static_cast<int64_t>(codes.size() + scale_codes.size() +
                              scale_absmax.size() * sizeof(float) + sizeof(float));
}

Nf4Tensor QuantizeNf4(const float* w, int64_t n) {
  Nf4Tensor q;
  q.numel = n;
  q.codes.assign(static_cast<size_t>((n + 1) / 2), 0);
  const int64_t nb = q.blocks();
  std::vector<float> absmax(static_cast<size_t>(nb), 0.0f);
  double sum = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t end = std::min(n, (b + 1) * kNf4BlockSize);
    float m = 0;
    for (int64_t i = b * kNf4BlockSize; i < end; ++i) m = std::max(m, std::fabs(w[i]));
    absmax[b] = m;
    sum += m;
    for (int64_t i = b * kNf4BlockSize; i < end; ++i) {
      const int c = m > 0 ? Nf4Encode(w[i] / m) : 7;  // an all-zero block: code of 0
      q.codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? c << 4 : c);
    }
  }
  // Double quantisation of the absmaxes.
  q.scale_offset = nb > 0 ? static_cast<float>(sum / static_cast<double>(nb)) : 0.0f;
  const int64_t groups = (nb + kNf4ScaleGroup - 1) / kNf4ScaleGroup;
  q.scale_absmax.assign(static_cast<size_t>(groups), 0.0f);
  q.scale_codes.assign(static_cast<size_t>(nb), 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t end = std::min(nb, (g + 1) * kNf4ScaleGroup);
    float s = 0;
    for (int64_t b = g * kNf4ScaleGroup; b < end; ++b) {
      s = std::max(s, std::fabs(absmax[b] - q.scale_offset));
    }
    q.scale_absmax[g] = s;
    for (int64_t b = g * kNf4ScaleGroup; b < end; ++b) {
      const float r = s > 0 ? (absmax[b] - q.scale_offset) / s * 127.0f : 0.0f;
      q.scale_codes[b] = static_cast<int8_t>(std::clamp(std::lround(r), -127L, 127L));
    }
  }
  return q;
}

void DequantizeNf4(const Nf4Tensor& q, int64_t begin, int64_t count, float* out) {
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = begin + k;
    out[k] = kNf4Codebook[q.Code(i)] * q.BlockScale(i / kNf4BlockSize);
  }
}

}  // namespace hypertrain::model
