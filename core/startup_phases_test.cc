#include "core/startup_phases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace hypertrain::startup {
namespace {

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(StartupPhases, ExecAgeIsPositiveAndGrows) {
  const double a = SecondsSinceExec();
  EXPECT_GT(a, 0.0);
  EXPECT_LT(a, 600.0);  // this test process started minutes ago at most
  Sleep(20);
  EXPECT_GE(SecondsSinceExec() - a, 0.019);
}

TEST(StartupPhases, NestedPhasesAreNamedByTheirParentAndSummarised) {
  ResetForTest();
  {
    PhaseTimer outer("backend");
    Sleep(30);
    {
      PhaseTimer inner("weight_init");
      Sleep(20);
    }
    PhaseTimer second("plan");
    EXPECT_GE(second.End(), 0.0);
  }
  PhaseTimer first_step("first_step");
  Sleep(10);
  const double fs = first_step.End();
  EXPECT_GE(fs, 0.009);
  first_step.End();  // a second End records nothing (counted below)

  const std::vector<PhaseRecord> p = Phases();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].name, "backend/weight_init");
  EXPECT_EQ(p[0].depth, 1);
  EXPECT_GE(p[0].seconds, 0.019);
  EXPECT_EQ(p[1].name, "backend/plan");
  EXPECT_EQ(p[2].name, "backend");
  EXPECT_EQ(p[2].depth, 0);
  EXPECT_GE(p[2].seconds, p[0].seconds + 0.029);
  EXPECT_EQ(p[3].name, "first_step");

  const Summary s = Summarize(p[2].seconds + p[3].seconds + 1.0);
  EXPECT_NEAR(s.other_s, 1.0, 1e-9);
  const std::string line = FormatSummary(s);
  EXPECT_EQ(line.rfind("time to first step ", 0), 0u) << line;
  EXPECT_NE(line.find(", other 1.00"), std::string::npos) << line;
  EXPECT_NE(line.find(": backend "), std::string::npos) << line;
  EXPECT_NE(line.find(" (weight_init "), std::string::npos) << line;
  EXPECT_NE(line.find(", plan 0.00), first_step "), std::string::npos) << line;
}

TEST(StartupPhases, AccumulatedPhasesNestInTheOpenOne) {
  ResetForTest();
  Accumulate("alone", 0.5);
  {
    PhaseTimer step("first_step");
    Accumulate("gemm_autotune", 0.25);
    Accumulate("gemm_autotune", 0.5);
  }
  const std::vector<PhaseRecord> p = Phases();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].name, "alone");
  EXPECT_EQ(p[0].depth, 0);
  EXPECT_EQ(p[1].name, "first_step/gemm_autotune");
  EXPECT_EQ(p[1].depth, 1);
  EXPECT_DOUBLE_EQ(p[1].seconds, 0.75);
  EXPECT_EQ(p[2].name, "first_step");
  EXPECT_NE(FormatSummary(Summarize(10)).find("first_step 0.00 (gemm_autotune 0.75)"), std::string::npos)
      << FormatSummary(Summarize(10));
}

TEST(StartupPhases, PhasesOnAnotherThreadAreTopLevel) {
  ResetForTest();
  PhaseTimer outer("main");
  std::thread([] { PhaseTimer t("worker"); }).join();
  outer.End();
  const std::vector<PhaseRecord> p = Phases();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "worker");
  EXPECT_EQ(p[0].depth, 0);
}

}  // namespace
}  // namespace hypertrain::startup
