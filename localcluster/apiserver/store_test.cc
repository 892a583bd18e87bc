#include "localcluster/apiserver/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace kubelocal {
namespace {

using namespace std::chrono_literals;

json Obj(const std::string& ns, const std::string& name, json labels = json::object()) {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"labels", labels}}}};
}

StatusOr<json> Put(Store& s, const std::string& ns, const std::string& name, json o) {
  return s.Mutate("/pods", ns, name, [&](const std::optional<json>&) -> StatusOr<Mutation> {
    return Mutation::Put(o);
  });
}

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string d = std::string(base ? base : "/tmp") + "/store_test_XXXXXX";
  return mkdtemp(d.data());
}

WatchEvent Next(Watcher& w) {
  WatchEvent e;
  EXPECT_EQ(w.Wait(&e, std::chrono::steady_clock::now() + 2s), Watcher::Next::kEvent);
  return e;
}

TEST(Store, ResourceVersionsAreMonotonicAndStamped) {
  auto s = Store::Open({});
  ASSERT_TRUE(s.ok());
  uint64_t rv0 = (*s)->CurrentRV();
  auto a = Put(**s, "ns", "a", Obj("ns", "a"));
  auto b = Put(**s, "ns", "b", Obj("ns", "b"));
  EXPECT_EQ(a->at("metadata").at("resourceVersion"), std::to_string(rv0 + 1));
  EXPECT_EQ(b->at("metadata").at("resourceVersion"), std::to_string(rv0 + 2));
  // An error from the callback changes nothing.
  auto err = (*s)->Mutate("/pods", "ns", "a", [](const std::optional<json>&) -> StatusOr<Mutation> {
    return Conflict("pods", "a", "nope");
  });
  EXPECT_FALSE(err.ok());
  EXPECT_EQ((*s)->CurrentRV(), rv0 + 2);
  auto gone = (*s)->Mutate("/pods", "ns", "a", [](const std::optional<json>&) -> StatusOr<Mutation> {
    return Mutation::Delete();
  });
  EXPECT_EQ(gone->at("metadata").at("resourceVersion"), std::to_string(rv0 + 3));
  EXPECT_FALSE((*s)->Get("/pods", "ns", "a").has_value());
}

TEST(Store, PagedListsAndExpiredContinue) {
  StoreOptions o;
  o.history_limit = 3;
  auto s = Store::Open(o);
  for (int i = 0; i < 5; ++i) (void)Put(**s, "ns", "p" + std::to_string(i), Obj("ns", "p" + std::to_string(i), {{"i", std::to_string(i % 2)}}));
  (void)Put(**s, "other", "z", Obj("other", "z"));
  auto p1 = (*s)->List("/pods", "ns", nullptr, 2, "");
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->items.size(), 2u);
  EXPECT_EQ(p1->remaining, 3);
  auto p2 = (*s)->List("/pods", "ns", nullptr, 2, p1->continue_token);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->items[0]["metadata"]["name"], "p2");
  EXPECT_EQ(p2->resource_version, p1->resource_version);
  auto all = (*s)->List("/pods", "", [](const json& o) { return o["metadata"]["labels"].value("i", "") == "0"; }, 0, "");
  EXPECT_EQ(all->items.size(), 3u);
  EXPECT_TRUE(all->continue_token.empty());
  // Writes push the continue token's revision out of the (3-event) history.
  for (int i = 0; i < 4; ++i) (void)Put(**s, "ns", "q" + std::to_string(i), Obj("ns", "q"));
  auto stale = (*s)->List("/pods", "ns", nullptr, 2, p2->continue_token);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(HttpCode(stale.status()), 410);
  EXPECT_EQ(Reason(stale.status()), "Expired");
  EXPECT_EQ(HttpCode((*s)->List("/pods", "ns", nullptr, 2, "garbage!").status()), 400);
}

