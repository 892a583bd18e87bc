// Reflector/informer against the real local API server (kube-local, its own
// process over HTTPS) and its watch faults: events cut into random chunks,
// dropped and stalled watches, compaction told as an ERROR event or as HTTP
// 410. A scripted peer plays only what no real server does on demand (every
// watch ending at once, a non-410 ERROR event), and an unreachable server.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <thread>

#include "core/testing/log_capture.h"
#include "kube/testing/handler_model.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"
#include "localcluster/testing/scripted_server.h"

namespace kube {
namespace {

using namespace std::chrono_literals;
using kubelocal::testing::KubeLocal;
using kubelocal::testing::ScriptedServer;
using testing::HandlerModel;

constexpr char kNs[] = "ns";

ReflectorOptions FastOptions() {
  ReflectorOptions o;
  o.page_size = 7;  // several pages per LIST
  o.watch_timeout_seconds = 1;
  o.backoff_base = 10ms;
  o.backoff_max = 100ms;
  return o;
}

std::map<std::string, std::string> StoreState(Informer& inf) {
  std::map<std::string, std::string> out;
  for (const auto& o : inf.store().List()) out[NameOf(*o)] = ResourceVersionOf(*o);
  return out;
}

// Pods in namespace kNs of a kube-local of the test's own (its fault switches
// are server-wide).
class KubeLocalInformerTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> flags = {}) {
    kl_ = std::make_unique<KubeLocal>(KubeLocal::DefaultBinary(), kubelocal::testing::MakeTempDir("informer"),
                                      std::move(flags));
    const Status started = kl_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    auto cfg = kl_->LoadConfig();
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    cfg->qps = 0;
    cfg->retry_base = 5ms;
    cfg->retry_max = 20ms;
    auto client = RestClient::Create(*cfg);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
    for (const char* ns : {kNs, "other"}) {
      auto created = ResourceClient(client_, resources::kNamespaces).Create({{"metadata", {{"name", ns}}}});
      ASSERT_TRUE(created.ok()) << created.status().ToString();
    }
  }
  ResourceClient Pods() const { return ResourceClient(client_, resources::kPods, kNs); }
  void Admin(const std::string& what, std::vector<std::pair<std::string, std::string>> query = {}) {
    auto r = kl_->Admin(what, std::move(query));
    ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
  }
  void Create(const std::string& name, const std::string& app = "") {
    Json pod = {{"metadata", {{"name", name}}},
                {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox:1"}}})}}}};
    if (!app.empty()) pod["metadata"]["labels"] = {{"app", app}};
    auto r = Pods().Create(pod);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // A new resourceVersion for the pod (an annotation changes).
  void Update(const std::string& name) {
    auto r = Pods().Patch(name, {{"metadata", {{"annotations", {{"v", std::to_string(++updates_)}}}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Delete(const std::string& name) {
    DeleteOptions now;
    now.grace_period_seconds = 0;
    auto r = Pods().Delete(name, now);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // name → resourceVersion on the server.
  std::map<std::string, std::string> State() {
    std::map<std::string, std::string> out;
    auto l = Pods().ListAll();
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok())
      for (const auto& it : l->items) out[NameOf(it)] = ResourceVersionOf(it);
    return out;
  }
  std::string CurrentRv() {
    auto s = kl_->State();
    return s.ok() ? (*s)["resourceVersion"].get<std::string>() : "";
  }
  // Waits (bounded) until handler model and store both equal the server's state.
  bool Converged(Informer& inf, HandlerModel& m, std::chrono::milliseconds t = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto want = State();
      if (m.model() == want && StoreState(inf) == want) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::unique_ptr<KubeLocal> kl_;
  std::shared_ptr<RestClient> client_;
  int updates_ = 0;
};

// Parameter: how the server reports an expired watch ("event" or "http").
class InformerTest : public KubeLocalInformerTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(InformerTest, ConvergesWithoutMissedOrDuplicatedEvents) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Admin("watch-expiry", {{"as", GetParam()}});
  Admin("watch-chunking", {{"seed", "42"}});  // events split across chunks and packed together
  for (int i = 0; i < 20; ++i) Create("pod-" + std::to_string(i), i % 2 ? "odd" : "even");
  Informer inf(Pods(), FastOptions());
  inf.store().AddIndex("app", LabelIndex("app"));
  HandlerModel m;
  inf.AddEventHandlers(m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  ASSERT_TRUE(Converged(inf, m));
  EXPECT_EQ(m.adds, 20);
  EXPECT_EQ(inf.store().ByIndex("app", "odd")->size(), 10u);

  // 1. Live events.
  for (int i = 0; i < 5; ++i) Update("pod-" + std::to_string(i));
  Delete("pod-19");
  Create("pod-20", "even");
  ASSERT_TRUE(Converged(inf, m));

  // 2. Watches time out (1 s) and re-watch from the last version: wait for two renewals.
  const int64_t w0 = inf.stats().watches;
  for (int i = 0; i < 300 && inf.stats().watches < w0 + 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(inf.stats().watches, w0 + 2);
  Update("pod-5");
  ASSERT_TRUE(Converged(inf, m));

  // 3. Dropped watches, with changes racing the reconnect.
  for (int round = 0; round < 3; ++round) {
    Admin("drop-watches");
    Update("pod-6");
    Create("drop-" + std::to_string(round));
    Delete("pod-" + std::to_string(10 + round));
  }
  ASSERT_TRUE(Converged(inf, m));
  const int64_t lists_before = inf.stats().lists;

  // 4. History compacted while the watch is stalled: what the informer missed
  //    comes back by a re-list (synthesised deletes, updates and adds).
  Admin("stall-watches", {{"stalled", "true"}});
  Delete("pod-1");
  Delete("pod-2");
  Update("pod-3");
  Create("late-1");
  Admin("compact", {{"expireOpenWatches", "true"}});
  Admin("stall-watches", {{"stalled", "false"}});
  ASSERT_TRUE(Converged(inf, m));
  EXPECT_GT(inf.stats().lists, lists_before);
  EXPECT_GE(inf.stats().relists_after_gone, 1);

  // 5. After the re-list the informer watches on normally.
  Update("late-1");
  Delete("pod-4");
  ASSERT_TRUE(Converged(inf, m));
  inf.Stop();

  std::lock_guard<std::mutex> l(m.mu_);
  EXPECT_TRUE(m.violations.empty()) << m.violations.front();
  // Exact handler accounting: 20 initial + 1 + 3 + 1 created; deleted 1 + 3 + 2 + 1.
  EXPECT_EQ(m.adds, 25);
  EXPECT_EQ(m.deletes, 7);
}

INSTANTIATE_TEST_SUITE_P(ExpiryStyles, InformerTest, ::testing::Values("event", "http"));

TEST_F(KubeLocalInformerTest, BookmarksAdvanceTheResumeVersion) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--bookmark-interval-ms=50", "--log-level=debug"}));
  Create("a");
  Informer inf(Pods(), FastOptions());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  // Writes in another namespace advance the server's resourceVersion without
  // an event for this informer; bookmarks carry the new version to it.
  ResourceClient other(client_, resources::kConfigMaps, "other");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(other.Create({{"metadata", {{"name", "cm-" + std::to_string(i)}}}}).ok());
  const std::string rv = CurrentRv();
  for (int i = 0; i < 500 && inf.LastResourceVersion() != rv; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GT(inf.stats().bookmarks, 0);
  EXPECT_EQ(inf.LastResourceVersion(), rv);
  // Re-watches resume from a version the informer saw, never "" or "0": the
  // server's request log names each finished watch's resourceVersion.
  static const std::regex kWatch(R"(GET /api/v1/namespaces/ns/pods\?\S*watch=1\S*)");
  static const std::regex kRv(R"([?&]resourceVersion=([^&\s]*))");
  std::vector<std::string> rvs;
  for (int i = 0; i < 500 && rvs.size() < 2; ++i) {
    std::this_thread::sleep_for(10ms);
    rvs.clear();
    const std::string log = kl_->log();
    for (auto it = std::sregex_iterator(log.begin(), log.end(), kWatch); it != std::sregex_iterator(); ++it) {
      const std::string target = it->str();
      std::smatch m;
      rvs.push_back(std::regex_search(target, m, kRv) ? m[1].str() : "");
    }
  }
  inf.Stop();
  ASSERT_GE(rvs.size(), 2u) << kl_->log();
  for (const auto& v : rvs) EXPECT_TRUE(!v.empty() && v != "0") << "watch from \"" << v << "\"";
}

TEST_F(KubeLocalInformerTest, StopClosesAnOpenWatchPromptly) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Create("a");
  ReflectorOptions o = FastOptions();
  o.watch_timeout_seconds = 300;  // a long watch that Stop() must cut
  Informer inf(Pods(), o);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  auto watchers = [&] {
    auto s = kl_->State();
    return s.ok() ? (*s)["watchers"].get<int>() : -1;
  };
  for (int i = 0; i < 300 && watchers() < 1; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(watchers(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  // The server sees the connection go and ends the watch.
  for (int i = 0; i < 300 && watchers() != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(watchers(), 0);
}

std::shared_ptr<RestClient> ScriptedClient(const std::string& url, const std::string& ca_pem, int max_retries = 5) {
  Config c;
  c.server = url;
  c.ca_pem = ca_pem;
  c.max_retries = max_retries;
  c.qps = 0;
  c.retry_base = 5ms;
  c.retry_max = 20ms;
  auto r = RestClient::Create(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : nullptr;
}

TEST(ReflectorTest, UnreachableServerBacksOffAndStops) {
  int port;
  {
    ScriptedServer gone([](const kubelocal::HttpRequest&, kubelocal::ResponseSink&) {});
    port = gone.port();
  }
  // No client retries: each failed LIST is the reflector's to back off from.
  Informer inf(ResourceClient(ScriptedClient("https://127.0.0.1:" + std::to_string(port), "", 0), resources::kPods, kNs),
               FastOptions());
  hypertrain::testing::LogCapture log(spdlog::level::warn);
  inf.Start();
  EXPECT_FALSE(inf.WaitForSync(1s));
  const auto t0 = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  const auto errors = log.Matching("list pods in namespace ns: ");
  ASSERT_GE(errors.size(), 2u);
  EXPECT_NE(errors[0].find("(retrying in "), std::string::npos) << errors[0];
  EXPECT_LT(errors.size(), 40u);  // backoff (10 ms doubling to 100 ms), not a hot loop
}

// A server that ends every watch at once (or with a non-410 ERROR event) must
// not be hammered: the reflector backs off, and does not re-list for non-410 errors.
TEST(ReflectorTest, InstantWatchClosesAndErrorEventsBackOff) {
  for (bool error_event : {false, true}) {
    std::atomic<int> lists{0}, watches{0};
    ScriptedServer srv([&](const kubelocal::HttpRequest& r, kubelocal::ResponseSink& s) {
      if (!r.HasQuery("watch")) {
        lists++;
        kubelocal::testing::Respond(s, 200, R"({"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]})");
        return;
      }
      watches++;
      s.StartStream("application/json");
      if (error_event)
        s.WriteChunk(
            R"({"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError","message":"etcd hiccup"}})"
            "\n");
      s.EndStream();
    });
    Informer inf(ResourceClient(ScriptedClient(srv.url(), srv.ca_pem()), resources::kPods, kNs), FastOptions());
    inf.Start();
    ASSERT_TRUE(inf.WaitForSync(10s));
    std::this_thread::sleep_for(1s);
    inf.Stop();
    EXPECT_EQ(lists.load(), 1) << "error_event=" << error_event;
    EXPECT_GE(watches.load(), 3);
    EXPECT_LT(watches.load(), 60) << "error_event=" << error_event;  // backoff 10 ms → 100 ms
  }
}

TEST(InformerHandlersTest, EnqueueOwner) {
  WorkQueue q;
  auto h = EnqueueOwnerHandlers(&q, "TrainingJob");
  Json pod = {{"metadata",
               {{"name", "job1-worker-0"},
                {"namespace", "ns"},
                {"ownerReferences", Json::array({{{"kind", "TrainingJob"}, {"name", "job1"}},
                                                 {{"kind", "Other"}, {"name", "x"}}})}}}};
  h.on_add(pod);
  h.on_delete(pod);
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(*q.Get(), "ns/job1");
}

}  // namespace
}  // namespace kube
