// model.peft.fp8_base (issue 36): LoRA over a frozen base whose block
// projections are e4m3 codes cast once at load. Checked here:
//  - what is stored: every weight's codes and power-of-two scale exactly as
//    the CPU FP8 reference makes them from the bf16 weight (model::
//    Fp8ScaleFromAmax, ::hypertrain::cpu::Fp8Encode), read back as the forward
//    sees them, the norms untouched, one byte per projection element;
//  - the training pass against the bf16 LoRA backend holding those same
//    (dequantised) weights: only the FP8 rounding of the inputs and output
//    gradients differs, so loss and adapter gradients agree closely, but not
//    bit for bit (the FP8 GEMMs did run);
//  - checkpointing modes bit-identical, as for the bf16 base;
//  - the configurations it refuses.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/backends/cuda/backend.h"
#include "runtime/backends/cuda/peft_backend_testing.h"
#include "runtime/kernels/cpu/fp8.h"
#include "runtime/numerics/fp8_scale.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::cuda {
namespace {

using namespace peft_testing;  // NOLINT: the shared helpers

model::BackendOptions Fp8BaseOptions(Precision p = Precision::kBF16,
                                     ActivationCheckpointing ck = ActivationCheckpointing::kNone) {
  model::BackendOptions o = Options(p, 0.0, ck);
  o.peft.fp8_base = true;
  return o;
}

// The four GEMM weights of a block, as tensor index spans [first, last].
constexpr int kSpans[4][2] = {{model::kQProj, model::kVProj},
                              {model::kOProj, model::kOProj},
                              {model::kGateProj, model::kUpProj},
                              {model::kDownProj, model::kDownProj}};

TEST(CudaPeftFp8Base, StoresEachWeightAsTheCpuReferenceCastsIt) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(false);
  auto fp8 = CudaBackend::Create(c, Fp8BaseOptions());
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  auto bf16 = CudaBackend::Create(c, Options(Precision::kBF16, 0.0));
  ASSERT_TRUE(bf16.ok());
  // One byte per projection element instead of two (norms and embedding stay bf16).
  const model::ParamLayout& base = *(*fp8)->BaseLayout();
  int64_t proj = 0;
  for (int u = 1; u < base.num_units(); ++u) {
    for (const model::TensorSlot& t : base.unit(u).tensors) {
      if (t.kind == model::TensorKind::kLinear) proj += t.numel;
    }
  }
  EXPECT_LT((*fp8)->BaseBytes(), (*bf16)->BaseBytes() - proj + proj / 8) << "projections in one byte";

