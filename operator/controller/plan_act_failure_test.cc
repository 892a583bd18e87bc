// DecideActFailure, table-driven (issue 19, defect 2): what a pass does when
// the API server refuses one of the objects it creates. Each row starts from
// a new two-node job's creating pass (Service, ConfigMap, the trainer's
// ServiceAccount, progress ConfigMap, Role, RoleBinding, then 2 pods) unless
// it changes the input, and names the action that failed and the error.
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller::plantest {
namespace {

using ::testing::HasSubstr;

Status ApiError(int http, StatusCode code, const std::string& reason, const std::string& message) {
  ApiErrorDetail d;
  d.http_status = http;
  d.reason = reason;
  return Status(code, message, d);
}
const Status kQuota = ApiError(403, StatusCode::kPermissionDenied, "Forbidden",
                               "pods \"j-node-1\" is forbidden: exceeded quota: gpus, requested: "
                               "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: "
                               "requests.nvidia.com/gpu=8");
const Status kInvalid = ApiError(422, StatusCode::kInvalidArgument, "Invalid",
                                 "Pod \"j-node-1\" is invalid: metadata.labels: Invalid value: \"bad key!\"");

struct FailureRow {
  std::string name;
  std::function<void(Input&)> setup;  // the input of the pass that acted
  std::string failed;                 // Describe() of the action that failed
  Status error;
  bool handled = true;                // false: not the job's to report (the queue retries)
  std::string state;
  std::vector<std::string> actions;
  std::vector<std::string> events;
  std::optional<milliseconds> requeue;
  std::function<void(const Plan&)> check = nullptr;
};

void NewJob(Input& t) {
  t.in.status = {};
  t.in.pods.clear();
}

std::vector<FailureRow> Rows() {
  return {
      {"InvalidPodFailsTheJobAndDeletesWhatWasMade", NewJob, "create Pod j-node-1", kInvalid, true, "Failed",
       {"delete Pod j-node-0"}, {"InvalidSpec"}, std::nullopt,
       [](const Plan& p) {
         EXPECT_EQ(Cond(p, api::kCondFailed).reason, "InvalidSpec");
         EXPECT_THAT(Cond(p, api::kCondFailed).message,
                     HasSubstr("the API server refused to create Pod j-node-1: Pod \"j-node-1\" is invalid: "
                               "metadata.labels"));
         EXPECT_EQ(p.status->pods, api::PodCounts{});
         EXPECT_EQ(p.actions[0].uid, "") << "made this pass, not yet observed: by name";
       }},
      {"QuotaRefusalRollsBackThePartialGangAndRetries", NewJob, "create Pod j-node-1", kQuota, true, "Pending",
       {"delete Pod j-node-0"}, {"PodCreationFailed"}, kCreationRetryMin,
       [](const Plan& p) {
         const api::Condition& c = Cond(p, api::kCondCreated);
         EXPECT_EQ(c.status, "False");
         EXPECT_EQ(c.reason, "PodCreationFailed");
         EXPECT_THAT(c.message, HasSubstr("exceeded quota"));
         EXPECT_EQ(p.status->pods.active, 0) << "no pod is counted that does not exist";
         EXPECT_EQ(p.status->scheduling.retry_time, At(65s)) << "nothing is created before the backoff ends";
         EXPECT_EQ(p.events[0].type, EventType::kWarning);
         EXPECT_EQ(p.events[0].message, c.message);
       }},
      {"TheSameRefusalAgainIsNoNewEventAndBacksOffLonger",
       [](Input& t) {
         NewJob(t);
         api::SetJobConditionFalse(&t.in.status, api::kCondCreated, api::reason::kPodCreationFailed,
                              "the API server refused to create Pod j-node-1: " + kQuota.message(), At(20s), 3);
       },
       "create Pod j-node-1", kQuota, true, "Pending", {"delete Pod j-node-0"}, {}, milliseconds(40s)},
      {"ALongRefusalIsRetriedAtMostEveryFiveMinutes",
       [](Input& t) {
         NewJob(t);
         t.now = t0 + 10h;
         api::SetJobConditionFalse(&t.in.status, api::kCondCreated, api::reason::kPodCreationFailed, "old cause",
                              At(1s), 3);
       },
       "create Pod j-node-1", kQuota, true, "Pending", {"delete Pod j-node-0"}, {"PodCreationFailed"}, kCreationRetryMax},
      {"ARefusedRoleStopsBeforeAnyPod", NewJob, "create Role j-progress",
       ApiError(403, StatusCode::kPermissionDenied, "Forbidden",
                "roles.rbac.authorization.k8s.io \"j-progress\" is forbidden: user cannot grant it"),
       true, "Pending", {}, {"PodCreationFailed"}, kCreationRetryMin,
       [](const Plan& p) {
         EXPECT_THAT(Cond(p, api::kCondCreated).message, HasSubstr("create Role j-progress"));
       }},
      // The reconciler words a 404 of the PodGroup kind (the gang scheduler is
      // not installed) and keeps its HTTP status: the job says it, not the log.
      {"AnUnservedPodGroupKindStopsBeforeAnyPod",
       [](Input& t) {
         NewJob(t);
         t.spec.scheduling.gang.provider = api::GangProvider::kCoscheduling;
       },
       "create PodGroup j-job-uid",
       ApiError(404, StatusCode::kNotFound, "NotFound",
                "scheduling.x-k8s.io/v1alpha1 PodGroup is not served: install the gang scheduler that "
                "spec.scheduling.gang.provider names (the server could not find the requested resource)"),
       true, "Pending", {}, {"PodCreationFailed"}, kCreationRetryMin,
       [](const Plan& p) {
         EXPECT_THAT(Cond(p, api::kCondCreated).message,
                     HasSubstr("create PodGroup j-job-uid: scheduling.x-k8s.io/v1alpha1 PodGroup is not served"));
       }},
      {"ARunningPartOfTheGangIsDeletedToo",
       [](Input& t) {
         t.in.status.restart_attempt = 2;
         t.in.pods = {Pod(1, "Running", 2)};
       },
       "create Pod j-node-0",
       ApiError(404, StatusCode::kNotFound, "NotFound", "priorityclasses \"gold\" not found"), true, "Pending",
       {"delete Pod j-node-1"}, {"PodCreationFailed"}, kCreationRetryMin,
       [](const Plan& p) {
         EXPECT_EQ(p.actions[0].uid, "j-node-1-a2") << "an observed pod: by uid";
         EXPECT_EQ(Cond(p, api::kCondRunning).status, "False");
       }},
      {"AConflictIsTheQueuesToRetry", NewJob, "create Pod j-node-1",
       ApiError(409, StatusCode::kAborted, "Conflict", "the object has been modified"), false},
      {"AServerErrorIsTheQueuesToRetry", NewJob, "create Pod j-node-1",
       ApiError(500, StatusCode::kInternal, "InternalError", "etcd timeout"), false},
      {"ThrottlingIsTheQueuesToRetry", NewJob, "create Pod j-node-0",
       ApiError(429, StatusCode::kResourceExhausted, "TooManyRequests", "slow down"), false},
      {"ATransportErrorIsTheQueuesToRetry", NewJob, "create Pod j-node-0", Unavailable("connection refused"), false},
      {"AFailedDeleteIsTheQueuesToRetry",
       [](Input& t) { t.spec.run_policy.suspend = true; },
       "delete Pod j-node-0", ApiError(403, StatusCode::kPermissionDenied, "Forbidden", "no"), false},
  };
}

class DecideActFailureTest : public ::testing::TestWithParam<FailureRow> {};

TEST_P(DecideActFailureTest, Row) {
  const FailureRow& row = GetParam();
  Input t;
  row.setup(t);
  const Plan plan = t.Decide();
  size_t failed = plan.actions.size();
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    if (Describe(plan.actions[i]) == row.failed) failed = i;
  }
  ASSERT_LT(failed, plan.actions.size()) << "the pass has no action '" << row.failed << "'";
  const std::optional<Plan> out = DecideActFailure(t.in, plan, failed, row.error, t.now);
  ASSERT_EQ(out.has_value(), row.handled);
  if (!out) return;
  EXPECT_EQ(out->status->state, row.state);
  std::vector<std::string> actions, events;
  for (const Action& a : out->actions) actions.push_back(Describe(a));
  for (const Event& e : out->events) events.push_back(e.reason);
  EXPECT_EQ(actions, row.actions);
  EXPECT_EQ(events, row.events);
  EXPECT_EQ(out->requeue_after, row.requeue);
  if (row.check) row.check(*out);
}

// The passes that follow a refusal (the rollback's pod events among them)
// create nothing before status.scheduling.retryTime, then retry.
TEST(DecideActFailureTest, NothingIsCreatedAgainBeforeTheBackoffEnds) {
  Input t;
  NewJob(t);
  const Plan plan = t.Decide();
  const std::optional<Plan> refused = DecideActFailure(t.in, plan, plan.actions.size() - 1, kQuota, t.now);
  ASSERT_TRUE(refused.has_value());
  t.in.status = *refused->status;
  t.in.pods = {Pod(0)};  // the rolled-back pod, still in the cache
  t.now += 1s;
  Plan waiting = t.Decide();
  EXPECT_EQ(CaseName(waiting.decision), std::string("SchedulingBackoff"));
  EXPECT_TRUE(waiting.actions.empty());
  EXPECT_EQ(waiting.requeue_after, milliseconds(4s));
  t.in.pods.clear();
  t.now += 4s;
  Plan retry = t.Decide();
  EXPECT_EQ(CaseName(retry.decision), std::string("Creating"));
  EXPECT_EQ(Describe(retry.actions.back()), "create Pod j-node-1");
  EXPECT_EQ(retry.status->scheduling.retry_time, "");
}

void PrintTo(const FailureRow& row, std::ostream* os) { *os << row.name; }

INSTANTIATE_TEST_SUITE_P(Refusals, DecideActFailureTest, ::testing::ValuesIn(Rows()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hypertrain::controller::plantest
