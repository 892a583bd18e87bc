#include "localcluster/apiserver/patch.h"

#include <gtest/gtest.h>

namespace kubelocal {
namespace {

TEST(Patch, ContentTypes) {
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json"), PatchType::kMerge);
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json; charset=utf-8"), PatchType::kJson);
  EXPECT_EQ(*PatchTypeFromContentType("application/strategic-merge-patch+json"), PatchType::kStrategic);
  EXPECT_EQ(*PatchTypeFromContentType("application/apply-patch+yaml"), PatchType::kApply);
  auto bad = PatchTypeFromContentType("application/json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(HttpCode(bad.status()), 415);
}

TEST(Patch, MergePatchRemovesNulls) {
  json t = {{"a", 1}, {"b", {{"c", 2}, {"d", 3}}}, {"l", {1, 2}}};
  auto r = ApplyPatch(t, PatchType::kMerge, R"({"b":{"c":null,"e":4},"l":[3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, json::parse(R"({"a":1,"b":{"d":3,"e":4},"l":[3]})"));
}

TEST(Patch, JsonPatchOpsAndFailures) {
  json t = {{"a", {{"b", 1}}}, {"l", {1, 2}}};
  auto r = ApplyPatch(t, PatchType::kJson,
                      R"([{"op":"test","path":"/a/b","value":1},{"op":"replace","path":"/a/b","value":5},
                          {"op":"add","path":"/l/-","value":3},{"op":"remove","path":"/l/0"}])");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, json::parse(R"({"a":{"b":5},"l":[2,3]})"));
  auto failed = ApplyPatch(t, PatchType::kJson, R"([{"op":"test","path":"/a/b","value":9}])");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(HttpCode(failed.status()), 422);
  EXPECT_FALSE(ApplyPatch(t, PatchType::kJson, R"({"op":"add"})").ok());
  EXPECT_FALSE(ApplyPatch(t, PatchType::kMerge, "{not json").ok());
}

TEST(Patch, StrategicMergesListsByKey) {
  json pod = json::parse(R"({"spec":{"containers":[{"name":"a","image":"i1","env":[{"name":"X","value":"1"}]},
                                                   {"name":"b","image":"i2"}]},
                             "metadata":{"finalizers":["f1","f2"]}})");
  auto r = ApplyPatch(pod, PatchType::kStrategic, R"({
    "$setElementOrder/containers":[{"name":"b"},{"name":"a"}],
    "spec":{"containers":[{"name":"a","image":"i3","env":[{"name":"Y","value":"2"}]},{"name":"c","image":"i4"}]},
    "metadata":{"$deleteFromPrimitiveList/finalizers":["f1"]}})");
  ASSERT_TRUE(r.ok());
  const json& cs = (*r)["spec"]["containers"];
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[0]["name"], "a");
  EXPECT_EQ(cs[0]["image"], "i3");
  EXPECT_EQ(cs[0]["env"].size(), 2u);  // merged by name
  EXPECT_EQ(cs[1]["image"], "i2");
  EXPECT_EQ(cs[2]["name"], "c");
  EXPECT_EQ((*r)["metadata"]["finalizers"], json({"f2"}));
  auto del = ApplyPatch(pod, PatchType::kStrategic,
                        R"({"spec":{"containers":[{"name":"b","$patch":"delete"}]}})");
  ASSERT_TRUE(del.ok());
  EXPECT_EQ((*del)["spec"]["containers"].size(), 1u);
}

TEST(Patch, ApplyYaml) {
  json t = {{"metadata", {{"name", "x"}}}, {"spec", {{"a", 1}}}};
  auto r = ApplyPatch(t, PatchType::kApply,
                      "apiVersion: v1\nkind: ConfigMap\nspec:\n  b: \"2\"\n  c: 3\n  d: true\n  e: ~\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["spec"]["a"], 1);
  EXPECT_EQ((*r)["spec"]["b"], "2");
  EXPECT_EQ((*r)["spec"]["c"], 3);
  EXPECT_EQ((*r)["spec"]["d"], true);
  EXPECT_FALSE((*r)["spec"].contains("e"));
  EXPECT_FALSE(ApplyPatch(t, PatchType::kApply, "a: [unclosed").ok());
}

}  // namespace
}  // namespace kubelocal
