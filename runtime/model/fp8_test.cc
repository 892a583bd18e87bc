// Delayed scaling against a straightforward reference: per slot, a queue of
// the last history_len amaxes and the largest power of two that keeps
// amax * scale within the format's max (found by search, not by formula).
#include "runtime/model/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <random>

namespace hypertrain::model {
namespace {

float ReferenceScale(float amax, float fp8_max, int margin, float prev) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return prev;
  int e = 200;
  while (static_cast<double>(amax) * std::ldexp(1.0, e) > fp8_max) --e;
  e -= margin;
  e = std::max(kFp8MinScaleExp, std::min(kFp8MaxScaleExp, e));
  return std::ldexp(1.0f, e);
}

TEST(Fp8Scale, PowerOfTwoWithinRangeOnRandomAmaxes) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(0.5f, 1.0f);
  for (int i = 0; i < 20000; ++i) {
    const float amax = std::ldexp(mant(rng), static_cast<int>(rng() % 160) - 100);
    for (float fmax : {kFp8E4M3Max, kFp8E5M2Max}) {
      for (int margin : {0, 1, 3}) {
        const float s = Fp8ScaleFromAmax(amax, fmax, margin, 1.0f);
        ASSERT_EQ(s, ReferenceScale(amax, fmax, margin, 1.0f)) << amax << " " << fmax;
        int e = 0;
        ASSERT_EQ(std::frexp(s, &e), 0.5f) << "not a power of two: " << s;
        if (margin == 0) {
          ASSERT_LE(static_cast<double>(amax) * s, fmax);
          ASSERT_GT(static_cast<double>(amax) * s, fmax / 2.0);
        }
      }
    }
  }
}

TEST(Fp8Scale, EdgeCases) {
  EXPECT_EQ(Fp8ScaleFromAmax(448.0f, kFp8E4M3Max, 0, 5.0f), 1.0f);   // exactly at the max
  EXPECT_EQ(Fp8ScaleFromAmax(224.0f, kFp8E4M3Max, 0, 5.0f), 2.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(224.1f, kFp8E4M3Max, 0, 5.0f), 1.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(1.0f, kFp8E4M3Max, 0, 5.0f), 256.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(1.0f, kFp8E5M2Max, 0, 5.0f), 32768.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(0.0f, kFp8E4M3Max, 0, 5.0f), 5.0f);  // keeps the previous
  EXPECT_EQ(Fp8ScaleFromAmax(INFINITY, kFp8E4M3Max, 0, 5.0f), 5.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(NAN, kFp8E4M3Max, 0, 5.0f), 5.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(-1.0f, kFp8E4M3Max, 0, 5.0f), 5.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(1e-40f, kFp8E4M3Max, 0, 5.0f), std::ldexp(1.0f, kFp8MaxScaleExp));
  EXPECT_EQ(Fp8ScaleFromAmax(3.4e38f, kFp8E4M3Max, 0, 5.0f), std::ldexp(1.0f, -120));
}

TEST(Fp8Slots, NumberingAndNames) {
  Fp8Options o;
  o.lm_head = true;
  o.grad_format = Fp8Format::kE5M2;
  const Fp8Slots s(2, o);
  EXPECT_EQ(s.size(), 2 * 12 + 3);
  EXPECT_EQ(s.Block(1, Fp8Gemm::kDown, Fp8Role::kGradOutput), 23);
  EXPECT_EQ(s.Name(23), "layers.1.down.grad_output");
  EXPECT_EQ(s.Name(s.Block(0, Fp8Gemm::kGateUp, Fp8Role::kWeight)), "layers.0.gate_up.weight");
  EXPECT_EQ(s.LmHead(Fp8Role::kInput), 24);
  EXPECT_EQ(s.Name(24), "lm_head.input");
  EXPECT_EQ(s.format(23), Fp8Format::kE5M2);
  EXPECT_EQ(s.format(22), Fp8Format::kE4M3);
  EXPECT_EQ(s.format(21), Fp8Format::kE4M3);
  o.lm_head = false;
  EXPECT_EQ(Fp8Slots(2, o).LmHead(Fp8Role::kInput), -1);
  EXPECT_EQ(Fp8Slots(2, o).size(), 24);
}

