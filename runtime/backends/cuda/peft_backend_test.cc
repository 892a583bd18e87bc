// LoRA on the CUDA backend against the CPU reference backend (issue 26): the
// same random frozen base and adapters written into both through the Backend
// interface (WriteBase / WriteState), then the loss, the adapter gradients and
// the adapters after several AdamW steps compared (fp32: tight; bf16: the
// base and adapters are exactly representable in bf16, so only the
// arithmetic differs). Also: the base round trip, what the backend stores
// (no gradient, master or optimizer state for the base), checkpointing modes
// bit-identical, an evaluation pass without dropout, a restored state
// continuing bit-identically, packed rows (per-sample RoPE and attention)
// against the CPU's document masking, QLoRA (NF4 base) against the CPU's, and
// the configurations it refuses.
// GPU tests skip on machines without one; the argument checks run anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/backends/cpu/backend.h"
#include "runtime/backends/cuda/backend.h"
#include "runtime/backends/cuda/peft_backend_testing.h"
#include "runtime/model/peft.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain::cuda {
namespace {

using namespace peft_testing;  // NOLINT: the shared helpers

using model::ActivationCheckpointing;
using model::Precision;
using model::StateKind;

void ExpectMatchesCpu(Precision precision, bool tied, double dropout, ActivationCheckpointing ck,
                      const Tolerance& tol) {
  const model::ModelConfig c = SmallConfig(tied);
  Pair p = MakePair(c, Options(precision, dropout, ck));
  ASSERT_TRUE(p.cpu && p.gpu);
  // Same layouts and names: checkpoints and PEFT export see one model.
  ASSERT_EQ(p.gpu->layout().num_units(), p.cpu->layout().num_units());
  for (int u = 0; u < p.cpu->layout().num_units(); ++u) {
    const auto& a = p.cpu->layout().unit(u).tensors;
    const auto& b = p.gpu->layout().unit(u).tensors;
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < a.size(); ++t) {
      EXPECT_EQ(a[t].name, b[t].name);
      EXPECT_EQ(a[t].offset, b[t].offset);
    }
  }
  Randomize({p.cpu.get(), p.gpu.get()}, 5);
  const Tokens t = RandomTokens(c.vocab_size, 9);
  const double lc = Pass(*p.cpu, t, 7), lg = Pass(*p.gpu, t, 7);
  EXPECT_NEAR(lg, lc, tol.loss * std::abs(lc)) << "loss";
  for (int u = 1; u < p.cpu->layout().num_units(); ++u) {
    const std::vector<float> gc = Read(*p.cpu, u, StateKind::kShardGrads);
    const std::vector<float> gg = Read(*p.gpu, u, StateKind::kShardGrads);
    ASSERT_GT(Norm(gc), 0.0) << "unit " << u;
    EXPECT_LT(RelL2(gg, gc), tol.grads) << "adapter gradients of unit " << u;
    // Per tensor too: every adapter (A and B of every target) takes part.
    for (const model::TensorSlot& s : p.cpu->layout().unit(u).tensors) {
      const std::vector<float> a(gc.begin() + s.offset, gc.begin() + s.offset + s.numel);
      const std::vector<float> b(gg.begin() + s.offset, gg.begin() + s.offset + s.numel);
      ASSERT_GT(Norm(a), 0.0) << s.name;
      EXPECT_LT(RelL2(b, a), tol.grads) << s.name;
    }
  }
  const std::vector<float> before = ReadAll(*p.cpu, StateKind::kMasterParams);
  for (int step = 1; step <= 4; ++step) {
    const double a = TrainStep(*p.cpu, t, step, 1e-2f), b = TrainStep(*p.gpu, t, step, 1e-2f);
    EXPECT_NEAR(b, a, tol.loss * std::abs(a)) << "step " << step;
  }
  const std::vector<float> mc = ReadAll(*p.cpu, StateKind::kMasterParams);
  const std::vector<float> mg = ReadAll(*p.gpu, StateKind::kMasterParams);
  std::vector<float> dc(mc.size()), dg(mg.size());
  for (size_t i = 0; i < mc.size(); ++i) dc[i] = mc[i] - before[i], dg[i] = mg[i] - before[i];
  ASSERT_GT(Norm(dc), 0.0);
  EXPECT_LT(RelL2(dg, dc), tol.updates) << "adapters' change after 4 AdamW steps";
  EXPECT_LT(RelL2(mg, mc), tol.updates) << "adapters after 4 AdamW steps";
  // Evaluation: no dropout, same loss.
  model::NoOpUnitHooks hooks;
  const double ec = *p.cpu->Loss(t.view(99), hooks), eg = *p.gpu->Loss(t.view(99), hooks);
  EXPECT_NEAR(eg, ec, tol.loss * std::abs(ec)) << "evaluation loss";
}