  Randomize({fp8->get()}, 5);
  std::mt19937 rng(3);
  for (int u = 1; u < base.num_units(); ++u) {
    const model::UnitLayout& ul = base.unit(u);
    // Random values of a wide range (not bf16-exact): the reference rounds to
    // bf16 first, as the bf16 base would hold them.
    std::vector<float> v(ul.padded_numel, 0.0f);
    std::normal_distribution<float> n01;
    for (const model::TensorSlot& t : ul.tensors) {
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        v[i] = t.kind == model::TensorKind::kNorm ? 1.0f + 0.01f * n01(rng)
                                                  : 0.02f * n01(rng) * (u == 1 ? 1.0f : 37.0f);
      }
    }
    ASSERT_TRUE((*fp8)->WriteBase(u, {0, ul.padded_numel}, v.data()).ok());
    std::vector<float> got(ul.padded_numel);
    ASSERT_TRUE((*fp8)->ReadBase(u, {0, ul.padded_numel}, got.data()).ok());
    std::vector<float> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      b[i] = __bfloat162float(__float2bfloat16_rn(v[i]));
    }
    for (const auto& span : kSpans) {
      const int64_t lo = ul.tensors[span[0]].offset;
      const int64_t hi = ul.tensors[span[1]].offset + ul.tensors[span[1]].numel;
      const float amax = ::hypertrain::cpu::AbsMax(b.data() + lo, hi - lo);
      const float s = model::Fp8ScaleFromAmax(amax, model::kFp8E4M3Max, 0, 1.0f);
      int coarse = 0;
      for (int64_t i = lo; i < hi; ++i) {
        const uint8_t q = ::hypertrain::cpu::Fp8Encode(b[i] * s, model::Fp8Format::kE4M3);
        const float want = ::hypertrain::cpu::Fp8Decode(q, model::Fp8Format::kE4M3) / s;
        ASSERT_EQ(got[i], want) << "unit " << u << " element " << i << " (bf16 " << b[i] << ")";
        coarse += got[i] != b[i];
      }
      EXPECT_GT(coarse, (hi - lo) / 4) << "the FP8 rounding is visible";
    }
    for (int t : {model::kInputNorm, model::kPostNorm}) {
      for (int64_t i = ul.tensors[t].offset; i < ul.tensors[t].offset + ul.tensors[t].numel; ++i) {
        ASSERT_EQ(got[i], b[i]) << "norm " << t;
      }
    }
  }
  // A block is written whole (its scales are per weight); the embedding is not FP8.
  std::vector<float> part(4, 0.5f);
  const Status partial = (*fp8)->WriteBase(1, {0, 4}, part.data());
  EXPECT_EQ(partial.code(), StatusCode::kInvalidArgument) << partial.ToString();
  EXPECT_NE(partial.message().find("model.peft.fp8_base"), std::string::npos);
  ASSERT_TRUE((*fp8)->WriteBase(0, {0, 4}, part.data()).ok());
  std::vector<float> e(4);
  ASSERT_TRUE((*fp8)->ReadBase(0, {0, 4}, e.data()).ok());
  EXPECT_EQ(e, part);
}

// The bf16 LoRA backend on the dequantised weights is the reference: the
// only difference left is the e4m3 / e5m2 rounding of inputs and gradients.
TEST(CudaPeftFp8Base, TrainsLikeTheBf16BaseOnTheSameWeights) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(false);
  auto fp8 = CudaBackend::Create(c, Fp8BaseOptions());
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  auto ref = CudaBackend::Create(c, Options(Precision::kBF16, 0.0));
  ASSERT_TRUE(ref.ok());
  Randomize({fp8->get()}, 5);
  const model::ParamLayout& base = *(*fp8)->BaseLayout();
  for (const model::UnitLayout& u : base.units()) {
    std::vector<float> v(u.padded_numel);
    ASSERT_TRUE((*fp8)->ReadBase(u.index, {0, u.padded_numel}, v.data()).ok());
    ASSERT_TRUE((*ref)->WriteBase(u.index, {0, u.padded_numel}, v.data()).ok());
  }
  for (const model::UnitLayout& u : (*fp8)->layout().units()) {
    const std::vector<float> m = Read(**fp8, u.index, StateKind::kMasterParams);
    ASSERT_TRUE((*ref)->WriteState(u.index, StateKind::kMasterParams, m.data()).ok());
  }
  const Tokens t = RandomTokens(c.vocab_size, 9);
  const double lf = Pass(**fp8, t, 1), lr = Pass(**ref, t, 1);
  EXPECT_NEAR(lf, lr, 5e-3 * std::abs(lr));
  const std::vector<float> gf = ReadAll(**fp8, StateKind::kShardGrads);
  const std::vector<float> gr = ReadAll(**ref, StateKind::kShardGrads);
  ASSERT_GT(Norm(gr), 0.0);
  EXPECT_LT(RelL2(gf, gr), 0.25) << "adapter gradients (e5m2 output gradients: 2 mantissa bits)";
  EXPECT_GT(RelL2(gf, gr), 0.0) << "bit-identical to bf16: the FP8 GEMMs did not run";
  for (int step = 1; step <= 4; ++step) {
    const double a = TrainStep(**ref, t, step, 1e-2f), b = TrainStep(**fp8, t, step, 1e-2f);
    EXPECT_NEAR(b, a, 1e-2 * std::abs(a)) << "step " << step;
  }
}

