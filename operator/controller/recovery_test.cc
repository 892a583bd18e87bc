// MeasureRecovery: the recovery time from the fault to the first step after
// the resume, its phases, and when it is not measured (pure).
#include "operator/controller/recovery.h"

#include <gtest/gtest.h>

namespace hypertrain::controller {
namespace {

api::TrainingJobStatus Restarted() {
  api::TrainingJobStatus s;
  s.restart_attempt = 1;
  s.restart_count = 1;
  s.last_fault = api::Fault{"PodFailed", "exit 137", "j-node-1", "n1", 1, 137, "2026-11-28T05:00:05Z",
                            "2026-11-28T05:00:02.500Z"};
  return s;
}

contract::Progress Report() {
  contract::Progress p;
  p.step = 11;
  p.attempt = 1;
  contract::Recovery r;
  r.resumed_from_step = 10;
  r.launcher_start = "2026-11-28T05:00:20.500Z";
  r.first_step_time = "2026-11-28T05:00:44.750Z";
  r.rendezvous_seconds = 1.5;
  r.checkpoint_load_seconds = 8.0;
  r.checkpoint_load_gbps = 3.0;
  r.first_step_seconds = 2.5;
  r.trainer_seconds = 14.25;  // of the 24.25 s since the launcher started
  p.recovery = r;
  return p;
}

TEST(MeasureRecovery, FromTheContainersFinishToTheFirstStep) {
  const auto m = MeasureRecovery(Restarted(), Report());
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->seconds, 42.25);
  EXPECT_EQ(m->message,
            "recovered in 42.2 s from the fault of pod j-node-1 to step 11 (resumed from step 10): launcher exit and "
            "gang restart 18.0 s, trainer start 10.0 s, rendezvous 1.5 s, checkpoint load 8.0 s (3.00 GB/s per "
            "rank), other start-up 2.2 s, first step 2.5 s");
}

TEST(MeasureRecovery, FallsBackToTheFaultsDetectionTime) {
  api::TrainingJobStatus s = Restarted();
  s.last_fault->finished_at.clear();  // a hang or a node fault: no container finished
  contract::Progress p = Report();
  p.recovery->launcher_start.clear();
  p.recovery->trainer_seconds.reset();
  p.recovery->checkpoint_load_gbps.reset();
  const auto m = MeasureRecovery(s, p);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->seconds, 39.75);
  EXPECT_EQ(m->message,
            "recovered in 39.8 s from the fault of pod j-node-1 to step 11 (resumed from step 10): rendezvous 1.5 s, "
            "checkpoint load 8.0 s, first step 2.5 s");
}

TEST(MeasureRecovery, OnlyOncePerAttemptAndOnlyForIt) {
  contract::Progress p = Report();
  api::TrainingJobStatus s = Restarted();
  s.last_recovery_attempt = 1;  // recorded already: no second event
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  s = Restarted();
  p.attempt = 0;  // the previous attempt's report
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  p.attempt.reset();  // an older launcher: cannot be attributed
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  p = Report();
  s.restart_attempt = 0;  // never restarted (a resume after a manual restart)
  p.attempt = 0;
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  s = Restarted();
  s.last_fault.reset();
  EXPECT_FALSE(MeasureRecovery(s, Report()).has_value());
  s = Restarted();
  p = Report();
  p.recovery.reset();
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  p = Report();
  p.recovery->first_step_time = "2026-11-28T04:59:00Z";  // before the fault: clocks disagree
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
  p.recovery->first_step_time = "soon";
  EXPECT_FALSE(MeasureRecovery(s, p).has_value());
}

}  // namespace
}  // namespace hypertrain::controller
