// The TrainingJob examples are valid end to end: CRD schema (as the API server
// validates and defaults), the operator's parser, the pod builders, and the
// trainer's own config parser for the inline config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "operator/api/crd_schema.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "operator/controller/builders.h"
#include "runtime/config/config.h"

namespace hypertrain {
namespace {

using nlohmann::json;
using ::testing::IsEmpty;

json Crd() {
  auto crd = api::YamlFileToJson("crds/trainingjobs.hypertrain.dev.yaml");
  EXPECT_TRUE(crd.ok());
  return crd.ok() ? (*crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] : json();
}

std::map<std::string, json> Jobs() {
  std::map<std::string, json> out;
  for (const auto& e : std::filesystem::directory_iterator("examples")) {
    if (e.path().extension() != ".yaml") continue;
    auto doc = api::YamlFileToJson(e.path().string());
    EXPECT_TRUE(doc.ok()) << e.path();
    if (doc.ok() && doc->is_object() && doc->value("kind", "") == "TrainingJob") {
      out[e.path().filename().string()] = *doc;
    }
  }
  return out;
}

std::map<std::string, std::string> Env(const json& pod) {
  std::map<std::string, std::string> m;
  for (const json& e : pod["spec"]["containers"][0]["env"]) m[e["name"]] = e.value("value", "<ref>");
  return m;
}

struct Expected {
  int nodes;
  int gpus;
  int efa;
  bool rdma;
  std::string instance;
};

TEST(ExampleJobsTest, AllExamplesAreValidEverywhere) {
  const json schema = Crd();
  const std::map<std::string, Expected> expected = {
      {"llama3-1b-p5.yaml", {2, 8, 32, true, "ml.p5.48xlarge"}},
      {"llama3-1b-g5.yaml", {4, 8, 1, false, "ml.g5.48xlarge"}},
  };
  auto jobs = Jobs();
  for (const auto& [file, _] : expected) ASSERT_TRUE(jobs.count(file)) << "missing example " << file;

  for (auto& [file, obj] : jobs) {
    SCOPED_TRACE(file);
    json defaulted = obj;
    EXPECT_THAT(api::ValidateAgainstSchema(schema, &defaulted), IsEmpty());
    auto meta = api::ParseObjectMeta(defaulted["metadata"]);
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    api::ObjectMeta m = *meta;
    m.uid = "uid";
    auto spec = api::ParseSpec(defaulted["spec"], m);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();

    // The trainer accepts the inline config as it is.
    ASSERT_TRUE(spec->trainer_config.inline_yaml.has_value());
    auto trainer = config::ParseTrainConfig(*spec->trainer_config.inline_yaml, {}, file);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    EXPECT_THAT(trainer->unknown_keys, IsEmpty());
    EXPECT_EQ(trainer->num_nodes, spec->nodes);
    EXPECT_EQ(trainer->devices, spec->nproc_per_node);
    EXPECT_EQ(trainer->checkpoint_dir, spec->checkpoint_dir);

    for (int rank = 0; rank < spec->nodes; ++rank) {
      auto pod = controller::BuildPod(m, *spec, controller::PodOptions{rank, 0, {}});
      ASSERT_TRUE(pod.ok()) << pod.status().ToString();
      auto env = Env(*pod);
      EXPECT_EQ(env["NODE_RANK"], std::to_string(rank));
      EXPECT_EQ(env["WORLD_SIZE"], std::to_string(spec->WorldSize()));
    }

    auto it = expected.find(file);
    if (it == expected.end()) continue;
    const Expected& want = it->second;
    EXPECT_EQ(spec->instance_type, want.instance);
    EXPECT_EQ(spec->nodes, want.nodes);
    EXPECT_EQ(spec->gpus_per_node, want.gpus);
    EXPECT_EQ(spec->efa_per_node, want.efa);
    EXPECT_EQ(trainer->shape, "1b");
    auto pod = controller::BuildPod(m, *spec, controller::PodOptions{0, 0, {}});
    ASSERT_TRUE(pod.ok());
    const json& res = (*pod)["spec"]["containers"][0]["resources"];
    EXPECT_EQ(res["limits"]["nvidia.com/gpu"], std::to_string(want.gpus));
    EXPECT_EQ(res["limits"]["vpc.amazonaws.com/efa"], std::to_string(want.efa));
    EXPECT_EQ(res["limits"]["hugepages-2Mi"], "5120Mi");
    auto env = Env(*pod);
    EXPECT_EQ(env["FI_PROVIDER"], "efa");
    EXPECT_EQ(env.count("FI_EFA_USE_DEVICE_RDMA"), want.rdma ? 1u : 0u);
    EXPECT_EQ((*pod)["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"], want.instance);
  }
}

}  // namespace
}  // namespace hypertrain
