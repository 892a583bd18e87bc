// spec.scheduling (gang, topology, placement validation), the scheduling
// timeout of spec.runPolicy and the deep health check of spec.faultPolicy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/training_job.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kConfig[] = "trainer:\n  max_steps: 100\nmodel:\n  sharding_strategy: hybrid_shard\n";

ObjectMeta Meta() {
  ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  m.uid = "uid-1";
  return m;
}

json Spec(json scheduling = nullptr) {
  json s = {{"image", "hypertrain:1"},
            {"instanceType", "ml.p5.48xlarge"},
            {"nodes", 2},
            {"trainerConfig", {{"inline", kConfig}}}};
  if (!scheduling.is_null()) s["scheduling"] = scheduling;
  return s;
}

// "field: message" of the parse error.
std::string Error(const json& spec) {
  auto r = ParseSpec(spec, Meta());
  EXPECT_FALSE(r.ok()) << spec.dump();
  return r.ok() ? "" : r.status().message();
}

TrainingJobSpec Ok(const json& spec) {
  auto r = ParseSpec(spec, Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : TrainingJobSpec{};
}

TEST(GangTest, Providers) {
  TrainingJobSpec s = Ok(Spec({{"gang", {{"provider", "kueue"}, {"queueName", "team-a"}, {"priorityClass", "high"}}}}));
  EXPECT_EQ(s.scheduling.gang.provider, GangProvider::kKueue);
  EXPECT_EQ(s.scheduling.gang.queue_name, "team-a");
  EXPECT_EQ(s.scheduling.gang.priority_class, "high");
  EXPECT_EQ(Ok(Spec({{"gang", {{"provider", "coscheduling"}}}})).scheduling.gang.provider, GangProvider::kCoscheduling);
  s = Ok(Spec({{"gang", {{"provider", "volcano"}, {"queueName", "research"}}}}));
  EXPECT_EQ(s.scheduling.gang.provider, GangProvider::kVolcano);
  EXPECT_STREQ(GangProviderName(s.scheduling.gang.provider), "volcano");
}

TEST(GangTest, ErrorsNameTheField) {
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "yunikorn"}}}})),
              HasSubstr("spec.scheduling.gang.provider: 'yunikorn' is not one of kueue, coscheduling, volcano"));
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "kueue"}}}})), HasSubstr("spec.scheduling.gang.queueName: required"));
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "coscheduling"}, {"queueName", "q"}}}})),
              HasSubstr("spec.scheduling.gang.queueName: provider coscheduling has no queues"));
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "volcano"}, {"priorityClass", "p"}}}})),
              HasSubstr("spec.scheduling.gang.priorityClass"));
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "kueue"}, {"queueName", "Team A"}}}})),
              HasSubstr("spec.scheduling.gang.queueName: 'Team A' must be a DNS-1123 label"));
  EXPECT_THAT(Error(Spec({{"gang", {{"provider", "kueue"}, {"queue", "q"}}}})),
              HasSubstr("spec.scheduling.gang.queue: unknown field"));
  EXPECT_THAT(Error(Spec({{"schedulerName", "default-scheduler"}, {"gang", {{"provider", "volcano"}}}})),
              HasSubstr("spec.scheduling.schedulerName: 'default-scheduler' does not read Volcano PodGroups"));
}

TEST(TopologyTest, LayerOrKeyAndMode) {
  TrainingJobSpec s = Ok(Spec({{"topology", {{"layer", 3}}}}));
  EXPECT_EQ(s.scheduling.topology.key, "topology.k8s.aws/network-node-layer-3");
  EXPECT_TRUE(s.scheduling.topology.required);
  s = Ok(Spec({{"topology", {{"topologyKey", "example.com/rack"}, {"mode", "Preferred"}}}}));
  EXPECT_EQ(s.scheduling.topology.key, "example.com/rack");
  EXPECT_FALSE(s.scheduling.topology.required);
  EXPECT_THAT(Error(Spec({{"topology", {{"layer", 4}}}})), HasSubstr("spec.scheduling.topology.layer: 4 is out of range"));
  EXPECT_THAT(Error(Spec({{"topology", json::object()}})), HasSubstr("exactly one of layer"));
  EXPECT_THAT(Error(Spec({{"topology", {{"layer", 1}, {"topologyKey", "a/b"}}}})), HasSubstr("exactly one of layer"));
  EXPECT_THAT(Error(Spec({{"topology", {{"layer", 2}, {"mode", "Strict"}}}})),
              HasSubstr("spec.scheduling.topology.mode: 'Strict' is not one of Required, Preferred"));
  EXPECT_THAT(Error(Spec({{"topology", {{"topologyKey", "bad key!"}}}})),
              HasSubstr("spec.scheduling.topology.topologyKey: 'bad key!' is not a valid label key"));
}