TEST(Store, WatchFromResourceVersionWithFilterTranslation) {
  auto s = Store::Open({});
  auto a = Put(**s, "ns", "a", Obj("ns", "a", {{"app", "x"}}));
  uint64_t start = std::stoull(a->at("metadata").at("resourceVersion").get<std::string>());
  auto pred = [](const json& o) { return o["metadata"]["labels"].value("app", "") == "x"; };
  auto w = (*s)->Watch("/pods", "ns", start, pred);
  ASSERT_TRUE(w.ok());
  (void)Put(**s, "ns", "b", Obj("ns", "b", {{"app", "y"}}));  // filtered out
  (void)Put(**s, "ns", "a", Obj("ns", "a", {{"app", "y"}}));  // stops matching -> DELETED
  (void)Put(**s, "ns", "b", Obj("ns", "b", {{"app", "x"}}));  // starts matching -> ADDED
  (void)Put(**s, "other", "c", Obj("other", "c", {{"app", "x"}}));  // other namespace
  auto e1 = Next(**w);
  EXPECT_EQ(e1.type, "DELETED");
  EXPECT_EQ(e1.object["metadata"]["name"], "a");
  // As kube-apiserver: the object as it was when it matched, at the event's version.
  EXPECT_EQ(e1.object["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(e1.object["metadata"]["resourceVersion"], std::to_string(e1.rv));
  auto e2 = Next(**w);
  EXPECT_EQ(e2.type, "ADDED");
  EXPECT_EQ(e2.object["metadata"]["name"], "b");
  EXPECT_EQ((*w)->BookmarkRV(), (*s)->CurrentRV());
  // A watch without a resourceVersion starts with the current state.
  auto w2 = (*s)->Watch("/pods", "", std::nullopt, pred);
  std::set<std::string> names;
  names.insert(Next(**w2).object["metadata"]["name"]);
  names.insert(Next(**w2).object["metadata"]["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"b", "c"}));
  (*s)->hub().DropAll();
  WatchEvent e;
  EXPECT_EQ((*w)->Wait(&e, std::chrono::steady_clock::now() + 1s), Watcher::Next::kClosed);
}

TEST(Store, CompactionExpiresOldWatchStarts) {
  StoreOptions o;
  o.history_limit = 2;
  auto s = Store::Open(o);
  auto a = Put(**s, "ns", "a", Obj("ns", "a"));
  uint64_t old = std::stoull(a->at("metadata").at("resourceVersion").get<std::string>());
  for (int i = 0; i < 3; ++i) (void)Put(**s, "ns", "a", Obj("ns", "a"));
  auto w = (*s)->Watch("/pods", "ns", old, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(HttpCode(w.status()), 410);
  EXPECT_EQ(Reason(w.status()), "Expired");
  // Within history: fine; after an explicit compaction: expired.
  uint64_t recent = (*s)->CurrentRV() - 1;
  EXPECT_TRUE((*s)->Watch("/pods", "ns", recent, nullptr).ok());
  (*s)->CompactHistory();
  EXPECT_FALSE((*s)->Watch("/pods", "ns", recent, nullptr).ok());
  EXPECT_TRUE((*s)->Watch("/pods", "ns", (*s)->CurrentRV(), nullptr).ok());
  // Open watchers get an ERROR 410 when the harness expires them.
  auto live = (*s)->Watch("/pods", "ns", (*s)->CurrentRV(), nullptr);
  (*s)->hub().ExpireAll();
  auto e = Next(**live);
  EXPECT_EQ(e.type, "ERROR");
  EXPECT_EQ(e.object["code"], 410);
}

TEST(Store, DurableAcrossReopenWithSnapshotsAndTornLog) {
  std::string dir = TempDir();
  StoreOptions o;
  o.data_dir = dir;
  o.snapshot_every = 3;
  uint64_t last;
  {
    auto s = Store::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    for (int i = 0; i < 7; ++i) (void)Put(**s, "ns", "p" + std::to_string(i), Obj("ns", "p" + std::to_string(i)));
    (void)(*s)->Mutate("/pods", "ns", "p0", [](const std::optional<json>&) -> StatusOr<Mutation> { return Mutation::Delete(); });
    last = (*s)->CurrentRV();
  }
  {
    std::ofstream wal(dir + "/wal.log", std::ios::app);
    wal << "{\"rv\": 999, \"op\": \"put\", \"r\"";  // crash mid-append
  }
  auto s = Store::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->CurrentRV(), last);
  EXPECT_FALSE((*s)->Get("/pods", "ns", "p0").has_value());
  EXPECT_TRUE((*s)->Get("/pods", "ns", "p6").has_value());
  EXPECT_EQ((*s)->List("/pods", "ns", nullptr, 0, "")->items.size(), 6u);
  // History did not survive: watching from before the restart is 410.
  EXPECT_EQ(HttpCode((*s)->Watch("/pods", "ns", last - 1, nullptr).status()), 410);
  auto next = Put(**s, "ns", "new", Obj("ns", "new"));
  EXPECT_EQ(next->at("metadata").at("resourceVersion"), std::to_string(last + 1));
}

TEST(Store, ContinueTokensRoundTrip) {
  uint64_t rv;
  std::string key;
  ASSERT_TRUE(DecodeContinue(EncodeContinue(42, "ns/a-b"), &rv, &key));
  EXPECT_EQ(rv, 42u);
  EXPECT_EQ(key, "ns/a-b");
  EXPECT_FALSE(DecodeContinue("eyJ4IjoxfQ", &rv, &key));  // {"x":1}
}

}  // namespace
}  // namespace kubelocal
