// The TrainingJob CRD in the real kube-apiserver 1.26 (envtest): its OpenAPI
// schema and CEL rules reject bad specs with the field named, and the
// immutable fields can be neither changed nor added nor removed (issue 19,
// defects 4 and 7). Skips, naming HYPERTRAIN_KUBE_BINARIES, without the binaries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "localcluster/envtest/control_plane.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"

namespace hypertrain::api {
namespace {

using kube::Json;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const kube::ResourceType kCrdType{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                  "CustomResourceDefinition", false};
const kube::ResourceType kJobs = kube::resources::Custom("hypertrain.dev", "v1alpha1", "trainingjobs", "TrainingJob");

class CrdRealKubeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto bins = envtest::FindBinaries();
    if (!bins.ok()) {
      skip_ = new std::string(bins.status().message());
      return;
    }
    envtest::Options o;
    o.work_dir = std::string(std::getenv("TEST_TMPDIR")) + "/envtest";
    o.binaries = *bins;
    o.controller_manager = false;  // admission and validation only
    o.scheduler = false;
    auto cp = envtest::ControlPlane::Start(o);
    if (!cp.ok()) {
      error_ = new std::string(cp.status().ToString());
      return;
    }
    cp_ = cp->release();
    auto cfg = kube::LoadKubeconfig({cp_->kubeconfig()});
    cfg->max_retries = 0;
    client_ = new std::shared_ptr<kube::RestClient>(*kube::RestClient::Create(*cfg));
    auto crd = YamlFileToJson("crds/trainingjobs.hypertrain.dev.yaml");
    if (!crd.ok()) {
      error_ = new std::string(crd.status().ToString());
      return;
    }
    auto created = kube::ResourceClient(*client_, kCrdType).Create(*crd);
    if (!created.ok()) {
      error_ = new std::string("the API server refused the CRD: " + created.status().ToString());
      return;
    }
    kube::ResourceClient jobs(*client_, kJobs, "default");
    for (int i = 0; i < 100 && !jobs.List().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  static void TearDownTestSuite() {
    delete client_;
    delete cp_;
  }
  void SetUp() override {
    if (skip_ && !envtest::MaySkipWithoutBinaries()) FAIL() << "under CI: " << *skip_;
    if (skip_) GTEST_SKIP() << *skip_;
    ASSERT_EQ(error_, nullptr) << *error_;
  }
  static Json Job(const std::string& name, Json spec) {
    return {{"apiVersion", "hypertrain.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}}},
            {"spec", std::move(spec)}};
  }
  static Json P5Spec() {
    return {{"image", "img:1"},
            {"instanceType", "ml.p5.48xlarge"},
            {"nodes", 2},
            {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\n"}}}};
  }
  kube::ResourceClient Jobs() const { return kube::ResourceClient(*client_, kJobs, "default"); }
  // POST with ?fieldValidation=<mode> (kubectl --validate=strict sends Strict).
  static StatusOr<Json> CreateWith(const std::string& mode, const Json& obj) {
    kube::Request req;
    req.method = "POST";
    req.path = kJobs.CollectionPath("default");
    req.query = {{"fieldValidation", mode}};
    req.body = obj.dump();
    return (*client_)->SendJson(req);
  }

  static inline envtest::ControlPlane* cp_ = nullptr;
  static inline std::shared_ptr<kube::RestClient>* client_ = nullptr;
  static inline std::string* skip_ = nullptr;
  static inline std::string* error_ = nullptr;
};

TEST_F(CrdRealKubeTest, BadSpecsAreRejectedWithTheFieldNamed) {
  struct Case {
    const char* what;
    std::function<void(Json&)> mutate;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"nodes 0", [](Json& s) { s["nodes"] = 0; }, "spec.nodes"},
      {"instance type without ml.", [](Json& s) { s["instanceType"] = "p5.48xlarge"; }, "spec.instanceType"},
      {"bad pull policy", [](Json& s) { s["imagePullPolicy"] = "Sometimes"; }, "spec.imagePullPolicy"},
      {"nproc > gpus", [](Json& s) { s["gpusPerNode"] = 2, s["nprocPerNode"] = 4; }, "nprocPerNode must not exceed"},
      {"cpu ranks without nproc", [](Json& s) { s["gpusPerNode"] = 0; }, "nprocPerNode is required"},
      {"reserved env", [](Json& s) { s["env"] = {{{"name", "WORLD_SIZE"}, {"value", "3"}}}; }, "is reserved"},
      {"progress env reserved",
       [](Json& s) { s["env"] = {{{"name", "HYPERTRAIN_PROGRESS_CONFIGMAP"}, {"value", "x"}}}; }, "is reserved"},
      {"inline and configMapRef",
       [](Json& s) { s["trainerConfig"]["configMapRef"] = {{"name", "c"}}; }, "exactly one of inline or configMapRef"},
      {"unhealthy taint tolerated",
       [](Json& s) {
         s["scheduling"] = {{"tolerations", {{{"key", "sagemaker.amazonaws.com/node-health-status"}}}}};
       },
       "must not tolerate the HyperPod unhealthy-node taint"},
      {"reserved volume name", [](Json& s) { s["volumes"] = {{{"name", "dshm"}, {"emptyDir", Json::object()}}}; },
       "reserved"},
      {"negative memory request", [](Json& s) { s["resources"] = {{"requests", {{"memory", "-1Gi"}}}}; },
       "spec.resources.requests.memory"},
      {"negative integer limit", [](Json& s) { s["resources"] = {{"limits", {{"cpu", -4}}}}; },
       "spec.resources.limits.cpu"},
      {"negative shm", [](Json& s) { s["shmSize"] = "-64Gi"; }, "spec.shmSize"},
      {"bad quantity", [](Json& s) { s["resources"] = {{"requests", {{"memory", "lots"}}}}; },
       "spec.resources.requests.memory"},
      // The rules of issue 22 (gang scheduling, topology, pod template, exit codes).
      {"label key", [](Json& s) { s["podMetadata"] = {{"labels", {{"bad key!", "x"}}}}; }, "label keys must be"},
      {"mount of no volume", [](Json& s) { s["volumeMounts"] = {{{"name", "nope"}, {"mountPath", "/x"}}}; },
       "every volumeMounts[].name must name a volume"},
      {"kueue without a queue", [](Json& s) { s["scheduling"] = {{"gang", {{"provider", "kueue"}}}}; },
       "provider kueue needs queueName"},
      {"layer and key", [](Json& s) { s["scheduling"] = {{"topology", {{"layer", 3}, {"topologyKey", "k"}}}}; },
       "exactly one of layer"},
      {"retry without a timeout", [](Json& s) { s["runPolicy"] = {{"schedulingRetry", {{"limit", 2}}}}; },
       "schedulingRetry needs schedulingTimeoutSeconds"},
      {"exit code 2 retried", [](Json& s) { s["faultPolicy"] = {{"retryableExitCodes", {2}}}; },
       "never retried"},
      {"pod template restartPolicy", [](Json& s) { s["podTemplate"] = {{"spec", {{"restartPolicy", "Always"}}}}; },
       "are the operator's"},
      {"pod template account", [](Json& s) { s["podTemplate"] = {{"spec", {{"serviceAccountName", "x"}}}}; },
       "set spec.serviceAccountName"},
      // Issue 35, item 4: conflicts the pod would resolve silently.
      {"masterPort is the metrics port", [](Json& s) { s["masterPort"] = 9400; },
       "masterPort must differ from the trainer's metrics port"},
      {"metrics port moved onto masterPort",
       [](Json& s) { s["env"] = {{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "29500"}}}; },
       "masterPort must differ from the trainer's metrics port"},
      {"trainer port named metrics",
       [](Json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "trainer"}, {"ports", {{{"name", "metrics"}, {"containerPort", 9401}}}}}}}}}};
       },
       "port names rendezvous and metrics are the operator's"},
      {"trainer port on the metrics port",
       [](Json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "trainer"}, {"ports", {{{"name", "m"}, {"containerPort", 9400}}}}}}}}}};
       },
       "must differ from the trainer's metrics port 9400"},
      {"sidecar hostPort is masterPort",
       [](Json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "side"}, {"image", "b"}, {"ports", {{{"containerPort", 8080}, {"hostPort", 29500}}}}}}}}}};
       },
       "must differ from masterPort (the rendezvous port)"},
      {"scheduler name", [](Json& s) { s["scheduling"] = {{"schedulerName", "bad name!"}}; },
       "spec.scheduling.schedulerName"},
      {"priority class name", [](Json& s) { s["scheduling"] = {{"priorityClassName", "Big_One"}}; },
       "spec.scheduling.priorityClassName"},
      // Item 2: a volume that lost its (misspelled, pruned) source would become an emptyDir.
      {"volume without a source", [](Json& s) { s["volumes"] = {{{"name", "fsx"}}}; },
       "a volume needs exactly one volume source"},
      {"volume with two sources",
       [](Json& s) {
         s["volumes"] = {{{"name", "fsx"}, {"emptyDir", Json::object()}, {"persistentVolumeClaim", {{"claimName", "c"}}}}};
       },
       "a volume needs exactly one volume source"},
      {"template volume typed wrong",
       [](Json& s) { s["podTemplate"] = {{"spec", {{"volumes", {{{"name", "v"}, {"emptyDir", {{"medium", 3}}}}}}}}}; },
       "spec.podTemplate.spec.volumes[0].emptyDir.medium"},
      {"template securityContext typed wrong",
       [](Json& s) { s["podTemplate"] = {{"spec", {{"securityContext", {{"runAsUser", "root"}}}}}}; },
       "spec.podTemplate.spec.securityContext.runAsUser"},
  };
  int i = 0;
  for (const Case& c : cases) {
    Json spec = P5Spec();
    c.mutate(spec);
    auto r = Jobs().Create(Job("bad-" + std::to_string(i++), spec));
    ASSERT_FALSE(r.ok()) << c.what << " was accepted";
    EXPECT_EQ(r.status().http_status(), 422) << c.what << ": " << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr(c.needle)) << c.what;
  }
  // The name rule: pods are <name>-node-<rank>, a DNS label.
  auto r = Jobs().Create(Job(std::string(60, 'a'), P5Spec()));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("at most 53 characters"));
  // Quantities the API accepts still pass, and ports that do not clash.
  Json spec = P5Spec();
  spec["podTemplate"] = {{"spec", {{"containers", {{{"name", "trainer"}, {"ports", {{{"name", "stats"}, {"containerPort", 9500}}}}}}}}}};
  spec["scheduling"] = {{"schedulerName", "my-scheduler"}};
  spec["resources"] = {{"requests", {{"cpu", "500m"}, {"memory", 1073741824}}}, {"limits", {{"memory", "1e12"}}}};
  spec["shmSize"] = "256Gi";
  auto ok = Jobs().Create(Job("good-quantities", spec));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

