// Decide rows about the objects under a job's names (issue 35, items 1, 5, 6):
// nothing the caches hold as the job's is created again; an object the job
// does not control stops it with Created=False/OwnershipConflict and a Warning
// naming the object; a deleted namesake's objects make it wait
// (PreviousJobTerminating); the progress ConfigMap gets its metadata back; a
// job in an excluded namespace says so; status.state is never blank. Also
// DecideActFailure after a 409 whose object is another's, and the ownership
// rules on object JSON.
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller::plantest {
namespace {

using ::testing::HasSubstr;

void NewJob(Input& t) {
  t.in.status = {};
  t.in.pods.clear();
}

ObservedObject Obj(const std::string& kind, const std::string& name, const std::string& controller_kind = "",
                   const std::string& controller_name = "", const std::string& controller_uid = "") {
  ObservedObject o;
  o.kind = kind;
  o.name = name;
  o.uid = kind + "-" + name + "-uid";
  o.controller_kind = controller_kind;
  o.controller_name = controller_name;
  o.controller_uid = controller_uid;
  o.job_label = controller_kind.empty() ? "" : "j";
  return o;
}
ObservedObject Ours(const std::string& kind, const std::string& name) {
  return Obj(kind, name, "TrainingJob", "j", "job-uid");
}
void Put(Input& t, const ObservedObject& o) { t.in.objects[ObjectKey(o.kind, o.name)] = o; }

const char kForeignRole[] =
    "Role j-progress (no controller ownerReference) exists and is not controlled by this TrainingJob (uid job-uid)";

std::vector<Row> Rows() {
  return {
      {"OwnObjectsInTheCacheAreNotCreatedAgain",
       [](Input& t) {
         Put(t, Ours("Service", "j"));
         Put(t, Ours("ConfigMap", "j-config"));
       },
       Case::kRunning, "Running", {}, {}, std::nullopt},
      {"NewJobCreatesOnlyWhatTheCachesLack",
       [](Input& t) {
         NewJob(t);
         Put(t, Ours("Service", "j"));
         Put(t, Ours("ServiceAccount", "j-trainer"));
         Put(t, Ours("Role", "j-progress"));
       },
       Case::kCreating, "Pending",
       {"create ConfigMap j-config", "create ConfigMap j-progress", "create RoleBinding j-progress",
        "create Pod j-node-0", "create Pod j-node-1"},
       {}, std::nullopt},
      {"NewJobIsPendingNotBlank", NewJob, Case::kCreating, "Pending",
       EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_TRUE(p.needs_current_cache); }},
      {"ForeignRoleStopsTheJobAndNamesIt",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("Role", "j-progress"));
       },
       Case::kOwnershipConflict, "Pending", {}, {"OwnershipConflict"}, 30000ms,
       [](const Plan& p, const Input&) {
         const api::Condition& c = Cond(p, api::kCondCreated);
         EXPECT_EQ(c.status, "False");
         EXPECT_EQ(c.reason, "OwnershipConflict");
         EXPECT_THAT(c.message, HasSubstr(kForeignRole));
         EXPECT_THAT(p.events[0].message, HasSubstr(kForeignRole));
         EXPECT_EQ(p.events[0].type, EventType::kWarning);
         EXPECT_EQ(p.status->start_time, "") << "nothing started";
         EXPECT_EQ(p.status->scheduling.start_time, "");
         EXPECT_FALSE(p.needs_current_cache);
       }},
      {"SameConflictAgainNoSecondWarning",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("Role", "j-progress"));
         Input first;
         NewJob(first);
         Put(first, Obj("Role", "j-progress"));
         t.in.status = *first.Decide().status;
       },
       Case::kOwnershipConflict, "Pending", {}, {}, 30000ms},
      {"ConfigMapOfAnotherControllerIsNotMounted",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("ConfigMap", "j-config", "Deployment", "web", "d-uid"));
       },
       Case::kOwnershipConflict, "Pending", {}, {"OwnershipConflict"}, 30000ms,
       [](const Plan& p, const Input&) {
         EXPECT_THAT(Cond(p, api::kCondCreated).message,
                     HasSubstr("ConfigMap j-config (controlled by Deployment web, uid d-uid)"));
       }},
      {"ForeignPodUnderARankNameStopsTheJob",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("Pod", "j-node-1"));
       },
       Case::kOwnershipConflict, "Pending", {}, {"OwnershipConflict"}, 30000ms},
      {"RunningJobWhoseServiceWasReplacedKeepsItsState",
       [](Input& t) { Put(t, Obj("Service", "j", "TrainingJob", "other", "other-uid")); },
       Case::kOwnershipConflict, "Running", {}, {"OwnershipConflict"}, 30000ms},
      {"PodsOfADeletedNamesakeMakeItWait",
       [](Input& t) {
         NewJob(t);
         ObservedObject old = Obj("Pod", "j-node-0", "TrainingJob", "j", "old-uid");
         old.deleting = true;
         Put(t, old);
       },
       Case::kEarlierJob, "Pending", {}, {}, 1000ms,
       [](const Plan& p, const Input&) {
         const api::Condition& c = Cond(p, api::kCondCreated);
         EXPECT_EQ(c.reason, "PreviousJobTerminating");
         EXPECT_THAT(c.message, HasSubstr("Pod j-node-0 (controlled by TrainingJob j, uid old-uid) of an earlier "
                                          "TrainingJob named j is still being deleted"));
       }},
      {"ExcludedNamespaceSaysSoOnce",
       [](Input& t) {
         NewJob(t);
         t.in.namespace_excluded = true;
       },
       Case::kExcluded, "Pending", {}, {"NamespaceExcluded"}, std::nullopt,
       [](const Plan& p, const Input&) {
         const api::Condition& c = Cond(p, api::kCondCreated);
         EXPECT_EQ(c.reason, "NamespaceExcluded");
         EXPECT_THAT(c.message, HasSubstr("namespace ns is excluded by the operator"));
       }},
      {"ExcludedNamespaceSecondPassNoEvent",
       [](Input& t) {
         NewJob(t);
         t.in.namespace_excluded = true;
         Input first;
         NewJob(first);
         first.in.namespace_excluded = true;
         t.in.status = *first.Decide().status;
       },
       Case::kExcluded, "Pending", {}, {}, std::nullopt},
      {"ExcludedNamespaceEvenWithAnInvalidSpec",
       [](Input& t) {
         NewJob(t);
         t.in.namespace_excluded = true;
         t.spec_error = InvalidArgument("spec.nodes: bad");
       },
       Case::kExcluded, "Pending", {}, {"NamespaceExcluded"}, std::nullopt},
      {"ProgressWithAForeignFinalizerIsRepairedFirst",
       [](Input& t) {
         ObservedObject cm = Ours("ConfigMap", "j-progress");
         cm.finalizers = {"example.com/hold"};
         Put(t, cm);
       },
       Case::kRunning, "Running", {"repair ConfigMap j-progress", "create Service j", "create ConfigMap j-config"},
       {}, std::nullopt,
       [](const Plan& p, const Input&) {
         ASSERT_EQ(p.actions.size(), 3u);
         EXPECT_EQ(Describe(p.actions[0]), "repair ConfigMap j-progress");
         EXPECT_EQ(p.actions[0].object["metadata"]["finalizers"], nullptr);
         EXPECT_EQ(p.actions[0].object["metadata"]["ownerReferences"][0]["uid"], "job-uid");
         EXPECT_EQ(p.actions[0].object["metadata"]["ownerReferences"][0]["controller"], true);
         EXPECT_EQ(p.actions[0].object["metadata"]["labels"]["hypertrain.dev/job-name"], "j");
       }},
      {"ProgressStrippedOfItsOwnerButKnownIsRepairedNotAConflict",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("ConfigMap", "j-progress"));
         t.in.progress_known_ours = true;
       },
       Case::kCreating, "Pending",
       {"repair ConfigMap j-progress", "create Service j", "create ConfigMap j-config",
        "create ServiceAccount j-trainer", "create Role j-progress", "create RoleBinding j-progress",
        "create Pod j-node-0", "create Pod j-node-1"},
       {}, std::nullopt},
      {"ProgressWithoutOwnerNotKnownIsForeign",
       [](Input& t) {
         NewJob(t);
         Put(t, Obj("ConfigMap", "j-progress"));
       },
       Case::kOwnershipConflict, "Pending", {}, {"OwnershipConflict"}, 30000ms},
      {"DeletingJobStillRepairsItsProgress",
       [](Input& t) {
         t.in.job.deletion_timestamp = At(1s);
         ObservedObject cm = Ours("ConfigMap", "j-progress");
         cm.finalizers = {"example.com/hold"};
         Put(t, cm);
       },
       Case::kIgnored, "", {"repair ConfigMap j-progress"}, {}, std::nullopt},
  };
}