TEST(PlacementTest, GarbageAffinityIsRejectedNamingTheField) {
  auto affinity_error = [](json affinity) { return Error(Spec({{"affinity", affinity}})); };
  EXPECT_THAT(affinity_error({{"nodeAfinity", json::object()}}), HasSubstr("spec.scheduling.affinity.nodeAfinity: unknown field"));
  EXPECT_THAT(affinity_error("rack-1"), HasSubstr("spec.scheduling.affinity: must be an object"));
  json bad_op = {{"nodeAffinity",
                  {{"requiredDuringSchedulingIgnoredDuringExecution",
                    {{"nodeSelectorTerms", {{{"matchExpressions", {{{"key", "zone"}, {"operator", "Equals"}}}}}}}}}}}};
  EXPECT_THAT(affinity_error(bad_op),
              HasSubstr("nodeSelectorTerms[0].matchExpressions[0].operator: 'Equals' is not one of In"));
  json no_values = bad_op;
  no_values["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
           ["matchExpressions"][0]["operator"] = "In";
  EXPECT_THAT(affinity_error(no_values), HasSubstr("matchExpressions[0].values: required for operator In"));
  json empty_terms = {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", json::array()}}}}}};
  EXPECT_THAT(affinity_error(empty_terms), HasSubstr("nodeSelectorTerms: must not be empty"));
  json no_key = {{"podAntiAffinity",
                  {{"requiredDuringSchedulingIgnoredDuringExecution", {{{"labelSelector", {{"matchLabels", {{"a", "b"}}}}}}}}}}};
  EXPECT_THAT(affinity_error(no_key),
              HasSubstr("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: required"));
  json weight = {{"nodeAffinity",
                  {{"preferredDuringSchedulingIgnoredDuringExecution",
                    {{{"weight", 0}, {"preference", {{"matchExpressions", json::array()}}}}}}}}};
  EXPECT_THAT(affinity_error(weight), HasSubstr("preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0 is out of range"));
  // A well-formed affinity passes.
  json good = {{"nodeAffinity",
                {{"preferredDuringSchedulingIgnoredDuringExecution",
                  {{{"weight", 10}, {"preference", {{"matchExpressions", {{{"key", "zone"}, {"operator", "Exists"}}}}}}}}}}},
               {"podAntiAffinity",
                {{"preferredDuringSchedulingIgnoredDuringExecution",
                  {{{"weight", 5},
                    {"podAffinityTerm", {{"topologyKey", "kubernetes.io/hostname"},
                                         {"labelSelector", {{"matchLabels", {{"app", "x"}}}}}}}}}}}}};
  Ok(Spec({{"affinity", good}}));
}

TEST(PlacementTest, InvalidLabelsAreRejected) {
  EXPECT_THAT(Error(Spec({{"nodeSelector", {{"pool", "a b"}}}})),
              HasSubstr("spec.scheduling.nodeSelector.pool: invalid label value 'a b'"));
  json spec = Spec();
  spec["podMetadata"] = {{"labels", {{"-team", "a"}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.podMetadata.labels.-team: invalid label key"));
  spec["podMetadata"] = {{"labels", {{"team", std::string(64, 'a')}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.podMetadata.labels.team: invalid label value"));
  spec["podMetadata"] = {{"labels", {{"Example.com/team", "a"}}}};
  EXPECT_THAT(Error(spec), HasSubstr("prefix 'Example.com' must be a DNS subdomain"));
  spec["podMetadata"] = {{"labels", {{"kueue.x-k8s.io/queue-name", "q"}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.podMetadata.labels.kueue.x-k8s.io/queue-name: is set by the operator"));
  spec["podMetadata"] = {{"annotations", {{"hypertrain.dev/progress", "{}"}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.podMetadata.annotations.hypertrain.dev/progress: is set by the operator"));
  spec["podMetadata"] = {{"labels", {{"example.com/team", "a-b_c.d"}, {"empty", ""}}}};
  Ok(spec);
}

TEST(SchedulingTimeoutTest, RunPolicyFields) {
  json spec = Spec();
  spec["runPolicy"] = {{"schedulingTimeoutSeconds", 600},
                       {"schedulingRetry", {{"limit", 3}, {"backoffSeconds", 30}, {"maxBackoffSeconds", 100},
                                            {"countsTowardBackoffLimit", true}}}};
  TrainingJobSpec s = Ok(spec);
  EXPECT_EQ(s.run_policy.scheduling_timeout_seconds, 600);
  const SchedulingRetry& r = s.run_policy.scheduling_retry;
  EXPECT_EQ(r.limit, 3);
  EXPECT_TRUE(r.counts_toward_backoff_limit);
  EXPECT_EQ(r.BackoffSeconds(0), 30);
  EXPECT_EQ(r.BackoffSeconds(1), 60);
  EXPECT_EQ(r.BackoffSeconds(2), 100);  // capped
  EXPECT_EQ(r.BackoffSeconds(30), 100);
  spec["runPolicy"] = {{"schedulingRetry", {{"limit", 1}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.runPolicy.schedulingRetry: needs schedulingTimeoutSeconds"));
  spec["runPolicy"] = {{"schedulingTimeoutSeconds", 60}, {"schedulingRetry", {{"backoffSeconds", 60}, {"maxBackoffSeconds", 10}}}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.runPolicy.schedulingRetry.maxBackoffSeconds: 10 is less than backoffSeconds 60"));
  spec["runPolicy"] = {{"schedulingTimeoutSeconds", -1}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.runPolicy.schedulingTimeoutSeconds"));
}

TEST(DeepHealthTest, Modes) {
  json spec = Spec();
  spec["faultPolicy"] = {{"deepHealthCheck", "Required"}};
  EXPECT_EQ(Ok(spec).fault_policy.deep_health_check, DeepHealthCheck::kRequired);
  spec["faultPolicy"] = {{"deepHealthCheck", "Ignored"}};
  EXPECT_EQ(Ok(spec).fault_policy.deep_health_check, DeepHealthCheck::kIgnored);
  spec["faultPolicy"] = {{"deepHealthCheck", "Always"}};
  EXPECT_THAT(Error(spec), HasSubstr("spec.faultPolicy.deepHealthCheck: 'Always' is not one of"));
}

}  // namespace
}  // namespace hypertrain::api
