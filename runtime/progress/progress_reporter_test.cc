#include "runtime/progress/progress_reporter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace hypertrain::progress {
namespace {

std::string TempDir() {
  std::string t = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/progXXXXXX";
  return mkdtemp(t.data());
}

TEST(JsonlTail, ReadsOnlyNewCompleteLines) {
  const std::string dir = TempDir();
  const std::string path = dir + "/metrics.jsonl";
  std::ofstream(path) << R"({"step":5,"loss":9.0,"tokens_per_s":1.0})" << "\n";
  JsonlTail tail(path, /*from_end=*/true);
  Progress p;
  EXPECT_FALSE(tail.Poll(&p));  // the earlier attempt's line is skipped
  EXPECT_EQ(p.step, -1);
  {
    std::ofstream f(path, std::ios::app);
    f << R"({"step":6,"loss":2.5,"tokens_per_s":100.0})" << "\n" << R"({"step":7,"lo)";
  }
  EXPECT_TRUE(tail.Poll(&p));
  EXPECT_EQ(p.step, 6);
  EXPECT_DOUBLE_EQ(*p.loss, 2.5);
  EXPECT_DOUBLE_EQ(*p.tokens_per_second, 100.0);
  { std::ofstream(path, std::ios::app) << R"(ss":2.0,"tokens_per_s":null})" << "\nnot json\n"; }
  EXPECT_TRUE(tail.Poll(&p));  // the split line completes; garbage is skipped
  EXPECT_EQ(p.step, 7);
  EXPECT_DOUBLE_EQ(*p.loss, 2.0);
}

// The "startup" key of the trainer's first step record becomes the report's
// start-up section: the top-level phases and "other" (nested phases stay in
// metrics.jsonl).
TEST(JsonlTail, CarriesTheStartupRecord) {
  const std::string path = TempDir() + "/metrics.jsonl";
  std::ofstream(path) << R"({"step":1,"loss":5.5,"tokens_per_s":10.0,"startup":{"time_to_first_step_s":7.5,)"
                      << R"("other_s":0.5,"phases":[{"name":"backend/weight_init","seconds":2.0,"depth":1},)"
                      << R"({"name":"backend","seconds":3.0,"depth":0},)"
                      << R"({"name":"first_step","seconds":4.0,"depth":0}]},"wall_time":1.0})" << "\n";
  JsonlTail tail(path, /*from_end=*/false);
  Progress p;
  EXPECT_TRUE(tail.Poll(&p));
  EXPECT_EQ(p.step, 1);
  EXPECT_DOUBLE_EQ(*p.loss, 5.5);
  ASSERT_TRUE(p.startup.has_value());
  EXPECT_DOUBLE_EQ(p.startup->time_to_first_step_seconds, 7.5);
  const std::vector<contract::StartupReport::Phase> want = {
      {"backend", 3.0}, {"first_step", 4.0}, {"other", 0.5}};
  EXPECT_EQ(p.startup->phases, want);
  // A later record without one keeps it (the attempt started once).
  { std::ofstream(path, std::ios::app) << R"({"step":2,"loss":5.0})" << "\n"; }
  EXPECT_TRUE(tail.Poll(&p));
  EXPECT_EQ(p.step, 2);
  EXPECT_TRUE(p.startup.has_value());
}

// <exp_dir>/recovery.json (train::MetricsWriter::WriteRecovery): this
// launcher's when its first step is not before the launcher started, which
// it then carries; an earlier attempt's file, or a broken one, is not.
TEST(Recovery, OnlyTheCurrentAttemptsReport) {
  const std::string path = TempDir() + "/recovery.json";
  const std::string start = "2026-11-28T05:00:00.500Z";
  EXPECT_FALSE(ReadRecovery(path, start).has_value());  // none yet
  std::ofstream(path) << R"({"resumedFromStep":10,"firstStepTime":"2026-11-28T05:00:04.250Z",)"
                      << R"("checkpointLoadSeconds":1.5,"checkpointLoadGBps":2.0})" << "\n";
  auto r = ReadRecovery(path, start);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->resumed_from_step, 10);
  EXPECT_EQ(r->launcher_start, start);
  EXPECT_DOUBLE_EQ(*r->checkpoint_load_gbps, 2.0);
  EXPECT_FALSE(ReadRecovery(path, "2026-11-28T05:01:00Z").has_value());  // an earlier attempt's
  std::ofstream(path) << "{broken";
  EXPECT_FALSE(ReadRecovery(path, start).has_value());
}