constexpr Tolerance kFp32{2e-5, 2e-4, 1e-3};
// bf16 activations and outputs (fp32 accumulation), fp32 adapter gradients.
constexpr Tolerance kBf16{1e-2, 6e-2, 1e-1};

TEST(CudaPeftBackend, MatchesCpuFp32) {
  HT_SKIP_WITHOUT_GPU();
  ExpectMatchesCpu(Precision::kFP32, true, 0.0, ActivationCheckpointing::kNone, kFp32);
}

TEST(CudaPeftBackend, MatchesCpuFp32DropoutUntiedFullCheckpointing) {
  HT_SKIP_WITHOUT_GPU();
  ExpectMatchesCpu(Precision::kFP32, false, 0.1, ActivationCheckpointing::kFull, kFp32);
}

TEST(CudaPeftBackend, MatchesCpuBf16) {
  HT_SKIP_WITHOUT_GPU();
  ExpectMatchesCpu(Precision::kBF16, true, 0.0, ActivationCheckpointing::kNone, kBf16);
}

TEST(CudaPeftBackend, MatchesCpuBf16DropoutSelective) {
  HT_SKIP_WITHOUT_GPU();
  ExpectMatchesCpu(Precision::kBF16, false, 0.25, ActivationCheckpointing::kSelective, kBf16);
}

// Only some projections targeted: the others run their frozen GEMM alone.
TEST(CudaPeftBackend, MatchesCpuWithSomeTargets) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  model::BackendOptions o = Options(Precision::kFP32, 0.1);
  o.peft.targets = {model::kKProj, model::kOProj, model::kUpProj};
  Pair p = MakePair(c, o);
  ASSERT_TRUE(p.cpu && p.gpu);
  Randomize({p.cpu.get(), p.gpu.get()}, 6);
  const Tokens t = RandomTokens(c.vocab_size, 10);
  const double lc = Pass(*p.cpu, t, 2), lg = Pass(*p.gpu, t, 2);
  EXPECT_NEAR(lg, lc, kFp32.loss * std::abs(lc));
  EXPECT_LT(RelL2(ReadAll(*p.gpu, StateKind::kShardGrads), ReadAll(*p.cpu, StateKind::kShardGrads)),
            kFp32.grads);
}

// The base is stored in the compute dtype: fp32 round-trips exactly, bf16
// rounds to nearest even; the frozen base has no gradient, master or
// optimizer state (state = base in the compute dtype + the adapters'
// compute copy, fp32 gradient, master, m and v).
TEST(CudaPeftBackend, FrozenBaseStoreAndState) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(false);
  for (Precision prec : {Precision::kFP32, Precision::kBF16}) {
    auto b = CudaBackend::Create(c, Options(prec, 0.0));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    const model::ParamLayout* base = (*b)->BaseLayout();
    ASSERT_NE(base, nullptr);
    const size_t es = prec == Precision::kFP32 ? 4 : 2;
    int64_t base_numel = 0, adapter_numel = 0;
    for (const model::UnitLayout& u : base->units()) base_numel += u.padded_numel;
    for (const model::UnitLayout& u : (*b)->layout().units()) adapter_numel += u.padded_numel;
    EXPECT_EQ((*b)->state_bytes(),
              static_cast<int64_t>(base_numel * es + adapter_numel * (es + 4 * sizeof(float))));
    // Initialised from the seed exactly as the CPU backend's base.
    auto cpu = cpu::CpuBackend::Create(c, Options(prec, 0.0));
    ASSERT_TRUE(cpu.ok());
    const model::UnitLayout& u1 = base->unit(1);
    std::vector<float> want(u1.padded_numel), got(u1.padded_numel);
    ASSERT_TRUE((*cpu)->ReadBase(1, {0, u1.padded_numel}, want.data()).ok());
    ASSERT_TRUE((*b)->ReadBase(1, {0, u1.padded_numel}, got.data()).ok());
    for (int64_t i = 0; i < u1.padded_numel; ++i) {
      ASSERT_NEAR(got[i], want[i], es == 4 ? 0.0 : std::abs(want[i]) / 256) << i;
    }
    // A partial write lands where it should and rounds like a cast.
    std::vector<float> v = {1.0f, 1.0f + 1.0f / 512, -3.0f, 0.1f};
    ASSERT_TRUE((*b)->WriteBase(1, {10, 14}, v.data()).ok());
    std::vector<float> r(6);
    ASSERT_TRUE((*b)->ReadBase(1, {9, 15}, r.data()).ok());
    EXPECT_EQ(r[0], got[9]);
    EXPECT_EQ(r[5], got[14]);
    EXPECT_EQ(r[1], 1.0f);
    EXPECT_EQ(r[2], es == 4 ? v[1] : 1.0f);  // below half a bf16 step (2^-8) above 1
    EXPECT_EQ(r[3], -3.0f);
    EXPECT_NEAR(r[4], 0.1f, es == 4 ? 0.0 : 0.1 / 256);
    EXPECT_EQ((*b)->WriteBase(1, {0, u1.padded_numel + 1}, want.data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*b)->ReadBase(base->num_units(), {0, 1}, got.data()).code(),
              StatusCode::kInvalidArgument);
  }
}

