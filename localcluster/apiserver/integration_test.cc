// Drives the real kube-local binary over HTTPS on 127.0.0.1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "localcluster/testing/files.h"
#include "localcluster/testing/https_client.h"
#include "localcluster/testing/kube_local.h"

namespace kubelocal {
namespace {

using json = nlohmann::json;
using testing::ClientConfig;
using testing::HttpResponse;
using testing::KubeLocal;
using testing::Request;
using namespace std::chrono_literals;

// Token authentication and the server's CA, for the raw HTTPS client.
ClientConfig ClientOf(const KubeLocal& kl) {
  ClientConfig c;
  c.port = kl.port();
  c.ca_pem = kl.ca_pem();
  c.token = kl.token();
  return c;
}

const char kCrd[] = R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.test.io"},
  "spec": {"group": "test.io", "scope": "Namespaced",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "additionalPrinterColumns": [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"}],
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["replicas"],
          "x-kubernetes-validations": [{"rule": "self.replicas >= 1", "message": "cel not evaluated"}],
          "properties": {
            "replicas": {"type": "integer", "minimum": 1, "maximum": 64},
            "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
            "tuning": {"type": "object", "default": {}, "properties": {
              "lr": {"type": "number", "default": 0.5}}}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})";

json J(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

class KubeLocalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new KubeLocal(KubeLocal::DefaultBinary(), testing::MakeTempDir("kube_local_it"),
                            {"--bookmark-interval-ms=200", "--gc-period-ms=100", "--v=1"});
    const auto started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0);  // graceful SIGTERM
    delete server_;
  }
  ClientConfig C() const { return ClientOf(*server_); }
  HttpResponse Do(const std::string& m, const std::string& path, const json& body = nullptr,
                  const std::string& ct = "application/json",
                  const std::map<std::string, std::string>& headers = {}) {
    return Request(C(), m, path, body.is_null() ? "" : body.dump(), ct, headers);
  }
  void CreateNamespace(const std::string& ns) {
    auto r = Do("POST", "/api/v1/namespaces", {{"metadata", {{"name", ns}}}});
    ASSERT_EQ(r.code, 201) << r.body;
  }
  json Pod(const std::string& name, json labels = json::object()) {
    return {{"apiVersion", "v1"}, {"kind", "Pod"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "img"}}}}}}};
  }
  // Polls `path` until it answers 404 (or the time is up).
  bool WaitGone(const std::string& path, std::chrono::milliseconds limit = 5s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (Do("GET", path).code == 404) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  static inline KubeLocal* server_ = nullptr;
};

TEST_F(KubeLocalTest, AuthenticationByTokenAndClientCertificate) {
  ClientConfig anon = C();
  anon.token.clear();
  auto r = Request(anon, "GET", "/api/v1/namespaces");
  ASSERT_EQ(r.code, 401);
  EXPECT_EQ(J(r)["kind"], "Status");
  EXPECT_EQ(J(r)["reason"], "Unauthorized");
  EXPECT_EQ(Request(anon, "GET", "/healthz").code, 200);
  ClientConfig wrong = C();
  wrong.token = "not-the-token";
  EXPECT_EQ(Request(wrong, "GET", "/api/v1/namespaces").code, 401);
  // A client certificate issued by the cluster CA authenticates without a token.
  auto cert = Do("POST", "/_local/client-cert?user=alice&groups=devs");
  ASSERT_EQ(cert.code, 200) << cert.body;
  ClientConfig tls = anon;
  tls.client_cert_pem = J(cert)["certificate"];
  tls.client_key_pem = J(cert)["key"];
  EXPECT_EQ(Request(tls, "GET", "/api/v1/namespaces/default").code, 200);
  // A client that trusts another CA refuses the server.
  ClientConfig bad_ca = C();
  bad_ca.ca_pem = J(cert)["certificate"];  // not a CA for the server cert
  auto f = Request(bad_ca, "GET", "/healthz");
  EXPECT_EQ(f.code, 0);
  EXPECT_NE(f.error.find("certificate verify failed"), std::string::npos) << f.error;
}

