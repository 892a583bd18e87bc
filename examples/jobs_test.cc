// The TrainingJob examples are valid end to end: CRD schema (as the API server
// validates and defaults), the operator's parser, the pod builders, and the
// trainer's own config parser for the inline config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include <fstream>

#include <filesystem>
#include <map>

#include "operator/api/crd_schema.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "runtime/launch/env.h"
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
      {"llama3-1b-p5en-kueue.yaml", {2, 8, 16, true, "ml.p5en.48xlarge"}},
      {"llama3-1b-b200-volcano.yaml", {4, 8, 8, true, "ml.p6-b200.48xlarge"}},
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

TEST(ExampleJobsTest, GangExamplesCarryTheirProvidersMarks) {
  auto jobs = Jobs();
  api::ObjectMeta m;
  m.name = "j";
  m.namespace_ = "ns";
  m.uid = "0123456789";
  auto spec = api::ParseSpec(jobs.at("llama3-1b-p5en-kueue.yaml")["spec"], m);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto pod = controller::BuildPod(m, *spec, controller::PodOptions{1, 0, {}});
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "hyperpod-ns-ml-team-localqueue");
  EXPECT_EQ((*pod)["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"],
            "topology.k8s.aws/network-node-layer-3");
  EXPECT_EQ((*pod)["spec"]["schedulingGates"][0]["name"], "kueue.x-k8s.io/admission");

  spec = api::ParseSpec(jobs.at("llama3-1b-b200-volcano.yaml")["spec"], m);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  pod = controller::BuildPod(m, *spec, controller::PodOptions{1, 0, {}});
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"]["schedulerName"], "volcano");
  EXPECT_EQ((*pod)["spec"]["containers"].size(), 2u);
  EXPECT_EQ((*pod)["spec"]["imagePullSecrets"][0]["name"], "registry-credentials");
  const json pg = controller::BuildPodGroup(m, *spec);
  EXPECT_EQ(pg["spec"]["minMember"], 4);
  EXPECT_EQ(pg["spec"]["queue"], "research");
  EXPECT_EQ(pg["spec"]["minResources"]["nvidia.com/gpu"], "32");
}

// An interop example: a ConfigMap with the trainer config, then the foreign
// job (kind `kind`); the parsed trainer config goes to *trainer.
void LoadInteropExample(const std::string& file, const std::string& kind, json* job,
                        config::TrainConfig* trainer) {
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  std::stringstream text;
  text << in.rdbuf();
  auto docs = api::YamlDocumentsToJson(text.str());
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 2u);
  const json& cm = (*docs)[0];
  ASSERT_EQ(cm["kind"], "ConfigMap");
  ASSERT_EQ((*docs)[1]["kind"], kind);
  *job = (*docs)[1];
  auto parsed = config::ParseTrainConfig(cm["data"]["config.yaml"].get<std::string>(), {}, file);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(parsed->unknown_keys, IsEmpty());
  *trainer = *parsed;
}

// The trainer under Kubeflow's PyTorchJob: what each pod's environment makes
// the launcher start is the world the trainer config describes.
TEST(ExampleJobsTest, KubeflowPyTorchJobExampleIsConsistent) {
  json pj;
  config::TrainConfig tc;
  ASSERT_NO_FATAL_FAILURE(LoadInteropExample("examples/interop/kubeflow-pytorchjob.yaml", "PyTorchJob", &pj, &tc));
  const config::TrainConfig* trainer = &tc;

  const json& replicas = pj["spec"]["pytorchReplicaSpecs"];
  const int pods = replicas["Master"]["replicas"].get<int>() + replicas["Worker"]["replicas"].get<int>();
  EXPECT_EQ(pods, trainer->num_nodes);
  for (const char* type : {"Master", "Worker"}) {
    const json& c = replicas[type]["template"]["spec"]["containers"][0];
    const std::vector<std::string> cmd = c["command"];
    ASSERT_GE(cmd.size(), 6u);
    EXPECT_EQ(cmd[0], "hypertrain");
    EXPECT_EQ(cmd[1], "launch");
    ASSERT_EQ(cmd[2], "--nproc-per-node");
    const int nproc = std::stoi(cmd[3]);
    EXPECT_EQ(nproc, trainer->devices);
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], nproc);
    // Kubeflow: MASTER_ADDR <job>-master-0, WORLD_SIZE = pods, RANK = pod index (master 0).
    for (int index = 0; index < pods; ++index) {
      const std::map<std::string, std::string> env = {{"MASTER_ADDR", pj["metadata"]["name"].get<std::string>() + "-master-0"},
                                                      {"MASTER_PORT", "23456"},
                                                      {"WORLD_SIZE", std::to_string(pods)},
                                                      {"RANK", std::to_string(index)},
                                                      {"PYTHONUNBUFFERED", "0"}};
      auto node = launch::ParseNodeEnv([&](const char* k) -> const char* {
        auto it = env.find(k);
        return it == env.end() ? nullptr : it->second.c_str();
      });
      ASSERT_TRUE(node.ok()) << node.status().ToString();
      EXPECT_EQ(node->nnodes, trainer->num_nodes);
      EXPECT_EQ(node->node_rank, index);
      auto local = launch::LocalWorldSize(*node, nproc);
      ASSERT_TRUE(local.ok()) << local.status().ToString();
      EXPECT_EQ(*local * node->nnodes, trainer->num_nodes * trainer->devices);
    }
  }
}