class OwnershipRows : public ::testing::TestWithParam<Row> {};
TEST_P(OwnershipRows, Decide) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Ownership, OwnershipRows, ::testing::ValuesIn(Rows()), RowName);

// A foreign object among the job's own: nothing at all is created.
TEST(OwnershipTest, OneForeignObjectAmongOwnOnesCreatesNothing) {
  Input t;
  NewJob(t);
  Put(t, Ours("Service", "j"));
  Put(t, Obj("RoleBinding", "j-progress"));
  const Plan p = t.Decide();
  EXPECT_TRUE(p.actions.empty());
  EXPECT_EQ(Cond(p, api::kCondCreated).reason, "OwnershipConflict");
}

Status AlreadyExists409(const std::string& name) {
  ApiErrorDetail d;
  d.http_status = 409;
  d.reason = "AlreadyExists";
  return Status(StatusCode::kAlreadyExists, "roles.rbac.authorization.k8s.io \"" + name + "\" already exists", d);
}

TEST(OwnershipTest, ActFailureOnAForeignObjectIsAConflictWithRollback) {
  Input t;
  NewJob(t);
  const Plan plan = t.Decide();
  size_t role = 0;
  while (role < plan.actions.size() && Describe(plan.actions[role]) != "create Role j-progress") ++role;
  ASSERT_LT(role, plan.actions.size());
  const ObservedObject foreign = Obj("Role", "j-progress");
  auto out = DecideActFailure(t.in, plan, role, AlreadyExists409("j-progress"), t.now, &foreign);
  ASSERT_TRUE(out.has_value());
  const api::Condition& c = Cond(*out, api::kCondCreated);
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "OwnershipConflict");
  EXPECT_THAT(c.message, HasSubstr(kForeignRole));
  EXPECT_EQ(out->status->state, "Pending");
  ASSERT_EQ(out->events.size(), 1u);
  EXPECT_EQ(out->events[0].reason, "OwnershipConflict");
  EXPECT_EQ(out->requeue_after, kCreationRetryMin);
  // Without the object read back, a 409 is the queue's (a race), not the job's.
  EXPECT_FALSE(DecideActFailure(t.in, plan, role, AlreadyExists409("j-progress"), t.now).has_value());
  // A deleted namesake's object: waiting, no Warning about a conflict.
  const ObservedObject earlier = Obj("Role", "j-progress", "TrainingJob", "j", "old-uid");
  auto wait = DecideActFailure(t.in, plan, role, AlreadyExists409("j-progress"), t.now, &earlier);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(Cond(*wait, api::kCondCreated).reason, "PreviousJobTerminating");
}

