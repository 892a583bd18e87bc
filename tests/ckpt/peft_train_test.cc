// LoRA through the whole training job on the CPU: a base model exported as
// Hugging Face weights is fine-tuned with adapters; checkpoints hold only the
// adapters and resume bit-identically; the PEFT adapter and the merged model
// are written at the end, the merged model equals base + (alpha/r) B A, and
// the adapter applied to the base with plain matrix arithmetic reproduces the
// trainer's loss; a resume on another base is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "runtime/backends/cpu/backend.h"
#include "runtime/backends/cpu/model.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/layout_desc.h"
#include "runtime/ckpt/peft_export.h"
#include "runtime/ckpt/peft_hooks.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/model/nf4.h"
#include "runtime/train/trainer.h"
#include "tests/ckpt/peft_testing.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt {
namespace {

std::string TempDir(const std::string& name) { return testing::FreshTempDir("peft_" + name); }

std::vector<std::string> Common(const std::string& exp) {
  return {"trainer.backend=cpu", "trainer.max_steps=8", "trainer.log_every_n_steps=100",
          "model.shape=tiny", "model.num_hidden_layers=2", "model.max_context_width=16",
          "model.train_batch_size=2", "model.grad_accumulation_steps=2", "model.optim.lr=1e-2",
          "model.data.use_synthetic_data=true", "exp_manager.exp_dir=" + exp,
          "exp_manager.every_n_train_steps=3", "exp_manager.save_top_k=3"};
}

config::TrainConfig Parse(std::vector<std::string> sets) {
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// A trained full model as Hugging Face weights (fp32): the base.
const std::string& Base() {
  static const std::string dir = [] {
    const std::string exp = TempDir("base");
    auto sets = Common(exp);
    sets.push_back("exp_manager.checkpoint.export_hf_dir=" + exp + "/hf");
    sets.push_back("exp_manager.checkpoint.export_hf_dtype=fp32");
    auto r = testing::RunJob(Parse(sets));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return exp + "/hf";
  }();
  return dir;
}

config::TrainConfig Peft(const std::string& exp, const std::string& base,
                         std::vector<std::string> extra = {}) {
  auto sets = Common(exp);
  for (const std::string& s :
       std::vector<std::string>{"model.do_finetune=true", "model.hf_model_name_or_path=" + base,
        "model.peft.peft_type=lora", "model.peft.rank=4", "model.peft.alpha=8",
        "model.peft.dropout=0.1", "exp_manager.checkpoint.export_hf_dir=" + exp + "/merged",
        "exp_manager.checkpoint.export_hf_dtype=fp32"}) {
    sets.push_back(s);
  }
  sets.insert(sets.end(), extra.begin(), extra.end());
  return Parse(sets);
}

TEST(PeftTrainTest, CheckpointsHoldOnlyAdaptersAndResumeBitIdentically) {
  const std::string base = Base();
  const std::string straight = TempDir("straight");
  auto a = testing::RunJob(Peft(straight, base));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->losses.size(), 8u);
  for (double l : a->losses) EXPECT_TRUE(std::isfinite(l));
  auto m = VerifyCheckpoint(straight + "/checkpoints/step-8", true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  int lora = 0;
  for (const UnitEntry& u : m->layout.units) {
    for (const TensorEntry& t : u.tensors) {
      EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name;
      ++lora;
    }
  }
  EXPECT_EQ(lora, 2 * 7 * 2);  // 2 layers x 7 targets x (A, B)
  EXPECT_EQ(m->trainer_state["peft"]["base"], base);
  EXPECT_EQ(m->trainer_state["peft"]["rank"], 4);

  const std::string stopped = TempDir("stopped");
  auto b1 = testing::RunJob(Peft(stopped, base), 5);
  ASSERT_EQ(b1.status().code(), StatusCode::kUnavailable) << b1.status().ToString();
  auto b2 = testing::RunJob(Peft(stopped, base));
  ASSERT_TRUE(b2.ok()) << b2.status().ToString();
  ASSERT_EQ(b2->losses.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b2->losses[i], a->losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(testing::ShardBytes(straight, 8), testing::ShardBytes(stopped, 8));

  // Another base under the same experiment is refused.
  const std::string other_exp = TempDir("other_base");
  auto other_sets = Common(other_exp);
  other_sets.push_back("model.seed=99");
  other_sets.push_back("exp_manager.checkpoint.export_hf_dir=" + other_exp + "/hf");
  ASSERT_TRUE(testing::RunJob(Parse(other_sets)).ok());
  auto refused = testing::RunJob(Peft(stopped, other_exp + "/hf", {"trainer.max_steps=9"}));
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("differs"), std::string::npos);
}

TEST(PeftTrainTest, AdapterAndMergedExportReproduceTheTrainersLoss) {
  const std::string base = Base();
  const std::string exp = TempDir("export");
  const config::TrainConfig c = Peft(exp, base);
  ASSERT_TRUE(testing::RunJob(c).ok());
  auto adapter = LoadAdapter(exp + "/adapter");
  ASSERT_TRUE(adapter.ok()) << adapter.status().ToString();
  EXPECT_EQ(adapter->options.rank, 4);
  EXPECT_EQ(adapter->options.alpha, 8);
  EXPECT_EQ(adapter->base_model, base);
  ASSERT_EQ(adapter->tensors.size(), 28u);
  auto cfg = ReadFileToString(exp + "/adapter/adapter_config.json");
  ASSERT_TRUE(cfg.ok());
  EXPECT_NE(cfg->find("\"peft_type\": \"LORA\""), std::string::npos);
  EXPECT_NE(cfg->find("\"gate_proj\""), std::string::npos);

  // Merged = base + (alpha/r) B A, recomputed here in double.
  EXPECT_EQ(testing::ExpectMergedIsBasePlusScaledBA(base, exp, 8.0 / 4.0, 4, testing::MergedBase::kExact), 14);

  // The trainer's loss (PEFT backend: base from HF + the trained adapter) vs
  // the plain model on base weights merged here with loops.
  auto b = SafetensorsReader::Open(base + "/model.safetensors");
  ASSERT_TRUE(b.ok());
  const double s = 8.0 / 4.0;
  model::BackendOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 16;
  o.peft = c.finetune.peft;
  auto peft = cpu::CpuBackend::Create(c.model, o);
  ASSERT_TRUE(peft.ok());
  ASSERT_TRUE(LoadFrozenBase(c, **peft).ok());
  const model::ParamLayout& al = (*peft)->layout();
  for (const model::UnitLayout& u : al.units()) {
    std::vector<float> v(u.padded_numel, 0.0f);
    for (const model::TensorSlot& t : u.tensors) {
      const auto& x = adapter->tensors.at(t.name).values;
      std::copy(x.begin(), x.end(), v.begin() + t.offset);
    }
    ASSERT_TRUE((*peft)->WriteState(u.index, model::StateKind::kMasterParams, v.data()).ok());
  }
  auto layout = *model::ParamLayout::Build(c.model);
  std::vector<std::vector<float>> merged;
  std::vector<float*> ptrs;
  for (const model::UnitLayout& u : layout.units()) {
    merged.emplace_back(u.padded_numel, 0.0f);
    for (const model::TensorSlot& t : u.tensors) {
      std::vector<float> w = testing::ReadAll(*b, t.name);
      auto [la, lb] = adapter->ForWeight(t.name);
      if (la != nullptr) {
        const int64_t out = t.shape[0], in = t.shape[1];
        for (int64_t oo = 0; oo < out; ++oo)
          for (int64_t i = 0; i < in; ++i) {
            double d = 0;
            for (int64_t k = 0; k < 4; ++k) d += double(lb->values[oo * 4 + k]) * la->values[k * in + i];
            w[oo * in + i] = static_cast<float>(w[oo * in + i] + s * d);
          }
      }
      std::copy(w.begin(), w.end(), merged.back().begin() + t.offset);
    }
    ptrs.push_back(merged.back().data());
  }
  std::mt19937 rng(5);
  std::vector<int32_t> in(32), tg(32);
  for (auto& x : in) x = rng() % c.model.vocab_size;
  for (auto& x : tg) x = rng() % c.model.vocab_size;
  model::NoOpUnitHooks hooks;
  const double trainer_loss = *(*peft)->Loss(model::TokenBatch{in.data(), tg.data(), 2, 16}, hooks);
  cpu::CpuModel<float> plain(layout, 2, 16, model::ActivationCheckpointing::kNone);
  const double plain_loss = *plain.Loss(in.data(), tg.data(), ptrs, hooks);
  EXPECT_NEAR(trainer_loss, plain_loss, 1e-5 * plain_loss);
  // ... and the adapter matters: the base alone gives another loss.
  std::vector<float*> base_ptrs;
  std::vector<std::vector<float>> basev;
  for (const model::UnitLayout& u : layout.units()) {
    basev.emplace_back(u.padded_numel, 0.0f);
    ASSERT_TRUE((*peft)->ReadBase(u.index, {0, u.padded_numel}, basev.back().data()).ok());
    base_ptrs.push_back(basev.back().data());
  }
  EXPECT_GT(std::abs(*plain.Loss(in.data(), tg.data(), base_ptrs, hooks) - plain_loss), 1e-4);
}

// QLoRA: the frozen projections are the NF4 round trip of the HF base; the
// merged export is that base + (alpha/r) B A with the trained adapter.
TEST(PeftTrainTest, QloraTrainsOnTheNf4Base) {
  const std::string base = Base();
  const std::string exp = TempDir("qlora");
  const config::TrainConfig c = Peft(exp, base, {"model.peft.peft_type=qlora"});
  auto run = testing::RunJob(c);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->losses.size(), 8u);
  for (double l : run->losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_EQ(testing::ExpectMergedIsBasePlusScaledBA(base, exp, 8.0 / 4.0, 4, testing::MergedBase::kNf4RoundTrip),
            14);
}

TEST(PeftTrainTest, ConfigErrors) {
  auto fp8 = config::ParseTrainConfig("", {"model.data.use_synthetic_data=true", "model.peft.peft_type=lora",
                                           "model.fp8=true"});
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.status().message().find("does not support FP8"), std::string::npos);
  auto qlora = config::ParseTrainConfig("", {"model.data.use_synthetic_data=true", "model.peft.peft_type=qlora",
                                             "model.fp8=true"});
  ASSERT_FALSE(qlora.ok());
  EXPECT_NE(qlora.status().message().find("does not support FP8"), std::string::npos);
  auto nofinetune = config::ParseTrainConfig(
      "", {"model.data.use_synthetic_data=true", "model.hf_model_name_or_path=/x"});
  ASSERT_FALSE(nofinetune.ok());
  EXPECT_NE(nofinetune.status().message().find("model.do_finetune is false"), std::string::npos);
  auto badtarget = config::ParseTrainConfig(
      "", {"model.data.use_synthetic_data=true", "model.peft.peft_type=lora",
           "model.peft.target_modules=[q_proj, lm_head]"});
  ASSERT_FALSE(badtarget.ok());
  EXPECT_NE(badtarget.status().message().find("'lm_head'"), std::string::npos);
  auto ok = config::ParseTrainConfig("", {"model.data.use_synthetic_data=true",
                                          "model.peft.peft_type=LORA", "model.peft.target_modules=v_proj,q_proj",
                                          "model.peft.rank=32", "model.peft.alpha=16"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->finetune.peft.targets, (std::vector<int>{model::kQProj, model::kVProj}));
  EXPECT_DOUBLE_EQ(ok->finetune.peft.scaling(), 0.5);
  EXPECT_EQ(ok->finetune.adapter_dir, "./exp/adapter");
}

}  // namespace
}  // namespace hypertrain::ckpt
