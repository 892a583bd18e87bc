#include "runtime/ckpt/resume_checks.h"

#include <gtest/gtest.h>

namespace hypertrain::ckpt {
namespace {

using json = nlohmann::json;

config::TrainConfig Config(const std::vector<std::string>& sets) {
  auto c = config::ParseTrainConfig("model: {shape: tiny, data: {use_synthetic_data: true}}\n", sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(ResumeChecks, MaxStepsIsATrajectoryKeyOnlyAsTheDecayHorizon) {
  EXPECT_EQ(TrajectoryKeys(Config({"model.lr_decay_iters=50", "trainer.max_steps=10"})),
            TrajectoryKeys(Config({"model.lr_decay_iters=50", "trainer.max_steps=40"})));
  EXPECT_NE(TrajectoryKeys(Config({"trainer.max_steps=10"})), TrajectoryKeys(Config({"trainer.max_steps=40"})));
  EXPECT_EQ(TrajectoryKeys(Config({"model.optim.sched.name=constant", "trainer.max_steps=10"})),
            TrajectoryKeys(Config({"model.optim.sched.name=constant", "trainer.max_steps=40"})));
  // Logging and checkpoint keys are not.
  EXPECT_EQ(TrajectoryKeys(Config({"trainer.log_every_n_steps=1", "exp_manager.every_n_train_steps=3"})),
            TrajectoryKeys(Config({})));
}

TEST(ResumeChecks, WarningsNameTheChangedKeysAndBothData) {
  const json was = TrajectoryKeys(Config({"model.optim.lr=0.001"}));
  const json now = TrajectoryKeys(Config({"model.optim.lr=0.002", "model.seed=7"}));
  const json data_a = {{"train_dir", "/a"}, {"manifest_crc32c", "0000abcd"}, {"tokens", 10}};
  const json data_b = {{"train_dir", "/b"}, {"manifest_crc32c", "1111abcd"}, {"tokens", 20}};
  const json saved = {{"trajectory", was}, {"data", data_a}};
  auto w = ResumeWarnings("/ck/step-4", saved, "h1", now, "h2", data_b);
  ASSERT_EQ(w.size(), 2u) << testing::PrintToString(w);
  EXPECT_EQ(w[0], "resuming /ck/step-4 under a config that changes the training trajectory: model.optim.lr 0.001 "
                  "-> 0.002, model.seed 1234 -> 7");
  EXPECT_EQ(w[1], "resuming /ck/step-4 on other data: it was trained on model.data.train_dir /a (manifest.json "
                  "crc32c 0000abcd, 10 tokens), this run reads model.data.train_dir /b (manifest.json crc32c "
                  "1111abcd, 20 tokens); the sampler continues at the checkpoint's position in this data");
  // The same data moved elsewhere (same manifest) and the same config: silent.
  json moved = data_a;
  moved["train_dir"] = "/elsewhere";
  EXPECT_TRUE(ResumeWarnings("/ck", saved, "h1", was, "h1", moved).empty());
  // Synthetic then real data.
  auto syn = ResumeWarnings("/ck", {{"trajectory", was}, {"data", {{"synthetic", true}}}}, "h", was, "h", data_a);
  ASSERT_EQ(syn.size(), 1u);
  EXPECT_NE(syn[0].find("trained on synthetic data, this run reads model.data.train_dir /a"), std::string::npos);
  // An older checkpoint: only the hashes.
  auto old = ResumeWarnings("/ck", json::object(), "h1", now, "h2", data_b);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_NE(old[0].find("written with config hash h1, current config hash is h2"), std::string::npos);
}

}  // namespace
}  // namespace hypertrain::ckpt
