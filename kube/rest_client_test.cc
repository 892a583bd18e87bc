#include "kube/rest_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "core/atomic_file.h"
#include "core/testing/log_capture.h"
#include "localcluster/testing/files.h"
#include "localcluster/testing/scripted_server.h"

namespace kube {
namespace {

using kubelocal::HttpRequest;
using kubelocal::ResponseSink;
using kubelocal::testing::MakeTempDir;
using kubelocal::testing::Respond;
using kubelocal::testing::ScriptedServer;
using Clock = std::chrono::steady_clock;

std::string StatusBody(int code, const std::string& reason, const std::string& msg) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", msg}}
      .dump();
}

Config TestConfig(const std::string& url, const std::string& ca_pem) {
  Config c;
  c.server = url;
  c.ca_pem = ca_pem;
  c.retry_base = std::chrono::milliseconds(10);
  c.retry_max = std::chrono::milliseconds(50);
  c.request_timeout = std::chrono::milliseconds(5000);
  c.qps = 0;
  return c;
}

Config TestConfig(const ScriptedServer& srv) { return TestConfig(srv.url(), srv.ca_pem()); }

std::shared_ptr<RestClient> MustClient(const Config& c) {
  auto r = RestClient::Create(c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().ToString());
  return r.ok() ? *r : nullptr;
}

TEST(RestClientTest, GetSendsHeadersAndEncodesQuery) {
  HttpRequest seen;
  std::mutex mu;
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    {
      std::lock_guard<std::mutex> l(mu);
      seen = r;
    }
    Respond(c, 200, R"({"kind":"PodList","items":[]})");
  });
  Config cfg = TestConfig(srv);
  cfg.token = "s3cret-token";
  auto client = MustClient(cfg);
  Request req;
  req.path = "/api/v1/namespaces/ns1/pods";
  req.query = {{"labelSelector", "app=a,tier!=x"}, {"limit", "5"}};
  auto r = client->SendJson(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["kind"], "PodList");
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(seen.path, "/api/v1/namespaces/ns1/pods");
  EXPECT_EQ(seen.query["labelSelector"], "app=a,tier!=x");
  EXPECT_EQ(seen.query["limit"], "5");
  EXPECT_EQ(seen.headers["authorization"], "Bearer s3cret-token");
  EXPECT_EQ(seen.headers["accept"], "application/json");
}

TEST(RestClientTest, ObserverSeesEveryAttemptWithMethodAndCode) {
  std::atomic<int> calls{0};
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    if (r.path == "/flaky" && calls++ == 0) {
      Respond(c, 503, StatusBody(503, "ServiceUnavailable", "try again"));
    } else if (r.path == "/missing") {
      Respond(c, 404, StatusBody(404, "NotFound", "no"));
    } else {
      Respond(c, 201, "{}");
    }
  });
  auto client = MustClient(TestConfig(srv));
  std::mutex mu;
  std::vector<RequestRecord> seen;
  client->SetRequestObserver([&](const RequestRecord& r) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(r);
  });
  Request get;
  get.path = "/flaky";
  ASSERT_TRUE(client->Send(get).ok());
  Request post;
  post.method = "POST";
  post.path = "/missing";
  post.body = "{}";
  EXPECT_FALSE(client->Send(post).ok());
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(seen.size(), 3u);  // the 503 retry is its own attempt
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].code, 503);
  EXPECT_EQ(seen[1].code, 201);
  EXPECT_EQ(seen[2].method, "POST");
  EXPECT_EQ(seen[2].code, 404);
  for (const auto& r : seen) EXPECT_GT(r.seconds, 0);

  // No server: code 0, the attempts are still seen.
  Config dead = TestConfig("https://127.0.0.1:1", "");
  dead.max_retries = 1;
  auto down = MustClient(dead);
  std::vector<int> codes;
  down->SetRequestObserver([&](const RequestRecord& r) { codes.push_back(r.code); });
  EXPECT_FALSE(down->Send(get).ok());
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(RestClientTest, MapsStatusObjects) {
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    if (r.path == "/nf")
      Respond(c, 404, StatusBody(404, "NotFound", "pods \"x\" not found"));
    else if (r.path == "/conflict")
      Respond(c, 409, StatusBody(409, "Conflict", "the object has been modified"));
    else if (r.path == "/exists")
      Respond(c, 409, StatusBody(409, "AlreadyExists", "already exists"));
    else if (r.path == "/gone")
      Respond(c, 410, StatusBody(410, "Expired", "too old resource version"));
    else
      Respond(c, 422, "not json at all");
  });
  auto client = MustClient(TestConfig(srv));
  auto get = [&](const std::string& p) {
    Request q;
    q.path = p;
    return client->Send(q);
  };
  auto nf = get("/nf");
  ASSERT_FALSE(nf.ok());
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nf.status().http_status(), 404);
  EXPECT_EQ(Reason(nf.status()), "NotFound");
  EXPECT_EQ(nf.status().message(), "pods \"x\" not found");
  EXPECT_EQ(get("/conflict").status().code(), StatusCode::kAborted);
  EXPECT_EQ(get("/exists").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(get("/gone").status().code(), StatusCode::kExpired);
  auto inv = get("/other");
  EXPECT_EQ(inv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(inv.status().http_status(), 422);
  EXPECT_TRUE(IsInvalid(inv.status()));
  EXPECT_EQ(inv.status().message(), "not json at all");
  EXPECT_EQ(client->retries(), 0);  // none of these is retryable
}

TEST(RestClientTest, RetriesTooManyRequestsHonouringRetryAfter) {
  std::atomic<int> n{0};
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    if (n.fetch_add(1) == 0)
      Respond(c, 429, StatusBody(429, "TooManyRequests", "slow down"), {{"Retry-After", "1"}});
    else
      Respond(c, 200, "{}");
  });
  auto client = MustClient(TestConfig(srv));
  Request q;
  q.method = "POST";  // 429 means the request was not processed: safe for every verb
  q.path = "/x";
  q.body = "{}";
  auto t0 = Clock::now();
  auto r = client->Send(q);
  auto dt = Clock::now() - t0;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(n.load(), 2);
  EXPECT_GE(dt, std::chrono::milliseconds(950));
  EXPECT_LT(dt, std::chrono::seconds(5));
}

