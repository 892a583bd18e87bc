// Bit-identical resume of the single-process trainer on the tiny model: N
// steps straight vs k steps, stop, automatic resume, N-k steps. Also the HF
// round trip through the training job (export at the end, init from it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/train_hooks.h"
#include "runtime/train/trainer.h"
#include "tests/ckpt/resume_testing.h"

namespace hypertrain::ckpt {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return testing::FreshTempDir("resume_" + name); }

config::TrainConfig Config(const std::string& exp, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {
      "trainer.backend=cpu", "trainer.max_steps=10", "trainer.log_every_n_steps=100",
      "model.shape=tiny", "model.num_hidden_layers=2", "model.max_context_width=16",
      "model.train_batch_size=2", "model.grad_accumulation_steps=2", "model.optim.lr=3e-3",
      "model.optim.sched.warmup_steps=2", "model.data.use_synthetic_data=true",
      "trainer.precision=bf16", "exp_manager.exp_dir=" + exp, "exp_manager.every_n_train_steps=3",
      "exp_manager.save_top_k=2"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

using testing::ShardBytes;

TEST(TrainResumeTest, StopAndAutomaticResumeIsBitIdentical) {
  const std::string straight = TempDir("straight");
  auto a = testing::RunJob(Config(straight));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->losses.size(), 10u);
  ASSERT_EQ(ListCheckpoints(straight + "/checkpoints").back().first, 10);

  // Stop after step 7 (last save: step 6) and after step 9 (a save step: the
  // in-flight save of 9 completes), resuming each time with no flag.
  const std::string stopped = TempDir("stopped");
  auto b1 = testing::RunJob(Config(stopped), /*stop_after_step=*/7);
  ASSERT_EQ(b1.status().code(), StatusCode::kUnavailable) << b1.status().ToString();
  auto b2 = testing::RunJob(Config(stopped), /*stop_after_step=*/9);
  ASSERT_EQ(b2.status().code(), StatusCode::kUnavailable) << b2.status().ToString();
  auto b3 = testing::RunJob(Config(stopped));
  ASSERT_TRUE(b3.ok()) << b3.status().ToString();
  ASSERT_EQ(b3->losses.size(), 1u);  // resumed at 9, ran step 10
  EXPECT_EQ(b3->losses[0], a->losses[9]);
  // A forced resume_from_checkpoint into an empty experiment continues too.
  const std::string forced = TempDir("forced");
  auto c = testing::RunJob(
      Config(forced, {"exp_manager.resume_from_checkpoint=" + stopped + "/checkpoints/step-9"}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->losses.size(), 1u);
  EXPECT_EQ(c->losses[0], a->losses[9]);
  // Final parameters, m and v: the shard files are byte-identical.
  EXPECT_EQ(ShardBytes(straight, 10), ShardBytes(stopped, 10));
  EXPECT_EQ(ShardBytes(straight, 9), ShardBytes(stopped, 9));
  auto m = VerifyCheckpoint(stopped + "/checkpoints/step-10", true);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->tokens_seen, 10 * 2 * 2 * 16);
  EXPECT_EQ(m->trainer_state["adam_step"], 10);
  EXPECT_EQ(m->ranks[0].sampler, VerifyCheckpoint(straight + "/checkpoints/step-10", true)->ranks[0].sampler);
  // save_top_k=2 kept the newest two.
  auto kept = ListCheckpoints(stopped + "/checkpoints");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].first, 9);
}

TEST(TrainResumeTest, LossesAfterResumeMatchStepByStep) {
  const std::string straight = TempDir("straight2");
  auto a = testing::RunJob(Config(straight, {"exp_manager.every_n_train_steps=4"}));
  ASSERT_TRUE(a.ok());
  const std::string stopped = TempDir("stopped2");
  ASSERT_FALSE(testing::RunJob(Config(stopped, {"exp_manager.every_n_train_steps=4"}), /*stop_after_step=*/5).ok());
  auto b = testing::RunJob(Config(stopped, {"exp_manager.every_n_train_steps=4"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->losses.size(), 6u);  // resumed from step 4
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b->losses[i], a->losses[4 + i]) << "step " << 5 + i;
  EXPECT_EQ(ShardBytes(straight, 10), ShardBytes(stopped, 10));
}

TEST(TrainResumeTest, ExportHfAtEndAndInitialiseANewRunFromIt) {
  const std::string first = TempDir("hf_first");
  auto a = testing::RunJob(Config(first, {"exp_manager.checkpoint.export_hf_dir=" + first + "/hf",
                                             "exp_manager.checkpoint.export_hf_dtype=fp32"}));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto st = SafetensorsReader::Open(first + "/hf/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->Find("lm_head.weight"), nullptr);  // tiny ties embeddings
  ASSERT_NE(st->Find("model.layers.1.mlp.gate_proj.weight"), nullptr);
  // A new run initialised from the export starts where the first ended: its
  // first loss is well below a fresh initialisation's.
  const std::string second = TempDir("hf_second");
  auto b = testing::RunJob(Config(second, {"exp_manager.hf_init_from=" + first + "/hf", "trainer.max_steps=1"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const std::string fresh = TempDir("hf_fresh");
  auto f = testing::RunJob(Config(fresh, {"trainer.max_steps=1"}));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->losses[0], a->losses[0]);
  EXPECT_NE(b->losses[0], f->losses[0]);
  auto bad = testing::RunJob(Config(TempDir("hf_bad"), {"exp_manager.hf_init_from=" + first + "/hf",
                                                          "model.num_hidden_layers=3", "trainer.max_steps=1"}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("num_hidden_layers 2 vs 3"), std::string::npos) << bad.status().ToString();
}

// metrics.jsonl reports the step loop's wait on checkpoint saves: none before
// the first save, some in the record after it.
TEST(TrainResumeTest, MetricsReportTheCheckpointStall) {
  const std::string exp = TempDir("stall");
  ASSERT_TRUE(testing::RunJob(Config(exp, {"trainer.log_every_n_steps=3"})).ok());
  std::ifstream in(exp + "/metrics.jsonl");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 4u);  // steps 3, 6, 9, 10; saves after 3, 6 and 9
  EXPECT_EQ(records[0]["step"], 3);
  // Before the first save only the per-step checks ran (microseconds); each later
  // record holds one save's snapshot.
  const double before = records[0]["checkpoint_stall_s"].get<double>();
  EXPECT_LT(before, 1e-3);
  for (size_t r = 1; r < records.size(); ++r) {
    EXPECT_GT(records[r]["checkpoint_stall_s"].get<double>(), 5 * before) << records[r].dump();
  }
}

}  // namespace
}  // namespace hypertrain::ckpt