// The state's scales after every pass equal the reference's, through
// history roll-over, both algorithms, margins, zeros and non-finite amaxes.
TEST(Fp8ScalingState, MatchesReferenceThroughRollOver) {
  for (AmaxComputeAlgo algo : {AmaxComputeAlgo::kMax, AmaxComputeAlgo::kMostRecent}) {
    for (int64_t len : {1, 4, 16}) {
      Fp8Options o;
      o.enabled = true;
      o.amax_history_len = len;
      o.amax_compute_algo = algo;
      o.margin = len == 4 ? 1 : 0;
      Fp8ScalingState st(o, Fp8Slots(1, o));
      const int n = st.num_slots();
      std::vector<std::deque<float>> ref(n);
      std::vector<float> ref_scale(n, 1.0f);
      std::mt19937 rng(static_cast<unsigned>(len) * 7 + static_cast<unsigned>(algo));
      std::uniform_real_distribution<float> mant(0.5f, 1.0f);
      EXPECT_FALSE(st.UsesHistory());
      for (int pass = 0; pass < 3 * len + 5; ++pass) {
        std::vector<float> amax(n);
        for (int s = 0; s < n; ++s) {
          // Spikes that must roll out of the window again, zeros and NaN.
          amax[s] = std::ldexp(mant(rng), static_cast<int>(rng() % 12) - 6);
          if (pass % 5 == s % 5) amax[s] *= 1024.0f;
          if (pass == 2 && s == 1) amax[s] = 0.0f;
          if (pass == 3 && s == 2) amax[s] = NAN;
        }
        ASSERT_TRUE(st.Record(amax).ok());
        for (int s = 0; s < n; ++s) {
          ref[s].push_back(std::isfinite(amax[s]) ? amax[s] : 0.0f);
          if (static_cast<int64_t>(ref[s].size()) > len) ref[s].pop_front();
          float a = ref[s].back();
          if (algo == AmaxComputeAlgo::kMax) {
            for (float v : ref[s]) a = std::max(a, v);
          }
          ref_scale[s] = ReferenceScale(a, Fp8MaxOf(st.slots().format(s)),
                                        static_cast<int>(o.margin), ref_scale[s]);
          ASSERT_EQ(st.scales()[s], ref_scale[s]) << "pass " << pass << " slot " << st.slots().Name(s);
          ASSERT_EQ(st.scale_invs()[s] * st.scales()[s], 1.0f);
        }
        EXPECT_TRUE(st.UsesHistory());
        EXPECT_EQ(st.History(0).size(), std::min<size_t>(pass + 1, len));
        EXPECT_EQ(st.History(0).back(), amax[0]);
      }
      EXPECT_EQ(st.nonfinite_amaxes(), 1);
    }
  }
}

TEST(Fp8ScalingState, TensorwiseNeverUsesHistory) {
  Fp8Options o;
  o.recipe = Fp8Recipe::kTensorwise;
  Fp8ScalingState st(o, Fp8Slots(1, o));
  ASSERT_TRUE(st.Record(std::vector<float>(st.num_slots(), 2.0f)).ok());
  EXPECT_FALSE(st.UsesHistory());
  EXPECT_FALSE(st.Record(std::vector<float>(3, 1.0f)).ok());
}

// Save after some passes, restore into a fresh state, continue both: the
// scales stay bit-identical to an uninterrupted state.
TEST(Fp8ScalingState, CheckpointRoundTripContinuesIdentically) {
  Fp8Options o;
  o.amax_history_len = 8;
  o.lm_head = true;
  Fp8ScalingState a(o, Fp8Slots(2, o));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.01f, 100.0f);
  auto pass = [&] {
    std::vector<float> v(a.num_slots());
    for (float& x : v) x = u(rng);
    return v;
  };
  for (int i = 0; i < 11; ++i) ASSERT_TRUE(a.Record(pass()).ok());
  const std::string saved = a.ToJson();
  Fp8ScalingState b(o, Fp8Slots(2, o));
  ASSERT_TRUE(b.FromJson(saved).ok()) << b.FromJson(saved).ToString();
  EXPECT_EQ(a.scales(), b.scales());
  EXPECT_EQ(b.passes(), 11);
  for (int s = 0; s < a.num_slots(); ++s) EXPECT_EQ(a.History(s), b.History(s));
  for (int i = 0; i < 20; ++i) {
    const std::vector<float> v = pass();
    ASSERT_TRUE(a.Record(v).ok());
    ASSERT_TRUE(b.Record(v).ok());
    ASSERT_EQ(a.scales(), b.scales()) << "pass " << i;
  }
  // A shorter history keeps the newest rows.
  Fp8Options shorter = o;
  shorter.amax_history_len = 3;
  Fp8ScalingState c(shorter, Fp8Slots(2, shorter));
  ASSERT_TRUE(c.FromJson(a.ToJson()).ok());
  const std::vector<float> full = a.History(4);
  EXPECT_EQ(c.History(4), std::vector<float>(full.end() - 3, full.end()));
}

TEST(Fp8ScalingState, RestoreRejectsADifferentModel) {
  Fp8Options o;
  Fp8ScalingState a(o, Fp8Slots(2, o));
  ASSERT_TRUE(a.Record(std::vector<float>(a.num_slots(), 1.0f)).ok());
  Fp8ScalingState fewer(o, Fp8Slots(1, o));
  const Status s = fewer.FromJson(a.ToJson());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("24 slots saved, this model has 12"), std::string::npos) << s.ToString();
  Fp8Options e4m3 = o;
  e4m3.grad_format = Fp8Format::kE4M3;
  Fp8ScalingState other(e4m3, Fp8Slots(2, e4m3));
  const Status f = other.FromJson(a.ToJson());
  EXPECT_NE(f.message().find("fp8_grad_format"), std::string::npos) << f.ToString();
  EXPECT_EQ(other.FromJson("{").code(), StatusCode::kDataLoss);
  EXPECT_EQ(other.FromJson("{\"version\": 9}").code(), StatusCode::kDataLoss);
}

TEST(Fp8Options, ParseAndValidate) {
  EXPECT_EQ(*ParseAmaxComputeAlgo("most_recent"), AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(*ParseFp8Recipe("tensorwise"), Fp8Recipe::kTensorwise);
  EXPECT_EQ(*ParseFp8Format("e4m3"), Fp8Format::kE4M3);
  EXPECT_NE(ParseAmaxComputeAlgo("mean").status().message().find("max, most_recent"), std::string::npos);
  Fp8Options o;
  o.amax_history_len = 0;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace hypertrain::model