TEST(RestClientTest, RetriesServerErrorForGetNotForPost) {
  std::atomic<int> n{0};
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    if (n.fetch_add(1) % 2 == 0)
      Respond(c, 500, StatusBody(500, "InternalError", "boom"));
    else
      Respond(c, 200, "{}");
  });
  auto client = MustClient(TestConfig(srv));
  Request get;
  get.path = "/x";
  ASSERT_TRUE(client->Send(get).ok());
  EXPECT_EQ(n.load(), 2);
  Request post;
  post.method = "POST";
  post.path = "/x";
  post.body = "{}";
  auto r = client->Send(post);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().http_status(), 500);
  EXPECT_EQ(r.status().message(), "boom");
  EXPECT_EQ(n.load(), 3);
}

TEST(RestClientTest, RetriesAreBounded) {
  std::atomic<int> n{0};
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    n.fetch_add(1);
    Respond(c, 503, StatusBody(503, "ServiceUnavailable", "down"));
  });
  Config cfg = TestConfig(srv);
  cfg.max_retries = 3;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  auto r = client->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().http_status(), 503);
  EXPECT_EQ(n.load(), 4);
  EXPECT_NE(r.status().message().find("after 4 attempts"), std::string::npos);
}

TEST(RestClientTest, EachRetryIsLoggedWithItsCauseAndDelay) {
  std::atomic<int> n{0};
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    if (n.fetch_add(1) < 2)
      Respond(c, 503, StatusBody(503, "ServiceUnavailable", "etcd leader changed"));
    else
      Respond(c, 200, "{}");
  });
  auto client = MustClient(TestConfig(srv));
  hypertrain::testing::LogCapture log(spdlog::level::info);  // retries are warnings
  Request q;
  q.path = "/api/v1/pods";
  ASSERT_TRUE(client->Send(q).ok());
  const auto retries = log.Matching("GET " + srv.url() + "/api/v1/pods");
  ASSERT_EQ(retries.size(), 2u);
  EXPECT_NE(retries[0].find("etcd leader changed; retry 1/5 in "), std::string::npos) << retries[0];
  EXPECT_NE(retries[1].find("retry 2/5"), std::string::npos) << retries[1];
  for (const auto& l : log.Lines()) EXPECT_EQ(l.level, spdlog::level::warn) << l.message;
}