// Issue 35, item 2: volumes, mounts, env sources and the pod template have
// core/v1's structural schemas, so a misspelled field is refused under Strict
// field validation (kubectl's default) and, without it, dropped with a warning
// instead of stored; a volume that lost its only (misspelled) source is refused.
TEST_F(CrdRealKubeTest, MisspelledCoreFieldsAreRefusedOrDropped) {
  Json spec = P5Spec();
  spec["trainerConfig"]["inline"] = "trainer: {max_steps: 1}\nmodel: {sharding_strategy: full_shard}\n";
  spec["volumes"] = {{{"name", "fsx"}, {"persistentVolumeClam", {{"claimName", "fsx-claim"}}}}};
  spec["volumeMounts"] = {{{"name", "fsx"}, {"mountPath", "/fsx"}, {"readOnyl", true}}};
  spec["env"] = {{{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRf", {{"name", "s"}, {"key", "k"}}}}}}};
  spec["podTemplate"] = {{"spec",
                          {{"securityContxt", {{"runAsUser", 1000}}},
                           {"containers", {{{"name", "trainer"}, {"resourcs", {{"limits", {{"cpu", 1}}}}}}}}}}};
  auto strict = CreateWith("Strict", Job("typos", spec));
  ASSERT_FALSE(strict.ok()) << "misspelled fields were accepted under Strict";
  EXPECT_EQ(strict.status().http_status(), 400) << strict.status().ToString();
  for (const char* field : {"spec.volumes[0].persistentVolumeClam", "spec.volumeMounts[0].readOnyl",
                            "spec.env[0].valueFrom.secretKeyRf", "spec.podTemplate.spec.securityContxt",
                            "spec.podTemplate.spec.containers[0].resourcs"}) {
    EXPECT_THAT(strict.status().message(), HasSubstr(std::string("unknown field \"") + field + "\"")) << field;
  }
  // Without Strict the pruned volume has no source left: refused, not an emptyDir.
  auto warn = CreateWith("Warn", Job("typos", spec));
  ASSERT_FALSE(warn.ok()) << "a volume without a source was stored";
  EXPECT_THAT(warn.status().message(), HasSubstr("a volume needs exactly one volume source"));
  // The other typos are dropped (never stored to be lost later), and the correct
  // spellings are kept.
  spec["volumes"] = {{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "fsx-claim"}}}}};
  spec["podTemplate"]["spec"]["securityContext"] = {{"runAsNonRoot", true}};
  auto created = CreateWith("Ignore", Job("typos", spec));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const Json& s = (*created)["spec"];
  EXPECT_EQ(s["volumes"][0]["persistentVolumeClaim"]["claimName"], "fsx-claim");
  EXPECT_FALSE(s["volumeMounts"][0].contains("readOnyl"));
  EXPECT_FALSE(s["env"][0]["valueFrom"].contains("secretKeyRf"));
  EXPECT_FALSE(s["podTemplate"]["spec"].contains("securityContxt"));
  EXPECT_EQ(s["podTemplate"]["spec"]["securityContext"]["runAsNonRoot"], true);
  EXPECT_FALSE(s["podTemplate"]["spec"]["containers"][0].contains("resourcs"));
  // What the operator then reads: the env source it lost is refused naming the field.
  auto meta = ParseObjectMeta((*created)["metadata"]);
  ASSERT_TRUE(meta.ok());
  auto parsed = ParseSpec(s, *meta);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("spec.env[0].valueFrom: needs exactly one source"));
}

