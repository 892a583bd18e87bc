// BitHash: equal bits hash equal; any single-bit change, a swap of two words
// and a change in a trailing partial word all change the hash.
#include "runtime/kernels/cuda/bit_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "runtime/kernels/cuda/test_util.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::kernels::cuda {
namespace {

using testing::DeviceBuffer;

unsigned long long HashOf(const std::vector<unsigned char>& bytes) {
  DeviceBuffer<unsigned char> d(bytes.size());
  DeviceBuffer<unsigned long long> out(1);
  EXPECT_EQ(cudaMemcpy(d.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(BitHash(d.get(), bytes.size(), out.get(), nullptr), cudaSuccess);
  return out.Download()[0];
}

TEST(BitHashTest, DetectsEveryKindOfChange) {
  HT_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  // 1 MiB + 3 bytes: many blocks, and a partial trailing word.
  std::vector<unsigned char> base((1 << 20) + 3);
  for (auto& b : base) b = static_cast<unsigned char>(rng());
  const unsigned long long h = HashOf(base);
  EXPECT_EQ(HashOf(base), h) << "not a function of the bits alone";
  std::set<unsigned long long> seen{h};
  for (size_t pos : {size_t{0}, size_t{5}, size_t{4096}, base.size() / 2, base.size() - 4,
                     base.size() - 1}) {
    for (int bit : {0, 7}) {
      auto v = base;
      v[pos] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_TRUE(seen.insert(HashOf(v)).second) << "byte " << pos << " bit " << bit;
    }
  }
  auto swapped = base;
  for (int i = 0; i < 4; ++i) std::swap(swapped[64 + i], swapped[128 + i]);
  ASSERT_NE(swapped, base);
  EXPECT_NE(HashOf(swapped), h) << "word order must matter";
}

TEST(BitHashTest, RejectsMisalignedInput) {
  HT_SKIP_WITHOUT_GPU();
  DeviceBuffer<unsigned char> d(64);
  DeviceBuffer<unsigned long long> out(1);
  EXPECT_EQ(BitHash(d.get() + 1, 16, out.get(), nullptr), cudaErrorMisalignedAddress);
}

}  // namespace
}  // namespace hypertrain::kernels::cuda
