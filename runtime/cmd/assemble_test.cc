// The assembly of `hypertrain train` in a CPU-only build (this test links
// :no_cuda_parts in every build): the CPU backend under auto, a clear "not
// built in" for cuda, and checkpoint hooks in every job.
#include "runtime/cmd/assemble.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "runtime/ckpt/store.h"
#include "runtime/cmd/cuda_parts.h"

namespace hypertrain::cmd {
namespace {

launch::EnvLookup NoEnv() {
  return [](const char*) -> const char* { return nullptr; };
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  auto p = std::filesystem::path(base ? base : "/tmp") / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

config::TrainConfig Config(const std::string& exp, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {
      "trainer.max_steps=2",       "model.shape=tiny",
      "model.num_hidden_layers=1", "model.max_context_width=16",
      "model.train_batch_size=2",  "model.data.use_synthetic_data=true",
      "exp_manager.exp_dir=" + exp};
  sets.insert(sets.end(), extra.begin(), extra.end());
  auto c = config::ParseTrainConfig("", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(AssembleTest, AutoTakesTheCpuBackendWhenCudaIsNotBuiltIn) {
  ASSERT_FALSE(CudaBuiltIn());
  const auto c = Config(TempDir("auto"), {"trainer.backend=auto"});
  ckpt::HostAllocator* snapshots = nullptr;
  auto b = CreateBackend(c, train::BackendOptionsFor(c), NoEnv(), &snapshots);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->backend->name(), "cpu");
  EXPECT_EQ(snapshots, ckpt::PageableHostAllocator());
}

TEST(AssembleTest, CudaIsNotBuiltInAndTheErrorSaysHowToGetIt) {
  const auto c = Config(TempDir("cuda"), {"trainer.backend=cuda"});
  auto b = CreateBackend(c, train::BackendOptionsFor(c), NoEnv());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);  // exit 2: never retried
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("trainer.backend: cuda: the CUDA backend is not built in"), std::string::npos)
      << m;
  EXPECT_NE(m.find("CUDA_HOME"), std::string::npos) << m;
  EXPECT_NE(m.find("--config=cpu"), std::string::npos) << m;
  // The whole job stops before anything is written.
  auto parts = AssembleTrainJob(c, NoEnv());
  EXPECT_EQ(parts.status().code(), StatusCode::kInvalidArgument);
}

TEST(AssembleTest, AnUnknownBackendIsAConfigError) {
  auto c = Config(TempDir("tpu"));
  c.backend = "tpu";
  auto b = CreateBackend(c, train::BackendOptionsFor(c), NoEnv());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "trainer.backend: 'tpu' is not one of auto, cpu, cuda");
}

TEST(AssembleTest, EveryJobHasCheckpointHooksAndSaves) {
  const std::string exp = TempDir("job");
  const auto c = Config(exp, {"trainer.backend=cpu"});
  auto parts = AssembleTrainJob(c, NoEnv());
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_NE(parts->parallel, nullptr);
  EXPECT_EQ(parts->parallel->world_size(), 1);
  EXPECT_NE(parts->backend.backend, nullptr);
  EXPECT_NE(parts->hooks, nullptr);
  ASSERT_NE(parts->checkpoint, nullptr);
  auto s = train::RunTrainJob(c, std::move(parts).value());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->steps_run, 2);
  // The final save (exp_manager.checkpoint.save_last defaults to true).
  ASSERT_FALSE(ckpt::ListCheckpoints(exp + "/checkpoints").empty());
  EXPECT_EQ(ckpt::ListCheckpoints(exp + "/checkpoints").back().first, 2);
}

TEST(AssembleTest, CheckpointConfigErrorsStopTheJobBeforeTheBackendExists) {
  auto c = Config(TempDir("badckpt"));
  c.checkpoint.every_n_train_steps = -1;  // past the config's own check
  auto parts = AssembleTrainJob(c, NoEnv());
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parts.status().message().find("every_n_train_steps"), std::string::npos)
      << parts.status().ToString();
}

TEST(SizeForThisWorld, FewerNodesRaiseAccumulationToKeepTheGlobalBatch) {
  const auto c = Config(TempDir("elastic"), {"model.grad_accumulation_steps=2"});
  auto one = SizeForThisWorld(c, EnvFromMap({{"HYPERTRAIN_DESIRED_NNODES", "2"}, {"NNODES", "1"}}));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->grad_accumulation_steps, 4);
  EXPECT_EQ(one->desired_grad_accumulation_steps, 2);
  auto four = SizeForThisWorld(c, EnvFromMap({{"HYPERTRAIN_DESIRED_NNODES", "2"}, {"NNODES", "4"}, {"MASTER_ADDR", "h"}}));
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_EQ(four->grad_accumulation_steps, 1);
  // At the desired size, or not elastic: the config as written.
  for (const auto& env : {EnvFromMap({{"HYPERTRAIN_DESIRED_NNODES", "2"}, {"NNODES", "2"}, {"MASTER_ADDR", "h"}}), EnvFromMap({{"NNODES", "1"}})}) {
    auto same = SizeForThisWorld(c, env);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(same->grad_accumulation_steps, 2);
    EXPECT_EQ(same->desired_grad_accumulation_steps, 0);
  }
}

TEST(SizeForThisWorld, AGlobalBatchThatDoesNotSplitIsAClearConfigError) {
  const auto c = Config(TempDir("elastic_bad"), {"model.grad_accumulation_steps=1"});
  auto three = SizeForThisWorld(c, EnvFromMap({{"HYPERTRAIN_DESIRED_NNODES", "2"}, {"NNODES", "3"}, {"MASTER_ADDR", "h"}}));
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("elastic job on 3 of 2 desired nodes cannot keep its global batch: "
                                          "grad_accumulation_steps 1 x 2 desired nodes = 2"),
            std::string::npos)
      << three.status().ToString();
  for (const char* bad : {"0", "two", "-1"}) {
    auto r = SizeForThisWorld(c, EnvFromMap({{"HYPERTRAIN_DESIRED_NNODES", bad}, {"NNODES", "1"}}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("HYPERTRAIN_DESIRED_NNODES: '") + bad +
                                        "' is not a positive node count");
  }
}

}  // namespace
}  // namespace hypertrain::cmd
