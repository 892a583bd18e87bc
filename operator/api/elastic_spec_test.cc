// spec.elastic: the size range, its defaults, and the sizes that keep the
// trainer config's global batch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/training_job.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ObjectMeta Meta() {
  ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  m.uid = "uid-1";
  return m;
}

// `nodes` x 8 GPUs, a 60 s scheduling timeout, the model section given.
json Spec(int nodes, json elastic, const std::string& model = "{}") {
  return {{"image", "hypertrain:1"},
          {"instanceType", "ml.p5.48xlarge"},
          {"nodes", nodes},
          {"runPolicy", {{"schedulingTimeoutSeconds", 60}}},
          {"elastic", elastic},
          {"trainerConfig", {{"inline", "trainer: {max_steps: 10}\nmodel: " + model + "\n"}}}};
}

std::string Error(const json& spec) {
  auto r = ParseSpec(spec, Meta());
  EXPECT_FALSE(r.ok()) << spec.dump();
  return r.ok() ? "" : r.status().message();
}

Elastic Ok(const json& spec) {
  auto r = ParseSpec(spec, Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->elastic) {
    ADD_FAILURE() << "no spec.elastic";
    return {};
  }
  return *r->elastic;
}

TEST(ElasticSpec, AbsentMeansAFixedSize) {
  json spec = Spec(4, nullptr);
  spec.erase("elastic");
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->elastic.has_value());
}

TEST(ElasticSpec, DefaultsAndTheSizesThatKeepTheBatch) {
  Elastic e = Ok(Spec(4, {{"minNodes", 1}}));
  EXPECT_EQ(e.min_nodes, 1);
  EXPECT_EQ(e.max_nodes, 4);  // nodes
  EXPECT_EQ(e.check_interval_seconds, 60);
  EXPECT_EQ(e.min_resize_interval_seconds, 600);
  EXPECT_THAT(e.sizes, ElementsAre(1, 2, 4));  // 3 does not divide 1 x 4 micro-batches
  EXPECT_EQ(e.LargestSizeAtMost(3), 2);
  EXPECT_EQ(e.LargestSizeAtMost(9), 4);
  EXPECT_EQ(e.LargestSizeAtMost(0), 0);

  // With 3 micro-batches per step, 3 nodes keep the batch (4 per rank), 2 and 4 too.
  e = Ok(Spec(4, {{"minNodes", 2}, {"maxNodes", 6}, {"checkIntervalSeconds", 5}, {"minResizeIntervalSeconds", 0}},
              "{grad_accumulation_steps: 3}"));
  EXPECT_THAT(e.sizes, ElementsAre(2, 3, 4, 6));
  EXPECT_EQ(e.check_interval_seconds, 5);
  EXPECT_EQ(e.min_resize_interval_seconds, 0);
}

TEST(ElasticSpec, ShardGroupsAcrossNodesLimitTheSizes) {
  // A shard group of 16 ranks spans two 8-GPU nodes: an odd node count cannot run it.
  Elastic e = Ok(Spec(4, {{"minNodes", 2}}, "{grad_accumulation_steps: 3, shard_degree: 16}"));
  EXPECT_THAT(e.sizes, ElementsAre(2, 4));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 1}}, "{shard_degree: 16}")),
              HasSubstr("spec.elastic.minNodes: 1 nodes cannot keep the global batch of spec.nodes 4: "
                        "model.shard_degree on 1 nodes: 16 does not divide the world size 8; sizes that can: 2, 4"));
}

TEST(ElasticSpec, ErrorsNameTheField) {
  EXPECT_THAT(Error(Spec(4, json::object())), HasSubstr("spec.elastic.minNodes: required"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 5}})), HasSubstr("spec.elastic.minNodes: 5 exceeds spec.nodes 4"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 0}})), HasSubstr("spec.elastic.minNodes"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 1}, {"maxNodes", 3}})),
              HasSubstr("spec.elastic.maxNodes: 3 is less than spec.nodes 4"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 1}, {"minNodes_", 1}})), HasSubstr("spec.elastic.minNodes_: unknown field"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 1}, {"checkIntervalSeconds", 0}})),
              HasSubstr("spec.elastic.checkIntervalSeconds"));
  EXPECT_THAT(Error(Spec(4, {{"minNodes", 3}})),
              HasSubstr("spec.elastic.minNodes: 3 nodes cannot keep the global batch of spec.nodes 4: "
                        "grad_accumulation_steps 1 x 4 desired nodes = 4 micro-batches per rank slot do not split "
                        "evenly over 3 nodes; sizes that can: 4"));
  EXPECT_THAT(Error(Spec(2, {{"minNodes", 1}, {"maxNodes", 3}})), HasSubstr("spec.elastic.maxNodes: 3 nodes cannot"));
  json no_timeout = Spec(4, {{"minNodes", 2}});
  no_timeout.erase("runPolicy");
  EXPECT_THAT(Error(no_timeout), HasSubstr("spec.elastic: needs spec.runPolicy.schedulingTimeoutSeconds"));
}

TEST(ElasticSpec, AConfigMapConfigIsAssumedToUseTheDefaults) {
  json spec = Spec(4, {{"minNodes", 2}});
  spec["trainerConfig"] = {{"configMapRef", {{"name", "cfg"}}}};
  EXPECT_THAT(Ok(spec).sizes, ElementsAre(2, 4));
  spec["elastic"]["minNodes"] = 3;
  EXPECT_THAT(Error(spec), HasSubstr("the trainer config is in a ConfigMap the operator does not read: it assumes "
                                     "grad_accumulation_steps 1"));
}

}  // namespace
}  // namespace hypertrain::api
