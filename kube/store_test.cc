#include "kube/store.h"

#include <gtest/gtest.h>

#include <thread>

namespace kube {
namespace {

Json Obj(const std::string& ns, const std::string& name, const std::string& rv,
         const std::string& owner = "", const std::string& app = "") {
  Json o = {{"metadata", {{"name", name}, {"resourceVersion", rv}, {"uid", "uid-" + name}}}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  if (!owner.empty())
    o["metadata"]["ownerReferences"] = Json::array({{{"uid", owner}, {"kind", "Job"}}});
  if (!app.empty()) o["metadata"]["labels"] = {{"app", app}};
  return o;
}

TEST(StoreTest, KeysAndIndexes) {
  Store s;
  s.AddIndex("app", LabelIndex("app"));
  EXPECT_EQ(Store::KeyOf(Obj("ns1", "a", "1")), "ns1/a");
  EXPECT_EQ(Store::KeyOf(Obj("", "node1", "1")), "node1");
  EXPECT_EQ(s.Upsert(Obj("ns1", "a", "1", "job1", "web")), nullptr);
  s.Upsert(Obj("ns1", "b", "2", "job1", "db"));
  s.Upsert(Obj("ns2", "c", "3", "job2", "web"));
  EXPECT_EQ(s.Size(), 3u);
  EXPECT_EQ(s.ByIndex(kNamespaceIndexName, "ns1")->size(), 2u);
  EXPECT_EQ(s.ByIndex(kOwnerUidIndexName, "job1")->size(), 2u);
  EXPECT_EQ(s.ByIndex("app", "web")->size(), 2u);
  EXPECT_FALSE(s.ByIndex("nope", "x").ok());
  // Re-indexing on update: b moves from db to web.
  auto old = s.Upsert(Obj("ns1", "b", "4", "job2", "web"));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ((*old)["metadata"]["resourceVersion"].get<std::string>(), "2");
  EXPECT_EQ(s.ByIndex("app", "db")->size(), 0u);
  EXPECT_EQ(s.ByIndex("app", "web")->size(), 3u);
  EXPECT_EQ(s.ByIndex(kOwnerUidIndexName, "job1")->size(), 1u);
  EXPECT_NE(s.Remove("ns2/c"), nullptr);
  EXPECT_EQ(s.Remove("ns2/c"), nullptr);
  EXPECT_EQ(s.ByIndex(kNamespaceIndexName, "ns2")->size(), 0u);
}

TEST(StoreTest, ReplaceComputesDeltas) {
  Store s;
  s.Upsert(Obj("n", "keep", "1"));
  s.Upsert(Obj("n", "change", "1"));
  s.Upsert(Obj("n", "gone", "1"));
  auto deltas = s.Replace({Obj("n", "keep", "1"), Obj("n", "change", "2"), Obj("n", "new", "3")});
  std::map<std::string, StoreDelta::Type> by;
  for (const auto& d : deltas) by[Store::KeyOf(*d.obj)] = d.type;
  EXPECT_EQ(by.size(), 3u);  // "keep" is unchanged: no delta
  EXPECT_EQ(by["n/change"], StoreDelta::Type::kUpdated);
  EXPECT_EQ(by["n/gone"], StoreDelta::Type::kDeleted);
  EXPECT_EQ(by["n/new"], StoreDelta::Type::kAdded);
  EXPECT_EQ(s.Size(), 3u);
  EXPECT_EQ(s.Get("n/gone"), nullptr);
  EXPECT_EQ(s.ByIndex(kNamespaceIndexName, "n")->size(), 3u);
}

TEST(StoreTest, ConcurrentReadersAndWriter) {
  Store s;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load())
      for (const auto& o : s.List()) ASSERT_TRUE(o->contains("metadata"));
  });
  for (int i = 0; i < 2000; ++i) {
    s.Upsert(Obj("n", "o" + std::to_string(i % 50), std::to_string(i)));
    if (i % 7 == 0) s.Remove("n/o" + std::to_string(i % 50));
  }
  done = true;
  reader.join();
  EXPECT_LE(s.Size(), 50u);
}

}  // namespace
}  // namespace kube
