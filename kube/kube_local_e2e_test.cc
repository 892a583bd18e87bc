// End to end: the client library against the real local control plane
// (//localcluster/apiserver:kube-local, a separate process over HTTPS on 127.0.0.1).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "core/atomic_file.h"
#include "core/testing/log_capture.h"
#include "kube/testing/handler_model.h"
#include "localcluster/apiserver/certs.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/kube_local.h"

namespace kube {
namespace {

using namespace std::chrono_literals;
using kubelocal::testing::KubeLocal;
using kubelocal::testing::MakeTempDir;
using testing::HandlerModel;

std::string ReadFile(const std::string& path) {
  auto s = hypertrain::ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : "";
}

constexpr char kNs[] = "e2e";

Json Pod(const std::string& name, const std::string& app = "web") {
  return {{"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
          {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox:1"}}})}}}};
}

// Waits (bounded) until `v` holds at least n entries, ignoring BOOKMARKs.
bool WaitForCount(std::mutex& mu, std::vector<std::string>& v, size_t n) {
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> l(mu);
      v.erase(std::remove_if(v.begin(), v.end(),
                             [](const std::string& s) { return s.rfind("BOOKMARK", 0) == 0; }),
              v.end());
      if (v.size() >= n) return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

class KubeLocalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kl_ = new KubeLocal(KubeLocal::DefaultBinary(), MakeTempDir("kube-local"));
    auto r = kl_->Start();
    ASSERT_TRUE(r.ok()) << r.ToString();
    auto cfg = kl_->LoadConfig();
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    cfg->retry_base = 20ms;
    cfg->retry_max = 200ms;
    cfg->qps = 0;
    client_ = new std::shared_ptr<RestClient>(*RestClient::Create(*cfg));
    ResourceClient ns(*client_, resources::kNamespaces);
    auto created = ns.Create({{"metadata", {{"name", kNs}}}});
    ASSERT_TRUE(created.ok() || IsAlreadyExists(created.status())) << created.status().ToString();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete kl_;
  }
  void SetUp() override {
    ASSERT_NE(client_, nullptr);
    ASSERT_NE(*client_, nullptr);
  }
  ResourceClient Pods() { return ResourceClient(*client_, resources::kPods, kNs); }
  StatusOr<Json> Admin(const std::string& what, std::vector<std::pair<std::string, std::string>> q = {}) {
    return kl_->Admin(what, std::move(q));
  }
  static inline KubeLocal* kl_ = nullptr;
  static inline std::shared_ptr<RestClient>* client_ = nullptr;
};

TEST_F(KubeLocalTest, CrudConflictsAndDelete) {
  auto pods = Pods();
  Json gen = Pod("");
  gen["metadata"].erase("name");
  gen["metadata"]["generateName"] = "crud-";
  auto created = pods.Create(gen);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::string name = NameOf(*created);
  EXPECT_EQ(name.rfind("crud-", 0), 0u);
  EXPECT_FALSE(UidOf(*created).empty());

  auto dup = pods.Create(*created);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists) << dup.status().ToString();

  // Update with the current resourceVersion succeeds; replaying the stale one conflicts.
  Json stale = *created;
  Json upd = *created;
  upd["metadata"]["labels"]["tier"] = "a";
  auto u1 = pods.Update(upd);
  ASSERT_TRUE(u1.ok()) << u1.status().ToString();
  EXPECT_NE(ResourceVersionOf(*u1), ResourceVersionOf(stale));
  stale["metadata"]["labels"]["tier"] = "b";
  auto u2 = pods.Update(stale);
  ASSERT_FALSE(u2.ok());
  EXPECT_EQ(u2.status().code(), StatusCode::kAborted) << u2.status().ToString();
  EXPECT_EQ(u2.status().http_status(), 409);

  // Conflict-retrying read-modify-write.
  auto u3 = pods.UpdateWithRetry(name, [](Json& o) -> Status {
    o["metadata"]["labels"]["tier"] = "c";
    return {};
  });
  ASSERT_TRUE(u3.ok()) << u3.status().ToString();
  EXPECT_EQ((*u3)["metadata"]["labels"]["tier"], "c");

  // Merge patch (how the launcher publishes progress).
  auto p =
      pods.Patch(name, {{"metadata", {{"annotations", {{"hypertrain.io/progress", "step=10"}}}}}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)["metadata"]["annotations"]["hypertrain.io/progress"], "step=10");
  EXPECT_EQ((*p)["metadata"]["labels"]["tier"], "c");

  // Annotation helper (set one, remove one) and an Event about the pod.
  auto ann = pods.PatchAnnotations(
      name, {{"hypertrain.io/step", "20"}, {"hypertrain.io/progress", std::nullopt}});
  ASSERT_TRUE(ann.ok()) << ann.status().ToString();
  EXPECT_EQ((*ann)["metadata"]["annotations"]["hypertrain.io/step"], "20");
  EXPECT_FALSE((*ann)["metadata"]["annotations"].contains("hypertrain.io/progress"));
  auto ev = RecordEvent(**client_, *ann, "Warning", "NodeFault", "rank 3 lost", "e2e-test");
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ResourceClient events(*client_, resources::kEvents, kNs);
  ListOptions eo;
  eo.field_selector = "involvedObject.name=" + name;
  auto evs = events.List(eo);
  ASSERT_TRUE(evs.ok()) << evs.status().ToString();
  ASSERT_EQ(evs->items.size(), 1u);
  EXPECT_EQ(evs->items[0]["reason"], "NodeFault");

  auto nf = pods.Get("does-not-exist");
  ASSERT_FALSE(nf.ok());
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);

  // Delete preconditions: wrong uid → Conflict; right uid → gone.
  DeleteOptions bad;
  bad.precondition_uid = "not-the-uid";
  auto d1 = pods.Delete(name, bad);
  ASSERT_FALSE(d1.ok());
  EXPECT_EQ(d1.status().code(), StatusCode::kAborted) << d1.status().ToString();
  DeleteOptions good;
  good.precondition_uid = UidOf(*created);
  good.propagation_policy = "Background";
  good.grace_period_seconds = 0;
  auto d2 = pods.Delete(name, good);
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  for (int i = 0; i < 200; ++i) {
    if (!pods.Get(name).ok()) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(pods.Get(name).status().code(), StatusCode::kNotFound);
}

TEST_F(KubeLocalTest, SelectorsAndPaging) {
  auto pods = Pods();
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(pods.Create(Pod("page-" + std::to_string(i), i % 3 == 0 ? "db" : "web")).ok());
  ListOptions o;
  o.label_selector = "app=db";
  auto db = pods.List(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  size_t db_count = 0;
  for (const auto& it : db->items) db_count += NameOf(it).rfind("page-", 0) == 0;
  EXPECT_EQ(db_count, 4u);
  ListOptions f;
  f.field_selector = "metadata.name=page-7";
  auto one = pods.List(f);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->items.size(), 1u);
  EXPECT_EQ(NameOf(one->items[0]), "page-7");
  ListOptions page;
  page.limit = 5;
  auto first = pods.List(page);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->items.size(), 5u);
  EXPECT_FALSE(first->continue_token.empty());
  int64_t before = (*client_)->attempts();
  auto all = pods.ListAll(page);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  size_t paged = 0;
  for (const auto& it : all->items) paged += NameOf(it).rfind("page-", 0) == 0;
  EXPECT_EQ(paged, 12u);
  EXPECT_GE((*client_)->attempts() - before, 3);  // ≥ 12 items / 5 per page
}

TEST_F(KubeLocalTest, StatusSubresource) {
  auto pods = Pods();
  ASSERT_TRUE(pods.Create(Pod("status-1")).ok());
  auto s = pods.PatchStatus("status-1", {{"status", {{"phase", "Running"}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto got = pods.GetStatus("status-1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["status"]["phase"], "Running");
  Json obj = *got;
  obj["status"]["phase"] = "Succeeded";
  auto put = pods.UpdateStatus(obj);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ((*pods.Get("status-1"))["status"]["phase"], "Succeeded");
}

TEST_F(KubeLocalTest, LeasesAndServerSideApply) {
  ResourceClient leases(*client_, resources::kLeases, kNs);
  Json lease = {{"metadata", {{"name", "leader"}}},
                {"spec", {{"holderIdentity", "op-1"}, {"leaseDurationSeconds", 15}}}};
  auto c = leases.Create(lease);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto u = leases.UpdateWithRetry("leader", [](Json& o) -> Status {
    o["spec"]["holderIdentity"] = "op-2";
    return {};
  });
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ((*u)["spec"]["holderIdentity"], "op-2");
  auto a = Pods().Apply(Pod("applied"), "e2e-manager", true);
  if (!a.ok() && (a.status().code() == StatusCode::kUnknown || a.status().http_status() == 415 ||
                  a.status().http_status() == 405)) {
    GTEST_SKIP() << "server-side apply not served by kube-local: " << a.status().ToString();
  }
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(NameOf(*a), "applied");
}

TEST_F(KubeLocalTest, AuthTokenClientCertExecPluginAndBadCa) {
  auto base = kl_->LoadConfig();
  ASSERT_TRUE(base.ok());
  base->max_retries = 0;
  Request ver;
  ver.path = "/api/v1/namespaces/default";
  // Wrong token → 401 (Unauthorized), no retry storm.
  Config wrong = *base;
  wrong.token = "not-the-token";
  auto w = (*RestClient::Create(wrong))->Send(ver);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnauthenticated) << w.status().ToString();
  EXPECT_EQ(w.status().http_status(), 401);
  // Client certificate instead of a token.
  Config cert = *base;
  cert.token.clear();
  cert.client_cert_pem = ReadFile(kl_->client_cert_dir() + "/client.crt");
  cert.client_key_pem = ReadFile(kl_->client_cert_dir() + "/client.key");
  auto c = (*RestClient::Create(cert))->Send(ver);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Exec plugin printing the real token.
  std::string dir = MakeTempDir("exec");
  ASSERT_TRUE(hypertrain::WriteFileAtomically(
                  dir + "/plugin.sh",
                  "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                  "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$TOKEN\"\n",
                  0755)
                  .ok());
  Config ex = *base;
  ExecConfig e;
  e.api_version = "client.authentication.k8s.io/v1beta1";
  e.command = dir + "/plugin.sh";
  e.env = {{"TOKEN", base->token}};
  ex.token.clear();
  ex.exec = e;
  auto exec_client = *RestClient::Create(ex);
  auto x = exec_client->Send(ver);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(exec_client->exec_runs(), 1);
  // A CA that did not sign the server certificate → clear TLS error.
  const auto other_ca = kubelocal::MakeCA("not-kube-local");
  ASSERT_TRUE(other_ca.ok()) << other_ca.status().ToString();
  Config bad = *base;
  bad.ca_pem = other_ca->cert_pem;
  auto b = (*RestClient::Create(bad))->Send(ver);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnauthenticated) << b.status().ToString();
  EXPECT_EQ(b.status().http_status(), 0);  // a TLS failure, not an HTTP 401
}

TEST_F(KubeLocalTest, RetriesInjectedFaults) {
  Request get;
  get.path = "/api/v1/namespaces/default";
  ASSERT_TRUE(Admin("fail", {{"count", "2"}, {"code", "500"}}).ok());
  int64_t a0 = (*client_)->attempts();
  auto r = (*client_)->Send(get);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*client_)->attempts() - a0, 3);
  ASSERT_TRUE(Admin("fail", {{"count", "1"}, {"code", "429"}, {"retryAfterSeconds", "1"}}).ok());
  auto t0 = std::chrono::steady_clock::now();
  Json pod = Pod("after-429");
  auto c = Pods().Create(pod);  // POST: 429 is safe to retry
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
  ASSERT_TRUE(Admin("reset-faults").ok());
}

TEST_F(KubeLocalTest, LeaderElectionSingleLeaderExpiryAndHandover) {
  LeaderElectionConfig c;
  c.lease_namespace = kNs;
  c.lease_name = "operator-lock";
  c.lease_duration = 2000ms;
  c.renew_deadline = 1000ms;
  c.retry_period = 100ms;
  std::atomic<int> a_started{0}, a_stopped{0}, b_started{0}, b_stopped{0};
  auto callbacks = [](std::atomic<int>* started, std::atomic<int>* stopped) {
    LeaderCallbacks cb;
    cb.on_started_leading = [started](CancelToken* stop) {
      started->fetch_add(1);
      stop->SleepFor(60s);  // "work" until leadership ends
    };
    cb.on_stopped_leading = [stopped] { stopped->fetch_add(1); };
    return cb;
  };
  c.identity = "candidate-a";
  auto a = LeaderElector::Create(*client_, c, callbacks(&a_started, &a_stopped));
  c.identity = "candidate-b";
  auto b = LeaderElector::Create(*client_, c, callbacks(&b_started, &b_stopped));
  ASSERT_TRUE(a.ok() && b.ok());
  // One round each: a creates the lease, b is refused, a renews.
  auto ra = (*a)->TryAcquireOrRenew();
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_TRUE(*ra);
  EXPECT_FALSE(*(*b)->TryAcquireOrRenew());
  EXPECT_TRUE(*(*a)->TryAcquireOrRenew());
  EXPECT_EQ((*b)->ObservedHolder(), "candidate-a");
  // a goes silent: b may take over only after the lease duration, measured on b's clock.
  auto t0 = std::chrono::steady_clock::now();
  bool b_won = false;
  while (std::chrono::steady_clock::now() - t0 < 5s) {
    auto r = (*b)->TryAcquireOrRenew();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (*r) {
      b_won = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(b_won);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1900ms);
  // Run loops: b leads (it holds the lease); a campaigns; b cancelled → releases → a leads.
  hypertrain::testing::LogCapture log(spdlog::level::info);
  CancelToken cancel_a, cancel_b;
  std::thread tb([&] { (*b)->Run(&cancel_b); });
  for (int i = 0; i < 200 && b_started == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(b_started.load(), 1);
  std::thread ta([&] { (*a)->Run(&cancel_a); });
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(a_started.load(), 0);  // never two leaders
  auto handover = std::chrono::steady_clock::now();
  cancel_b.Cancel();
  tb.join();
  EXPECT_EQ(b_stopped.load(), 1);
  for (int i = 0; i < 300 && a_started == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(a_started.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - handover, 1500ms);  // release, not expiry
  EXPECT_TRUE((*a)->IsLeader());
  cancel_a.Cancel();
  ta.join();
  EXPECT_EQ(a_stopped.load(), 1);
  EXPECT_EQ(log.Matching("leader election: candidate-b leads (lease e2e/operator-lock)").size(), 1u);
  EXPECT_EQ(log.Matching("leader election: candidate-a leads (lease e2e/operator-lock)").size(), 1u);
  EXPECT_FALSE(log.Matching("leader election: lease e2e/operator-lock is held by candidate-a").empty());
}

TEST_F(KubeLocalTest, CustomResourceWithStatusSubresourceAndWatch) {
  ResourceClient crds(*client_,
                      resources::Custom("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                        "CustomResourceDefinition", false));
  Json schema = {
      {"type", "object"},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"properties", {{"replicas", {{"type", "integer"}, {"minimum", 1}}}}}}},
        {"status", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  Json crd = {{"metadata", {{"name", "widgets.e2e.hypertrain.io"}}},
              {"spec",
               {{"group", "e2e.hypertrain.io"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"schema", {{"openAPIV3Schema", schema}}},
                                           {"subresources", {{"status", Json::object()}}}}})}}}};
  auto c = crds.Create(crd);
  ASSERT_TRUE(c.ok() || IsAlreadyExists(c.status())) << c.status().ToString();
  ResourceClient widgets(*client_,
                         resources::Custom("e2e.hypertrain.io", "v1", "widgets", "Widget"), kNs);
  bool served = false;
  for (int i = 0; i < 250 && !served; ++i) {
    served = widgets.List().ok();
    if (!served) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(served);
  // Schema validation errors come back as Invalid with the server's message.
  auto bad = widgets.Create({{"metadata", {{"name", "bad"}}}, {"spec", {{"replicas", 0}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  EXPECT_TRUE(IsInvalid(bad.status())) << bad.status().ToString();

  // Watch the collection while the object goes through create / status / delete.
  CancelToken stop;
  std::vector<std::string> seen;
  std::mutex mu;
  auto list = widgets.List();
  ASSERT_TRUE(list.ok());
  std::thread watcher([&] {
    WatchOptions wo;
    wo.resource_version = list->resource_version;
    wo.timeout_seconds = 30;
    (void)widgets.Watch(
        wo,
        [&](const WatchEvent& e) {
          std::lock_guard<std::mutex> l(mu);
          seen.push_back(std::string(WatchEventTypeName(e.type)) + " " + NameOf(e.object));
          return true;
        },
        &stop);
  });
  auto w = widgets.Create({{"metadata", {{"name", "w1"}}}, {"spec", {{"replicas", 2}}}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // The status subresource ignores spec changes and the main resource ignores status.
  Json with_status = *w;
  with_status["status"] = {{"phase", "Ready"}};
  with_status["spec"]["replicas"] = 9;
  auto st = widgets.UpdateStatus(with_status);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)["status"]["phase"], "Ready");
  EXPECT_EQ((*st)["spec"]["replicas"], 2);
  auto gen_before = (*st)["metadata"].value("generation", 0);
  auto sp = widgets.Patch("w1", {{"spec", {{"replicas", 3}}}, {"status", {{"phase", "Ignored"}}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_EQ((*sp)["status"]["phase"], "Ready");
  EXPECT_GT((*sp)["metadata"].value("generation", 0), gen_before);
  ASSERT_TRUE(widgets.Delete("w1").ok());
  ASSERT_TRUE(WaitForCount(mu, seen, 4));
  stop.Cancel();
  watcher.join();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen[0], "ADDED w1");
  EXPECT_EQ(seen[1], "MODIFIED w1");
  EXPECT_EQ(seen[2], "MODIFIED w1");
  EXPECT_EQ(seen.back(), "DELETED w1");
}

// Runs last (alphabetically after the others is not guaranteed; it restarts the server).
TEST_F(KubeLocalTest, ZInformerConvergesThroughDropsCompactionAndRestart) {
  auto pods = Pods();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(pods.Create(Pod("inf-" + std::to_string(i), "inf")).ok());
  ReflectorOptions o;
  o.label_selector = "app=inf";
  o.page_size = 3;
  o.watch_timeout_seconds = 2;
  o.backoff_base = 20ms;
  o.backoff_max = 300ms;
  Informer inf(pods, o);
  HandlerModel m;
  inf.AddEventHandlers(m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(20s));
  auto server_state = [&]() {
    std::map<std::string, std::string> s;
    ListOptions lo;
    lo.label_selector = "app=inf";
    auto l = pods.ListAll(lo);
    EXPECT_TRUE(l.ok());
    if (l.ok())
      for (const auto& it : l->items) s[NameOf(it)] = ResourceVersionOf(it);
    return s;
  };
  auto converged = [&]() {
    for (int i = 0; i < 1000; ++i) {
      auto want = server_state();
      std::map<std::string, std::string> cache;
      for (const auto& it : inf.store().List()) cache[NameOf(*it)] = ResourceVersionOf(*it);
      if (m.model() == want && cache == want) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  auto touch = [&](const std::string& name, const std::string& v) {
    return pods.Patch(name, {{"metadata", {{"annotations", {{"v", v}}}}}}).ok();
  };
  ASSERT_TRUE(converged());

  // Dropped watches with writes racing the reconnect.
  ASSERT_TRUE(Admin("drop-watches").ok());
  ASSERT_TRUE(touch("inf-0", "1"));
  ASSERT_TRUE(pods.Delete("inf-1", {}).ok());
  ASSERT_TRUE(pods.Create(Pod("inf-new-1", "inf")).ok());
  ASSERT_TRUE(converged());

  // Forced 410s: compaction expiring open watches and the next watch requests.
  ASSERT_TRUE(touch("inf-2", "1"));
  ASSERT_TRUE(Admin("compact", {{"expireOpenWatches", "true"}}).ok());
  ASSERT_TRUE(Admin("expire-next-watches", {{"count", "2"}}).ok());
  ASSERT_TRUE(pods.Delete("inf-3", {}).ok());
  ASSERT_TRUE(touch("inf-4", "1"));
  ASSERT_TRUE(converged());
  EXPECT_GE(inf.stats().relists_after_gone, 1);

  // Control-plane restart (state kept in --data-dir), with writes before and after.
  ASSERT_TRUE(touch("inf-5", "1"));
  auto rr = kl_->Restart();
  ASSERT_TRUE(rr.ok()) << rr.ToString();
  ASSERT_TRUE(pods.Delete("inf-6", {}).ok());
  ASSERT_TRUE(pods.Create(Pod("inf-new-2", "inf")).ok());
  ASSERT_TRUE(touch("inf-7", "1"));
  ASSERT_TRUE(converged());
  inf.Stop();

  std::lock_guard<std::mutex> l(m.mu_);
  EXPECT_TRUE(m.violations.empty()) << m.violations.front();
  EXPECT_EQ(m.adds, 10);    // 8 + inf-new-1 + inf-new-2, each exactly once
  EXPECT_EQ(m.deletes, 3);  // inf-1, inf-3, inf-6, each exactly once
}

}  // namespace
}  // namespace kube