TEST_F(KubeLocalTest, Discovery) {
  auto v = Do("GET", "/version");
  EXPECT_EQ(J(v)["major"], "1");
  auto api = J(Do("GET", "/api"));
  EXPECT_EQ(api["versions"], json({"v1"}));
  auto core = J(Do("GET", "/api/v1"));
  bool pods = false, pod_status = false;
  for (const auto& r : core["resources"]) {
    if (r["name"] == "pods") {
      pods = true;
      EXPECT_EQ(r["kind"], "Pod");
      EXPECT_EQ(r["namespaced"], true);
      EXPECT_EQ(r["shortNames"], json({"po"}));
    }
    pod_status = pod_status || r["name"] == "pods/status";
  }
  EXPECT_TRUE(pods && pod_status);
  auto groups = J(Do("GET", "/apis"));
  bool coordination = false;
  for (const auto& g : groups["groups"]) coordination = coordination || g["name"] == "coordination.k8s.io";
  EXPECT_TRUE(coordination);
  EXPECT_EQ(J(Do("GET", "/apis/coordination.k8s.io/v1"))["resources"][0]["name"], "leases");
  auto missing = Do("GET", "/apis/nope.io/v1/things");
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(J(missing)["reason"], "NotFound");
}

TEST_F(KubeLocalTest, CrudConflictsAndGenerateName) {
  CreateNamespace("crud");
  auto c = Do("POST", "/api/v1/namespaces/crud/pods", Pod("p1"));
  ASSERT_EQ(c.code, 201) << c.body;
  json p = J(c);
  EXPECT_EQ(p["metadata"]["namespace"], "crud");
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/crud/pods", Pod("p1")).code, 409);
  auto dup = J(Do("POST", "/api/v1/namespaces/crud/pods", Pod("p1")));
  EXPECT_EQ(dup["reason"], "AlreadyExists");
  // Update with the current resourceVersion, then with the stale one.
  json upd = p;
  upd["metadata"]["labels"] = {{"v", "2"}};
  auto u = Do("PUT", "/api/v1/namespaces/crud/pods/p1", upd);
  ASSERT_EQ(u.code, 200) << u.body;
  EXPECT_NE(J(u)["metadata"]["resourceVersion"], p["metadata"]["resourceVersion"]);
  auto stale = Do("PUT", "/api/v1/namespaces/crud/pods/p1", upd);
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(J(stale)["reason"], "Conflict");
  // Patches.
  auto mp = Do("PATCH", "/api/v1/namespaces/crud/pods/p1", {{"metadata", {{"annotations", {{"a", "b"}}}}}},
               "application/merge-patch+json");
  ASSERT_EQ(mp.code, 200) << mp.body;
  EXPECT_EQ(J(mp)["metadata"]["annotations"]["a"], "b");
  auto jp = Do("PATCH", "/api/v1/namespaces/crud/pods/p1",
               json::array({{{"op", "replace"}, {"path", "/metadata/labels/v"}, {"value", "3"}}}),
               "application/json-patch+json");
  EXPECT_EQ(J(jp)["metadata"]["labels"]["v"], "3");
  EXPECT_EQ(Do("PATCH", "/api/v1/namespaces/crud/pods/p1", json::object(), "text/plain").code, 415);
  // Status subresource of a pod.
  auto st = Do("PATCH", "/api/v1/namespaces/crud/pods/p1/status",
               {{"status", {{"phase", "Running"}}}, {"metadata", {{"labels", {{"v", "x"}}}}}},
               "application/merge-patch+json");
  ASSERT_EQ(st.code, 200) << st.body;
  EXPECT_EQ(J(st)["status"]["phase"], "Running");
  EXPECT_EQ(J(st)["metadata"]["labels"]["v"], "3");
  // generateName.
  json g = Pod("");
  g["metadata"].erase("name");
  g["metadata"]["generateName"] = "gen-";
  auto gr = Do("POST", "/api/v1/namespaces/crud/pods", g);
  ASSERT_EQ(gr.code, 201);
  EXPECT_EQ(J(gr)["metadata"]["name"].get<std::string>().substr(0, 4), "gen-");
  // Delete and NotFound.
  EXPECT_EQ(Do("DELETE", "/api/v1/namespaces/crud/pods/p1").code, 200);
  auto nf = Do("GET", "/api/v1/namespaces/crud/pods/p1");
  EXPECT_EQ(nf.code, 404);
  EXPECT_EQ(J(nf)["message"], "pods \"p1\" not found");
  EXPECT_EQ(J(nf)["details"]["kind"], "pods");
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/absent/pods", Pod("x")).code, 404);
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/crud/pods", "not json", "application/json").code, 400);
}