TEST(Checkpoints, LatestCompleteStep) {
  const std::string dir = TempDir();
  EXPECT_FALSE(LatestCheckpointStep(dir + "/missing").has_value());
  for (const char* s : {"step-10", "step-20", "step-30", "step-x"}) std::filesystem::create_directories(dir + "/" + s);
  std::ofstream(dir + "/step-10/manifest.json") << "{}";
  std::ofstream(dir + "/step-20/manifest.json") << "{}";
  // step-30 has no manifest yet (a save in progress): not complete.
  EXPECT_EQ(LatestCheckpointStep(dir), 20);
}

TEST(TrainPaths, FromTheLaunchedCommand) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/c.yaml") << "trainer: {max_steps: 42}\nexp_manager: {exp_dir: " << dir
                                 << "/exp}\nmodel: {shape: tiny, data: {use_synthetic_data: true}}\n";
  std::string metrics, ckpt;
  int64_t max_steps = 0;
  ASSERT_TRUE(TrainPaths({"train", "--config", dir + "/c.yaml", "--set", "exp_manager.exp_dir=" + dir + "/e2"},
                         EnvFromMap({}), &metrics, &ckpt, &max_steps));
  EXPECT_EQ(metrics, dir + "/e2/metrics.jsonl");
  EXPECT_EQ(ckpt, dir + "/e2/checkpoints");
  EXPECT_EQ(max_steps, 42);
  EXPECT_FALSE(TrainPaths({"/bin/true"}, EnvFromMap({}), &metrics, &ckpt, &max_steps));
  EXPECT_FALSE(TrainPaths({"train", "--config", dir + "/missing.yaml"}, EnvFromMap({}), &metrics, &ckpt, &max_steps));
  EXPECT_FALSE(TrainPaths({"train"}, EnvFromMap({}), &metrics, &ckpt, &max_steps));  // no config at all
}

TEST(TrainPaths, FromThePodEnvAsTheTrainerReadsIt) {
  // The operator's default command is `hypertrain launch -- train`: the config
  // and the checkpoint dir come from the pod env, for the reporter as for the trainer.
  const std::string dir = TempDir();
  std::ofstream(dir + "/c.yaml") << "trainer: {max_steps: 7}\nexp_manager: {exp_dir: " << dir
                                 << "/exp}\nmodel: {shape: tiny, data: {use_synthetic_data: true}}\n";
  std::string metrics, ckpt;
  int64_t max_steps = 0;
  ASSERT_TRUE(TrainPaths({"train"},
                         EnvFromMap({{"HYPERTRAIN_CONFIG", dir + "/c.yaml"}, {"HYPERTRAIN_CHECKPOINT_DIR", dir + "/ck"}}),
                         &metrics, &ckpt, &max_steps));
  EXPECT_EQ(metrics, dir + "/exp/metrics.jsonl");
  EXPECT_EQ(ckpt, dir + "/ck");
  EXPECT_EQ(max_steps, 7);
  ASSERT_TRUE(TrainPaths({"train", "--set=trainer.max_steps=9"}, EnvFromMap({{"HYPERTRAIN_CONFIG", dir + "/c.yaml"}}),
                         &metrics, &ckpt, &max_steps));
  EXPECT_EQ(ckpt, dir + "/exp/checkpoints");
  EXPECT_EQ(max_steps, 9);
}

TEST(Reporter, ReportsOnlyFromNodeZeroToTheNamedConfigMap) {
  auto t = ReportingTarget(
      EnvFromMap({{"NODE_RANK", "0"}, {"HYPERTRAIN_NAMESPACE", "ns"}, {"HYPERTRAIN_PROGRESS_CONFIGMAP", "j-progress"}}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->namespace_, "ns");
  EXPECT_EQ(t->configmap, "j-progress");
  t = ReportingTarget(EnvFromMap({{"POD_NAMESPACE", "ns2"}, {"HYPERTRAIN_PROGRESS_CONFIGMAP", "p"}}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->namespace_, "ns2");
  EXPECT_FALSE(ReportingTarget(
      EnvFromMap({{"NODE_RANK", "1"}, {"HYPERTRAIN_NAMESPACE", "ns"}, {"HYPERTRAIN_PROGRESS_CONFIGMAP", "p"}})));
  EXPECT_FALSE(ReportingTarget(EnvFromMap({{"HYPERTRAIN_NAMESPACE", "ns"}, {"HYPERTRAIN_POD_NAME", "p"}})))
      << "a pod name is no target: the pods may not patch pods";
}

TEST(Reporter, AbsentWithoutKubernetesEnv) {
  unsetenv("HYPERTRAIN_PROGRESS_CONFIGMAP");
  launch::LaunchConfig c;
  c.command = {"train", "--config", "/nonexistent.yaml"};
  EXPECT_EQ(MaybeCreateReporter(c), nullptr);
}

}  // namespace
}  // namespace hypertrain::progress
