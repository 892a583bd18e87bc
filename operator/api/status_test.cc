#include "operator/api/status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace hypertrain::api {
namespace {

using ::testing::HasSubstr;

TEST(ConditionsTest, LastTransitionTimeChangesOnlyOnStatusChange) {
  TrainingJobStatus s;
  EXPECT_TRUE(SetJobCondition(&s, kCondCreated, true, reason::kJobCreated, "created", "T1", 1));
  EXPECT_EQ(s.state, "Created");
  // Same status, same everything: no change.
  EXPECT_FALSE(SetJobCondition(&s, kCondCreated, true, reason::kJobCreated, "created", "T2", 1));
  // Same status, new message: changed, but the transition time stays.
  EXPECT_TRUE(SetJobCondition(&s, kCondCreated, true, reason::kJobCreated, "created again", "T3", 2));
  const Condition* c = FindCondition(s, kCondCreated);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->last_transition_time, "T1");
  EXPECT_EQ(c->message, "created again");
  EXPECT_EQ(c->observed_generation, 2);
  // Setting an absent condition False adds nothing.
  EXPECT_FALSE(SetJobCondition(&s, kCondSuspended, false, reason::kJobResumed, "", "T4", 2));
  EXPECT_EQ(FindCondition(s, kCondSuspended), nullptr);
}

