#include "localcluster/apiserver/object_ops.h"

#include <gtest/gtest.h>

#include "localcluster/apiserver/garbage_collector.h"

namespace kubelocal {
namespace {

const char kCrd[] = R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
          "size": {"type": "integer", "minimum": 1},
          "color": {"type": "string", "default": "red"}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}})";

class ObjectOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*Store::Open({}));
    ops_ = std::make_unique<ObjectOps>(store_.get(), &registry_);
    ASSERT_TRUE(ops_->EnsureDefaultNamespaces().ok());
  }
  ResourceType Type(const std::string& g, const std::string& plural) {
    auto t = registry_.Find(g, "v1", plural);
    EXPECT_TRUE(t.has_value()) << plural;
    return *t;
  }
  json Pod(const std::string& name, json extra = json::object()) {
    json p = {{"metadata", {{"name", name}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "img"}}}}}}};
    p.merge_patch(extra);
    return p;
  }
  void InstallCrd() {
    auto r = ops_->Create(Type("apiextensions.k8s.io", "customresourcedefinitions"), "",
                          json::parse(kCrd), {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  std::unique_ptr<Store> store_;
  Registry registry_;
  std::unique_ptr<ObjectOps> ops_;
};

TEST_F(ObjectOpsTest, CreateStampsMetadataAndRejectsDuplicates) {
  auto pods = Type("", "pods");
  auto p = ops_->Create(pods, "default", Pod("a"), {}, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)["kind"], "Pod");
  EXPECT_EQ((*p)["metadata"]["generation"], 1);
  EXPECT_EQ((*p)["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_FALSE((*p)["metadata"]["creationTimestamp"].get<std::string>().empty());
  EXPECT_EQ((*p)["status"]["phase"], "Pending");
  auto dup = ops_->Create(pods, "default", Pod("a"), {}, nullptr);
  EXPECT_EQ(HttpCode(dup.status()), 409);
  EXPECT_EQ(Reason(dup.status()), "AlreadyExists");
  auto gen = ops_->Create(pods, "default", json::parse(R"({"metadata":{"generateName":"w-"},
      "spec":{"containers":[{"name":"c","image":"i"}]}})"), {}, nullptr);
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ((*gen)["metadata"]["name"].get<std::string>().rfind("w-", 0), 0u);
  EXPECT_EQ((*gen)["metadata"]["name"].get<std::string>().size(), 7u);
  EXPECT_EQ(HttpCode(ops_->Create(pods, "nope", Pod("b"), {}, nullptr).status()), 404);
  auto bad = ops_->Create(pods, "default", Pod("Bad_Name"), {}, nullptr);
  EXPECT_EQ(HttpCode(bad.status()), 422);
  auto nocontainers = ops_->Create(pods, "default", json{{"metadata", {{"name", "x"}}}}, {}, nullptr);
  ASSERT_EQ(HttpCode(nocontainers.status()), 422);
  EXPECT_EQ(Causes(nocontainers.status())[0].field, "spec.containers");
}

TEST_F(ObjectOpsTest, UpdateConflictsOnStaleResourceVersion) {
  auto cms = Type("", "configmaps");
  auto c = ops_->Create(cms, "default", json{{"metadata", {{"name", "c"}}}, {"data", {{"a", "1"}}}}, {}, nullptr);
  json stale = *c;
  json next = *c;
  next["data"]["a"] = "2";
  ASSERT_TRUE(ops_->Update(cms, "default", "c", next, false, {}, nullptr).ok());
  stale["data"]["a"] = "3";
  auto r = ops_->Update(cms, "default", "c", stale, false, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpCode(r.status()), 409);
  EXPECT_EQ(Reason(r.status()), "Conflict");
  stale["metadata"].erase("resourceVersion");  // unconditional update
  EXPECT_TRUE(ops_->Update(cms, "default", "c", stale, false, {}, nullptr).ok());
  EXPECT_EQ(HttpCode(ops_->Update(cms, "default", "zz", stale, false, {}, nullptr).status()), 400);  // name mismatch
  stale["metadata"]["name"] = "zz";
  EXPECT_EQ(HttpCode(ops_->Update(cms, "default", "zz", stale, false, {}, nullptr).status()), 404);
}

TEST_F(ObjectOpsTest, CustomResourcesValidateDefaultAndSplitStatus) {
  InstallCrd();
  auto w = registry_.Find("example.com", "v1", "widgets");
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->has_status);
  auto bad = ops_->Create(*w, "default", json::parse(R"({"metadata":{"name":"b"},"spec":{"size":0}})"), {}, nullptr);
  ASSERT_EQ(HttpCode(bad.status()), 422);
  EXPECT_EQ(Causes(bad.status())[0].field, "spec.size");
  EXPECT_EQ(bad.status().message(),
            "Widget.example.com \"b\" is invalid: spec.size: Invalid value: 0: spec.size in body "
            "should be greater than or equal to 1");
  auto ok = ops_->Create(*w, "default",
                         json::parse(R"({"metadata":{"name":"a"},"spec":{"size":1},"status":{"phase":"X"}})"), {}, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)["spec"]["color"], "red");       // defaulted
  EXPECT_FALSE(ok->contains("status"));           // dropped on create
  // Main-resource writes ignore status; spec changes bump generation.
  auto p = ops_->Patch(*w, "default", "a", PatchType::kMerge,
                       R"({"spec":{"size":2},"status":{"phase":"Y"}})", false, {}, nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)["metadata"]["generation"], 2);
  EXPECT_FALSE(p->contains("status"));
  // Status writes ignore everything else and keep generation.
  auto s = ops_->Patch(*w, "default", "a", PatchType::kMerge,
                       R"({"spec":{"size":9},"metadata":{"labels":{"l":"v"}},"status":{"phase":"Running"}})", true, {}, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["status"]["phase"], "Running");
  EXPECT_EQ((*s)["spec"]["size"], 2);
  EXPECT_FALSE((*s)["metadata"].contains("labels"));
  EXPECT_EQ((*s)["metadata"]["generation"], 2);
  // Metadata-only change: no generation bump.
  auto m = ops_->Patch(*w, "default", "a", PatchType::kMerge, R"({"metadata":{"labels":{"l":"v"}}})", false, {}, nullptr);
  EXPECT_EQ((*m)["metadata"]["generation"], 2);
  // Strategic merge patches are refused for custom resources, as upstream.
  EXPECT_EQ(HttpCode(ops_->Patch(*w, "default", "a", PatchType::kStrategic, "{}", false, {}, nullptr).status()), 415);
  // Strict field validation reports unknown fields.
  WriteOptions strict;
  strict.field_validation = "Strict";
  auto unk = ops_->Create(*w, "default", json::parse(R"({"metadata":{"name":"u"},"spec":{"size":1,"zzz":1}})"), strict, nullptr);
  EXPECT_EQ(HttpCode(unk.status()), 400);
  EXPECT_NE(unk.status().message().find("spec.zzz"), std::string::npos);
}

