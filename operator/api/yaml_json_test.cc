#include "operator/api/yaml_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hypertrain::api {
namespace {

using nlohmann::json;

TEST(YamlJsonTest, CoreSchemaScalars) {
  auto r = YamlToJson(R"(
i: 42
neg: -7
f: 2.5
e: 1e3
t: true
F: False
n: null
tilde: ~
empty:
s: hello
q: "42"
sq: 'true'
ver: 1.2.3
quantity: 64Gi
list: [1, "2", x]
map: {a: {b: 1}}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json& j = *r;
  EXPECT_EQ(j["i"], 42);
  EXPECT_TRUE(j["i"].is_number_integer());
  EXPECT_EQ(j["neg"], -7);
  EXPECT_EQ(j["f"], 2.5);
  EXPECT_EQ(j["e"], 1000.0);
  EXPECT_EQ(j["t"], true);
  EXPECT_EQ(j["F"], false);
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_TRUE(j["tilde"].is_null());
  EXPECT_TRUE(j["empty"].is_null());
  EXPECT_EQ(j["s"], "hello");
  EXPECT_EQ(j["q"], "42");
  EXPECT_EQ(j["sq"], "true");
  EXPECT_EQ(j["ver"], "1.2.3");
  EXPECT_EQ(j["quantity"], "64Gi");
  EXPECT_EQ(j["list"], json({1, "2", "x"}));
  EXPECT_EQ(j["map"]["a"]["b"], 1);
}

TEST(YamlJsonTest, BlockScalarsStayStrings) {
  auto r = YamlToJson("inline: |\n  trainer:\n    max_steps: 5\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["inline"], "trainer:\n  max_steps: 5\n");
}

TEST(YamlJsonTest, MultiDocumentAndErrors) {
  auto docs = YamlDocumentsToJson("a: 1\n---\n# only a comment\n---\nb: 2\n");
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1]["b"], 2);
  auto bad = YamlToJson("a: [1, 2\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("not valid YAML"));
  EXPECT_FALSE(YamlFileToJson("/nonexistent/x.yaml").ok());
}

}  // namespace
}  // namespace hypertrain::api
