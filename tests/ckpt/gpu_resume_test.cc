// GPU: bit-identical resume of the single-process trainer on the 125m model
// with the CUDA backend (skips without a GPU). Multi-GPU resume is covered by
// running chaos-style restarts with `hypertrain launch` on the GPU machine
// (docs/CHECKPOINTS.md).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/train/trainer.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return testing::FreshTempDir("gpu_resume_" + name); }

config::TrainConfig Config(const std::string& exp, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {
      "trainer.backend=cuda", "trainer.max_steps=8", "trainer.log_every_n_steps=100",
      "model.shape=125m", "model.max_context_width=256", "model.train_batch_size=2",
      "model.optim.sched.warmup_steps=2", "model.data.use_synthetic_data=true",
      "trainer.precision=bf16", "exp_manager.exp_dir=" + exp, "exp_manager.every_n_train_steps=3",
      "exp_manager.save_top_k=2"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

using testing::ShardBytes;

TEST(GpuResumeTest, Resume125mOnOneGpuIsBitIdentical) {
  HT_SKIP_WITHOUT_GPU();
  const std::string straight = TempDir("straight");
  auto a = testing::RunJob(Config(straight));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->losses.size(), 8u);
  const std::string stopped = TempDir("stopped");
  // Last save: step 3.
  ASSERT_EQ(testing::RunJob(Config(stopped), /*stop_after_step=*/4).status().code(), StatusCode::kUnavailable);
  auto b = testing::RunJob(Config(stopped));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->losses.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b->losses[i], a->losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(ShardBytes(straight, 8), ShardBytes(stopped, 8));
}

// FP8 (delayed scaling, a 4-pass amax history that rolls over across the
// resume): the manifest carries the histories, and the resumed run's losses
// and weights equal the uninterrupted run's bit for bit.
TEST(GpuResumeTest, Fp8ResumeRestoresAmaxHistoriesBitIdentically) {
  HT_SKIP_WITHOUT_GPU();
  // Also with the LM head in FP8 (its dlogits scale from the history, so the
  // resumed run's head backward must see the restored amaxes).
  for (const bool head : {false, true}) {
  SCOPED_TRACE(head ? "fp8_lm_head" : "blocks");
  std::vector<std::string> fp8 = {"model.fp8=true", "model.fp8_amax_history_len=4"};
  if (head) fp8.push_back("model.fp8_lm_head=true");
  const std::string straight = TempDir(head ? "fp8_head_straight" : "fp8_straight");
  auto a = testing::RunJob(Config(straight, fp8));
  if (!a.ok() && a.status().message().find("no FP8 tensor cores") != std::string::npos) {
    GTEST_SKIP() << a.status().message();
  }
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string stopped = TempDir(head ? "fp8_head_stopped" : "fp8_stopped");
  // Last save: step 3.
  ASSERT_EQ(testing::RunJob(Config(stopped, fp8), /*stop_after_step=*/4).status().code(),
            StatusCode::kUnavailable);
  auto manifest = ReadFileToString(stopped + "/checkpoints/step-3/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  const auto fp8_state = nlohmann::json::parse(*manifest).at("trainer_state").at("fp8");
  EXPECT_EQ(fp8_state.at("passes").get<int>(), 3);
  EXPECT_EQ(fp8_state.at("rows").get<int>(), 3);
  auto b = testing::RunJob(Config(stopped, fp8));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->losses.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b->losses[i], a->losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(ShardBytes(straight, 8), ShardBytes(stopped, 8));
  // And FP8 really ran: the bf16 run's losses differ.
  const std::string bf16 = TempDir(head ? "fp8_head_vs_bf16" : "fp8_vs_bf16");
  auto c = testing::RunJob(Config(bf16));
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->losses.back(), a->losses.back());
  }
}

}  // namespace
}  // namespace hypertrain::ckpt
