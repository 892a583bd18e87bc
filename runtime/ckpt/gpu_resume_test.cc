// GPU: bit-identical resume of the single-process trainer on the 125m model
// with the CUDA backend (skips without a GPU). Multi-GPU resume is covered by
// running chaos-style restarts with `hypertrain launch` on the GPU machine
// (docs/CHECKPOINTS.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/ckpt/atomic_file.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/testing/cuda_device.h"
#include "runtime/train/trainer.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = fs::path(base ? base : "/tmp") / ("gpu_resume_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

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

// Forwards to the real hooks and fails ("crashes") right after step `stop_at`
// (after any save of that step was started).
class StoppingHooks final : public train::CheckpointHooks {
 public:
  StoppingHooks(std::unique_ptr<TrainCheckpointHooks> inner, int64_t stop_at)
      : inner_(std::move(inner)), stop_at_(stop_at) {}
  StatusOr<bool> Restore(model::Backend& b, train::TrainState& s) override { return inner_->Restore(b, s); }
  Status AfterStep(model::Backend& b, const train::TrainState& s) override {
    HT_RETURN_IF_ERROR(inner_->AfterStep(b, s));
    if (s.step == stop_at_) return Unavailable("simulated stop after step " + std::to_string(s.step));
    return Status::Ok();
  }
  Status Finish(model::Backend& b, const train::TrainState& s) override { return inner_->Finish(b, s); }

 private:
  std::unique_ptr<TrainCheckpointHooks> inner_;
  int64_t stop_at_;
};

int64_t g_stop_at = -1;

const bool kFactory = train::SetCheckpointFactory(
    [](const config::TrainConfig& c, train::ParallelRuntime& p) -> StatusOr<std::unique_ptr<train::CheckpointHooks>> {
      HT_ASSIGN_OR_RETURN(CheckpointOptions o, OptionsFromConfig(c));
      HT_ASSIGN_OR_RETURN(RankPlacement placement, PlacementFor(c, p.rank(), p.world_size()));
      auto inner = std::make_unique<TrainCheckpointHooks>(c, std::move(o), placement);
      return std::unique_ptr<train::CheckpointHooks>(std::make_unique<StoppingHooks>(std::move(inner), g_stop_at));
    });

std::string ShardBytes(const std::string& exp, int64_t step) {
  return *ReadFileToString(exp + "/checkpoints/step-" + std::to_string(step) + "/shard-00000-of-00001.bin");
}

TEST(GpuResumeTest, Resume125mOnOneGpuIsBitIdentical) {
  HT_SKIP_WITHOUT_GPU();
  const std::string straight = TempDir("straight");
  g_stop_at = -1;
  auto a = train::RunTrainJob(Config(straight));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->losses.size(), 8u);
  const std::string stopped = TempDir("stopped");
  g_stop_at = 4;  // last save: step 3
  ASSERT_EQ(train::RunTrainJob(Config(stopped)).status().code(), StatusCode::kUnavailable);
  g_stop_at = -1;
  auto b = train::RunTrainJob(Config(stopped));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->losses.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b->losses[i], a->losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(ShardBytes(straight, 8), ShardBytes(stopped, 8));
}

}  // namespace
}  // namespace hypertrain::ckpt