// Issue 35, item 4: a quantity the API server would clamp to 2^63-1 in the pod
// is stored (CEL in 1.26 has no quantity library), and the operator refuses
// the job naming the field: ParseSpec of what the server stored.
TEST_F(CrdRealKubeTest, AnOverlargeQuantityFailsTheJobNamingTheField) {
  Json spec = P5Spec();
  spec["trainerConfig"]["inline"] = "trainer: {max_steps: 1}\nmodel: {sharding_strategy: full_shard}\n";
  spec["resources"] = {{"limits", {{"memory", "1e100"}}}};
  auto created = Jobs().Create(Job("huge-memory", spec));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto meta = ParseObjectMeta((*created)["metadata"]);
  ASSERT_TRUE(meta.ok());
  auto parsed = ParseSpec((*created)["spec"], *meta);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("spec.resources.limits.memory: '1e100' is too large"));
}

// Issue 35, item 3: the inline config is written once into <job>-config, so
// changing it is refused once the job runs; a dry run (estimateOnly) may still
// change it, and a configMapRef (read at each attempt) may change.
TEST_F(CrdRealKubeTest, InlineConfigIsImmutableOnceTheJobRuns) {
  ASSERT_TRUE(Jobs().Create(Job("inline", P5Spec())).ok());
  const Json change = {{"spec", {{"trainerConfig", {{"inline", "trainer: {max_steps: 2}\n"}}}}}};
  auto r = Jobs().Patch("inline", change);
  ASSERT_FALSE(r.ok()) << "a changed inline config was accepted";
  EXPECT_EQ(r.status().http_status(), 422);
  EXPECT_THAT(r.status().message(), HasSubstr("trainerConfig.inline is immutable"));
  r = Jobs().Patch("inline", {{"spec", {{"trainerConfig", {{"inline", nullptr}, {"configMapRef", {{"name", "c"}}}}}}}});
  ASSERT_FALSE(r.ok()) << "switching to a configMapRef was accepted";
  EXPECT_THAT(r.status().message(), HasSubstr("trainerConfig.inline is immutable"));
  // The same text again is no change.
  ASSERT_TRUE(Jobs().Patch("inline", {{"spec", {{"trainerConfig", {{"inline", "trainer: {max_steps: 1}\n"}}}}}}).ok());
  // A dry run may change its config, then start.
  Json dry = P5Spec();
  dry["estimateOnly"] = true;
  ASSERT_TRUE(Jobs().Create(Job("dry", dry)).ok());
  r = Jobs().Patch("dry", change);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  r = Jobs().Patch("dry", {{"spec", {{"estimateOnly", false}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(Jobs().Patch("dry", {{"spec", {{"trainerConfig", {{"inline", "x: 1\n"}}}}}}).ok());
  // A configMapRef may name another ConfigMap; the next attempt mounts it.
  Json ref = P5Spec();
  ref["trainerConfig"] = {{"configMapRef", {{"name", "cfg-1"}}}};
  ASSERT_TRUE(Jobs().Create(Job("ref", ref)).ok());
  r = Jobs().Patch("ref", {{"spec", {{"trainerConfig", {{"configMapRef", {{"name", "cfg-2"}}}}}}}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// Every TrainingJob of examples/ (the Kueue, Volcano and plain ones) is accepted
// by the real API server: its CEL rules and OpenAPI schema, not only the C++
// parser that mirrors them (examples/jobs_test).
TEST_F(CrdRealKubeTest, EveryExampleIsAccepted) {
  int checked = 0;
  for (const char* file : {"examples/llama3-1b-b200-volcano.yaml", "examples/llama3-1b-g5.yaml",
                           "examples/llama3-1b-p5.yaml", "examples/llama3-1b-p5en-kueue.yaml",
                           "examples/local-tiny.yaml"}) {
    auto docs = YamlDocumentsToJson(ReadFile(file));
    ASSERT_TRUE(docs.ok()) << file << ": " << docs.status().ToString();
    for (Json doc : *docs) {
      if (doc.value("kind", "") != "TrainingJob") continue;
      doc["metadata"].erase("namespace");
      doc["metadata"]["name"] = "example-" + std::to_string(checked++);
      auto r = Jobs().Create(doc);
      EXPECT_TRUE(r.ok()) << file << ": " << r.status().ToString();
    }
  }
  EXPECT_EQ(checked, 5);
}

// Issue 19, defect 4: `self == oldSelf` on the field ran only when the field
// existed before and after, so removing instanceType and adding nprocPerNode
// was accepted on a running p5 job.
TEST_F(CrdRealKubeTest, ImmutableFieldsCanBeNeitherChangedNorAddedNorRemoved) {
  ASSERT_TRUE(Jobs().Create(Job("p5", P5Spec())).ok());
  struct Case {
    const char* what;
    Json patch;
    const char* needle;
  };
  const std::vector<Case> rejected = {
      {"the issue's patch", {{"spec", {{"instanceType", nullptr}, {"nprocPerNode", 4}}}}, "is immutable"},
      {"remove instanceType", {{"spec", {{"instanceType", nullptr}}}}, "instanceType is immutable"},
      {"change instanceType", {{"spec", {{"instanceType", "ml.p4d.24xlarge"}}}}, "instanceType is immutable"},
      {"add nprocPerNode", {{"spec", {{"nprocPerNode", 4}}}}, "nprocPerNode is immutable"},
      {"add gpusPerNode", {{"spec", {{"gpusPerNode", 8}}}}, "gpusPerNode is immutable"},
      {"add efaPerNode", {{"spec", {{"efaPerNode", 1}}}}, "efaPerNode is immutable"},
      {"change nodes", {{"spec", {{"nodes", 3}}}}, "nodes is immutable"},
      {"remove nodes (defaults to 1)", {{"spec", {{"nodes", nullptr}}}}, "nodes is immutable"},
  };
  for (const Case& c : rejected) {
    auto r = Jobs().Patch("p5", c.patch);
    ASSERT_FALSE(r.ok()) << c.what << " was accepted";
    EXPECT_EQ(r.status().http_status(), 422) << c.what;
    EXPECT_THAT(r.status().message(), HasSubstr(c.needle)) << c.what;
  }
  auto job = Jobs().Get("p5");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["spec"]["instanceType"], "ml.p5.48xlarge");
  EXPECT_EQ((*job)["spec"]["nodes"], 2);
  EXPECT_FALSE((*job)["spec"].contains("nprocPerNode"));
  // What may change still does.
  auto patched = Jobs().Patch("p5", {{"spec", {{"image", "img:2"}, {"runPolicy", {{"suspend", true}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["spec"]["image"], "img:2");
  // A CPU job's fields are immutable the same way once set.
  Json cpu = {{"image", "img:1"}, {"nodes", 1}, {"gpusPerNode", 0}, {"nprocPerNode", 2},
              {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\n"}}}};
  ASSERT_TRUE(Jobs().Create(Job("cpu", cpu)).ok());
  auto r = Jobs().Patch("cpu", {{"spec", {{"gpusPerNode", nullptr}, {"nprocPerNode", nullptr}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is immutable"));
}

}  // namespace
}  // namespace hypertrain::api
