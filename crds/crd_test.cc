// The TrainingJob CRD: structural, consistent with the C++ API, and validating
// objects as kube-apiserver would (CEL rules are mirrored by ParseSpec).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "contract/env.h"
#include "operator/api/crd_schema.h"
#include "operator/api/status.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::IsEmpty;

constexpr char kCrdPath[] = "crds/trainingjobs.hypertrain.dev.yaml";

class CrdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto crd = YamlFileToJson(kCrdPath);
    ASSERT_TRUE(crd.ok()) << crd.status().ToString();
    crd_ = *crd;
    ASSERT_EQ(crd_["spec"]["versions"].size(), 1u);
    version_ = crd_["spec"]["versions"][0];
    schema_ = version_["schema"]["openAPIV3Schema"];
  }

  std::vector<std::string> Validate(json obj) { return ValidateAgainstSchema(schema_, &obj); }

  static json Job(json spec) {
    return {{"apiVersion", kApiVersion}, {"kind", kKind}, {"metadata", {{"name", "j"}}}, {"spec", std::move(spec)}};
  }
  static json MinimalSpec() {
    return {{"image", "img"}, {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\nmodel: {}\n"}}}};
  }

  json crd_, version_, schema_;
};

TEST_F(CrdTest, IdentityNamesAndSubresources) {
  EXPECT_EQ(crd_["apiVersion"], "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd_["kind"], "CustomResourceDefinition");
  EXPECT_EQ(crd_["metadata"]["name"], std::string(kPlural) + "." + kGroup);
  EXPECT_EQ(crd_["spec"]["group"], kGroup);
  EXPECT_EQ(crd_["spec"]["scope"], "Namespaced");
  EXPECT_EQ(crd_["spec"]["names"]["kind"], kKind);
  EXPECT_EQ(crd_["spec"]["names"]["plural"], kPlural);
  EXPECT_EQ(crd_["spec"]["names"]["shortNames"], json({"tj"}));
  EXPECT_EQ(version_["name"], kVersion);
  EXPECT_EQ(version_["served"], true);
  EXPECT_EQ(version_["storage"], true);
  EXPECT_EQ(version_["subresources"]["status"], json::object());
}

TEST_F(CrdTest, SchemaIsStructural) { EXPECT_THAT(CheckStructural(schema_), IsEmpty()); }

TEST_F(CrdTest, PrinterColumnsResolveWithMatchingTypes) {
  std::vector<std::string> names;
  for (const json& col : version_["additionalPrinterColumns"]) {
    names.push_back(col["name"]);
    const std::string path = col["jsonPath"];
    if (path == ".metadata.creationTimestamp") {
      EXPECT_EQ(col["type"], "date");
      continue;
    }
    json node = SchemaAt(schema_, path);
    ASSERT_FALSE(node.is_null()) << path;
    EXPECT_EQ(node["type"], col["type"]) << path;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"State", "Nodes", "Current", "GPUs", "Step", "Restarts", "Age", "Estimate"}));
  // The State column's values are the condition types and Pending.
  json states = json(ConditionTypes());
  states.push_back(kStatePending);
  EXPECT_EQ(SchemaAt(schema_, ".status.state")["enum"], states);
}

TEST_F(CrdTest, ConditionEnumsMatchTheCppApi) {
  json cond = SchemaAt(schema_, ".status.conditions[*]");
  EXPECT_EQ(cond["properties"]["type"]["enum"], json(ConditionTypes()));
  std::set<std::string> crd_reasons(cond["properties"]["reason"]["enum"].begin(),
                                    cond["properties"]["reason"]["enum"].end());
  std::set<std::string> cpp_reasons(ConditionReasons().begin(), ConditionReasons().end());
  EXPECT_EQ(crd_reasons, cpp_reasons);
  for (const char* f : {"type", "status", "reason", "message", "lastTransitionTime"}) {
    EXPECT_NE(std::find(cond["required"].begin(), cond["required"].end(), f), cond["required"].end()) << f;
  }
}

