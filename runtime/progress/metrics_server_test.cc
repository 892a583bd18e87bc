#include "runtime/progress/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace hypertrain::progress {
namespace {

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(t ? t : "/tmp") + "/" + name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// GET over a real socket; the whole response, or "connect failed".
std::string Get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

bool Has(const std::string& text, const std::string& line) { return text.find("\n" + line + "\n") != std::string::npos; }

TEST(ResolveMetricsPort, FlagWinsOverTheEnvironment) {
  EXPECT_EQ(*ResolveMetricsPort(9500, "9400"), 9500);
  EXPECT_EQ(*ResolveMetricsPort(0, "9400"), 0);  // --metrics-port 0 turns the operator's default off
  EXPECT_EQ(*ResolveMetricsPort(-1, "9400"), 9400);
  EXPECT_EQ(*ResolveMetricsPort(-1, nullptr), 0);
  EXPECT_EQ(*ResolveMetricsPort(-1, ""), 0);
  for (const char* bad : {"x", "94o0", "-1", "70000"}) {
    auto p = ResolveMetricsPort(-1, bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("HYPERTRAIN_METRICS_PORT='" + std::string(bad) + "'"), std::string::npos)
        << p.status().message();
  }
}

TEST(MetricsServer, ServesTheRanksAndTheTrainersRecordsOverHttp) {
  const std::string dir = TempDir("metrics_server");
  std::ofstream(dir + "/c.yaml") << "trainer: {max_steps: 50}\nexp_manager: {exp_dir: " << dir
                                 << "/exp}\nmodel: {shape: tiny, data: {use_synthetic_data: true}}\n";
  std::filesystem::create_directories(dir + "/exp");
  const std::string jsonl = dir + "/exp/metrics.jsonl";
  std::ofstream(jsonl) << R"({"step":3,"loss":7.5})" "\n";  // an earlier attempt's record: not served

  launch::LaunchConfig config;
  config.command = {"train", "--config", dir + "/c.yaml"};
  int port = 0;
  auto server = StartMetricsServer(config, 0, &port);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_GT(port, 0);
  launch::LaunchObserver* o = server->get();

  o->OnRanksStarted(0, {101, 102});
  o->OnTick();
  std::string m = Get(port, "/metrics");
  ASSERT_EQ(m.rfind("HTTP/1.1 200", 0), 0u) << m;
  EXPECT_NE(m.find("text/plain; version=0.0.4"), std::string::npos) << m;
  EXPECT_TRUE(Has(m, "hypertrain_launcher_ranks_running 2")) << m;
  EXPECT_EQ(m.find("\nhypertrain_trainer_loss "), std::string::npos) << m;
  EXPECT_NE(m.find("\nprocess_resident_memory_bytes "), std::string::npos) << m;

  std::ofstream(jsonl, std::ios::app) << R"({"step":10,"max_steps":50,"loss":2.5,"tokens_per_s":4096,)"
                                      << R"("tokens_seen":40960,"checkpoint_stall_s":0.25})" "\n";
  o->OnTick();
  o->OnRankExited(1, 1, 137);
  m = Get(port, "/metrics");
  EXPECT_TRUE(Has(m, "hypertrain_trainer_step 10")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_trainer_max_steps 50")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_trainer_loss 2.5")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_trainer_tokens_per_second 4096")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_trainer_tokens_total 40960")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_trainer_checkpoint_stall_seconds_total 0.25")) << m;
  EXPECT_TRUE(Has(m, "hypertrain_launcher_ranks_running 1")) << m;
  EXPECT_TRUE(Has(m, R"(hypertrain_launcher_rank_exits_total{code="137"} 1)")) << m;
  EXPECT_EQ(Get(port, "/nope").rfind("HTTP/1.1 404", 0), 0u);

  // A port in use is Unavailable, naming the port.
  auto clash = StartMetricsServer(config, port);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("port " + std::to_string(port)), std::string::npos)
      << clash.status().message();

  server->reset();
  EXPECT_EQ(Get(port, "/metrics"), "connect failed");
}

TEST(MetricsServer, ANonTrainCommandServesTheLaunchersSeriesOnly) {
  launch::LaunchConfig config;
  config.command = {"/bin/sleep", "1"};
  int port = 0;
  auto server = StartMetricsServer(config, 0, &port);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->OnRanksStarted(0, {7});
  const std::string m = Get(port, "/metrics");
  EXPECT_TRUE(Has(m, "hypertrain_launcher_ranks_running 1")) << m;
  EXPECT_EQ(m.find("\nhypertrain_trainer_step "), std::string::npos) << m;
}

}  // namespace
}  // namespace hypertrain::progress
