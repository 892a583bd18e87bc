#pragma once
// Test helper: a merged PEFT export (`exp_dir`/merged) checked against the
// HF base it came from and the exported adapter (`exp_dir`/adapter), with
// plain loops in double: each weight the adapter does not touch equals the
// base; each adapted weight equals base' + scaling * B A to fp32 rounding,
// base' being the base or, for QLoRA, its NF4 round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/ckpt/peft_export.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/model/nf4.h"

namespace hypertrain::ckpt::testing {

inline std::vector<float> ReadAll(const SafetensorsReader& r, const std::string& name) {
  const StTensorInfo* t = r.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> v(t->numel());
  EXPECT_TRUE(r.ReadF32(*t, 0, t->numel(), v.data()).ok());
  return v;
}

enum class MergedBase { kExact, kNf4RoundTrip };

// Returns how many weights the adapter touched (each must have learnt
// something: some |scaling * B A| above 1e-4).
inline int ExpectMergedIsBasePlusScaledBA(const std::string& base_dir, const std::string& exp_dir,
                                          double scaling, int64_t rank, MergedBase base_kind) {
  auto adapter = LoadAdapter(exp_dir + "/adapter");
  EXPECT_TRUE(adapter.ok()) << adapter.status().ToString();
  auto b = SafetensorsReader::Open(base_dir + "/model.safetensors");
  auto mg = SafetensorsReader::Open(exp_dir + "/merged/model.safetensors");
  EXPECT_TRUE(b.ok() && mg.ok());
  if (!adapter.ok() || !b.ok() || !mg.ok()) return 0;
  int adapted = 0;
  for (const StTensorInfo& t : b->tensors()) {
    std::vector<float> w = ReadAll(*b, t.name);
    const std::vector<float> m = ReadAll(*mg, t.name);
    auto [la, lb] = adapter->ForWeight(t.name);
    if (la == nullptr) {  // norms and the embedding stay as they are
      EXPECT_EQ(w, m) << t.name;
      continue;
    }
    ++adapted;
    if (base_kind == MergedBase::kNf4RoundTrip) {
      const model::Nf4Tensor q = model::QuantizeNf4(w.data(), static_cast<int64_t>(w.size()));
      std::vector<float> wq(w.size());
      model::DequantizeNf4(q, 0, static_cast<int64_t>(w.size()), wq.data());
      EXPECT_NE(wq, w) << t.name << ": NF4 changed nothing";
      w.swap(wq);
    }
    const int64_t out = t.shape[0], in = t.shape[1];
    double max_delta = 0;
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        double d = 0;
        for (int64_t k = 0; k < rank; ++k) d += double(lb->values[o * rank + k]) * la->values[k * in + i];
        const double want = w[o * in + i] + scaling * d;
        EXPECT_NEAR(m[o * in + i], want, 1e-6 * (1 + std::abs(want))) << t.name << " [" << o << ", " << i << "]";
        if (std::abs(m[o * in + i] - want) > 1e-6 * (1 + std::abs(want))) return adapted;  // one report per run
        max_delta = std::max(max_delta, std::abs(scaling * d));
      }
    }
    EXPECT_GT(max_delta, 1e-4) << t.name << ": the adapter learnt nothing";
  }
  return adapted;
}

}  // namespace hypertrain::ckpt::testing
