#include "operator/api/crd_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

json Obj(json props, json extra = json::object()) {
  json s = {{"type", "object"}, {"properties", std::move(props)}};
  s.update(extra);
  return s;
}

bool AnyContains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(CheckStructuralTest, AcceptsAStructuralSchema) {
  json s = Obj({{"spec", Obj({{"n", {{"type", "integer"}, {"default", 1}, {"minimum", 1}}},
                              {"q", {{"x-kubernetes-int-or-string", true},
                                     {"anyOf", json::array({{{"type", "integer"}}, {{"type", "string"}}})}}},
                              {"free", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
                              {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}})},
                {"metadata", {{"type", "object"}}}});
  EXPECT_THAT(CheckStructural(s), IsEmpty());
}

TEST(CheckStructuralTest, FlagsNonStructuralSchemas) {
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"description", "no type"}}}})), ".type: Required value"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"type", "array"}}}})), "needs items"));
  EXPECT_TRUE(AnyContains(
      CheckStructural(Obj({{"a", {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", {{"type", "string"}}}}}})),
      "mutually exclusive"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"type", "string"}, {"anyOf", json::array({{{"type", "string"}}})}}}})),
                          "inside anyOf"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"type", "integer"}, {"default", "x"}}}})), "default in body must be of type integer"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"type", "string"}, {"patern", "x"}}}})), "unknown keyword"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"metadata", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}}}})),
                          "root metadata"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"x-kubernetes-int-or-string", true}, {"type", "string"}}}})),
                          "must not set a type"));
  EXPECT_TRUE(AnyContains(CheckStructural(Obj({{"a", {{"type", "integer"}}}}, {{"required", {"b"}}})),
                          "not a declared property"));
  EXPECT_TRUE(AnyContains(
      CheckStructural(Obj({{"l", {{"type", "array"},
                                  {"x-kubernetes-list-type", "map"},
                                  {"x-kubernetes-list-map-keys", {"k"}},
                                  {"items", Obj({{"k", {{"type", "string"}}}})}}}})),
      "must be required or defaulted"));
  EXPECT_TRUE(AnyContains(CheckStructural(json{{"type", "string"}}), "root must be type: object"));
}

TEST(ValidateTest, TypesRangesEnumsPatternsAndDefaults) {
  json s = Obj({{"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 4}, {"default", 2}}},
                {"mode", {{"type", "string"}, {"enum", {"a", "b"}}}},
                {"name", {{"type", "string"}, {"pattern", "^[a-z]+$"}, {"maxLength", 5}}},
                {"q", {{"x-kubernetes-int-or-string", true}, {"pattern", "^[0-9]+Gi$"}}},
                {"sub", Obj({{"x", {{"type", "boolean"}, {"default", false}}}}, {{"default", json::object()}})},
                {"set", {{"type", "array"}, {"x-kubernetes-list-type", "set"}, {"items", {{"type", "integer"}}}}}},
               {{"required", {"mode"}}});
  json ok = {{"mode", "a"}, {"name", "abc"}, {"q", "4Gi"}};
  EXPECT_THAT(ValidateAgainstSchema(s, &ok), IsEmpty());
  EXPECT_EQ(ok["n"], 2);                 // defaulted
  EXPECT_EQ(ok["sub"]["x"], false);      // nested default inside a defaulted object
  json q_int = {{"mode", "a"}, {"q", 7}};  // patterns apply to strings only
  EXPECT_THAT(ValidateAgainstSchema(s, &q_int), IsEmpty());

  json bad = {{"n", 9}, {"mode", "c"}, {"name", "ABCDEFG"}, {"q", true}, {"typo", 1}, {"set", {1, 1}}};
  auto p = ValidateAgainstSchema(s, &bad);
  EXPECT_TRUE(AnyContains(p, "n: Invalid value: 9: n in body should be less than or equal to 4"));
  EXPECT_TRUE(AnyContains(p, "mode: Unsupported value: \"c\": supported values: \"a\", \"b\""));
  EXPECT_TRUE(AnyContains(p, "name in body should be at most 5 chars long"));
  EXPECT_TRUE(AnyContains(p, "should match '^[a-z]+$'"));
  EXPECT_TRUE(AnyContains(p, "q in body must be of type integer or string"));
  EXPECT_TRUE(AnyContains(p, "typo: unknown field"));
  EXPECT_TRUE(AnyContains(p, "set[1]: Duplicate value: 1"));
  json missing = json::object();
  EXPECT_TRUE(AnyContains(ValidateAgainstSchema(s, &missing), "mode: Required value"));
  json when = {{"mode", "a"}, {"at", "2026-11-26T00:10:00Z"}};
  json at_schema = s;
  at_schema["properties"]["at"] = {{"type", "string"}, {"format", "date-time"}};
  EXPECT_THAT(ValidateAgainstSchema(at_schema, &when), IsEmpty());
  when["at"] = "yesterday";
  EXPECT_TRUE(AnyContains(ValidateAgainstSchema(at_schema, &when), "at in body must be of type date-time"));
  json wrong_type = {{"mode", 1}};
  EXPECT_TRUE(AnyContains(ValidateAgainstSchema(s, &wrong_type), "must be of type string"));
}

TEST(SchemaAtTest, FollowsPropertiesAndItems) {
  json s = Obj({{"status", Obj({{"conditions", {{"type", "array"}, {"items", Obj({{"type", {{"type", "string"}}}})}}}})}});
  EXPECT_EQ(SchemaAt(s, ".status.conditions[-1:].type")["type"], "string");
  EXPECT_TRUE(SchemaAt(s, ".status.nope").is_null());
}

}  // namespace
}  // namespace hypertrain::api