TEST_F(CrdTest, ReservedEnvRuleMatchesTheCppList) {
  json rules = SchemaAt(schema_, ".spec.env[*]")["x-kubernetes-validations"];
  ASSERT_FALSE(rules.empty());
  const std::string rule = rules[0]["rule"];
  std::set<std::string> in_rule;
  static const std::regex kName("'([A-Z_]+)'");
  for (auto it = std::sregex_iterator(rule.begin(), rule.end(), kName); it != std::sregex_iterator(); ++it) {
    in_rule.insert((*it)[1]);
  }
  const auto& reserved = contract::ReservedEnvNames();
  EXPECT_EQ(in_rule, std::set<std::string>(reserved.begin(), reserved.end()));
}

TEST_F(CrdTest, DefaultsAgreeWithTheCppDefaults) {
  json obj = Job(MinimalSpec());
  obj["spec"]["nprocPerNode"] = 1;
  ASSERT_THAT(ValidateAgainstSchema(schema_, &obj), IsEmpty());
  const json& s = obj["spec"];
  ObjectMeta meta;
  meta.name = "j";
  meta.namespace_ = "ns";
  auto defaulted = ParseSpec(s, meta);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status().ToString();
  json raw = MinimalSpec();
  raw["nprocPerNode"] = 1;
  auto cpp = ParseSpec(raw, meta);
  ASSERT_TRUE(cpp.ok());
  EXPECT_EQ(s["nodes"], cpp->nodes);
  EXPECT_EQ(s["masterPort"], cpp->master_port);
  EXPECT_EQ(s["imagePullPolicy"], cpp->image_pull_policy);
  EXPECT_EQ(s["runPolicy"]["backoffLimit"], cpp->run_policy.backoff_limit);
  EXPECT_EQ(s["runPolicy"]["cleanPodPolicy"], CleanPodPolicyName(cpp->run_policy.clean_pod_policy));
  EXPECT_EQ(s["runPolicy"]["suspend"], cpp->run_policy.suspend);
  const FaultPolicy& fp = cpp->fault_policy;
  // Exit codes: no list by default, the policy of contract/exit_codes.h decides.
  EXPECT_FALSE(s["faultPolicy"].contains("nonRetryableExitCodes"));
  EXPECT_FALSE(s["faultPolicy"].contains("retryableExitCodes"));
  EXPECT_TRUE(fp.non_retryable_exit_codes.empty());
  EXPECT_EQ(s["faultPolicy"]["deepHealthCheck"], DeepHealthCheckName(fp.deep_health_check));
  EXPECT_EQ(s["faultPolicy"]["hangTimeoutSeconds"], fp.hang_timeout_seconds);
  EXPECT_EQ(s["faultPolicy"]["startupTimeoutSeconds"], fp.startup_timeout_seconds);
  EXPECT_EQ(s["faultPolicy"]["maxRepeatOffenders"], fp.max_repeat_offenders);
  EXPECT_EQ(s["faultPolicy"]["podPendingOrLostGraceSeconds"], fp.pod_pending_or_lost_grace_seconds);
  EXPECT_EQ(s["faultPolicy"]["nodeHealthLabel"], fp.node_health_label);
  EXPECT_EQ(s["faultPolicy"]["healthyNodeValues"], json(fp.healthy_node_values));
  const Elastic elastic;  // what the schema's defaults must say
  EXPECT_EQ(SchemaAt(schema_, ".spec.elastic.checkIntervalSeconds")["default"], elastic.check_interval_seconds);
  EXPECT_EQ(SchemaAt(schema_, ".spec.elastic.minResizeIntervalSeconds")["default"],
            elastic.min_resize_interval_seconds);
  EXPECT_EQ(SchemaAt(schema_, ".spec.scheduling.terminationGracePeriodSeconds")["default"],
            cpp->scheduling.termination_grace_period_seconds);
  // The API server's defaulting and the C++ defaults give the same spec.
  EXPECT_EQ(defaulted->fault_policy.non_retryable_exit_codes, fp.non_retryable_exit_codes);
  EXPECT_EQ(defaulted->WorldSize(), cpp->WorldSize());
}