TEST(RestClientTest, ConnectionRefusedIsTransportErrorAfterRetries) {
  int port;
  {
    ScriptedServer srv([](const HttpRequest&, ResponseSink& c) { Respond(c, 200, "{}"); });
    port = srv.port();
  }
  Config cfg = TestConfig("https://127.0.0.1:" + std::to_string(port), "");
  cfg.max_retries = 2;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  auto r = client->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(r.status().http_status(), 0);  // a transport failure, not a 503
  EXPECT_EQ(client->attempts(), 3);
}

TEST(RestClientTest, EveryRequestHasATimeout) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::seconds(10), [&] { return release; });
    Respond(c, 200, "{}");
  });
  Config cfg = TestConfig(srv);
  cfg.max_retries = 0;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/slow";
  q.timeout = std::chrono::milliseconds(300);
  auto t0 = Clock::now();
  auto r = client->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_EQ(r.status().http_status(), 0);  // the client timed out, not a 504
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
}

TEST(RestClientTest, ClientSideRateLimit) {
  ScriptedServer srv([](const HttpRequest&, ResponseSink& c) { Respond(c, 200, "{}"); });
  Config cfg = TestConfig(srv);
  cfg.qps = 20;
  cfg.burst = 1;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  auto t0 = Clock::now();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(client->Send(q).ok());
  // 1 burst token + 5 refills at 20/s ≥ 250 ms.
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(240));
}

TEST(RestClientTest, TokenFileIsReReadWhenRotated) {
  std::string dir = MakeTempDir("tokfile");
  ASSERT_TRUE(hypertrain::WriteFileAtomically(dir + "/token", "first-token\n").ok());
  std::vector<std::string> seen;
  std::mutex mu;
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(r.headers.at("authorization"));
    Respond(c, 200, "{}");
  });
  Config cfg = TestConfig(srv);
  cfg.token_file = dir + "/token";
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  ASSERT_TRUE(client->Send(q).ok());
  ASSERT_TRUE(hypertrain::WriteFileAtomically(dir + "/token", "second-token-longer\n").ok());
  ASSERT_TRUE(client->Send(q).ok());
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "Bearer first-token");
  EXPECT_EQ(seen[1], "Bearer second-token-longer");
}

// The plugin counts its runs in a file and returns token "tok-<n>".
std::string WritePlugin(const std::string& dir, const std::string& expiry) {
  std::string script =
      "#!/bin/sh\n"
      "n=$(cat \"$COUNT_FILE\" 2>/dev/null || echo 0)\n"
      "n=$((n+1))\n"
      "echo $n > \"$COUNT_FILE\"\n"
      "test \"$(echo \"$KUBERNETES_EXEC_INFO\" | grep -c ExecCredential)\" = 1 || exit 3\n"
      "printf "
      "'{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"tok-%s\"" +
      expiry + "}}' $n\n";
  EXPECT_TRUE(hypertrain::WriteFileAtomically(dir + "/plugin.sh", script, 0755).ok());
  return dir + "/plugin.sh";
}

TEST(RestClientTest, ExecPluginCachedAndReRunOn401) {
  std::string dir = MakeTempDir("exec");
  std::atomic<int> unauthorized{0};
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    if (r.headers.at("authorization") == "Bearer tok-2") {
      Respond(c, 200, "{}");
    } else {
      unauthorized.fetch_add(1);
      Respond(c, 401, StatusBody(401, "Unauthorized", "Unauthorized"));
    }
  });
  Config cfg = TestConfig(srv);
  ExecConfig ex;
  ex.api_version = "client.authentication.k8s.io/v1beta1";
  ex.command = WritePlugin(dir, "");
  ex.env = {{"COUNT_FILE", dir + "/count"}};
  cfg.exec = ex;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  auto r = client->Send(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(unauthorized.load(), 1);
  EXPECT_EQ(client->exec_runs(), 2);
  ASSERT_TRUE(client->Send(q).ok());  // cached: no third run
  EXPECT_EQ(client->exec_runs(), 2);
  EXPECT_EQ(*hypertrain::ReadFileToString(dir + "/count"), "2\n");
}