// Every checkpointing mode gives bit-identical adapter gradients (with
// dropout: the recomputation draws the forward's masks).
TEST(CudaPeftBackend, CheckpointingModesAreBitIdentical) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  const Tokens t = RandomTokens(c.vocab_size, 12);
  std::vector<float> ref;
  double ref_loss = 0;
  for (ActivationCheckpointing ck : {ActivationCheckpointing::kNone,
                                     ActivationCheckpointing::kSelective,
                                     ActivationCheckpointing::kFull}) {
    auto b = CudaBackend::Create(c, Options(Precision::kBF16, 0.1, ck));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Randomize({b->get()}, 8);
    const double loss = Pass(**b, t, 4);
    const std::vector<float> g = ReadAll(**b, StateKind::kShardGrads);
    if (ref.empty()) {
      ref = g, ref_loss = loss;
      continue;
    }
    EXPECT_EQ(loss, ref_loss) << model::CheckpointingName(ck);
    EXPECT_EQ(g, ref) << model::CheckpointingName(ck);
  }
}

// Dropout draws a new mask per pass number: same pass, same gradients;
// another pass, other gradients.
TEST(CudaPeftBackend, DropoutFollowsThePassNumber) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  auto b = CudaBackend::Create(c, Options(Precision::kBF16, 0.25));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Randomize({b->get()}, 3);
  const Tokens t = RandomTokens(c.vocab_size, 13);
  Pass(**b, t, 1);
  const std::vector<float> g1 = ReadAll(**b, StateKind::kShardGrads);
  Pass(**b, t, 1);
  EXPECT_EQ(ReadAll(**b, StateKind::kShardGrads), g1);
  Pass(**b, t, 2);
  EXPECT_NE(ReadAll(**b, StateKind::kShardGrads), g1);
}

// A backend restored from another's adapters, AdamW moments and base (what a
// checkpoint holds plus the HF base) continues bit-identically.
TEST(CudaPeftBackend, RestoredStateContinuesBitIdentically) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  const model::BackendOptions o = Options(Precision::kBF16, 0.1, ActivationCheckpointing::kFull);
  auto a = CudaBackend::Create(c, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Randomize({a->get()}, 4);
  const Tokens t = RandomTokens(c.vocab_size, 14);
  for (int step = 1; step <= 2; ++step) TrainStep(**a, t, step);
  auto b = CudaBackend::Create(c, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const model::UnitLayout& u : (*a)->BaseLayout()->units()) {
    std::vector<float> v(u.padded_numel);
    ASSERT_TRUE((*a)->ReadBase(u.index, {0, u.padded_numel}, v.data()).ok());
    ASSERT_TRUE((*b)->WriteBase(u.index, {0, u.padded_numel}, v.data()).ok());
  }
  for (int u = 0; u < (*a)->layout().num_units(); ++u) {
    for (StateKind k : {StateKind::kMasterParams, StateKind::kAdamM, StateKind::kAdamV}) {
      ASSERT_TRUE((*b)->WriteState(u, k, Read(**a, u, k).data()).ok());
    }
  }
  for (int step = 3; step <= 4; ++step) {
    EXPECT_EQ(TrainStep(**b, t, step), TrainStep(**a, t, step)) << "step " << step;
  }
  EXPECT_EQ(ReadAll(**b, StateKind::kMasterParams), ReadAll(**a, StateKind::kMasterParams));
}

