// Issue 35, items 2 and 4: what the API server would drop or clamp, and ports
// that clash with the operator's, are refused by ParseSpec naming the field
// (the same cases as //crds:crd_realkube_test, which sends them to the real
// kube-apiserver).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "operator/api/training_job.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

ObjectMeta Meta() {
  ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  return m;
}

json Spec() {
  return {{"image", "hypertrain:1"},
          {"instanceType", "ml.p5.48xlarge"},
          {"nodes", 2},
          {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\nmodel: {sharding_strategy: full_shard}\n"}}}};
}

json Sidecar(json ports) { return {{"name", "side"}, {"image", "busybox"}, {"ports", std::move(ports)}}; }

struct Case {
  const char* what;
  std::function<void(json&)> mutate;
  const char* field;  // the message starts "<field>: "
  const char* why;
};

TEST(ConflictsTest, EachIsRefusedNamingTheField) {
  const std::vector<Case> cases = {
      {"masterPort is the metrics port", [](json& s) { s["masterPort"] = 9400; }, "spec.masterPort",
       "metrics port"},
      {"metrics port moved onto masterPort",
       [](json& s) { s["env"] = {{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "29500"}}}; }, "spec.masterPort",
       "metrics port"},
      {"trainer port named metrics",
       [](json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "trainer"}, {"ports", {{{"name", "metrics"}, {"containerPort", 9401}}}}}}}}}};
       },
       "spec.podTemplate.spec.containers[0].ports[0].name", "operator's port name"},
      {"trainer port on the metrics port",
       [](json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "trainer"}, {"ports", {{{"name", "m"}, {"containerPort", 9400}}}}}}}}}};
       },
       "spec.podTemplate.spec.containers[0].ports[0].containerPort", "metrics port"},
      {"sidecar hostPort is masterPort",
       [](json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {Sidecar({{{"containerPort", 8080}, {"hostPort", 29500}}})}}}}};
       },
       "spec.podTemplate.spec.containers[0].ports[0].hostPort", "rendezvous port"},
      {"sidecar port is masterPort",
       [](json& s) { s["podTemplate"] = {{"spec", {{"containers", {Sidecar({{{"containerPort", 29500}}})}}}}}; },
       "spec.podTemplate.spec.containers[0].ports[0].containerPort", "rendezvous port"},
      {"scheduler name", [](json& s) { s["scheduling"] = {{"schedulerName", "bad name!"}}; },
       "spec.scheduling.schedulerName", "DNS-1123 subdomain"},
      {"priority class name", [](json& s) { s["scheduling"] = {{"priorityClassName", "Big_One"}}; },
       "spec.scheduling.priorityClassName", "DNS-1123 subdomain"},
      {"memory 1e100", [](json& s) { s["resources"] = {{"limits", {{"memory", "1e100"}}}}; },
       "spec.resources.limits.memory", "too large"},
      {"cpu in exa", [](json& s) { s["resources"] = {{"requests", {{"cpu", "9E"}}}}; }, "spec.resources.requests.cpu",
       "too large"},
      {"shm 20 digits", [](json& s) { s["shmSize"] = "99999999999999999999"; }, "spec.shmSize", "too large"},
      {"template memory 1e100",
       [](json& s) {
         s["podTemplate"] = {{"spec", {{"containers", {{{"name", "side"}, {"image", "b"}, {"resources", {{"limits", {{"memory", "1e100"}}}}}}}}}}};
       },
       "spec.podTemplate.spec.containers[0].resources.limits.memory", "too large"},
      {"misspelled volume source",
       [](json& s) { s["volumes"] = {{{"name", "fsx"}, {"persistentVolumeClam", {{"claimName", "fsx-claim"}}}}}; },
       "spec.volumes[0].persistentVolumeClam", "not a core/v1 volume source"},
      {"volume without a source (the schema dropped it)", [](json& s) { s["volumes"] = {{{"name", "fsx"}}}; },
       "spec.volumes[0]", "needs a volume source"},
  };
  for (const Case& c : cases) {
    json spec = Spec();
    c.mutate(spec);
    auto r = ParseSpec(spec, Meta());
    ASSERT_FALSE(r.ok()) << c.what << " was accepted";
    EXPECT_THAT(r.status().message(), HasSubstr(std::string(c.field) + ": ")) << c.what;
    EXPECT_THAT(r.status().message(), HasSubstr(c.why)) << c.what;
  }
}

TEST(ConflictsTest, WhatFitsStillPasses) {
  json spec = Spec();
  spec["masterPort"] = 9400;
  spec["env"] = {{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "9500"}}};  // moved away: 9400 is free
  spec["resources"] = {{"requests", {{"cpu", "500m"}, {"memory", 1073741824}}}, {"limits", {{"memory", "1e12"}}}};
  spec["shmSize"] = "8Pi";
  spec["scheduling"] = {{"schedulerName", "my-scheduler.example.com"}, {"priorityClassName", "high"}};
  spec["podTemplate"] = {
      {"spec", {{"containers", {Sidecar({{{"name", "http"}, {"containerPort", 8080}}}),
                                {{"name", "trainer"}, {"ports", {{{"name", "stats"}, {"containerPort", 9401}}}}}}}}}};
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // With the metrics port turned off, its number is free as well.
  spec = Spec();
  spec["env"] = {{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "0"}}};
  spec["podTemplate"] = {{"spec", {{"containers", {Sidecar({{{"containerPort", 9400}, {"hostPort", 0}}})}}}}};
  r = ParseSpec(spec, Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

}  // namespace
}  // namespace hypertrain::api