TEST(OwnershipTest, PodsMadeBeforeTheConflictAreRolledBack) {
  Input t;
  NewJob(t);
  const Plan plan = t.Decide();
  const size_t last = plan.actions.size() - 1;
  ASSERT_EQ(Describe(plan.actions[last]), "create Pod j-node-1");
  const ObservedObject foreign = Obj("Pod", "j-node-1");
  auto out = DecideActFailure(t.in, plan, last, AlreadyExists409("j-node-1"), t.now, &foreign);
  ASSERT_TRUE(out.has_value());
  std::vector<std::string> actions;
  for (const Action& a : out->actions) actions.push_back(Describe(a));
  EXPECT_EQ(actions, std::vector<std::string>{"delete Pod j-node-0"});
}

TEST(OwnershipTest, OwnershipFromObjectJson) {
  const nlohmann::json ours = {
      {"metadata",
       {{"name", "j-progress"},
        {"uid", "cm-uid"},
        {"labels", {{"hypertrain.dev/job-name", "j"}}},
        {"finalizers", {"example.com/hold"}},
        {"ownerReferences",
         {{{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", "p"}, {"uid", "p-uid"}},
          {{"apiVersion", "hypertrain.dev/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "j"}, {"uid", "job-uid"},
           {"controller", true}}}}}}};
  const ObservedObject o = ObjectFromJson(ours);
  EXPECT_EQ(o.uid, "cm-uid");
  EXPECT_EQ(o.controller_uid, "job-uid");
  EXPECT_EQ(o.job_label, "j");
  EXPECT_EQ(o.finalizers, std::vector<std::string>{"example.com/hold"});
  EXPECT_EQ(OwnershipOf(o, "j", "job-uid"), Ownership::kOurs);
  EXPECT_EQ(OwnershipOf(o, "j", "new-uid"), Ownership::kEarlierJob);
  EXPECT_EQ(OwnershipOf(o, "k", "new-uid"), Ownership::kForeign);
  // An ownerReference with the job's UID but not as controller is not control.
  nlohmann::json weak = ours;
  weak["metadata"]["ownerReferences"][1].erase("controller");
  EXPECT_EQ(OwnershipOf(ObjectFromJson(weak), "j", "job-uid"), Ownership::kForeign);
  EXPECT_EQ(OwnershipOf(ObjectFromJson(nlohmann::json::object()), "j", "job-uid"), Ownership::kForeign);
  EXPECT_EQ(OwnershipOf(ObjectFromJson(ours), "j", ""), Ownership::kEarlierJob) << "an empty UID matches nothing";
}

}  // namespace
}  // namespace hypertrain::controller::plantest