TEST_F(ObjectOpsTest, FinalizersHoldDeletionUntilRemoved) {
  auto cms = Type("", "configmaps");
  ASSERT_TRUE(ops_->Create(cms, "default", json::parse(R"({"metadata":{"name":"f","finalizers":["x/y"]}})"), {}, nullptr).ok());
  auto d = ops_->Delete(cms, "default", "f", {});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->removed);
  EXPECT_TRUE(d->object["metadata"].contains("deletionTimestamp"));
  auto add = ops_->Patch(cms, "default", "f", PatchType::kMerge, R"({"metadata":{"finalizers":["x/y","new"]}})", false, {}, nullptr);
  EXPECT_EQ(HttpCode(add.status()), 422);
  auto rm = ops_->Patch(cms, "default", "f", PatchType::kMerge, R"({"metadata":{"finalizers":null}})", false, {}, nullptr);
  ASSERT_TRUE(rm.ok());
  EXPECT_EQ(HttpCode(ops_->Get(cms, "default", "f").status()), 404);
}

TEST_F(ObjectOpsTest, PodsOnNodesDeleteGracefully) {
  auto pods = Type("", "pods");
  ASSERT_TRUE(ops_->Create(pods, "default", Pod("unscheduled"), {}, nullptr).ok());
  EXPECT_TRUE(ops_->Delete(pods, "default", "unscheduled", {})->removed);
  ASSERT_TRUE(ops_->Create(pods, "default", Pod("p", {{"spec", {{"nodeName", "n1"}}}}), {}, nullptr).ok());
  auto d = ops_->Delete(pods, "default", "p", {});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->removed);
  EXPECT_EQ(d->object["metadata"]["deletionGracePeriodSeconds"], 30);
  DeleteOptions now;
  now.grace_period_seconds = 0;
  EXPECT_TRUE(ops_->Delete(pods, "default", "p", now)->removed);
  ASSERT_TRUE(ops_->Create(pods, "default", Pod("q"), {}, nullptr).ok());
  DeleteOptions pre;
  pre.precondition_uid = "not-the-uid";
  EXPECT_EQ(HttpCode(ops_->Delete(pods, "default", "q", pre).status()), 409);
  EXPECT_EQ(HttpCode(ops_->Delete(pods, "default", "zz", {}).status()), 404);
}