// QLoRA: the projections of the base are NF4 on the device. The forward sees
// exactly the CPU reference's dequantised weights (fp32: bit for bit through
// ReadBase), so loss and adapter gradients match as for LoRA; the base takes
// less memory than LoRA's; a block unit is written whole.
void ExpectQloraMatchesCpu(Precision precision, ActivationCheckpointing ck, const Tolerance& tol) {
  const model::ModelConfig c = SmallConfig(false);
  model::BackendOptions o = Options(precision, 0.1, ck);
  o.peft.type = model::PeftType::kQlora;
  Pair p = MakePair(c, o);
  ASSERT_TRUE(p.cpu && p.gpu);
  Randomize({p.cpu.get(), p.gpu.get()}, 20);
  const model::ParamLayout& base = *p.gpu->BaseLayout();
  for (const model::UnitLayout& u : base.units()) {
    std::vector<float> a(u.padded_numel), b(u.padded_numel);
    ASSERT_TRUE(p.cpu->ReadBase(u.index, {0, u.padded_numel}, a.data()).ok());
    ASSERT_TRUE(p.gpu->ReadBase(u.index, {0, u.padded_numel}, b.data()).ok());
    for (int64_t i = 0; i < u.padded_numel; ++i) {
      if (precision == Precision::kFP32) {
        ASSERT_EQ(b[i], a[i]) << u.name << " element " << i;
      } else {
        ASSERT_NEAR(b[i], a[i], std::abs(a[i]) / 256) << u.name << " element " << i;
      }
    }
  }
  const Tokens t = RandomTokens(c.vocab_size, 21);
  const double lc = Pass(*p.cpu, t, 4), lg = Pass(*p.gpu, t, 4);
  EXPECT_NEAR(lg, lc, tol.loss * std::abs(lc));
  EXPECT_LT(RelL2(ReadAll(*p.gpu, StateKind::kShardGrads), ReadAll(*p.cpu, StateKind::kShardGrads)),
            tol.grads);
  for (int step = 1; step <= 3; ++step) {
    const double a = TrainStep(*p.cpu, t, step, 1e-2f), b = TrainStep(*p.gpu, t, step, 1e-2f);
    EXPECT_NEAR(b, a, tol.loss * std::abs(a)) << "step " << step;
  }
  EXPECT_LT(RelL2(ReadAll(*p.gpu, StateKind::kMasterParams),
                  ReadAll(*p.cpu, StateKind::kMasterParams)),
            tol.updates);
}

TEST(CudaPeftBackend, QloraMatchesCpuFp32) {
  HT_SKIP_WITHOUT_GPU();
  ExpectQloraMatchesCpu(Precision::kFP32, ActivationCheckpointing::kNone, kFp32);
}

TEST(CudaPeftBackend, QloraMatchesCpuBf16FullCheckpointing) {
  HT_SKIP_WITHOUT_GPU();
  ExpectQloraMatchesCpu(Precision::kBF16, ActivationCheckpointing::kFull, kBf16);
}

TEST(CudaPeftBackend, QloraBaseIsSmallerAndWrittenWhole) {
  HT_SKIP_WITHOUT_GPU();
  model::ModelConfig c = SmallConfig(true);
  c.intermediate_size = 1024;  // blocks outweigh the embedding
  model::BackendOptions o = Options(Precision::kBF16, 0.0);
  auto lora = CudaBackend::Create(c, o);
  o.peft.type = model::PeftType::kQlora;
  auto qlora = CudaBackend::Create(c, o);
  ASSERT_TRUE(lora.ok() && qlora.ok()) << qlora.status().ToString();
  EXPECT_LT((*qlora)->state_bytes(), (*lora)->state_bytes());
  const model::UnitLayout& u1 = (*qlora)->BaseLayout()->unit(1);
  std::vector<float> v(u1.padded_numel, 0.5f);
  const Status partial = (*qlora)->WriteBase(1, {0, u1.padded_numel - 1}, v.data());
  EXPECT_EQ(partial.code(), StatusCode::kInvalidArgument) << partial.ToString();
  ASSERT_TRUE((*qlora)->WriteBase(1, {0, u1.padded_numel}, v.data()).ok());
  std::vector<float> r(u1.padded_numel);
  ASSERT_TRUE((*qlora)->ReadBase(1, {0, u1.padded_numel}, r.data()).ok());
  for (const model::TensorSlot& t : u1.tensors) EXPECT_EQ(r[t.offset + 1], 0.5f) << t.name;
}