// The trainer under HyperPod's HyperPodPyTorchJob: hyperpodrun starts
// `hypertrain train` as its worker; every rank's torchrun environment parses
// to the world the trainer config describes.
TEST(ExampleJobsTest, HyperPodPyTorchJobExampleIsConsistent) {
  json hj;
  config::TrainConfig tc;
  ASSERT_NO_FATAL_FAILURE(
      LoadInteropExample("examples/interop/hyperpod-pytorchjob.yaml", "HyperPodPyTorchJob", &hj, &tc));
  ASSERT_EQ(hj["apiVersion"], "sagemaker.amazonaws.com/v1");
  const config::TrainConfig* trainer = &tc;

  const int nproc = std::stoi(hj["spec"]["nprocPerNode"].get<std::string>());
  EXPECT_EQ(nproc, trainer->devices);
  ASSERT_EQ(hj["spec"]["replicaSpecs"].size(), 1u);
  const json& spec = hj["spec"]["replicaSpecs"][0];
  const int nodes = spec["replicas"].get<int>();
  EXPECT_EQ(nodes, trainer->num_nodes);
  const json& c = spec["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], nproc);
  const std::vector<std::string> cmd = c["command"];
  ASSERT_FALSE(cmd.empty());
  EXPECT_EQ(cmd[0], "hyperpodrun");
  const auto at = [&](const std::string& s) { return std::find(cmd.begin(), cmd.end(), s) - cmd.begin(); };
  EXPECT_LT(at("--nnodes=" + std::to_string(nodes)), static_cast<long>(cmd.size()));
  EXPECT_LT(at("--nproc-per-node=" + std::to_string(nproc)), static_cast<long>(cmd.size()));
  const long no_python = at("--no-python");
  ASSERT_LT(no_python + 3, static_cast<long>(cmd.size())) << "hypertrain is a binary: torchrun's --no-python";
  EXPECT_EQ(cmd[no_python + 1], "hypertrain");
  EXPECT_EQ(cmd[no_python + 2], "train");
  // What the agent gives each worker (torchrun's names; no NODE_RANK).
  for (int node = 0; node < nodes; ++node) {
    for (int local = 0; local < nproc; ++local) {
      const int rank = node * nproc + local;
      const std::map<std::string, std::string> env = {
          {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"WORLD_SIZE", std::to_string(nodes * nproc)}, {"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
          {"GROUP_RANK", std::to_string(node)}, {"GROUP_WORLD_SIZE", std::to_string(nodes)},
          {"NNODES", std::to_string(nodes)}, {"NPROC_PER_NODE", std::to_string(nproc)}};
      auto r = launch::ParseRankEnv(
          [&](const char* k) -> const char* {
            auto it = env.find(k);
            return it == env.end() ? nullptr : it->second.c_str();
          },
          /*require_rank_vars=*/true);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->node.node_rank, node);
      EXPECT_EQ(r->world_size, trainer->num_nodes * trainer->devices);
      EXPECT_EQ(r->node.StorePort(), 29501);
    }
  }
}

}  // namespace
}  // namespace hypertrain