TEST_F(ObjectOpsTest, SchedulingGatesMayOnlyBeRemoved) {
  auto pods = Type("", "pods");
  json gated = Pod("g");
  gated["spec"]["schedulingGates"] = json::parse(R"([{"name": "kueue.x-k8s.io/admission"}, {"name": "other"}])");
  ASSERT_TRUE(ops_->Create(pods, "default", gated, {}, nullptr).ok());
  auto add = ops_->Patch(pods, "default", "g", PatchType::kMerge,
                         R"({"spec":{"schedulingGates":[{"name":"kueue.x-k8s.io/admission"},{"name":"other"},{"name":"new"}]}})",
                         false, {}, nullptr);
  EXPECT_EQ(HttpCode(add.status()), 422);
  auto rm = ops_->Patch(pods, "default", "g", PatchType::kMerge, R"({"spec":{"schedulingGates":[{"name":"other"}]}})",
                        false, {}, nullptr);
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  EXPECT_EQ((*rm)["spec"]["schedulingGates"], json::parse(R"([{"name": "other"}])"));
  auto rest = ops_->Patch(pods, "default", "g", PatchType::kMerge, R"({"spec":{"schedulingGates":[]}})", false, {}, nullptr);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  // Other spec fields stay immutable.
  auto cmd = ops_->Patch(pods, "default", "g", PatchType::kMerge, R"({"spec":{"hostname":"x"}})", false, {}, nullptr);
  EXPECT_EQ(HttpCode(cmd.status()), 422);
}

TEST_F(ObjectOpsTest, GarbageCollectorCascades) {
  GarbageCollector gc(ops_.get(), std::chrono::seconds(100));
  auto cms = Type("", "configmaps");
  auto owner_of = [&](const json& o) {
    return json{{"metadata", {{"ownerReferences", {{{"apiVersion", "v1"}, {"kind", "ConfigMap"},
                                                     {"name", o["metadata"]["name"]},
                                                     {"uid", o["metadata"]["uid"]}}}}}}};
  };
  auto mk = [&](const std::string& name, json extra) {
    json o = {{"metadata", {{"name", name}}}};
    o.merge_patch(extra);
    auto r = ops_->Create(cms, "default", o, {}, nullptr);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return *r;
  };
  // Background: owner gone -> dependent collected.
  json o1 = mk("o1", json::object());
  mk("d1", owner_of(o1));
  ASSERT_TRUE(ops_->Delete(cms, "default", "o1", {})->removed);
  gc.RunOnce();
  EXPECT_EQ(HttpCode(ops_->Get(cms, "default", "d1").status()), 404);
  // Orphan: dependent survives without the owner reference.
  json o2 = mk("o2", json::object());
  mk("d2", owner_of(o2));
  DeleteOptions orphan;
  orphan.propagation_policy = "Orphan";
  ASSERT_TRUE(ops_->Delete(cms, "default", "o2", orphan)->removed);
  gc.RunOnce();
  auto d2 = ops_->Get(cms, "default", "d2");
  ASSERT_TRUE(d2.ok());
  EXPECT_FALSE((*d2)["metadata"].contains("ownerReferences"));
  // Foreground: owner waits (finalizer) until its dependents are gone.
  json o3 = mk("o3", json::object());
  mk("d3", owner_of(o3));
  DeleteOptions fg;
  fg.propagation_policy = "Foreground";
  auto r = ops_->Delete(cms, "default", "o3", fg);
  ASSERT_FALSE(r->removed);
  EXPECT_EQ(r->object["metadata"]["finalizers"], json({"foregroundDeletion"}));
  for (int i = 0; i < 3 && gc.RunOnce() > 0; ++i) {
  }
  EXPECT_EQ(HttpCode(ops_->Get(cms, "default", "d3").status()), 404);
  EXPECT_EQ(HttpCode(ops_->Get(cms, "default", "o3").status()), 404);
}

