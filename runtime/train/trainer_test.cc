#include "runtime/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/backends/cpu/backend.h"
#include "runtime/data/shard.h"

namespace hypertrain::train {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = std::filesystem::path(base ? base : "/tmp") / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

std::string TextShards() {
  static std::string dir;
  if (!dir.empty()) return dir;
  const std::string base = TempDir("text_shards");
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 7) + ". ";
  }
  std::ofstream(base + "/a.txt") << text;
  EXPECT_TRUE(data::PrepareByteShards({base + "/a.txt"}, base + "/shards", 4000).ok());
  dir = base + "/shards";
  return dir;
}

config::TrainConfig Config(const std::string& exp, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {
      "trainer.backend=cpu", "trainer.max_steps=12", "trainer.log_every_n_steps=4",
      "model.shape=tiny", "model.num_hidden_layers=2", "model.max_context_width=32",
      "model.train_batch_size=4", "model.optim.lr=3e-3", "model.optim.sched.warmup_steps=2",
      "model.data.train_dir=" + TextShards(), "exp_manager.exp_dir=" + exp};
  sets.insert(sets.end(), extra.begin(), extra.end());
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// Checkpoint hooks that keep nothing (the loop's tests need no files).
class NoCheckpoint : public CheckpointHooks {
 public:
  StatusOr<bool> Restore(model::Backend&, TrainState&) override { return false; }
  Status AfterStep(model::Backend&, const TrainState&) override { return Status::Ok(); }
  Status Finish(model::Backend&, const TrainState&) override { return Status::Ok(); }
};

// A one-process CPU job's parts (runtime/cmd assembles the same for
// trainer.backend: cpu without its checkpoint hooks).
TrainParts CpuParts(const config::TrainConfig& c, std::unique_ptr<CheckpointHooks> checkpoint = nullptr) {
  TrainParts p;
  p.parallel = std::make_unique<SingleProcessRuntime>();
  auto backend = cpu::CpuBackend::Create(c.model, BackendOptionsFor(c));
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  p.backend.backend = std::move(backend).value();
  p.hooks = std::make_unique<model::NoOpUnitHooks>();
  p.checkpoint = checkpoint != nullptr ? std::move(checkpoint) : std::make_unique<NoCheckpoint>();
  return p;
}

StatusOr<TrainSummary> RunCpuJob(const config::TrainConfig& c, std::unique_ptr<CheckpointHooks> checkpoint = nullptr) {
  return RunTrainJob(c, CpuParts(c, std::move(checkpoint)));
}

TEST(TrainerTest, LossFallsAndMetricsAreWritten) {
  const std::string exp = TempDir("exp_falls");
  auto s = RunCpuJob(Config(exp, {"trainer.max_steps=30"}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->steps_run, 30);
  EXPECT_NEAR(s->losses.front(), std::log(256.0), 0.2);
  EXPECT_LT(s->losses.back(), s->losses.front() - 1.5);
  std::ifstream jsonl(exp + "/metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(jsonl, l);) ++lines;
  EXPECT_EQ(lines, 30 / 4 + 1);  // every 4 steps plus the last
  EXPECT_TRUE(std::filesystem::is_directory(exp + "/tensorboard"));
}

TEST(TrainerTest, GradAccumulationMatchesOneBigBatch) {
  auto a = RunCpuJob(Config(TempDir("exp_a1"), {"model.train_batch_size=4", "trainer.max_steps=4"}));
  auto b = RunCpuJob(Config(TempDir("exp_a2"), {"model.train_batch_size=2",
                                                   "model.grad_accumulation_steps=2",
                                                   "trainer.max_steps=4"}));
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a->losses[i], b->losses[i], 2e-5) << i;
}

// Checkpoint hooks that keep the state in memory: proves the loop restores
// every piece (params, AdamW m/v, step, scaler, data position).
struct Snapshot {
  TrainState state;
  std::vector<std::vector<float>> units[3];
};

class MemoryCheckpoint : public CheckpointHooks {
 public:
  MemoryCheckpoint(Snapshot* snap, int64_t save_at, bool restore)
      : snap_(snap), save_at_(save_at), restore_(restore) {}
  StatusOr<bool> Restore(model::Backend& b, TrainState& state) override {
    if (!restore_) return false;
    const model::StateKind kinds[3] = {model::StateKind::kMasterParams, model::StateKind::kAdamM,
                                       model::StateKind::kAdamV};
    for (int k = 0; k < 3; ++k) {
      for (int u = 0; u < b.layout().num_units(); ++u) {
        HT_RETURN_IF_ERROR(b.WriteState(u, kinds[k], snap_->units[k][u].data()));
      }
    }
    state = snap_->state;
    return true;
  }
  Status AfterStep(model::Backend& b, const TrainState& state) override {
    if (state.step != save_at_) return Status::Ok();
    const model::StateKind kinds[3] = {model::StateKind::kMasterParams, model::StateKind::kAdamM,
                                       model::StateKind::kAdamV};
    for (int k = 0; k < 3; ++k) {
      snap_->units[k].clear();
      for (int u = 0; u < b.layout().num_units(); ++u) {
        snap_->units[k].emplace_back(b.Owned(u).size());
        HT_RETURN_IF_ERROR(b.ReadState(u, kinds[k], snap_->units[k].back().data()));
      }
    }
    snap_->state = state;
    return Status::Ok();
  }
  Status Finish(model::Backend&, const TrainState&) override { return Status::Ok(); }

 private:
  Snapshot* snap_;
  int64_t save_at_;
  bool restore_;
};

TEST(TrainerTest, ResumeFromCheckpointHooksIsBitIdentical) {
  Snapshot snap;
  auto full = RunCpuJob(Config(TempDir("exp_full"), {"model.grad_accumulation_steps=2"}),
                        std::make_unique<MemoryCheckpoint>(&snap, 5, false));
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ(snap.state.step, 5);
  auto resumed = RunCpuJob(Config(TempDir("exp_resumed"), {"model.grad_accumulation_steps=2"}),
                           std::make_unique<MemoryCheckpoint>(&snap, -1, true));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  ASSERT_EQ(resumed->steps_run, 12 - 5);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(resumed->losses[i], full->losses[5 + i]) << i;
}

// Records the stop: the step and whether the loop asked to save it.
struct StopRecord {
  int64_t stopped_at = -1;
  bool saved = false;
  bool finished = false;
};
class StopRecorder : public CheckpointHooks {
 public:
  StopRecorder(Termination* t, int64_t request_at, double estimate, StopRecord* rec)
      : t_(t), request_at_(request_at), estimate_(estimate), rec_(rec) {}
  StatusOr<bool> Restore(model::Backend&, TrainState&) override { return false; }
  Status AfterStep(model::Backend&, const TrainState& s) override {
    if (s.step == request_at_) t_->Request(15);  // as if SIGTERM came during the next step
    return Status::Ok();
  }
  Status Finish(model::Backend&, const TrainState&) override {
    rec_->finished = true;
    return Status::Ok();
  }
  double EstimatedSaveSeconds() const override { return estimate_; }
  Status Stop(model::Backend&, const TrainState& s, bool save) override {
    rec_->stopped_at = s.step;
    rec_->saved = save;
    return Status::Ok();
  }

 private:
  Termination* t_;
  int64_t request_at_;
  double estimate_;
  StopRecord* rec_;
};

TEST(TrainerTest, StopRequestEndsTheStepAndSavesWhenItFits) {
  for (const double estimate : {0.5, 100.0}) {  // grace 30 s: fits / does not
    Termination t(30);
    StopRecord record;
    const StopRecord* rec = &record;
    auto hooks = std::make_unique<StopRecorder>(&t, 4, estimate, &record);
    const config::TrainConfig c = Config(TempDir("exp_stop"), {});
    TrainParts parts = CpuParts(c, std::move(hooks));
    parts.termination = &t;
    auto s = RunTrainJob(c, std::move(parts));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->steps_run, 5);  // the step in progress when asked (5) ends, no more
    EXPECT_EQ(rec->stopped_at, 5);
    EXPECT_EQ(rec->saved, estimate < 10) << estimate;
    EXPECT_FALSE(rec->finished);  // no final save / HF export on a stop
    EXPECT_EQ(s->stopped_by_signal, 15);
    EXPECT_EQ(s->saved_at_stop, estimate < 10);
  }
}

// Writes +inf into one gradient at a chosen micro-batch.
// at_call < 0: every micro-batch.
class InfInjector : public model::UnitHooks {
 public:
  InfInjector(model::Backend* b, int at_call) : b_(b), at_(at_call) {}
  Status AfterBackward(int unit) override {
    if (unit == 0 && (calls_++ == at_ || at_ < 0)) {
      static_cast<float*>(b_->FullGrads(1).data)[5] = INFINITY;
    }
    return Status::Ok();
  }

 private:
  model::Backend* b_;
  int at_;
  int calls_ = 0;
};

TEST(TrainerTest, Fp16LossScalerSkipsAndBacksOffOnInjectedInf) {
  auto c = Config(TempDir("exp_fp16"), {"trainer.precision=fp16", "trainer.max_steps=4",
                                        "trainer.loss_scale.initial_scale=1024",
                                        "model.data.use_synthetic_data=true"});
  model::BackendOptions o;
  o.micro_batch_size = c.train_batch_size;
  o.seq_len = c.seq_len();
  auto backend = std::move(cpu::CpuBackend::Create(c.model, o).value());
  data::LoaderOptions lo{.synthetic = true, .vocab_size = 256, .micro_batch = 4, .seq = 32};
  auto loader = std::move(data::DataLoader::Create(lo).value());
  InfInjector hooks(backend.get(), 2);  // third step
  LoopContext ctx{backend.get(), &hooks, loader.get()};
  TrainState state;
  std::vector<float> before;
  auto s = RunTrainingLoop(c, ctx, state);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->skipped_steps, 1);
  EXPECT_EQ(state.adam_step, 3);
  EXPECT_EQ(state.scaler.skipped_steps, 1);
  EXPECT_EQ(state.scaler.scale, 512);
  EXPECT_TRUE(std::isfinite(static_cast<float*>(backend->ComputeParams(1).data)[5]));
}

