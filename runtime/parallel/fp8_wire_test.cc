// The FP8 gather record against one process casting whole tensors: for shard
// boundaries anywhere (inside tensors, inside norms, in the padding), the
// decoded unit equals cast-with-the-global-amax of every projection and the
// exact values of everything else.
#include "runtime/parallel/fp8_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/fp8.h"
#include "runtime/numerics/fp8_scale.h"
#include "runtime/model/init.h"

namespace hypertrain::parallel {
namespace {

model::ModelConfig Config() {
  model::ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 2;
  return c;
}

// What a single process gets: each projection cast with its own amax's
// scale and decoded; the rest unchanged.
std::vector<float> Reference(const model::UnitLayout& unit, const std::vector<float>& full) {
  std::vector<float> out = full;
  for (const model::TensorSlot& t : unit.tensors) {
    if (t.kind != model::TensorKind::kLinear) continue;
    const float amax = cpu::AbsMax(full.data() + t.offset, t.numel);
    const float s = model::Fp8ScaleFromAmax(amax, model::kFp8E4M3Max, 0, 1.0f);
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
      out[i] = cpu::Fp8Decode(cpu::Fp8Encode(full[i] * s, model::Fp8Format::kE4M3),
                              model::Fp8Format::kE4M3) / s;
    }
  }
  return out;
}

TEST(Fp8Wire, DecodedUnitEqualsSingleProcessCast) {
  for (int degree : {1, 2, 3, 8}) {
    model::LayoutOptions lo;
    lo.pad_multiple = degree * 64;
    const auto layout = *model::ParamLayout::Build(Config(), lo);
    const int u = model::ParamLayout::BlockUnit(1);
    const model::UnitLayout& unit = layout.unit(u);
    std::vector<float> full(unit.padded_numel);
    model::InitUnitParams(layout, u, 5, {0, unit.padded_numel}, full.data());
    // Norm weights that are not all 1 (their exact values must survive).
    for (const auto& t : unit.tensors) {
      if (t.kind == model::TensorKind::kNorm) {
        for (int64_t i = 0; i < t.numel; ++i) full[t.offset + i] = 1.0f + 1e-3f * static_cast<float>(i);
      }
    }
    const Fp8Wire w = Fp8Wire::ForUnit(layout, u, degree);
    ASSERT_FALSE(w.empty());
    EXPECT_EQ(w.num_tensors(), 7);
    // Every rank's local amax, then the max (what the all-reduce does).
    std::vector<float> amax(w.num_tensors(), 0.0f);
    const int64_t S = w.shard_elems();
    for (int r = 0; r < degree; ++r) {
      const auto a = w.LocalAmax(r, full.data() + r * S);
      for (int t = 0; t < w.num_tensors(); ++t) amax[t] = std::max(amax[t], a[t]);
    }
    const auto scales = Fp8Wire::Scales(amax);
    std::vector<uint8_t> records(w.record_bytes() * degree);
    for (int r = 0; r < degree; ++r) w.Encode(r, full.data() + r * S, scales, records.data() + r * w.record_bytes());
    std::vector<float> got(unit.padded_numel, std::nanf(""));
    ASSERT_TRUE(w.Decode(records.data(), got.data()).ok());
    EXPECT_EQ(got, Reference(unit, full)) << "degree " << degree;
    // About one byte per element on the wire (bf16 would be two).
    EXPECT_LT(w.record_bytes(), 1.1 * S + 4096) << degree;
  }
  EXPECT_TRUE(Fp8Wire::ForUnit(*model::ParamLayout::Build(Config()), 0, 2).empty());
}

TEST(Fp8Wire, DisagreeingScalesAreDataLoss) {
  model::LayoutOptions lo;
  lo.pad_multiple = 128;
  const auto layout = *model::ParamLayout::Build(Config(), lo);
  const int u = model::ParamLayout::BlockUnit(0);
  std::vector<float> full(layout.unit(u).padded_numel, 0.25f);
  const Fp8Wire w = Fp8Wire::ForUnit(layout, u, 2);
  std::vector<float> s0(w.num_tensors(), 4.0f), s1 = s0;
  s1[3] = 8.0f;
  std::vector<uint8_t> rec(2 * w.record_bytes());
  w.Encode(0, full.data(), s0, rec.data());
  w.Encode(1, full.data() + w.shard_elems(), s1, rec.data() + w.record_bytes());
  const Status st = w.Decode(rec.data(), full.data());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("shard rank 1"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace hypertrain::parallel