TEST_F(CrdTest, StatusWrittenByTheOperatorValidates) {
  TrainingJobStatus st;
  SetJobCondition(&st, kCondCreated, true, reason::kJobCreated, "created", "2026-11-22T00:00:00Z", 1);
  SetJobCondition(&st, kCondRunning, true, reason::kPodsRunning, "running", "2026-11-22T00:01:00Z", 1);
  SetJobCondition(&st, kCondRestarting, true, reason::kHang, "no step progress", "2026-11-22T00:02:00Z", 1);
  st.observed_generation = 1;
  st.start_time = "2026-11-22T00:00:01Z";
  st.restart_count = 1;
  st.restart_attempt = 1;
  st.gpus = 16;
  st.world_size = 16;
  st.pods = {1, 0, 1};
  st.progress = Progress{10, 100, 3.5, 1000.0, 5, "2026-11-22T00:01:30Z"};
  st.last_fault = Fault{"Hang", "no progress", "j-node-0", "ip-1", 0, 201, "2026-11-22T00:02:00Z",
                        "2026-11-22T00:01:59Z"};
  st.last_recovery_seconds = 12.25;
  st.last_recovery_attempt = 1;
  st.excluded_nodes = {"ip-1"};
  st.node_faults = {{"ip-1", 2}};
  st.current_nodes = 1;
  st.elastic.last_resize_time = "2026-11-22T00:02:00Z";
  st.elastic.history = {{2, "2026-11-22T00:00:01Z", "the desired size", 0, 10},
                        {1, "2026-11-22T00:02:00Z", "1 of 2 nodes fit", 5, std::nullopt}};
  json obj = Job(MinimalSpec());
  obj["spec"]["nprocPerNode"] = 1;
  obj["status"] = ToJson(st);
  EXPECT_THAT(Validate(obj), IsEmpty());
  obj["status"]["conditions"][0]["reason"] = "SomethingElse";
  EXPECT_THAT(Validate(obj), ::testing::Contains(::testing::HasSubstr("status.conditions[0].reason")));
}