TEST(TrainerTest, RepeatedNonFiniteGradientsWithoutLossScalingStopTheRun) {
  auto c = Config(TempDir("exp_diverge"), {"trainer.max_steps=10", "model.data.use_synthetic_data=true"});
  model::BackendOptions o;
  o.micro_batch_size = c.train_batch_size;
  o.seq_len = c.seq_len();
  auto backend = std::move(cpu::CpuBackend::Create(c.model, o).value());
  data::LoaderOptions lo{.synthetic = true, .vocab_size = 256, .micro_batch = 4, .seq = 32};
  auto loader = std::move(data::DataLoader::Create(lo).value());
  const float w5 = static_cast<float*>(backend->ComputeParams(1).data)[5];
  InfInjector hooks(backend.get(), -1);
  LoopContext ctx{backend.get(), &hooks, loader.get()};
  TrainState state;
  auto s = RunTrainingLoop(c, ctx, state);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("diverged"), std::string::npos);
  EXPECT_EQ(state.step, 3);
  EXPECT_EQ(state.adam_step, 0);  // no update was applied
  EXPECT_EQ(static_cast<float*>(backend->ComputeParams(1).data)[5], w5);
}

TEST(TrainerTest, ConfigAndDataErrorsComeBackAsStatus) {
  auto c = Config(TempDir("exp_err"), {"model.data.train_dir=/nonexistent/dir"});
  auto s = RunCpuJob(c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
}

// A job never runs with a part missing: above all not without checkpoints.
TEST(TrainerTest, AJobWithAMissingPartIsRefusedBeforeAnyStep) {
  const std::string exp = TempDir("exp_missing");
  auto c = Config(exp);
  TrainParts parts = CpuParts(c);
  parts.checkpoint.reset();
  auto s = RunTrainJob(c, std::move(parts));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
  EXPECT_EQ(s.status().message(), "training job assembled without its checkpoint hooks");
  EXPECT_FALSE(std::filesystem::exists(exp + "/metrics.jsonl"));
  TrainParts no_backend = CpuParts(c);
  no_backend.backend.backend.reset();
  EXPECT_EQ(RunTrainJob(c, std::move(no_backend)).status().message(),
            "training job assembled without its backend");
}

}  // namespace
}  // namespace hypertrain::train