// QLoRA keeps its NF4 store and casts each dequantised block to e4m3 for
// the GEMMs: near the bf16 QLoRA pass from the same seed, not equal to it.
TEST(CudaPeftFp8Base, QloraComputesInFp8FromItsNf4Base) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(false);
  model::BackendOptions qo = Options(Precision::kBF16, 0.0);
  qo.peft.type = model::PeftType::kQlora;
  model::BackendOptions fo = qo;
  fo.peft.fp8_base = true;
  auto fp8 = CudaBackend::Create(c, fo);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  auto ref = CudaBackend::Create(c, qo);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ((*fp8)->BaseBytes(), (*ref)->BaseBytes()) << "the NF4 store is unchanged";
  Randomize({fp8->get(), ref->get()}, 6);
  const Tokens t = RandomTokens(c.vocab_size, 2);
  const double lf = Pass(**fp8, t, 1), lr = Pass(**ref, t, 1);
  EXPECT_NEAR(lf, lr, 5e-3 * std::abs(lr));
  const std::vector<float> gf = ReadAll(**fp8, StateKind::kShardGrads);
  const std::vector<float> gr = ReadAll(**ref, StateKind::kShardGrads);
  EXPECT_LT(RelL2(gf, gr), 0.25);
  EXPECT_GT(RelL2(gf, gr), 0.0) << "bit-identical to the bf16 GEMMs: FP8 did not run";
  // A block stored again gets scales from its new values.
  const model::UnitLayout& u1 = (*fp8)->BaseLayout()->unit(1);
  std::vector<float> v(u1.padded_numel);
  ASSERT_TRUE((*fp8)->ReadBase(1, {0, u1.padded_numel}, v.data()).ok());
  for (float& x : v) x *= 8.0f;
  ASSERT_TRUE((*fp8)->WriteBase(1, {0, u1.padded_numel}, v.data()).ok());
  ASSERT_TRUE((*ref)->WriteBase(1, {0, u1.padded_numel}, v.data()).ok());
  const double lf2 = Pass(**fp8, t, 2), lr2 = Pass(**ref, t, 2);
  EXPECT_NE(lf2, lf);
  EXPECT_NEAR(lf2, lr2, 5e-3 * std::abs(lr2));
}

TEST(CudaPeftFp8Base, CheckpointingModesAreBitIdentical) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  const Tokens t = RandomTokens(c.vocab_size, 4);
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
  for (ActivationCheckpointing ck : {ActivationCheckpointing::kNone, ActivationCheckpointing::kSelective,
                                     ActivationCheckpointing::kFull}) {
    auto b = CudaBackend::Create(c, Fp8BaseOptions(Precision::kBF16, ck));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Randomize({b->get()}, 8);
    double l = 0;
    for (int step = 1; step <= 3; ++step) l = TrainStep(**b, t, step);  // delayed scales from step 2
    losses.push_back(l);
    grads.push_back(ReadAll(**b, StateKind::kShardGrads));
  }
  for (size_t i = 1; i < losses.size(); ++i) {
    EXPECT_EQ(losses[i], losses[0]) << "mode " << i;
    EXPECT_EQ(grads[i], grads[0]) << "mode " << i;
  }
}

// Refused before any device work (these run without a GPU too).
TEST(CudaPeftFp8BaseArgs, Refusals) {
  const model::ModelConfig c = SmallConfig(false);
  model::BackendOptions o = Fp8BaseOptions();
  o.base_shard = {0, 2};
  auto r = CudaBackend::Create(c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("model.peft.fp8_base"), std::string::npos) << r.status().ToString();
  auto cpu = cpu::CpuBackend::Create(c, Fp8BaseOptions());
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.status().message().find("CUDA backend"), std::string::npos) << cpu.status().ToString();
}

TEST(CudaPeftFp8Base, RefusesFp32) {
  HT_SKIP_WITHOUT_GPU();
  auto r = CudaBackend::Create(SmallConfig(false), Fp8BaseOptions(Precision::kFP32));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("model.peft.fp8_base"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::cuda
