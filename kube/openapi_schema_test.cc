#include "kube/openapi_schema.h"

#include <gtest/gtest.h>

namespace hypertrain::kube::openapi {
namespace {

const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "required": ["replicas", "image"],
      "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 8},
        "image": {"type": "string", "minLength": 3, "maxLength": 20, "pattern": "^[a-z0-9:./-]+$"},
        "policy": {"type": "string", "enum": ["Never", "OnFailure"], "default": "OnFailure"},
        "port": {"x-kubernetes-int-or-string": true},
        "resources": {
          "type": "object",
          "default": {},
          "properties": {
            "gpus": {"type": "integer", "default": 8},
            "nested": {"type": "object", "default": {}, "properties": {"deep": {"type": "string", "default": "yes"}}}
          }
        },
        "env": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["name"],
                 "properties": {"name": {"type": "string"}, "value": {"type": "string", "default": "v"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "properties": {"n": {"type": "integer"}}},
        "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0}
      }
    },
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
  }
})");

std::vector<std::string> Fields(const std::vector<Cause>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.field + "|" + c.reason);
  return out;
}

TEST(Schema, DefaultsAreAppliedRecursively) {
  json o = {{"apiVersion", "x/v1"}, {"kind", "K"}, {"metadata", {{"name", "a"}}},
            {"spec", {{"replicas", 2}, {"image", "img:1"}, {"env", {{{"name", "A"}}}}}}};
  ApplyDefaults(o, kSchema);
  EXPECT_EQ(o["spec"]["policy"], "OnFailure");
  EXPECT_EQ(o["spec"]["resources"]["gpus"], 8);
  EXPECT_EQ(o["spec"]["resources"]["nested"]["deep"], "yes");
  EXPECT_EQ(o["spec"]["env"][0]["value"], "v");
  EXPECT_TRUE(Validate(o, kSchema).empty());
}

TEST(Schema, PruningKeepsPreservedAndRootMeta) {
  json o = {{"apiVersion", "x/v1"}, {"kind", "K"}, {"metadata", {{"name", "a"}}},
            {"junk", 1},
            {"spec", {{"replicas", 2}, {"image", "img"}, {"bogus", true},
                      {"labels", {{"a", "b"}}}, {"free", {{"anything", {{"x", 1}}}}}}},
            {"status", {{"whatever", 1}}}};
  auto pruned = PruneUnknownFields(o, kSchema);
  EXPECT_EQ(pruned, (std::vector<std::string>{"junk", "spec.bogus"}));
  EXPECT_TRUE(o.contains("metadata"));
  EXPECT_EQ(o["spec"]["labels"]["a"], "b");
  EXPECT_EQ(o["spec"]["free"]["anything"]["x"], 1);
  EXPECT_EQ(o["status"]["whatever"], 1);
}

TEST(Schema, ReportsEveryViolationWithFieldPaths) {
  json o = {{"spec", {{"replicas", 0}, {"image", "UPPER"}, {"policy", "Always"},
                      {"port", true}, {"env", {{{"value", "x"}}, {{"name", "b"}}, {{"name", "c"}}}},
                      {"labels", {{"k", 1}}}, {"ratio", 0}}}};
  auto causes = Validate(o, kSchema);
  auto f = Fields(causes);
  auto has = [&](const std::string& s) { return std::find(f.begin(), f.end(), s) != f.end(); };
  EXPECT_TRUE(has("spec.replicas|FieldValueInvalid"));
  EXPECT_TRUE(has("spec.image|FieldValueInvalid"));  // pattern
  EXPECT_TRUE(has("spec.policy|FieldValueNotSupported"));
  EXPECT_TRUE(has("spec.port|FieldValueTypeInvalid"));
  EXPECT_TRUE(has("spec.env|FieldValueTooMany"));
  EXPECT_TRUE(has("spec.env[0].name|FieldValueRequired"));
  EXPECT_TRUE(has("spec.labels.k|FieldValueTypeInvalid"));
  EXPECT_TRUE(has("spec.ratio|FieldValueInvalid"));
  for (const auto& c : causes) {
    if (c.field == "spec.replicas") {
      EXPECT_EQ(c.message, "Invalid value: 0: spec.replicas in body should be greater than or equal to 1");
    }
  }
  json missing = {{"spec", json::object()}};
  auto m = Fields(Validate(missing, kSchema));
  EXPECT_EQ(m, (std::vector<std::string>{"spec.replicas|FieldValueRequired", "spec.image|FieldValueRequired"}));
}

TEST(Schema, LengthsAndIntOrString) {
  json o = {{"spec", {{"replicas", 8}, {"image", "ab"}, {"port", "http"}}}};
  auto f = Fields(Validate(o, kSchema));
  EXPECT_EQ(f, (std::vector<std::string>{"spec.image|FieldValueInvalid"}));
  o["spec"]["image"] = std::string(21, 'a');
  o["spec"]["port"] = 80;
  EXPECT_EQ(Fields(Validate(o, kSchema)), (std::vector<std::string>{"spec.image|FieldValueInvalid"}));
  o["spec"]["replicas"] = 9;
  o["spec"]["image"] = "ok:1";
  EXPECT_EQ(Fields(Validate(o, kSchema)), (std::vector<std::string>{"spec.replicas|FieldValueInvalid"}));
}

TEST(Schema, CombinatorsAndListTypes) {
  json s = json::parse(R"({"type":"object","properties":{
     "a":{"type":"integer","anyOf":[{"minimum":10},{"maximum":0}]},
     "b":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
          "items":{"type":"object","properties":{"name":{"type":"string"}}}},
     "c":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}}}})");
  json ok = {{"a", 11}, {"b", {{{"name", "x"}}, {{"name", "y"}}}}, {"c", {"p", "q"}}};
  EXPECT_TRUE(Validate(ok, s).empty());
  json bad = {{"a", 5}, {"b", {{{"name", "x"}}, {{"name", "x"}}}}, {"c", {"p", "p"}}};
  EXPECT_EQ(Fields(Validate(bad, s)),
            (std::vector<std::string>{"a|FieldValueInvalid", "b[1]|FieldValueDuplicate",
                                      "c[1]|FieldValueDuplicate"}));
}

TEST(Schema, CheckStructuralRejectsBadTypesAndPatterns) {
  json s = {{"type", "object"},
            {"properties", {{"a", {{"type", "int"}}}, {"b", {{"type", "string"}, {"pattern", "(["}}}}}};
  auto c = CheckStructural(s, "schema");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].field, "schema.properties[a].type");
  EXPECT_EQ(c[1].field, "schema.properties[b].pattern");
}

}  // namespace
}  // namespace hypertrain::kube::openapi