TEST_F(CrdTest, RejectsBadSpecs) {
  auto expect_problem = [&](json spec, const std::string& needle) {
    auto problems = Validate(Job(std::move(spec)));
    EXPECT_THAT(problems, ::testing::Contains(::testing::HasSubstr(needle))) << needle;
  };
  json s = MinimalSpec();
  s["nodes"] = 0;
  expect_problem(s, "spec.nodes in body should be greater than or equal to 1");
  s = MinimalSpec();
  s["instanceType"] = "p5.48xlarge";
  expect_problem(s, "spec.instanceType");
  s = MinimalSpec();
  s["imagePullPolicy"] = "Sometimes";
  expect_problem(s, "spec.imagePullPolicy");
  s = MinimalSpec();
  s["resources"] = {{"requests", {{"memory", "lots"}}}};
  expect_problem(s, "spec.resources.requests.memory");
  s = MinimalSpec();
  s["runPolicy"] = {{"cleanPodPolicy", "Sometimes"}};
  expect_problem(s, "spec.runPolicy.cleanPodPolicy");
  s = MinimalSpec();
  s["gpusPerNod"] = 8;
  expect_problem(s, "spec.gpusPerNod: unknown field");
  s = MinimalSpec();
  s.erase("image");
  expect_problem(s, "spec.image: Required value");
  s = MinimalSpec();
  s["masterPort"] = 99999;
  expect_problem(s, "spec.masterPort");
  s = MinimalSpec();
  s["faultPolicy"] = {{"nonRetryableExitCodes", {137, 137}}};
  expect_problem(s, "nonRetryableExitCodes[1]: Duplicate value: 137");
  // Garbage affinity, gang and topology are refused at admission.
  s = MinimalSpec();
  s["scheduling"] = {{"affinity", {{"nodeAffinity", {{"anything", 1}}}}}};
  expect_problem(s, "spec.scheduling.affinity.nodeAffinity.anything: unknown field");
  s["scheduling"] = json::parse(R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
      {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Equals"}]}]}}}})");
  expect_problem(s, "operator");
  s["scheduling"] = json::parse(R"({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
      [{"labelSelector": {"matchLabels": {"a": "b"}}}]}}})");
  expect_problem(s, "topologyKey: Required value");
  s["scheduling"] = {{"gang", {{"provider", "yunikorn"}}}};
  expect_problem(s, "spec.scheduling.gang.provider");
  s["scheduling"] = {{"gang", {{"queueName", "q"}}}};
  expect_problem(s, "spec.scheduling.gang.provider: Required value");
  s["scheduling"] = {{"topology", {{"layer", 4}}}};
  expect_problem(s, "spec.scheduling.topology.layer");
  s["scheduling"] = {{"nodeSelector", {{"pool", "a b"}}}};
  expect_problem(s, "spec.scheduling.nodeSelector.pool");
  s = MinimalSpec();
  s["podMetadata"] = {{"labels", {{"team", "a b"}}}};
  expect_problem(s, "spec.podMetadata.labels.team");
  s = MinimalSpec();
  s["podTemplate"] = {{"metadata", {{"labels", {{"team", std::string(64, 'x')}}}}}};
  expect_problem(s, "spec.podTemplate.metadata.labels.team");
  s["podTemplate"] = {{"spec", {{"containers", {{{"image", "x"}}}}}}};
  expect_problem(s, "spec.podTemplate.spec.containers[0].name: Required value");
  s["podTemplate"] = {{"spec", {{"volumes", {{{"name", "a"}, {"emptyDir", json::object()}}, {{"name", "a"}, {"emptyDir", json::object()}}}}}}};
  expect_problem(s, "Duplicate value");
  s = MinimalSpec();
  s["runPolicy"] = {{"schedulingTimeoutSeconds", -5}};
  expect_problem(s, "spec.runPolicy.schedulingTimeoutSeconds");
  s = MinimalSpec();
  s["elastic"] = {{"maxNodes", 2}};
  expect_problem(s, "spec.elastic.minNodes: Required value");
  s["elastic"] = {{"minNodes", 0}};
  expect_problem(s, "spec.elastic.minNodes");
  s["elastic"] = {{"minNodes", 1}, {"checkIntervalSeconds", 0}};
  expect_problem(s, "spec.elastic.checkIntervalSeconds");
  s["elastic"] = {{"minNodes", 1}, {"every", 1}};
  expect_problem(s, "spec.elastic.every: unknown field");
  // Core fields have core/v1's schemas (issue 35, item 2): what the core API
  // defines passes, a misspelled field is unknown instead of kept.
  s = MinimalSpec();
  s["volumes"] = json::array({{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "c"}}}}});
  s["podTemplate"] = json::parse(R"({"spec": {"runtimeClassName": "nvidia", "securityContext": {"fsGroup": 1},
      "containers": [{"name": "side", "image": "x", "livenessProbe": {"exec": {"command": ["true"]}}}]}})");
  json obj = Job(s);
  EXPECT_THAT(Validate(obj), IsEmpty());
  s["volumes"][0]["persistentVolumeClam"] = s["volumes"][0]["persistentVolumeClaim"];
  s["podTemplate"]["spec"]["securityContxt"] = json::object();
  s["podTemplate"]["spec"]["containers"][0]["resourcs"] = json::object();
  obj = Job(s);
  EXPECT_THAT(Validate(obj), ::testing::UnorderedElementsAre(
                                 "spec.volumes[0].persistentVolumeClam: unknown field (the API server would drop it)",
                                 "spec.podTemplate.spec.securityContxt: unknown field (the API server would drop it)",
                                 "spec.podTemplate.spec.containers[0].resourcs: unknown field (the API server would drop it)"));
}

