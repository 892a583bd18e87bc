#include "localcluster/apiserver/table.h"

#include <gtest/gtest.h>

namespace kubelocal {
namespace {

TEST(JsonPath, SimplePathsSlicesAndFilters) {
  json o = json::parse(R"({"spec":{"n":3,"c":[{"image":"a"},{"image":"b"}]},
    "status":{"conditions":[{"type":"Created","status":"True"},{"type":"Running","status":"True"}]}})");
  EXPECT_EQ(JsonPathFind(o, ".spec.n")->at(0), 3);
  EXPECT_EQ(JsonPathFind(o, ".status.conditions[-1:].type")->at(0), "Running");
  EXPECT_EQ(JsonPathFind(o, "{.spec.c[0].image}")->at(0), "a");
  EXPECT_EQ(JsonPathFind(o, ".spec.c[*].image")->size(), 2u);
  EXPECT_EQ(JsonPathFind(o, ".status.conditions[?(@.type==\"Created\")].status")->at(0), "True");
  EXPECT_TRUE(JsonPathFind(o, ".spec.missing")->empty());
  EXPECT_TRUE(JsonPathFind(o, ".spec.c[5]")->empty());
  EXPECT_FALSE(JsonPathFind(o, ".spec.c[").ok());
}

TEST(Table, CrdPrinterColumns) {
  ResourceType t;
  t.group = "example.com";
  t.version = "v1";
  t.plural = "widgets";
  t.kind = "Widget";
  t.is_crd = true;
  t.columns = {{"Size", "integer", "", "", ".spec.size", 0},
               {"State", "string", "", "", ".status.conditions[-1:].type", 0},
               {"Debug", "string", "", "", ".spec.debug", 1}};
  json o = {{"metadata", {{"name", "w"}, {"resourceVersion", "7"}}},
            {"spec", {{"size", 4}}},
            {"status", {{"conditions", {{{"type", "A"}}, {{"type", "B"}}}}}}};
  json tab = MakeTable(t, {o}, IncludeObject::kMetadata, "7", "tok", 3);
  EXPECT_EQ(tab["kind"], "Table");
  EXPECT_EQ(tab["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(tab["columnDefinitions"].size(), 4u);
  EXPECT_EQ(tab["columnDefinitions"][3]["priority"], 1);
  EXPECT_EQ(tab["rows"][0]["cells"], json({"w", 4, "B", nullptr}));
  EXPECT_EQ(tab["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(tab["metadata"]["continue"], "tok");
  EXPECT_TRUE(WantsTable("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
  EXPECT_FALSE(WantsTable("application/json"));
}

TEST(Table, HumanAge) {
  EXPECT_EQ(HumanAge(""), "<unknown>");
  EXPECT_EQ(HumanAge("2000-01-01T00:00:00Z").back(), 'y');
}

}  // namespace
}  // namespace kubelocal