TEST(ConditionsTest, RunningAndRestartingReplaceEachOther) {
  TrainingJobStatus s;
  SetJobCondition(&s, kCondCreated, true, reason::kJobCreated, "", "T1", 1);
  SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T2", 1);
  EXPECT_EQ(s.state, "Running");
  EXPECT_TRUE(SetJobCondition(&s, kCondRestarting, true, reason::kHang, "no progress", "T3", 1));
  EXPECT_EQ(s.state, "Restarting");
  EXPECT_FALSE(IsConditionTrue(s, kCondRunning));
  EXPECT_EQ(FindCondition(s, kCondRunning)->last_transition_time, "T3");
  EXPECT_EQ(FindCondition(s, kCondRunning)->reason, reason::kHang);
  EXPECT_TRUE(SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T4", 1));
  EXPECT_EQ(s.state, "Running");
  EXPECT_FALSE(IsConditionTrue(s, kCondRestarting));
  EXPECT_EQ(FindCondition(s, kCondRestarting)->last_transition_time, "T4");
  EXPECT_TRUE(IsConditionTrue(s, kCondCreated));
}

TEST(ConditionsTest, SuspendAndResume) {
  TrainingJobStatus s;
  SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T1", 1);
  SetJobCondition(&s, kCondSuspended, true, reason::kJobSuspended, "", "T2", 2);
  EXPECT_EQ(s.state, "Suspended");
  EXPECT_FALSE(IsConditionTrue(s, kCondRunning));
  SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T3", 3);
  EXPECT_EQ(s.state, "Running");
  EXPECT_EQ(FindCondition(s, kCondSuspended)->status, "False");
  EXPECT_EQ(FindCondition(s, kCondSuspended)->reason, reason::kJobResumed);
}

TEST(ConditionsTest, TerminalConditionsAreSticky) {
  TrainingJobStatus s;
  SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T1", 1);
  EXPECT_TRUE(SetJobCondition(&s, kCondFailed, true, reason::kDeadlineExceeded, "deadline", "T2", 1));
  EXPECT_EQ(s.state, "Failed");
  EXPECT_TRUE(IsFinished(s));
  EXPECT_FALSE(IsConditionTrue(s, kCondRunning));
  TrainingJobStatus before = s;
  EXPECT_FALSE(SetJobCondition(&s, kCondRunning, true, reason::kPodsRunning, "", "T3", 1));
  EXPECT_FALSE(SetJobCondition(&s, kCondSucceeded, true, reason::kAllPodsSucceeded, "", "T3", 1));
  EXPECT_FALSE(SetJobCondition(&s, kCondFailed, false, reason::kJobFailed, "", "T3", 1));
  EXPECT_EQ(s, before);

  TrainingJobStatus ok;
  SetJobCondition(&ok, kCondRestarting, true, reason::kPodFailed, "", "T1", 1);
  SetJobCondition(&ok, kCondSucceeded, true, reason::kAllPodsSucceeded, "", "T2", 1);
  EXPECT_EQ(ok.state, "Succeeded");
  EXPECT_FALSE(IsConditionTrue(ok, kCondRestarting));
}

TEST(ConditionsTest, ReasonSetHasNoDuplicates) {
  auto r = ConditionReasons();
  std::sort(r.begin(), r.end());
  EXPECT_EQ(std::adjacent_find(r.begin(), r.end()), r.end());
  EXPECT_EQ(ConditionTypes().size(), 7u);
}

TEST(ConditionsTest, UnschedulableIsAReason) {
  const auto& r = ConditionReasons();
  EXPECT_NE(std::find(r.begin(), r.end(), reason::kUnschedulable), r.end());
  EXPECT_NE(std::find(r.begin(), r.end(), reason::kResized), r.end());
}

TEST(StatusJsonTest, RoundTrips) {
  TrainingJobStatus s;
  SetJobCondition(&s, kCondCreated, true, reason::kJobCreated, "m", "2026-01-01T00:00:00Z", 4);
  s.observed_generation = 4;
  s.start_time = "2026-01-01T00:00:01Z";
  s.restart_count = 2;
  s.restart_attempt = 2;
  s.gpus = 16;
  s.world_size = 16;
  s.pods = {2, 0, 0};
  s.progress = Progress{120, 1000, 2.5, 51234.5, 100, "2026-01-01T00:10:00Z"};
  s.last_fault = Fault{"PodFailed", "exit 137", "j-node-1", "ip-1", 8, 137, "2026-01-01T00:05:00Z",
                       "2026-01-01T00:04:59Z"};
  s.last_recovery_seconds = 42.5;
  s.last_recovery_attempt = 2;
  s.excluded_nodes = {"ip-9"};
  s.node_faults = {{"ip-9", 2}};
  s.scheduling = {"2026-01-01T00:00:02Z", 1, "2026-01-01T00:07:00Z", "pod j-node-1: 0/2 nodes are available"};
  s.current_nodes = 1;
  s.elastic.last_resize_time = "2026-01-01T00:08:00Z";
  s.elastic.history = {{2, "2026-01-01T00:00:01Z", "the desired size", 0, 120},
                       {1, "2026-01-01T00:08:00Z", "1 of 2 nodes fit", 100, std::nullopt}};
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["currentNodes"], 1);
  EXPECT_EQ(j["elastic"]["history"][0]["toStep"], 120);
  EXPECT_EQ(j["elastic"]["history"][1]["fromStep"], 100);
  EXPECT_FALSE(j["elastic"]["history"][1].contains("toStep"));
  EXPECT_FALSE(ToJson(TrainingJobStatus{}).contains("elastic"));
  EXPECT_FALSE(ToJson(TrainingJobStatus{}).contains("currentNodes"));
  EXPECT_EQ(j["state"], "Created");
  EXPECT_EQ(j["scheduling"]["timeouts"], 1);
  EXPECT_EQ(j["scheduling"]["retryTime"], "2026-01-01T00:07:00Z");
  EXPECT_FALSE(ToJson(TrainingJobStatus{}).contains("scheduling"));
  EXPECT_EQ(j["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(j["progress"]["tokensPerSecond"], 51234.5);
  EXPECT_EQ(j["lastFault"]["exitCode"], 137);
  EXPECT_EQ(j["lastFault"]["finishedAt"], "2026-01-01T00:04:59Z");
  EXPECT_EQ(j["lastRecoverySeconds"], 42.5);
  EXPECT_EQ(j["lastRecoveryAttempt"], 2);
  EXPECT_FALSE(ToJson(TrainingJobStatus{}).contains("lastRecoverySeconds"));
  auto back = ParseStatus(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);
  EXPECT_TRUE(ParseStatus(nullptr).ok());
  EXPECT_FALSE(ParseStatus("x").ok());
}

TEST(ProgressAnnotationTest, ParsesTheLauncherFormat) {
  auto p = ParseProgressAnnotation(
      R"({"step": 120, "maxSteps": 1000, "loss": 2.31, "tokensPerSecond": 51000, "lastCheckpointStep": 100, "time": "2026-11-22T01:02:03Z"})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->step, 120);
  EXPECT_EQ(p->max_steps, 1000);
  EXPECT_DOUBLE_EQ(*p->loss, 2.31);
  EXPECT_EQ(p->last_checkpoint_step, 100);
  EXPECT_EQ(p->updated_at, "2026-11-22T01:02:03Z");
  EXPECT_THAT(ParseProgressAnnotation("{").status().message(), HasSubstr("JSON"));
  EXPECT_THAT(ParseProgressAnnotation(R"({"loss": 1})").status().message(), HasSubstr("step"));
}

}  // namespace
}  // namespace hypertrain::api