TEST_F(CrdTest, CelRulesArePresentWhereRulesSpanFields) {
  auto rules_at = [&](const std::string& path) {
    std::string all;
    const json node = SchemaAt(schema_, path);
    for (const json& r : node.value("x-kubernetes-validations", json::array())) all += r["rule"].get<std::string>() + "\n";
    return all;
  };
  EXPECT_THAT(rules_at(""), ::testing::HasSubstr("self.metadata.name"));
  EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr("has(self.nprocPerNode)"));
  EXPECT_THAT(rules_at(".spec.trainerConfig"), ::testing::HasSubstr("has(self.inline) != has(self.configMapRef)"));
  EXPECT_THAT(rules_at(".spec.scheduling.tolerations[*]"),
              ::testing::HasSubstr("sagemaker.amazonaws.com/node-health-status"));
  // The rules ParseSpec mirrors for a real API server (kube-local does not run CEL).
  EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr("self.volumeMounts.all(m"));
  EXPECT_THAT(rules_at(".spec.runPolicy"), ::testing::HasSubstr("has(self.schedulingTimeoutSeconds)"));
  EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr("self.elastic.minNodes <="));
  EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr("self.elastic.maxNodes >="));
  EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr("!has(self.elastic) || (has(self.runPolicy)"));
  EXPECT_THAT(rules_at(".spec.faultPolicy"), ::testing::HasSubstr("self.retryableExitCodes.exists"));
  EXPECT_THAT(rules_at(".spec.faultPolicy.retryableExitCodes"), ::testing::HasSubstr("!(2 in self)"));
  EXPECT_THAT(rules_at(".spec.scheduling"), ::testing::HasSubstr("'volcano'"));
  EXPECT_THAT(rules_at(".spec.scheduling.gang"), ::testing::HasSubstr("has(self.queueName)"));
  EXPECT_THAT(rules_at(".spec.scheduling.topology"), ::testing::HasSubstr("has(self.layer) != has(self.topologyKey)"));
  EXPECT_THAT(rules_at(".spec.podMetadata.labels"), ::testing::HasSubstr("k.matches("));
  EXPECT_THAT(rules_at(".spec.podTemplate.spec"), ::testing::HasSubstr("!has(self.restartPolicy)"));
  EXPECT_THAT(rules_at(".spec.podTemplate.spec.containers[*]"), ::testing::HasSubstr("!has(self.command)"));
  // Immutable fields: transition rules on spec that also cover adding and
  // removing the field (a rule on the field itself never sees those).
  for (const char* f : {"nodes", "gpusPerNode", "nprocPerNode", "efaPerNode", "instanceType"}) {
    EXPECT_THAT(rules_at(".spec"), ::testing::HasSubstr(std::string("has(self.") + f + ") == has(oldSelf." + f + ")"))
        << f;
    EXPECT_THAT(rules_at(std::string(".spec.") + f), ::testing::Not(::testing::HasSubstr("oldSelf"))) << f;
  }
}

// Defect 7 of issue 19: "-1Gi" matched the quantity pattern and -1 had no bound.
TEST_F(CrdTest, RejectsNegativeQuantities) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"requests", "-1Gi"}, {"requests", -2}, {"limits", "-500m"}, {"limits", -1}}) {
    json s = MinimalSpec();
    s["resources"] = {{field, {{"memory", value}}}};
    EXPECT_THAT(Validate(Job(s)), ::testing::Contains(::testing::HasSubstr("spec.resources." + field + ".memory")))
        << field << "=" << value.dump();
  }
  for (const json& v : {json("-1Gi"), json(-1)}) {
    json s = MinimalSpec();
    s["shmSize"] = v;
    EXPECT_THAT(Validate(Job(s)), ::testing::Contains(::testing::HasSubstr("spec.shmSize"))) << v.dump();
  }
  json ok = MinimalSpec();
  ok["nprocPerNode"] = 1;
  ok["resources"] = {{"requests", {{"cpu", "500m"}, {"memory", 1073741824}, {"hugepages-2Mi", "+1Gi"}}},
                     {"limits", {{"memory", "1e9"}}}};
  ok["shmSize"] = "64Gi";
  EXPECT_THAT(Validate(Job(ok)), IsEmpty());
}

}  // namespace
}  // namespace hypertrain::api