TEST(RestClientTest, ExecPluginReRunAfterExpiry) {
  std::string dir = MakeTempDir("exec2");
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) { Respond(c, 200, "{}"); });
  Config cfg = TestConfig(srv);
  ExecConfig ex;
  ex.api_version = "client.authentication.k8s.io/v1beta1";
  ex.command = WritePlugin(dir, R"(,"expirationTimestamp":"2001-01-01T00:00:00Z")");
  ex.env = {{"COUNT_FILE", dir + "/count"}};
  cfg.exec = ex;
  auto client = MustClient(cfg);
  Request q;
  q.path = "/x";
  for (int i = 0; i < 3; ++i) {
    auto r = client->Send(q);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(client->exec_runs(), 3);  // an expired token is never reused
}

TEST(RestClientTest, ExecPluginFailureAndTimeoutAreClear) {
  std::string dir = MakeTempDir("exec3");
  ASSERT_TRUE(hypertrain::WriteFileAtomically(dir + "/fail.sh", "#!/bin/sh\necho 'no creds configured' >&2\nexit 7\n", 0755).ok());
  ASSERT_TRUE(hypertrain::WriteFileAtomically(dir + "/hang.sh", "#!/bin/sh\nexec sleep 30\n", 0755).ok());
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) { Respond(c, 200, "{}"); });
  Config cfg = TestConfig(srv);
  ExecConfig ex;
  ex.api_version = "client.authentication.k8s.io/v1beta1";
  ex.command = dir + "/fail.sh";
  cfg.exec = ex;
  Request q;
  q.path = "/x";
  auto r = MustClient(cfg)->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(r.status().http_status(), 0);  // the credential plugin failed: nothing was sent
  EXPECT_NE(r.status().message().find("exited with 7: no creds configured"), std::string::npos);
  cfg.exec->command = dir + "/hang.sh";
  cfg.exec->timeout = std::chrono::milliseconds(300);
  auto t0 = Clock::now();
  r = MustClient(cfg)->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(srv.requests(), 0);
}

TEST(RestClientTest, TokensNeverLogged) {
  ScriptedServer srv([&](const HttpRequest&, ResponseSink& c) {
    Respond(c, 401, StatusBody(401, "Unauthorized", "Unauthorized"));
  });
  Config cfg = TestConfig(srv);
  cfg.token = "TOPSECRET-abc123";
  auto client = MustClient(cfg);
  hypertrain::testing::LogCapture log;  // debug: one line per attempt
  Request q;
  q.path = "/x";
  auto r = client->Send(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(r.status().http_status(), 401);
  EXPECT_EQ(r.status().ToString().find("TOPSECRET"), std::string::npos);
  const auto lines = log.Lines();
  ASSERT_FALSE(lines.empty());
  bool saw_redacted = false;
  for (const auto& l : lines) {
    EXPECT_EQ(l.message.find("TOPSECRET"), std::string::npos) << l.message;
    saw_redacted |= l.message.find("Bearer <redacted>") != std::string::npos;
  }
  EXPECT_TRUE(saw_redacted);
  EXPECT_EQ(cfg.DebugString().find("TOPSECRET"), std::string::npos);
  EXPECT_EQ(RedactSecrets(R"({"status":{"token":"abc"}} Authorization: Bearer xyz.def)"),
            R"({"status":{"token":"<redacted>"}} Authorization: Bearer <redacted>)");
}

TEST(RestClientTest, StreamDeliversChunksAndCancelsPromptly) {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  ScriptedServer srv([&](const HttpRequest& r, ResponseSink& c) {
    c.StartStream("application/json");
    c.WriteChunk("hello ");
    c.WriteChunk("world\n");
    if (r.query.count("end")) {
      c.EndStream();
      return;
    }
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::seconds(20), [&] { return stop; });
  });
  auto client = MustClient(TestConfig(srv));
  std::string got;
  Request q;
  q.path = "/w";
  q.query = {{"end", "1"}};
  auto r = client->Stream(q, [&](std::string_view d) {
    got.append(d);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(got, "hello world\n");

  // An open stream is closed promptly by the cancel token.
  CancelToken cancel;
  got.clear();
  q.query.clear();
  q.timeout = std::chrono::seconds(60);
  std::thread t([&] {
    while (true) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (got.size() >= 12) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    cancel.Cancel();
  });
  auto t0 = Clock::now();
  r = client->Stream(
      q,
      [&](std::string_view d) {
        std::lock_guard<std::mutex> l(mu);
        got.append(d);
        return true;
      },
      &cancel);
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), StatusCode::kCancelled);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  {
    std::lock_guard<std::mutex> l(mu);
    stop = true;
  }
  cv.notify_all();
}

}  // namespace
}  // namespace kube