TEST_F(ObjectOpsTest, NamespaceDeletionEmptiesItFirst) {
  GarbageCollector gc(ops_.get(), std::chrono::seconds(100));
  auto nss = Type("", "namespaces");
  auto cms = Type("", "configmaps");
  ASSERT_TRUE(ops_->Create(nss, "", json{{"metadata", {{"name", "team"}}}}, {}, nullptr).ok());
  ASSERT_TRUE(ops_->Create(cms, "team", json{{"metadata", {{"name", "c"}}}}, {}, nullptr).ok());
  auto d = ops_->Delete(nss, "", "team", {});
  ASSERT_FALSE(d->removed);
  EXPECT_EQ(d->object["status"]["phase"], "Terminating");
  EXPECT_EQ(HttpCode(ops_->Create(cms, "team", json{{"metadata", {{"name", "late"}}}}, {}, nullptr).status()), 403);
  for (int i = 0; i < 3 && gc.RunOnce() > 0; ++i) {
  }
  EXPECT_EQ(HttpCode(ops_->Get(cms, "team", "c").status()), 404);
  EXPECT_EQ(HttpCode(ops_->Get(nss, "", "team").status()), 404);
}

TEST_F(ObjectOpsTest, CrdValidationAndRemoval) {
  auto crds = Type("apiextensions.k8s.io", "customresourcedefinitions");
  json bad = json::parse(kCrd);
  bad["metadata"]["name"] = "wrong.example.com";
  bad["spec"]["versions"][0]["storage"] = false;
  auto r = ops_->Create(crds, "", bad, {}, nullptr);
  ASSERT_EQ(HttpCode(r.status()), 422);
  EXPECT_EQ(Causes(r.status()).size(), 2u);
  InstallCrd();
  auto crd = ops_->Get(crds, "", "widgets.example.com");
  EXPECT_EQ((*crd)["status"]["conditions"][1]["type"], "Established");
  auto w = *registry_.Find("example.com", "v1", "widgets");
  ASSERT_TRUE(ops_->Create(w, "default", json::parse(R"({"metadata":{"name":"a"},"spec":{"size":1}})"), {}, nullptr).ok());
  ASSERT_TRUE(ops_->Delete(crds, "", "widgets.example.com", {})->removed);
  EXPECT_FALSE(registry_.Find("example.com", "v1", "widgets").has_value());
  EXPECT_TRUE(store_->Snapshot("example.com/widgets").empty());
}

TEST(ObjectMeta, Names) {
  EXPECT_TRUE(IsDnsSubdomain("a.b-c.d"));
  EXPECT_FALSE(IsDnsSubdomain("A"));
  EXPECT_FALSE(IsDnsSubdomain("-a"));
  EXPECT_TRUE(IsDnsLabel("abc-1"));
  EXPECT_FALSE(IsDnsLabel("a.b"));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(SpecChanged(json{{"spec", 1}}, json{{"spec", 2}}));
  EXPECT_FALSE(SpecChanged(json{{"spec", 1}, {"status", 1}}, json{{"spec", 1}, {"status", 2}}));
}

}  // namespace
}  // namespace kubelocal
