// GPU: LoRA through the whole training job on the CUDA backend (issue 26),
// the CPU job as the oracle. A base model trained on the CPU and exported as
// Hugging Face weights is loaded into the frozen base on the GPU; the LoRA
// run's losses and exported adapter match the CPU backend's run of the same
// job (fp32: tight; bf16: the losses); checkpoints hold only the adapters and
// a stopped run resumes bit-identically on the GPU; the merged export equals
// base + (alpha/r) B A of the run's own adapter; QLoRA matches the CPU's and
// merges on the NF4 round trip of the base. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ckpt/peft_export.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/model/nf4.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/train/trainer.h"
#include "tests/ckpt/peft_testing.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt {
namespace {

std::string TempDir(const std::string& name) { return testing::FreshTempDir("gpu_peft_" + name); }

// tiny with head_dim 64 (the bf16 flash kernels) and 2 layers.
std::vector<std::string> Common(const std::string& exp, const std::string& backend) {
  return {"trainer.backend=" + backend, "trainer.max_steps=8", "trainer.log_every_n_steps=100",
          "model.shape=tiny", "model.num_hidden_layers=2", "model.num_attention_heads=2",
          "model.num_key_value_heads=1", "model.max_context_width=64",
          "model.train_batch_size=2", "model.grad_accumulation_steps=2", "model.optim.lr=1e-2",
          "model.data.use_synthetic_data=true", "exp_manager.exp_dir=" + exp,
          "exp_manager.every_n_train_steps=3", "exp_manager.save_top_k=3"};
}

config::TrainConfig Parse(const std::vector<std::string>& sets) {
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// A trained full model as Hugging Face weights (fp32), trained on the CPU.
const std::string& Base() {
  static const std::string dir = [] {
    const std::string exp = TempDir("base");
    auto sets = Common(exp, "cpu");
    sets.push_back("exp_manager.checkpoint.export_hf_dir=" + exp + "/hf");
    sets.push_back("exp_manager.checkpoint.export_hf_dtype=fp32");
    auto r = testing::RunJob(Parse(sets));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return exp + "/hf";
  }();
  return dir;
}

config::TrainConfig Peft(const std::string& exp, const std::string& backend,
                         const std::string& precision, double dropout,
                         const std::string& type = "lora") {
  auto sets = Common(exp, backend);
  for (const std::string& s : std::vector<std::string>{
           "trainer.precision=" + precision, "model.do_finetune=true",
           "model.hf_model_name_or_path=" + Base(), "model.peft.peft_type=" + type,
           "model.peft.rank=4", "model.peft.alpha=8",
           "model.peft.dropout=" + std::to_string(dropout),
           "exp_manager.checkpoint.export_hf_dir=" + exp + "/merged",
           "exp_manager.checkpoint.export_hf_dtype=fp32"}) {
    sets.push_back(s);
  }
  return Parse(sets);
}

// The same job on the CPU and on the GPU: losses per step and the exported
// adapters (relative L2 over all adapter elements).
void ExpectGpuRunMatchesCpu(const std::string& precision, double dropout, double loss_tol,
                            double adapter_tol) {
  const std::string cpu_exp = TempDir("cpu_" + precision), gpu_exp = TempDir("gpu_" + precision);
  auto c = testing::RunJob(Peft(cpu_exp, "cpu", precision, dropout));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto g = testing::RunJob(Peft(gpu_exp, "cuda", precision, dropout));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(c->losses.size(), 8u);
  ASSERT_EQ(g->losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(g->losses[i], c->losses[i], loss_tol * std::abs(c->losses[i])) << "step " << i + 1;
  }
  auto ac = LoadAdapter(cpu_exp + "/adapter");
  auto ag = LoadAdapter(gpu_exp + "/adapter");
  ASSERT_TRUE(ac.ok()) << ac.status().ToString();
  ASSERT_TRUE(ag.ok()) << ag.status().ToString();
  ASSERT_EQ(ag->tensors.size(), 28u);  // 2 layers x 7 targets x (A, B)
  double d = 0, n = 0;
  for (const auto& [name, m] : ac->tensors) {
    ASSERT_TRUE(ag->tensors.count(name)) << name;
    const auto& x = ag->tensors.at(name).values;
    ASSERT_EQ(x.size(), m.values.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      d += (double(x[i]) - m.values[i]) * (double(x[i]) - m.values[i]);
      n += double(m.values[i]) * m.values[i];
    }
  }
  ASSERT_GT(n, 0.0);
  if (adapter_tol > 0) EXPECT_LT(std::sqrt(d / n), adapter_tol) << "exported adapters";
}

TEST(GpuPeftTrainTest, Fp32RunMatchesTheCpuBackend) {
  HT_SKIP_WITHOUT_GPU();
  ExpectGpuRunMatchesCpu("fp32", 0.1, 1e-4, 1e-2);
}

TEST(GpuPeftTrainTest, Bf16RunMatchesTheCpuBackendsLosses) {
  HT_SKIP_WITHOUT_GPU();
  ExpectGpuRunMatchesCpu("bf16", 0.1, 3e-2, /*adapter_tol=*/0);
}

TEST(GpuPeftTrainTest, CheckpointsHoldOnlyAdaptersAndResumeBitIdentically) {
  HT_SKIP_WITHOUT_GPU();
  const std::string straight = TempDir("straight");
  auto a = testing::RunJob(Peft(straight, "cuda", "bf16", 0.1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->losses.size(), 8u);
  auto m = VerifyCheckpoint(straight + "/checkpoints/step-8", true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  int lora = 0;
  for (const UnitEntry& u : m->layout.units) {
    for (const TensorEntry& t : u.tensors) {
      EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name;
      ++lora;
    }
  }
  EXPECT_EQ(lora, 28);
  EXPECT_EQ(m->trainer_state["peft"]["base"], Base());
  const std::string stopped = TempDir("stopped");
  ASSERT_EQ(testing::RunJob(Peft(stopped, "cuda", "bf16", 0.1), 5).status().code(),
            StatusCode::kUnavailable);
  auto b = testing::RunJob(Peft(stopped, "cuda", "bf16", 0.1));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->losses.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b->losses[i], a->losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(testing::ShardBytes(straight, 8), testing::ShardBytes(stopped, 8));
}

// fp32 on the GPU keeps the HF base exact, so the merged export is
// base + (alpha/r) B A of the exported adapter to fp32 rounding.
TEST(GpuPeftTrainTest, MergedExportIsBasePlusScaledBA) {
  HT_SKIP_WITHOUT_GPU();
  const std::string exp = TempDir("export");
  ASSERT_TRUE(testing::RunJob(Peft(exp, "cuda", "fp32", 0.1)).ok());
  EXPECT_EQ(testing::ExpectMergedIsBasePlusScaledBA(Base(), exp, 8.0 / 4.0, 4, testing::MergedBase::kExact), 14);
}

// QLoRA on the GPU (fp32): the same losses as the CPU backend's QLoRA job, and
// the merged export is the NF4 round trip of the HF base + (alpha/r) B A.
TEST(GpuPeftTrainTest, QloraMatchesTheCpuAndMergesOnTheNf4Base) {
  HT_SKIP_WITHOUT_GPU();
  const std::string cpu_exp = TempDir("qlora_cpu"), exp = TempDir("qlora_gpu");
  auto c = testing::RunJob(Peft(cpu_exp, "cpu", "fp32", 0.1, "qlora"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto g = testing::RunJob(Peft(exp, "cuda", "fp32", 0.1, "qlora"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(g->losses[i], c->losses[i], 1e-4 * std::abs(c->losses[i])) << "step " << i + 1;
  }
  EXPECT_EQ(
      testing::ExpectMergedIsBasePlusScaledBA(Base(), exp, 8.0 / 4.0, 4, testing::MergedBase::kNf4RoundTrip), 14);
}

}  // namespace
}  // namespace hypertrain::ckpt