TEST_F(KubeLocalTest, SelectorsAndPaging) {
  CreateNamespace("sel");
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(Do("POST", "/api/v1/namespaces/sel/pods",
                 Pod("p" + std::to_string(i), {{"tier", i % 2 ? "odd" : "even"}, {"i", std::to_string(i)}})).code, 201);
  }
  Do("PATCH", "/api/v1/namespaces/sel/pods/p3/status", {{"status", {{"phase", "Running"}}}},
     "application/merge-patch+json");
  auto names = [](const json& list) {
    std::vector<std::string> out;
    for (const auto& i : list["items"]) out.push_back(i["metadata"]["name"]);
    return out;
  };
  EXPECT_EQ(names(J(Do("GET", "/api/v1/namespaces/sel/pods?labelSelector=tier%3Dodd"))),
            (std::vector<std::string>{"p1", "p3", "p5"}));
  EXPECT_EQ(names(J(Do("GET", "/api/v1/namespaces/sel/pods?labelSelector=tier%20in%20(odd),i%20notin%20(1,5)"))),
            (std::vector<std::string>{"p3"}));
  EXPECT_EQ(names(J(Do("GET", "/api/v1/namespaces/sel/pods?fieldSelector=status.phase%3DRunning"))),
            (std::vector<std::string>{"p3"}));
  EXPECT_EQ(names(J(Do("GET", "/api/v1/pods?fieldSelector=metadata.namespace%3Dsel,metadata.name!%3Dp0&labelSelector=!nothing"))).size(), 6u);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/sel/pods?labelSelector=a%20in%20(").code, 400);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/sel/pods?fieldSelector=spec.bogus%3D1").code, 400);
  // Paging: 3 + 3 + 1.
  std::vector<std::string> all;
  std::string cont;
  int pages = 0;
  do {
    auto page = J(Do("GET", "/api/v1/namespaces/sel/pods?limit=3" + (cont.empty() ? "" : "&continue=" + cont)));
    for (auto& n : names(page)) all.push_back(n);
    cont = page["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(all.size(), 7u);
  // A continue token from before a compaction is 410 Expired.
  auto first = J(Do("GET", "/api/v1/namespaces/sel/pods?limit=3"));
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/sel/pods", Pod("later")).code, 201);
  ASSERT_EQ(Do("POST", "/_local/compact").code, 200);
  auto expired = Do("GET", "/api/v1/namespaces/sel/pods?limit=3&continue=" +
                           first["metadata"]["continue"].get<std::string>());
  EXPECT_EQ(expired.code, 410);
  EXPECT_EQ(J(expired)["reason"], "Expired");
}

TEST_F(KubeLocalTest, WatchEventsBookmarksTimeoutAnd410) {
  CreateNamespace("watch");
  auto list = J(Do("GET", "/api/v1/namespaces/watch/configmaps"));
  std::string rv = list["metadata"]["resourceVersion"];
  std::vector<json> events;
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    Do("POST", "/api/v1/namespaces/watch/configmaps", {{"metadata", {{"name", "a"}, {"labels", {{"w", "1"}}}}}});
    Do("POST", "/api/v1/namespaces/watch/configmaps", {{"metadata", {{"name", "skip"}}}});
    Do("PATCH", "/api/v1/namespaces/watch/configmaps/a", {{"data", {{"k", "v"}}}}, "application/merge-patch+json");
    Do("DELETE", "/api/v1/namespaces/watch/configmaps/a");
  });
  int code = testing::Stream(
      C(), "/api/v1/namespaces/watch/configmaps?watch=1&allowWatchBookmarks=true&labelSelector=w&resourceVersion=" + rv,
      [&](const std::string& line) {
        events.push_back(json::parse(line));
        int bookmarks = 0;
        for (auto& e : events) bookmarks += e["type"] == "BOOKMARK";
        return bookmarks < 2 || events.size() < 5;
      },
      std::chrono::steady_clock::now() + 10s);
  writer.join();
  EXPECT_EQ(code, 200);
  std::vector<std::string> types;
  std::string last_rv;
  for (auto& e : events) {
    if (e["type"] != "BOOKMARK") {
      types.push_back(e["type"]);
      last_rv = e["object"]["metadata"]["resourceVersion"];
    }
  }
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "BOOKMARK");
  EXPECT_EQ(events.back()["object"]["kind"], "ConfigMap");
  // Bookmarks never run ahead of delivered events.
  EXPECT_GE(std::stoull(events.back()["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(last_rv));

  // timeoutSeconds ends the stream normally.
  auto t0 = std::chrono::steady_clock::now();
  int lines = 0;
  code = testing::Stream(C(), "/api/v1/namespaces/watch/configmaps?watch=true&timeoutSeconds=1&resourceVersion=" + rv,
                         [&](const std::string&) { return ++lines < 100; }, t0 + 10s);
  EXPECT_EQ(code, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);

  // After compaction the old start point is an ERROR 410 event in a 200 stream.
  ASSERT_EQ(Do("POST", "/_local/compact").code, 200);
  std::vector<json> err;
  code = testing::Stream(C(), "/api/v1/namespaces/watch/configmaps?watch=1&resourceVersion=" + rv,
                         [&](const std::string& l) { err.push_back(json::parse(l)); return true; },
                         std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(code, 200);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0]["type"], "ERROR");
  EXPECT_EQ(err[0]["object"]["code"], 410);
  EXPECT_EQ(err[0]["object"]["reason"], "Expired");
  // Injected: the next watch gets a 410 even from a fresh version.
  Do("POST", "/_local/expire-next-watches?count=1");
  err.clear();
  testing::Stream(C(), "/api/v1/namespaces/watch/configmaps?watch=1",
                  [&](const std::string& l) { err.push_back(json::parse(l)); return true; },
                  std::chrono::steady_clock::now() + 5s);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0]["object"]["code"], 410);
}

