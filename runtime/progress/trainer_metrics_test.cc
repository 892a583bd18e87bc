#include "runtime/progress/trainer_metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace hypertrain::progress {
namespace {

std::string TempFile(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(t ? t : "/tmp") + "/" + name;
  std::filesystem::remove(p);
  return p;
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(TrainerMetrics, ExposesTheLatestRecordAndRunningTotals) {
  const std::string path = TempFile("metrics.jsonl");
  Append(path, R"({"step":10,"loss":9.9})" "\n");  // an earlier attempt's record
  metrics::Registry r;
  TrainerMetrics m(&r, path, /*from_end=*/true);
  EXPECT_FALSE(m.Poll());
  // Before any record only the launcher's series have samples.
  std::string text = r.Render();
  EXPECT_EQ(text.find("\nhypertrain_trainer_loss "), std::string::npos) << text;
  EXPECT_TRUE(Has(text, "hypertrain_launcher_ranks_running 0")) << text;

  Append(path,
         R"({"step":20,"max_steps":100,"loss":3.25,"lr":0.001,"grad_norm":1.5,"skipped":false,)"
         R"("step_time_s":0.5,"tokens_per_s":32768,"tokens_per_s_per_device":8192,"mfu":0.41,)"
         R"("data_wait_s":0.002,"checkpoint_stall_s":0.25,"memory_bytes":1073741824,"tokens_seen":655360,)"
         R"("wall_time":1764093662.5})" "\n");
  Append(path, R"({"step":30,"max_steps":100,"loss":null,"skipped":true,"checkpoint_stall_s":0.5,)"
               R"("tokens_seen":983040})" "\n" R"({"step":40,"loss":2.)");  // the last line is still being written
  ASSERT_TRUE(m.Poll());
  m.SetRanksRunning(8);
  m.RankExited(137);
  text = r.Render();
  EXPECT_TRUE(Has(text, "hypertrain_trainer_step 30")) << text;
  EXPECT_TRUE(Has(text, "hypertrain_trainer_max_steps 100"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_loss 3.25")) << "a null loss keeps the last number";
  EXPECT_TRUE(Has(text, "hypertrain_trainer_learning_rate 0.001"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_grad_norm 1.5"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_tokens_per_second 32768"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_tokens_per_second_per_device 8192"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_step_time_seconds 0.5"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_mfu_ratio 0.41"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_data_wait_seconds 0.002"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_memory_bytes 1073741824"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_last_record_timestamp_seconds 1764093662.5"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_tokens_total 983040"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_skipped_steps_total 1"));
  EXPECT_TRUE(Has(text, "hypertrain_trainer_checkpoint_stall_seconds_total 0.75"));
  EXPECT_TRUE(Has(text, "hypertrain_launcher_ranks_running 8"));
  EXPECT_TRUE(Has(text, "hypertrain_launcher_rank_exits_total{code=\"137\"} 1"));
  EXPECT_NE(text.find("# TYPE hypertrain_trainer_checkpoint_stall_seconds_total counter"), std::string::npos);

  Append(path, "5}\n");  // the half-written line completes
  ASSERT_TRUE(m.Poll());
  EXPECT_TRUE(Has(r.Render(), "hypertrain_trainer_loss 2.5"));
}

TEST(TrainerMetrics, ExposesTheTimeToFirstStep) {
  const std::string path = TempFile("startup.jsonl");
  metrics::Registry r;
  TrainerMetrics m(&r, path, /*from_end=*/false);
  Append(path, R"({"step":1,"loss":5.0,"startup":{"time_to_first_step_s":12.5,"other_s":0.5,"phases":[]}})" "\n");
  ASSERT_TRUE(m.Poll());
  EXPECT_TRUE(Has(r.Render(), "hypertrain_trainer_time_to_first_step_seconds 12.5")) << r.Render();
}

}  // namespace
}  // namespace hypertrain::progress