// Refused before any device work (these run without a GPU too).
TEST(CudaPeftBackendArgs, RefusesFp8AndAUnitPool) {
  const model::ModelConfig c = SmallConfig(true);
  model::BackendOptions o = Options(Precision::kBF16, 0.0);
  o.fp8.enabled = true;
  auto r = CudaBackend::Create(c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("model.fp8"), std::string::npos) << r.status().ToString();
  o = Options(Precision::kBF16, 0.0);
  o.unit_pool = true;
  r = CudaBackend::Create(c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  o = Options(Precision::kBF16, 0.0);
  o.peft.rank = 0;
  r = CudaBackend::Create(c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// Packed rows (SFT): samples of 10, 30 and 24 tokens in row 0, 1 and 63 in
// row 1; RoPE restarts and attention stays inside each sample. Loss and
// adapter gradients against the CPU's document masking.
std::vector<int32_t> PackedPositions() {
  std::vector<int32_t> pos;
  for (int len : {10, 30, 24, 1, 63}) {
    for (int i = 0; i < len; ++i) pos.push_back(i);
  }
  return pos;
}

void ExpectPackedMatchesCpu(Precision precision, ActivationCheckpointing ck, const Tolerance& tol) {
  const model::ModelConfig c = SmallConfig(false);
  Pair p = MakePair(c, Options(precision, 0.1, ck));
  ASSERT_TRUE(p.cpu && p.gpu);
  Randomize({p.cpu.get(), p.gpu.get()}, 16);
  const Tokens t = RandomTokens(c.vocab_size, 17);
  const std::vector<int32_t> positions = PackedPositions();
  ASSERT_EQ(positions.size(), 128u);
  model::TokenBatch batch = t.view(5);
  batch.positions = positions.data();
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE(p.cpu->ZeroGrads().ok());
  ASSERT_TRUE(p.gpu->ZeroGrads().ok());
  auto lc = p.cpu->ForwardBackward(batch, 1.0f, hooks);
  auto lg = p.gpu->ForwardBackward(batch, 1.0f, hooks);
  ASSERT_TRUE(lc.ok()) << lc.status().ToString();
  ASSERT_TRUE(lg.ok()) << lg.status().ToString();
  EXPECT_NEAR(*lg, *lc, tol.loss * std::abs(*lc));
  for (int u = 1; u < p.cpu->layout().num_units(); ++u) {
    const std::vector<float> gc = Read(*p.cpu, u, StateKind::kShardGrads);
    ASSERT_GT(Norm(gc), 0.0);
    EXPECT_LT(RelL2(Read(*p.gpu, u, StateKind::kShardGrads), gc), tol.grads) << "unit " << u;
  }
  // Evaluation on packed rows too; and the packing matters (another loss
  // than the same tokens as whole rows).
  auto ec = p.cpu->Loss(batch, hooks), eg = p.gpu->Loss(batch, hooks);
  ASSERT_TRUE(ec.ok() && eg.ok()) << eg.status().ToString();
  EXPECT_NEAR(*eg, *ec, tol.loss * std::abs(*ec));
  auto whole = p.gpu->Loss(t.view(5), hooks);
  ASSERT_TRUE(whole.ok());
  EXPECT_GT(std::abs(*whole - *eg), 1e-6);
}

TEST(CudaPeftBackend, PackedRowsMatchCpuFp32) {
  HT_SKIP_WITHOUT_GPU();
  ExpectPackedMatchesCpu(Precision::kFP32, ActivationCheckpointing::kNone, kFp32);
}

TEST(CudaPeftBackend, PackedRowsMatchCpuBf16FullCheckpointing) {
  HT_SKIP_WITHOUT_GPU();
  ExpectPackedMatchesCpu(Precision::kBF16, ActivationCheckpointing::kFull, kBf16);
}

// Positions 0..seq-1 in every row are one sample per row: the same pass as
// no positions, bit for bit. Bad positions are refused by name.
TEST(CudaPeftBackend, WholeRowPositionsAndBadPositions) {
  HT_SKIP_WITHOUT_GPU();
  const model::ModelConfig c = SmallConfig(true);
  auto b = CudaBackend::Create(c, Options(Precision::kBF16, 0.1));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Randomize({b->get()}, 18);
  const Tokens t = RandomTokens(c.vocab_size, 19);
  std::vector<int32_t> positions(128);
  for (int i = 0; i < 128; ++i) positions[i] = i % 64;
  model::TokenBatch batch = t.view(3);
  batch.positions = positions.data();
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE((*b)->ZeroGrads().ok());
  auto with = (*b)->ForwardBackward(batch, 1.0f, hooks);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  const std::vector<float> g = ReadAll(**b, StateKind::kShardGrads);
  EXPECT_EQ(Pass(**b, t, 3), *with);
  EXPECT_EQ(ReadAll(**b, StateKind::kShardGrads), g);
  positions[70] = 5;  // neither previous + 1 nor 0
  auto r = (*b)->ForwardBackward(batch, 1.0f, hooks);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("positions[1][6]"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::cuda