TEST_F(KubeLocalTest, WatchListSendsInitialEventsThenBookmark) {
  CreateNamespace("wlist");
  for (const char* n : {"a", "b"}) {
    ASSERT_EQ(Do("POST", "/api/v1/namespaces/wlist/configmaps", {{"metadata", {{"name", n}}}}).code, 201);
  }
  std::vector<json> ev;
  int code = testing::Stream(
      C(), "/api/v1/namespaces/wlist/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
      [&](const std::string& l) { ev.push_back(json::parse(l)); return ev.size() < 3; },
      std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(code, 200);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[1]["type"], "ADDED");
  EXPECT_EQ(ev[2]["type"], "BOOKMARK");
  EXPECT_EQ(ev[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/wlist/configmaps?watch=1&sendInitialEvents=true").code, 422);
}

TEST_F(KubeLocalTest, DropWatchesClosesStreams) {
  // Close watches left by earlier tests so the count below is only ours.
  ASSERT_EQ(Do("POST", "/_local/drop-watches").code, 200);
  std::atomic<int> code{-1};
  std::thread watcher([&] {
    code = testing::Stream(C(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" +
                                    J(Do("GET", "/api/v1/namespaces/default/configmaps"))["metadata"]["resourceVersion"].get<std::string>(),
                           [](const std::string&) { return true; }, std::chrono::steady_clock::now() + 20s);
  });
  // Wait until the watch is registered, then drop it.
  for (int i = 0; i < 500 && J(Do("GET", "/_local/state"))["watchers"] == 0; ++i) std::this_thread::sleep_for(20ms);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Do("POST", "/_local/drop-watches").code, 200);
  watcher.join();
  EXPECT_EQ(code, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// The watch faults a client must survive: events cut into random chunks, a
// stalled stream, and 410 as an HTTP status instead of an ERROR event.
TEST_F(KubeLocalTest, WatchFaultsChunkingStallAndHttp410) {
  auto reset_faults = [this] { Do("POST", "/_local/reset-faults"); };
  struct Reset {
    std::function<void()> f;
    ~Reset() { f(); }
  } reset{reset_faults};
  CreateNamespace("wfault");
  auto rv_now = [&] { return J(Do("GET", "/api/v1/namespaces/wfault/configmaps"))["metadata"]["resourceVersion"].get<std::string>(); };
  auto create = [&](const std::string& name) {
    return Do("POST", "/api/v1/namespaces/wfault/configmaps", {{"metadata", {{"name", name}}}}).code;
  };

  // 1. Chunking: events split over chunks and packed together, each still whole and in order.
  ASSERT_EQ(Do("POST", "/_local/watch-chunking?seed=7").code, 200);
  EXPECT_EQ(Do("POST", "/_local/watch-chunking?seed=x").code, 400);
  std::string rv = rv_now();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(create("c" + std::to_string(i)), 201);
  std::vector<json> events;
  std::vector<uint64_t> chunks;
  int code = testing::Stream(
      C(), "/api/v1/namespaces/wfault/configmaps?watch=1&resourceVersion=" + rv,
      [&](const std::string& l) { events.push_back(json::parse(l)); return events.size() < 5; },
      std::chrono::steady_clock::now() + 10s, nullptr, &chunks);
  EXPECT_EQ(code, 200);
  ASSERT_EQ(events.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(events[i]["object"]["metadata"]["name"], "c" + std::to_string(i));
  EXPECT_GT(chunks.size(), 5u);  // not one chunk per event
  ASSERT_EQ(Do("POST", "/_local/watch-chunking?seed=0").code, 200);

  // 2. Stalled: nothing arrives (not even bookmarks) until the stall ends.
  ASSERT_EQ(Do("POST", "/_local/stall-watches?stalled=true").code, 200);
  rv = rv_now();
  std::mutex mu;
  std::vector<json> stalled;
  std::thread watcher([&] {
    testing::Stream(C(), "/api/v1/namespaces/wfault/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv,
                    [&](const std::string& l) {
                      std::lock_guard<std::mutex> g(mu);
                      stalled.push_back(json::parse(l));
                      return false;
                    },
                    std::chrono::steady_clock::now() + 10s);
  });
  ASSERT_EQ(create("s1"), 201);
  std::this_thread::sleep_for(600ms);  // three bookmark intervals
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(stalled.empty());
  }
  ASSERT_EQ(Do("POST", "/_local/stall-watches?stalled=false").code, 200);
  watcher.join();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0]["type"], "ADDED");
  EXPECT_EQ(stalled[0]["object"]["metadata"]["name"], "s1");

  // 3. An expired start point as HTTP 410 (compaction, and the injected fault).
  ASSERT_EQ(Do("POST", "/_local/watch-expiry?as=http").code, 200);
  EXPECT_EQ(Do("POST", "/_local/watch-expiry?as=maybe").code, 400);
  EXPECT_EQ(J(Do("GET", "/_local/state"))["faults"]["watchExpiry"], "http");
  ASSERT_EQ(Do("POST", "/_local/compact").code, 200);
  auto gone = Do("GET", "/api/v1/namespaces/wfault/configmaps?watch=1&resourceVersion=" + rv);
  EXPECT_EQ(gone.code, 410);
  EXPECT_EQ(J(gone)["reason"], "Expired");
  ASSERT_EQ(Do("POST", "/_local/expire-next-watches?count=1").code, 200);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/wfault/configmaps?watch=1").code, 410);

  // 4. Open watches expired by compaction in that style just end; what they
  //    had not delivered is gone (the client re-lists).
  ASSERT_EQ(Do("POST", "/_local/drop-watches").code, 200);  // so the count below is only this watch
  ASSERT_EQ(Do("POST", "/_local/stall-watches").code, 200);
  rv = rv_now();
  std::vector<json> cut;
  std::atomic<int> cut_code{-1};
  std::string cut_error;
  std::thread cut_watcher([&] {
    cut_code = testing::Stream(C(), "/api/v1/namespaces/wfault/configmaps?watch=1&resourceVersion=" + rv,
                               [&](const std::string& l) { cut.push_back(json::parse(l)); return true; },
                               std::chrono::steady_clock::now() + 10s, &cut_error);
  });
  for (int i = 0; i < 500 && J(Do("GET", "/_local/state"))["watchers"] == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(create("lost"), 201);
  ASSERT_EQ(Do("POST", "/_local/compact?expireOpenWatches=true").code, 200);
  cut_watcher.join();
  EXPECT_EQ(cut_code, 200) << cut_error;
  EXPECT_TRUE(cut.empty()) << cut.size() << " events after the cut";
}

TEST_F(KubeLocalTest, CustomResourcesValidationDefaultsStatusAndTables) {
  auto crd = Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json::parse(kCrd));
  ASSERT_EQ(crd.code, 201) << crd.body;
  auto disc = J(Do("GET", "/apis/test.io/v1"));
  ASSERT_EQ(disc["resources"].size(), 2u);
  EXPECT_EQ(disc["resources"][0]["shortNames"], json({"gd"}));
  EXPECT_EQ(disc["resources"][1]["name"], "gadgets/status");
  const std::string base = "/apis/test.io/v1/namespaces/default/gadgets";
  auto bad = Do("POST", base, {{"apiVersion", "test.io/v1"}, {"kind", "Gadget"},
                               {"metadata", {{"name", "bad"}}}, {"spec", {{"replicas", 100}, {"mode", "slow"}}}});
  ASSERT_EQ(bad.code, 422) << bad.body;
  json st = J(bad);
  EXPECT_EQ(st["reason"], "Invalid");
  std::set<std::string> fields;
  for (auto& c : st["details"]["causes"]) fields.insert(c["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"spec.replicas", "spec.mode"}));
  auto ok = Do("POST", base, {{"apiVersion", "test.io/v1"}, {"kind", "Gadget"},
                              {"metadata", {{"name", "g1"}}}, {"spec", {{"replicas", 2}}},
                              {"status", {{"ignored", true}}}});
  ASSERT_EQ(ok.code, 201) << ok.body;
  EXPECT_EQ(J(ok)["spec"]["mode"], "safe");
  EXPECT_EQ(J(ok)["spec"]["tuning"]["lr"], 0.5);
  EXPECT_FALSE(J(ok).contains("status"));
  auto s = Do("PUT", base + "/g1/status",
              [&] { json o = J(ok); o["status"] = {{"conditions", {{{"type", "Running"}}}}}; o["spec"]["replicas"] = 9; return o; }());
  ASSERT_EQ(s.code, 200) << s.body;
  EXPECT_EQ(J(s)["spec"]["replicas"], 2);
  EXPECT_EQ(J(s)["metadata"]["generation"], 1);
  auto spec = Do("PATCH", base + "/g1", {{"spec", {{"replicas", 4}}}}, "application/merge-patch+json");
  EXPECT_EQ(J(spec)["metadata"]["generation"], 2);
  EXPECT_EQ(J(spec)["status"]["conditions"][0]["type"], "Running");
  auto table = Do("GET", base, nullptr, "", {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}});
  json t = J(table);
  ASSERT_EQ(t["kind"], "Table") << table.body;
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "Replicas");
  EXPECT_EQ(t["rows"][0]["cells"], json({"g1", 4, "Running"}));
  // Deleting the CRD removes the type and its objects.
  EXPECT_EQ(Do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.test.io").code, 200);
  EXPECT_EQ(Do("GET", base).code, 404);
}

TEST_F(KubeLocalTest, CascadingDeletionAndFinalizers) {
  CreateNamespace("gc");
  auto mk = [&](const std::string& name, json owner) {
    json o = {{"metadata", {{"name", name}}}};
    if (!owner.is_null()) {
      o["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"}, {"kind", "ConfigMap"},
                                           {"name", owner["metadata"]["name"]},
                                           {"uid", owner["metadata"]["uid"]}, {"blockOwnerDeletion", true}}};
    }
    auto r = Do("POST", "/api/v1/namespaces/gc/configmaps", o);
    EXPECT_EQ(r.code, 201) << r.body;
    return J(r);
  };
  const std::string cm = "/api/v1/namespaces/gc/configmaps/";
  json owner = mk("owner", nullptr);
  json child = mk("child", owner);
  mk("grandchild", child);
  ASSERT_EQ(Do("DELETE", cm + "owner").code, 200);
  EXPECT_TRUE(WaitGone(cm + "child"));
  EXPECT_TRUE(WaitGone(cm + "grandchild"));
  // Foreground: the owner stays (deletionTimestamp, finalizer) until the dependent is gone.
  json fg = mk("fg", nullptr);
  json dep = mk("dep", fg);
  auto d = Do("DELETE", cm + "fg", {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Foreground"}});
  ASSERT_EQ(d.code, 200);
  EXPECT_TRUE(J(d)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(WaitGone(cm + "dep"));
  EXPECT_TRUE(WaitGone(cm + "fg"));
  // Orphan.
  json o = mk("orphaner", nullptr);
  mk("kept", o);
  ASSERT_EQ(Do("DELETE", cm + "orphaner?propagationPolicy=Orphan").code, 200);
  auto kept = Do("GET", cm + "kept");
  ASSERT_EQ(kept.code, 200);
  EXPECT_FALSE(J(kept)["metadata"].contains("ownerReferences"));
  // Finalizers hold the object until removed.
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/gc/configmaps", {{"metadata", {{"name", "fin"}, {"finalizers", {"test/hold"}}}}}).code, 201);
  ASSERT_EQ(Do("DELETE", cm + "fin").code, 200);
  auto held = Do("GET", cm + "fin");
  ASSERT_EQ(held.code, 200);
  EXPECT_TRUE(J(held)["metadata"].contains("deletionTimestamp"));
  ASSERT_EQ(Do("PATCH", cm + "fin", {{"metadata", {{"finalizers", nullptr}}}}, "application/merge-patch+json").code, 200);
  EXPECT_EQ(Do("GET", cm + "fin").code, 404);
  // Preconditions.
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/gc/configmaps", {{"metadata", {{"name", "pre"}}}}).code, 201);
  EXPECT_EQ(Do("DELETE", cm + "pre", {{"preconditions", {{"uid", "wrong"}}}}).code, 409);
  // Graceful pod deletion on a node; the node agent finishes it with grace 0.
  json pod = Pod("scheduled");
  pod["spec"]["nodeName"] = "node-1";
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/gc/pods", pod).code, 201);
  auto gd = J(Do("DELETE", "/api/v1/namespaces/gc/pods/scheduled"));
  EXPECT_EQ(gd["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/gc/pods/scheduled").code, 200);
  EXPECT_EQ(Do("DELETE", "/api/v1/namespaces/gc/pods/scheduled", {{"gracePeriodSeconds", 0}}).code, 200);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/gc/pods/scheduled").code, 404);
}

TEST_F(KubeLocalTest, InjectedFaults) {
  ASSERT_EQ(Do("POST", "/_local/fail?count=2&code=429&retryAfterSeconds=3").code, 200);
  auto a = Do("GET", "/api/v1/namespaces");
  EXPECT_EQ(a.code, 429);
  EXPECT_EQ(a.headers["Retry-After"], "3");
  EXPECT_EQ(J(a)["reason"], "TooManyRequests");
  EXPECT_EQ(J(a)["details"]["retryAfterSeconds"], 3);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces").code, 429);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces").code, 200);
  ASSERT_EQ(Do("POST", "/_local/fail?count=1&code=500").code, 200);
  auto b = Do("GET", "/api/v1/namespaces");
  EXPECT_EQ(b.code, 500);
  EXPECT_EQ(J(b)["reason"], "InternalError");
  EXPECT_EQ(Do("POST", "/_local/fail?code=418").code, 400);
  ASSERT_EQ(Do("POST", "/_local/latency?ms=300").code, 200);
  auto t0 = std::chrono::steady_clock::now();
  Do("GET", "/api/v1/namespaces");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  ASSERT_EQ(Do("POST", "/_local/reset-faults").code, 200);
}

// Own server: restarts keep state and keep resourceVersions increasing.
TEST(KubeLocalRestart, StateSurvivesRestartEndpointAndSigterm) {
  KubeLocal server(KubeLocal::DefaultBinary(), testing::MakeTempDir("kube_local_restart"));
  ASSERT_TRUE(server.Start().ok()) << server.log();
  auto c = ClientOf(server);
  auto r = Request(c, "POST", "/api/v1/namespaces/default/configmaps",
                   json{{"metadata", {{"name", "keep"}}}, {"data", {{"k", "v"}}}}.dump());
  ASSERT_EQ(r.code, 201);
  uint64_t rv1 = std::stoull(J(r)["metadata"]["resourceVersion"].get<std::string>());
  const int pid = server.pid();
  // In-place restart (same pid, same port, re-exec).
  ASSERT_EQ(Request(c, "POST", "/_local/restart").code, 202);
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(server.WaitHealthy(15s).ok()) << server.log();
  EXPECT_EQ(server.pid(), pid);
  auto got = Request(c, "GET", "/api/v1/namespaces/default/configmaps/keep");
  ASSERT_EQ(got.code, 200) << got.body;
  EXPECT_EQ(J(got)["data"]["k"], "v");
  // Full stop and a new process on the same port and data dir.
  const int port = server.port();
  EXPECT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Start(port).ok()) << server.log();
  c = ClientOf(server);
  got = Request(c, "GET", "/api/v1/namespaces/default/configmaps/keep");
  ASSERT_EQ(got.code, 200);
  auto r2 = Request(c, "POST", "/api/v1/namespaces/default/configmaps", json{{"metadata", {{"name", "after"}}}}.dump());
  ASSERT_EQ(r2.code, 201);
  EXPECT_GT(std::stoull(J(r2)["metadata"]["resourceVersion"].get<std::string>()), rv1);
  // A watch from before the restart point is told to re-list (history is gone).
  std::vector<json> ev;
  testing::Stream(c, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + std::to_string(rv1 - 1),
                  [&](const std::string& l) { ev.push_back(json::parse(l)); return true; },
                  std::chrono::steady_clock::now() + 5s);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["object"]["code"], 410);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace kubelocal
