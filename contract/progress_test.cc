#include "contract/progress.h"

#include <gtest/gtest.h>

#include <limits>

namespace hypertrain::contract {
namespace {

Progress Full() {
  Progress p;
  p.step = 120;
  p.max_steps = 1000;
  p.loss = 2.31;
  p.tokens_per_second = 51000.5;
  p.last_checkpoint_step = 100;
  p.time = "2026-11-22T01:02:03Z";
  p.attempt = 2;
  return p;
}

TEST(ProgressAnnotation, WireFormatIsStable) {
  // Launchers and operators of different versions meet on this string.
  EXPECT_EQ(EncodeProgress(Full()),
            R"({"attempt":2,"lastCheckpointStep":100,"loss":2.31,"maxSteps":1000,"step":120,)"
            R"("time":"2026-11-22T01:02:03Z","tokensPerSecond":51000.5})");
  Progress step_only;
  step_only.step = 0;
  EXPECT_EQ(EncodeProgress(step_only), R"({"step":0})");
}

TEST(ProgressAnnotation, RoundTrips) {
  std::string error;
  auto back = DecodeProgress(EncodeProgress(Full()), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, Full());
  Progress sparse;
  sparse.step = 7;
  sparse.loss = 9.5;
  back = DecodeProgress(EncodeProgress(sparse), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, sparse);
}

TEST(ProgressAnnotation, DecodesWhatAHandOrANewerLauncherWrites) {
  std::string error;
  auto p = DecodeProgress(R"({"step": 3, "maxSteps": 9, "futureField": {"x": 1}, "loss": 4})", &error);
  ASSERT_TRUE(p.has_value()) << error;
  EXPECT_EQ(p->step, 3);
  EXPECT_EQ(p->max_steps, 9);
  EXPECT_DOUBLE_EQ(*p->loss, 4.0);
  EXPECT_FALSE(p->tokens_per_second.has_value());
  EXPECT_EQ(p->time, "");
  // A field of the wrong type is left out, not guessed.
  p = DecodeProgress(R"({"step": 3, "maxSteps": "9", "lastCheckpointStep": 1.5})", &error);
  ASSERT_TRUE(p.has_value()) << error;
  EXPECT_FALSE(p->max_steps.has_value());
  EXPECT_FALSE(p->last_checkpoint_step.has_value());
}

TEST(ProgressAnnotation, RejectsMalformedValues) {
  for (const char* bad : {"", "{", "[1]", "\"step\"", "null"}) {
    std::string error;
    EXPECT_FALSE(DecodeProgress(bad, &error).has_value()) << bad;
    EXPECT_EQ(error, "not a JSON object") << bad;
  }
  for (const char* bad : {R"({"loss": 1})", R"({"step": -1})", R"({"step": 1.5})", R"({"step": "3"})"}) {
    std::string error;
    EXPECT_FALSE(DecodeProgress(bad, &error).has_value()) << bad;
    EXPECT_EQ(error, "step must be a non-negative integer") << bad;
  }
}

TEST(ProgressAnnotation, NonFiniteNumbersAreLeftOut) {
  Progress p;
  p.step = 5;
  p.loss = std::numeric_limits<double>::quiet_NaN();
  p.tokens_per_second = std::numeric_limits<double>::infinity();
  EXPECT_EQ(EncodeProgress(p), R"({"step":5})");
}

// The start-up section (issue 34): its own object, round-tripped; a
// malformed one is dropped without failing the report.
TEST(ProgressAnnotation, StartupSectionRoundTripsAndIsOptional) {
  Progress p;
  p.step = 1;
  p.startup = StartupReport{12.5, {{"config", 0.25}, {"backend", 9.0}, {"first_step", 3.25}}};
  const std::string wire = EncodeProgress(p);
  EXPECT_EQ(wire,
            R"({"startup":{"phases":[{"name":"config","seconds":0.25},{"name":"backend","seconds":9.0},)"
            R"({"name":"first_step","seconds":3.25}],"timeToFirstStepSeconds":12.5},"step":1})");
  std::string error;
  auto back = DecodeProgress(wire, &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, p);

  for (const char* bad : {R"({"step":1,"startup":3})", R"({"step":1,"startup":{"phases":[]}})",
                          R"({"step":1,"startup":{"timeToFirstStepSeconds":"x"}})"}) {
    back = DecodeProgress(bad, &error);
    ASSERT_TRUE(back.has_value()) << bad << ": " << error;
    EXPECT_FALSE(back->startup.has_value()) << bad;
  }
  back = DecodeProgress(R"({"step":1,"startup":{"timeToFirstStepSeconds":4,"phases":[{"name":"a"},7,)"
                        R"({"name":"b","seconds":1.5}]}})",
                        &error);
  ASSERT_TRUE(back.has_value()) << error;
  ASSERT_TRUE(back->startup.has_value());
  EXPECT_EQ(back->startup->time_to_first_step_seconds, 4.0);
  ASSERT_EQ(back->startup->phases.size(), 1u);
  EXPECT_EQ(back->startup->phases[0].name, "b");
}

TEST(ProgressAnnotation, RecoverySectionRoundTrips) {
  Progress p;
  p.step = 101;
  p.attempt = 1;
  Recovery r;
  r.resumed_from_step = 100;
  r.first_step_time = "2026-11-22T01:02:03.456Z";
  r.launcher_start = "2026-11-22T01:01:50.000Z";
  r.rendezvous_seconds = 1.5;
  r.checkpoint_load_seconds = 8.0;
  r.checkpoint_load_gbps = 3.0;
  r.first_step_seconds = 2.5;
  r.trainer_seconds = 13.25;
  p.recovery = r;
  std::string error;
  auto back = DecodeProgress(EncodeProgress(p), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(*back, p);
  EXPECT_EQ(DecodeRecovery(EncodeRecovery(r)), r);
  // Only the resumed step and the first step's time are required; a section
  // without them is dropped, the rest of the report kept.
  back = DecodeProgress(R"({"step": 4, "recovery": {"resumedFromStep": 3}})", &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->step, 4);
  EXPECT_FALSE(back->recovery.has_value());
  auto minimal = DecodeRecovery(R"({"resumedFromStep": 3, "firstStepTime": "2026-11-22T01:02:03Z", "x": 1})");
  ASSERT_TRUE(minimal.has_value());
  EXPECT_FALSE(minimal->checkpoint_load_seconds.has_value());
  EXPECT_FALSE(DecodeRecovery("[]").has_value());
}

}  // namespace
}  // namespace hypertrain::contract
