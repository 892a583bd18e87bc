// One row per HyperPod GPU instance type: the pod a one-node job on that type
// gets. Expected figures are AWS's (aws/sagemaker-hyperpod-cli
// INSTANCE_RESOURCES; for ml.p6e-gb200.36xlarge the EC2 page's 8 x 400 Gbps
// EFA cards, see operator/api/instance_types.cc), written out here on their own
// so a typo in the operator's table fails the row.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "operator/api/instance_types.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;

struct Row {
  std::string type;
  int gpus;
  int efa;
  bool rdma;
};

const std::vector<Row>& Rows() {
  static const std::vector<Row> k = {
      {"ml.g5.xlarge", 1, 0, false},     {"ml.g5.2xlarge", 1, 0, false},    {"ml.g5.4xlarge", 1, 0, false},
      {"ml.g5.8xlarge", 1, 1, false},    {"ml.g5.12xlarge", 4, 1, false},   {"ml.g5.16xlarge", 1, 1, false},
      {"ml.g5.24xlarge", 4, 1, false},   {"ml.g5.48xlarge", 8, 1, false},   {"ml.g6.xlarge", 1, 0, false},
      {"ml.g6.2xlarge", 1, 0, false},    {"ml.g6.4xlarge", 1, 0, false},    {"ml.g6.8xlarge", 1, 1, false},
      {"ml.g6.12xlarge", 4, 1, false},   {"ml.g6.16xlarge", 1, 1, false},   {"ml.g6.24xlarge", 4, 1, false},
      {"ml.g6.48xlarge", 8, 1, false},   {"ml.gr6.4xlarge", 1, 0, false},   {"ml.gr6.8xlarge", 1, 1, false},
      {"ml.g6e.xlarge", 1, 0, false},    {"ml.g6e.2xlarge", 1, 0, false},   {"ml.g6e.4xlarge", 1, 0, false},
      {"ml.g6e.8xlarge", 1, 1, false},   {"ml.g6e.12xlarge", 4, 1, false},  {"ml.g6e.16xlarge", 1, 1, false},
      {"ml.g6e.24xlarge", 4, 2, false},  {"ml.g6e.48xlarge", 8, 4, false},  {"ml.g7e.2xlarge", 1, 0, false},
      {"ml.g7e.4xlarge", 1, 0, false},   {"ml.g7e.8xlarge", 1, 1, false},   {"ml.g7e.12xlarge", 2, 1, false},
      {"ml.g7e.24xlarge", 4, 2, false},  {"ml.g7e.48xlarge", 8, 4, false},  {"ml.p4d.24xlarge", 8, 4, true},
      {"ml.p4de.24xlarge", 8, 4, true},  {"ml.p5.4xlarge", 1, 1, true},     {"ml.p5.48xlarge", 8, 32, true},
      {"ml.p5e.48xlarge", 8, 32, true},  {"ml.p5en.48xlarge", 8, 16, true}, {"ml.p6-b200.48xlarge", 8, 8, true},
      {"ml.p6-b300.48xlarge", 8, 16, true}, {"ml.p6e-gb200.36xlarge", 4, 8, true},
  };
  return k;
}

class InstancePodTest : public ::testing::TestWithParam<Row> {};

std::string EnvValue(const json& env, const std::string& name) {
  for (const json& e : env) {
    if (e["name"] == name) return e.value("value", "");
  }
  return "<unset>";
}

TEST_P(InstancePodTest, ResourcesAndEfaEnvironment) {
  const Row& row = GetParam();
  api::ObjectMeta meta;
  meta.name = "j";
  meta.namespace_ = "ns";
  meta.uid = "u";
  const json spec_json = {{"image", "hypertrain:1"},
                          {"instanceType", row.type},
                          {"trainerConfig", {{"inline", "trainer: {max_steps: 1}\nmodel: {}\n"}}}};
  auto spec = api::ParseSpec(spec_json, meta);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->warnings.empty());
  auto pod = BuildPod(meta, *spec, PodOptions{});
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  const json& c = (*pod)["spec"]["containers"][0];
  const json& limits = c["resources"]["limits"];
  const json& requests = c["resources"]["requests"];
  EXPECT_EQ(limits["nvidia.com/gpu"], std::to_string(row.gpus));
  EXPECT_EQ(requests["nvidia.com/gpu"], std::to_string(row.gpus));
  EXPECT_EQ((*pod)["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"], row.type);
  const json& env = c["env"];
  EXPECT_EQ(EnvValue(env, "NPROC_PER_NODE"), std::to_string(row.gpus));
  EXPECT_EQ(EnvValue(env, "NCCL_SOCKET_IFNAME"), "^lo");
  if (row.efa > 0) {
    EXPECT_EQ(limits["vpc.amazonaws.com/efa"], std::to_string(row.efa));
    EXPECT_EQ(requests["vpc.amazonaws.com/efa"], std::to_string(row.efa));
    EXPECT_EQ(limits["hugepages-2Mi"], "5120Mi");
    EXPECT_EQ(requests["hugepages-2Mi"], "5120Mi");
    EXPECT_EQ(EnvValue(env, "FI_PROVIDER"), "efa");
    EXPECT_EQ(EnvValue(env, "FI_EFA_FORK_SAFE"), "1");
  } else {
    EXPECT_FALSE(limits.contains("vpc.amazonaws.com/efa"));
    EXPECT_FALSE(limits.contains("hugepages-2Mi"));
    EXPECT_EQ(EnvValue(env, "FI_PROVIDER"), "<unset>");
  }
  EXPECT_EQ(EnvValue(env, "FI_EFA_USE_DEVICE_RDMA"), row.rdma && row.efa > 0 ? "1" : "<unset>");
}

INSTANTIATE_TEST_SUITE_P(EveryType, InstancePodTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           std::string n = info.param.type.substr(3);
                           for (char& ch : n) {
                             if (ch == '.' || ch == '-') ch = '_';
                           }
                           return n;
                         });

TEST(InstanceTableTest, TheTableHasExactlyTheseRows) {
  std::set<std::string> expected, table;
  for (const Row& r : Rows()) expected.insert(r.type);
  for (const api::InstanceType& t : api::KnownInstanceTypes()) table.insert(t.name);
  EXPECT_EQ(table, expected);
}

}  // namespace
}  // namespace hypertrain::controller
