// Request shapes of the typed client, checked on the wire (loopback server).
#include "kube/resources.h"

#include <gtest/gtest.h>

#include "localcluster/testing/scripted_server.h"

namespace kube {
namespace {

using kubelocal::HttpRequest;
using kubelocal::ResponseSink;
using kubelocal::testing::Respond;
using kubelocal::testing::ScriptedServer;

struct Recorder {
  std::mutex mu;
  std::vector<HttpRequest> reqs;
  std::function<void(const HttpRequest&, ResponseSink&)> respond = [](const HttpRequest& r, ResponseSink& c) {
    Respond(c, 200, r.body.empty() ? "{}" : r.body);
  };
  kubelocal::testing::Handler Handler() {
    return [this](const HttpRequest& r, ResponseSink& c) {
      {
        std::lock_guard<std::mutex> l(mu);
        reqs.push_back(r);
      }
      respond(r, c);
    };
  }
  HttpRequest Last() {
    std::lock_guard<std::mutex> l(mu);
    return reqs.back();
  }
};

std::shared_ptr<RestClient> Client(const ScriptedServer& srv) {
  Config c;
  c.server = srv.url();
  c.ca_pem = srv.ca_pem();
  c.qps = 0;
  c.retry_base = std::chrono::milliseconds(5);
  return *RestClient::Create(c);
}

TEST(ResourceTypeTest, Paths) {
  EXPECT_EQ(resources::kPods.ObjectPath("ns", "p"), "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(resources::kPods.CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(resources::kNodes.ObjectPath("ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(resources::kLeases.CollectionPath("kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
  auto tj = resources::Custom("hypertrain.io", "v1alpha1", "trainingjobs", "TrainingJob");
  EXPECT_EQ(tj.ObjectPath("ns", "j"), "/apis/hypertrain.io/v1alpha1/namespaces/ns/trainingjobs/j");
  EXPECT_EQ(tj.ApiVersion(), "hypertrain.io/v1alpha1");
}

TEST(ResourceClientTest, MutationsOnTheWire) {
  Recorder rec;
  ScriptedServer srv(rec.Handler());
  ResourceClient pods(Client(srv), resources::kPods, "ns");

  ASSERT_TRUE(pods.Create({{"metadata", {{"generateName", "w-"}}}}).ok());
  auto r = rec.Last();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/api/v1/namespaces/ns/pods");
  Json body = Json::parse(r.body);
  EXPECT_EQ(body["apiVersion"], "v1");
  EXPECT_EQ(body["kind"], "Pod");
  EXPECT_EQ(body["metadata"]["namespace"], "ns");

  ASSERT_TRUE(pods.Patch("p", {{"metadata", {{"annotations", {{"progress", "50"}}}}}}).ok());
  r = rec.Last();
  EXPECT_EQ(r.method, "PATCH");
  EXPECT_EQ(r.path, "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(r.headers["content-type"], "application/merge-patch+json");

  ASSERT_TRUE(pods.Apply({{"metadata", {{"name", "p"}}}}, "hypertrain-operator", true).ok());
  r = rec.Last();
  EXPECT_EQ(r.headers["content-type"], "application/apply-patch+yaml");
  EXPECT_EQ(r.query["fieldManager"], "hypertrain-operator");
  EXPECT_EQ(r.query["force"], "true");

  DeleteOptions d;
  d.propagation_policy = "Foreground";
  d.grace_period_seconds = 0;
  d.precondition_uid = "u1";
  d.precondition_resource_version = "42";
  ASSERT_TRUE(pods.Delete("p", d).ok());
  r = rec.Last();
  EXPECT_EQ(r.method, "DELETE");
  body = Json::parse(r.body);
  EXPECT_EQ(body["propagationPolicy"], "Foreground");
  EXPECT_EQ(body["gracePeriodSeconds"], 0);
  EXPECT_EQ(body["preconditions"]["uid"], "u1");
  EXPECT_EQ(body["preconditions"]["resourceVersion"], "42");

  ASSERT_TRUE(pods.PatchStatus("p", {{"status", {{"phase", "Running"}}}}).ok());
  EXPECT_EQ(rec.Last().path, "/api/v1/namespaces/ns/pods/p/status");
  ASSERT_TRUE(pods.UpdateStatus({{"metadata", {{"name", "p"}, {"resourceVersion", "7"}}}}).ok());
  EXPECT_EQ(rec.Last().method, "PUT");
  EXPECT_EQ(rec.Last().path, "/api/v1/namespaces/ns/pods/p/status");
  EXPECT_EQ(Json::parse(rec.Last().body)["kind"], "Pod");
  ASSERT_TRUE(pods.GetStatus("p").ok());
  EXPECT_EQ(rec.Last().method, "GET");
  EXPECT_EQ(rec.Last().path, "/api/v1/namespaces/ns/pods/p/status");
  ASSERT_TRUE(pods.Update({{"metadata", {{"name", "p"}}}}).ok());
  EXPECT_EQ(rec.Last().path, "/api/v1/namespaces/ns/pods/p");
}

TEST(ResourceClientTest, BadInputsAreRejectedLocally) {
  Recorder rec;
  ScriptedServer srv(rec.Handler());
  ResourceClient all(Client(srv), resources::kPods, "");  // all namespaces
  EXPECT_EQ(all.Get("p").status().code(), StatusCode::kInvalidArgument);
  ResourceClient pods(Client(srv), resources::kPods, "ns");
  EXPECT_EQ(pods.Get("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Get("a/b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Create(Json::object()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Create({{"metadata", {{"name", "x"}, {"namespace", "other"}}}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Apply({{"metadata", {{"name", "x"}}}}, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Get("p", "scale").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pods.Update({{"metadata", {{"name", "p"}, {"namespace", "other"}}}}, "status").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(srv.requests(), 0);
}

TEST(ResourceClientTest, ListAllFollowsContinueAndRestartsOnExpiry) {
  Recorder rec;
  std::atomic<int> expire_once{1};
  rec.respond = [&](const HttpRequest& r, ResponseSink& c) {
    std::string cont = r.query.count("continue") ? r.query.at("continue") : "";
    int start = cont.empty() ? 0 : std::stoi(cont);
    if (start == 4 && expire_once.exchange(0) == 1) {
      Respond(c, 410,
                R"({"kind":"Status","code":410,"reason":"Expired","message":"continue expired"})");
      return;
    }
    Json items = Json::array();
    for (int i = start; i < std::min(start + 2, 5); ++i)
      items.push_back({{"metadata", {{"name", "n" + std::to_string(i)}}}});
    Json list = {{"kind", "NodeList"}, {"metadata", {{"resourceVersion", "99"}}}, {"items", items}};
    if (start + 2 < 5) list["metadata"]["continue"] = std::to_string(start + 2);
    Respond(c, 200, list.dump());
  };
  ScriptedServer srv(rec.Handler());
  ResourceClient nodes(Client(srv), resources::kNodes);
  ListOptions o;
  o.limit = 2;
  o.label_selector = "pool=gpu";
  auto all = nodes.ListAll(o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->items.size(), 5u);
  EXPECT_EQ(all->items[4]["metadata"]["name"], "n4");
  EXPECT_EQ(all->items[0]["kind"], "Node");  // restored on list items
  EXPECT_EQ(all->resource_version, "99");
  std::lock_guard<std::mutex> l(rec.mu);
  // 3 pages, the third expired → restart from scratch: 3 more.
  EXPECT_EQ(rec.reqs.size(), 6u);
  EXPECT_EQ(rec.reqs[0].query["labelSelector"], "pool=gpu");
  EXPECT_EQ(rec.reqs[0].query["limit"], "2");
  EXPECT_EQ(rec.reqs[0].query.count("continue"), 0u);
  EXPECT_EQ(rec.reqs[3].query.count("continue"), 0u);
}

TEST(ResourceClientTest, UpdateWithRetryRereadsOnConflict) {
  std::atomic<int> rv{1};
  std::atomic<int> puts{0};
  Recorder rec;
  rec.respond = [&](const HttpRequest& r, ResponseSink& c) {
    if (r.method == "GET") {
      Respond(c, 200,
                Json{{"metadata", {{"name", "j"}, {"resourceVersion", std::to_string(rv.load())}}}}
                    .dump());
      return;
    }
    Json b = Json::parse(r.body);
    puts++;
    // Another writer bumps the version once, right after the first read.
    if (puts == 1) rv = 2;
    if (b["metadata"]["resourceVersion"] != std::to_string(rv.load())) {
      Respond(c, 409, R"({"kind":"Status","code":409,"reason":"Conflict","message":"modified"})");
      return;
    }
    Respond(c, 200, r.body);
  };
  ScriptedServer srv(rec.Handler());
  ResourceClient jobs(Client(srv),
                      resources::Custom("hypertrain.io", "v1", "trainingjobs", "TrainingJob"),
                      "ns");
  auto r = jobs.UpdateWithRetry("j", [](Json& o) -> Status {
    o["spec"]["replicas"] = 4;
    return {};
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(puts.load(), 2);
  EXPECT_EQ((*r)["spec"]["replicas"], 4);
}

}  // namespace
}  // namespace kube
