// NF4 storage (QLoRA's frozen base) on random weights: nearest-code encoding,
// packing, double-quantised scales, error bounds, ranges and the size.
#include "runtime/model/nf4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/model/config.h"

namespace hypertrain::model {
namespace {

TEST(Nf4Test, CodebookIsSortedWithExactEnds) {
  EXPECT_EQ(kNf4Codebook[0], -1.0f);
  EXPECT_EQ(kNf4Codebook[7], 0.0f);
  EXPECT_EQ(kNf4Codebook[15], 1.0f);
  for (int c = 1; c < 16; ++c) EXPECT_LT(kNf4Codebook[c - 1], kNf4Codebook[c]);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(Nf4Encode(kNf4Codebook[c]), c);
}

TEST(Nf4Test, EncodeIsTheNearestEntry) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.2f, 1.2f);
  for (int k = 0; k < 100000; ++k) {
    const float v = u(rng);
    const int c = Nf4Encode(v);
    for (int o = 0; o < 16; ++o) {
      ASSERT_LE(std::fabs(v - kNf4Codebook[c]), std::fabs(v - kNf4Codebook[o]))
          << v << " coded " << c << " but " << o << " is nearer";
    }
  }
}

TEST(Nf4Test, RoundTripOfRandomWeights) {
  // 301 blocks (two double-quantisation groups, a short last block), normal
  // weights with a per-block spread so the absmaxes differ.
  const int64_t n = 300 * kNf4BlockSize + 17;
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> w(n);
  for (int64_t i = 0; i < n; ++i) w[i] = d(rng) * 0.02f * (1.0f + (i / kNf4BlockSize) % 5);
  // An all-zero block stays zero.
  for (int64_t i = 5 * kNf4BlockSize; i < 6 * kNf4BlockSize; ++i) w[i] = 0.0f;
  const Nf4Tensor q = QuantizeNf4(w.data(), n);
  ASSERT_EQ(q.blocks(), 301);
  ASSERT_EQ(q.scale_absmax.size(), 2u);
  ASSERT_EQ(q.codes.size(), static_cast<size_t>((n + 1) / 2));
  std::vector<float> back(n);
  DequantizeNf4(q, 0, n, back.data());
  double err2 = 0, ref2 = 0;
  for (int64_t b = 0; b < q.blocks(); ++b) {
    const int64_t lo = b * kNf4BlockSize, hi = std::min(n, lo + kNf4BlockSize);
    float m = 0;
    for (int64_t i = lo; i < hi; ++i) m = std::max(m, std::fabs(w[i]));
    // The scale is within half an 8-bit step of the true absmax.
    const float step = q.scale_absmax[b / kNf4ScaleGroup] / 127.0f;
    EXPECT_LE(std::fabs(q.BlockScale(b) - m), 0.5f * step + 1e-7f) << "block " << b;
    for (int64_t i = lo; i < hi; ++i) {
      const int c = m > 0 ? Nf4Encode(w[i] / m) : 7;
      ASSERT_EQ(q.Code(i), c) << i;
      ASSERT_EQ(back[i], kNf4Codebook[c] * q.BlockScale(b)) << i;
      // Largest half gap of the codebook: (1 - 0.6962) / 2, between -1 and -0.6962.
      EXPECT_LE(std::fabs(back[i] - w[i]), 0.1520f * m + 0.5f * step + 1e-7f) << i;
      err2 += double(back[i] - w[i]) * (back[i] - w[i]);
      ref2 += double(w[i]) * w[i];
    }
  }
  for (int64_t i = 5 * kNf4BlockSize; i < 6 * kNf4BlockSize; ++i) EXPECT_EQ(back[i], 0.0f);
  const double rel = std::sqrt(err2 / ref2);
  EXPECT_LT(rel, 0.12) << "relative RMS error of NF4 on normal weights";
  EXPECT_GT(rel, 0.01);  // it is a 4-bit code, not a copy
  // A range equals the slice of the whole.
  std::vector<float> part(1000);
  DequantizeNf4(q, 4321, 1000, part.data());
  for (int k = 0; k < 1000; ++k) ASSERT_EQ(part[k], back[4321 + k]);
}

TEST(Nf4Test, AboutFourBitsPerValueAndThe8bBaseFits) {
  const int64_t n = int64_t{4096} * 4096;
  std::vector<float> w(n, 0.01f);
  const Nf4Tensor q = QuantizeNf4(w.data(), n);
  const double bits = 8.0 * static_cast<double>(q.bytes()) / static_cast<double>(n);
  EXPECT_GT(bits, 4.12);
  EXPECT_LT(bits, 4.13);
  // The 8B QLoRA base: block projections in NF4, the rest (embedding, LM head,
  // norms) in bf16.
  auto c = NamedModelConfig("8b");
  ASSERT_TRUE(c.ok());
  const int64_t h = c->hidden_size;
  const int64_t proj = c->num_hidden_layers * (2 * h * c->q_dim() + 2 * h * c->kv_dim() +
                                               3 * h * c->intermediate_size);
  EXPECT_NEAR(static_cast<double>(proj), 6.98e9, 0.01e9);
  const int64_t rest = c->NumParams() - proj;
  const double gib = (proj * bits / 8.0 + rest * 2.0) / double(1 << 30);
  EXPECT_LT(gib, 5.5) << "QLoRA 8B base in GiB";
}

}  // namespace
}  // namespace hypertrain::model
