// GPU: bit-identical resume of the single-process trainer on the 125m model
// with the CUDA backend (skips without a GPU). Multi-GPU resume is covered by
// running chaos-style restarts with `hypertrain launch` on the GPU machine
// (docs/CHECKPOINTS.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/resume_testing.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/train/trainer.h"

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

}  // namespace
}  // namespace hypertrain::ckpt
