#include "runtime/launch/tcp_store.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "runtime/launch/socket_util.h"

namespace hypertrain::launch {
namespace {

using namespace std::chrono_literals;

int FreePort() {
  int port = 0;
  auto fd = net::Listen("127.0.0.1", 0, &port);
  EXPECT_TRUE(fd.ok());
  return port;  // closed on return; the tests bind it again right after
}

TcpStoreClientOptions Fast(std::chrono::milliseconds deadline) {
  TcpStoreClientOptions o;
  o.connect_deadline = deadline;
  o.io_timeout = 5s;
  o.initial_backoff = 20ms;
  o.max_backoff = 200ms;
  return o;
}

TEST(TcpStore, SetGetAddCompareBarrier) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {"job", 2});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  auto a = TcpStoreClient::Connect("127.0.0.1", port, {"job", 2}, Fast(5s));
  auto b = TcpStoreClient::Connect("localhost", port, {"job", 2}, Fast(5s));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();

  // Get waits for a later Set from another client.
  auto pending = std::async(std::launch::async, [&] { return (*b)->Get("k", 5s); });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE((*a)->Set("k", std::string("v\0x", 3)).ok());
  auto got = pending.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::string("v\0x", 3));

  EXPECT_EQ(*(*a)->Add("n", 5), 5);
  EXPECT_EQ(*(*b)->Add("n", -2), 3);
  EXPECT_EQ(*(*a)->CompareSet("c", "", "one"), "one");
  EXPECT_EQ(*(*b)->CompareSet("c", "zzz", "two"), "one");  // mismatch: unchanged
  EXPECT_EQ(*(*b)->CompareSet("c", "one", "two"), "two");
  EXPECT_TRUE(*(*a)->Check("c"));
  EXPECT_FALSE(*(*a)->Check("missing"));

  auto missing = (*a)->Get("missing", 100ms);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("'missing'"), std::string::npos);

  auto other = std::async(std::launch::async, [&] { return (*b)->Barrier("b0", 2, 5s); });
  EXPECT_TRUE((*a)->Barrier("b0", 2, 5s).ok());
  EXPECT_TRUE(other.get().ok());
  auto lonely = (*a)->Barrier("b1", 2, 100ms);
  EXPECT_FALSE(lonely.ok());
  EXPECT_NE(lonely.message().find("barrier 'b1'"), std::string::npos);
}

TEST(TcpStore, ClientStartedBeforeMasterConnectsWhenItAppears) {
  const int port = FreePort();
  auto client = std::async(std::launch::async, [&] {
    return TcpStoreClient::Connect("127.0.0.1", port, {"job", 0}, Fast(20s));
  });
  std::this_thread::sleep_for(300ms);  // the client is retrying connect meanwhile
  ASSERT_EQ(client.wait_for(0s), std::future_status::timeout);
  auto server = TcpStoreServer::Start("0.0.0.0", port, {"job", 0});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto c = client.get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->Set("x", "1").ok());
}

TEST(TcpStore, RetriesNameResolutionUntilTheNameResolves) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {"job", 0});
  ASSERT_TRUE(server.ok());
  int calls = 0;
  auto opts = Fast(20s);
  opts.resolver = [&](const std::string& host) -> StatusOr<std::vector<std::string>> {
    EXPECT_EQ(host, "job-master-0");
    if (++calls < 4) return Unavailable("cannot resolve 'job-master-0': Name or service not known");
    return std::vector<std::string>{"127.0.0.1"};
  };
  auto c = TcpStoreClient::Connect("job-master-0", (*server)->port(), {"job", 0}, opts);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(calls, 4);
}

TEST(TcpStore, DeadlineErrorNamesAddressAndDeadline) {
  const int port = FreePort();
  const auto start = std::chrono::steady_clock::now();
  auto c = TcpStoreClient::Connect("127.0.0.1", port, {"job", 0}, Fast(400ms));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
  EXPECT_NE(m.find("0.4s deadline"), std::string::npos) << m;
  EXPECT_NE(m.find("onnection refused"), std::string::npos) << m;
  EXPECT_LT(took, 3s);

  auto unresolvable = TcpStoreClient::Connect("no-such-host.invalid", port, {"job", 0}, Fast(200ms));
  ASSERT_FALSE(unresolvable.ok());
  EXPECT_NE(unresolvable.status().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(TcpStore, StaleAttemptIsRejectedAndTheNewMasterIsJoined) {
  auto old_server = TcpStoreServer::Start("127.0.0.1", 0, {"job", 0});
  ASSERT_TRUE(old_server.ok());
  const int port = (*old_server)->port();
  // A client of attempt 0 that stays connected must not see attempt 1's keys.
  auto old_client = TcpStoreClient::Connect("127.0.0.1", port, {"job", 0}, Fast(2s));
  ASSERT_TRUE(old_client.ok());

  auto rejected = TcpStoreClient::Connect("127.0.0.1", port, {"job", 1}, Fast(300ms));
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("stale store"), std::string::npos)
      << rejected.status().message();
  EXPECT_NE(rejected.status().message().find("attempt 0"), std::string::npos);
  auto other_job = TcpStoreClient::Connect("127.0.0.1", port, {"other", 0}, Fast(200ms));
  ASSERT_FALSE(other_job.ok());
  EXPECT_NE(other_job.status().message().find("job 'job'"), std::string::npos);

  // Attempt 1's worker keeps retrying while the old master lingers, then joins
  // the new master on the same port.
  auto joining = std::async(std::launch::async, [&] {
    return TcpStoreClient::Connect("127.0.0.1", port, {"job", 1}, Fast(20s));
  });
  std::this_thread::sleep_for(200ms);
  old_client->reset();
  old_server->reset();
  auto new_server = TcpStoreServer::Start("127.0.0.1", port, {"job", 1});
  ASSERT_TRUE(new_server.ok()) << new_server.status().ToString();
  auto c = joining.get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->Set("k", "new").ok());
  EXPECT_EQ(*(*c)->Get("k", 1s), "new");
}

}  // namespace
}  // namespace hypertrain::launch
