#pragma once
// Shared by the Decide table tests (plan_test.cc, plan_faults_test.cc): the
// input of one pass, starting from a running two-node job (pods j-node-0 on
// node-a and j-node-1 on node-b, both healthy, a minute after the start), and
// one table row: what the case changes, the decision, the job state, the
// actions in order, the events and the requeue; `check` looks at the rest.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/time.h"
#include "operator/controller/plan.h"

namespace hypertrain::controller::plantest {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

inline constexpr char kConfig[] = "trainer:\n  max_steps: 50\nmodel:\n  sharding_strategy: hybrid_shard\n";
inline constexpr char kT0[] = "2027-01-15T08:00:00Z";  // the job's start
inline const Clock::time_point t0 = *ParseRfc3339(kT0);

inline std::string At(Clock::duration d) { return FormatRfc3339(t0 + d); }

inline api::ObjectMeta JobMeta() {
  api::ObjectMeta m;
  m.name = "j";
  m.namespace_ = "ns";
  m.uid = "job-uid";
  m.resource_version = "10";
  m.generation = 3;
  return m;
}

inline api::TrainingJobSpec ParsedSpec(const nlohmann::json& j) {
  auto spec = api::ParseSpec(j, JobMeta());
  EXPECT_TRUE(spec.ok());
  return spec.ok() ? *spec : api::TrainingJobSpec{};
}

inline nlohmann::json SpecJson() {
  return {{"image", "hypertrain:test"}, {"nodes", 2}, {"nprocPerNode", 2}, {"trainerConfig", {{"inline", kConfig}}}};
}

inline ObservedPod Pod(int rank, const std::string& phase = "Running", int attempt = 0) {
  ObservedPod p;
  p.name = "j-node-" + std::to_string(rank);
  p.uid = p.name + "-a" + std::to_string(attempt);
  p.node_rank = rank;
  p.restart_attempt = attempt;
  p.phase = phase;
  p.node_name = rank == 0 ? "node-a" : "node-b";
  return p;
}

inline void Fail(ObservedPod& p, int exit_code, const std::string& finished_at = "", const std::string& message = "") {
  p.phase = "Failed";
  p.fault.exit_code = exit_code;
  p.fault.finished_at = finished_at;
  p.fault.message = message;
}

inline ObservedNode Node(const std::string& name, const std::string& health = "Schedulable") {
  ObservedNode n;
  n.name = name;
  n.labels[api::kHyperPodHealthLabel] = health;
  return n;
}

// One pass's input: a running two-node job a minute after its start.
struct Input {
  Observed in;
  api::TrainingJobSpec spec = ParsedSpec(SpecJson());
  std::optional<Status> spec_error;
  Clock::time_point now = t0 + 60s;
  DecideOptions opts;

  Input() {
    in.job = JobMeta();
    api::TrainingJobStatus& s = in.status;
    api::SetJobCondition(&s, api::kCondCreated, true, api::reason::kJobCreated, "created", kT0, 3);
    api::SetJobCondition(&s, api::kCondRunning, true, api::reason::kPodsRunning, "all 2 pods are running", kT0, 3);
    s.observed_generation = 3;
    s.start_time = kT0;
    s.world_size = 4;
    s.pods.active = 2;
    in.pods = {Pod(0), Pod(1)};
    in.nodes = std::map<std::string, ObservedNode>{{"node-a", Node("node-a")}, {"node-b", Node("node-b")}};
  }
  ObservedPod& pod(int i) { return in.pods[i]; }
  Plan Decide() const {
    auto plan = controller::Decide(in, spec_error ? StatusOr<api::TrainingJobSpec>(*spec_error) : spec, now, opts);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? *plan : Plan{};
  }
};

// The pod the create action p.actions[i] stands for, as the reconciler builds
// it just before sending it (Action::pod).
inline nlohmann::json PodOf(const Plan& p, size_t i, const Input& t) {
  EXPECT_EQ(p.actions.at(i).kind, Action::Kind::kCreatePod) << Describe(p.actions.at(i));
  EXPECT_TRUE(p.actions.at(i).object.is_null()) << "a pod built in Decide";
  auto pod = PodToCreate(t.in.job, t.spec, p.actions.at(i));
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return pod.ok() ? *pod : nlohmann::json();
}

struct Row {
  std::string name;
  std::function<void(Input&)> setup;
  Case decision;
  std::string state;                 // status.state after the pass ("" with no status)
  std::vector<std::string> actions;  // Describe() of each action, in order
  std::vector<std::string> events;   // reasons, in order
  std::optional<milliseconds> requeue;
  std::function<void(const Plan&, const Input&)> check = nullptr;
};

inline const api::Condition& Cond(const Plan& plan, const char* type) {
  static const api::Condition kNone;
  const api::Condition* c = api::FindCondition(*plan.status, type);
  return c ? *c : kNone;
}

inline const std::vector<std::string> kEnsure = {"create Service j", "create ConfigMap j-config"};
inline std::vector<std::string> Ensure(std::vector<std::string> more) {
  std::vector<std::string> out = kEnsure;
  out.insert(out.end(), more.begin(), more.end());
  return out;
}
// Before pods: the job's ServiceAccount and its progress ConfigMap, Role and RoleBinding.
inline const std::vector<std::string> kIdentity = {"create ServiceAccount j-trainer", "create ConfigMap j-progress",
                                                   "create Role j-progress", "create RoleBinding j-progress"};
inline std::vector<std::string> EnsureAndCreate(std::vector<std::string> pods, bool config = true) {
  std::vector<std::string> out = config ? kEnsure : std::vector<std::string>{"create Service j"};
  out.insert(out.end(), kIdentity.begin(), kIdentity.end());
  out.insert(out.end(), pods.begin(), pods.end());
  return out;
}

// Runs one row: Decide on the row's input, then the row's expectations.
inline void CheckRow(const Row& row) {
  Input t;
  row.setup(t);
  const Plan plan = t.Decide();
  EXPECT_EQ(CaseName(plan.decision), std::string(CaseName(row.decision)));
  EXPECT_EQ(plan.status ? plan.status->state : "", row.state);
  std::vector<std::string> actions, events;
  for (const Action& a : plan.actions) actions.push_back(Describe(a));
  for (const Event& e : plan.events) events.push_back(e.reason);
  EXPECT_EQ(actions, row.actions);
  EXPECT_EQ(events, row.events);
  EXPECT_EQ(plan.requeue_after, row.requeue);
  if (row.check) row.check(plan, t);
}

// gtest prints a failing row by its name, not its bytes.
inline void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

inline std::string RowName(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

}  // namespace hypertrain::controller::plantest
