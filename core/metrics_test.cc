#include "core/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include "core/http_server.h"
#include "core/log.h"

namespace hypertrain::metrics {
namespace {

TEST(Metrics, RendersCountersAndGaugesWithLabelsInTheTextFormat) {
  Registry r;
  auto& total = r.AddCounter("requests_total", "Requests by code.", {"code", "method"});
  total.With({"200", "GET"}).Inc();
  total.With({"200", "GET"}).Inc(2);
  total.With({"404", "GET"}).Inc();
  r.AddGauge("depth", "Keys waiting.").With().Set(7.5);
  EXPECT_EQ(r.Render(),
            "# HELP requests_total Requests by code.\n"
            "# TYPE requests_total counter\n"
            "requests_total{code=\"200\",method=\"GET\"} 3\n"
            "requests_total{code=\"404\",method=\"GET\"} 1\n"
            "# HELP depth Keys waiting.\n"
            "# TYPE depth gauge\n"
            "depth 7.5\n");
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  Registry r;
  r.AddCounter("x_total", "a \\ b\nc", {"v"}).With({"q\"u\\o\nte"}).Inc();
  EXPECT_EQ(r.Render(),
            "# HELP x_total a \\\\ b\\nc\n# TYPE x_total counter\n"
            "x_total{v=\"q\\\"u\\\\o\\nte\"} 1\n");
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInclusiveBounds) {
  Registry r;
  auto& h = r.AddHistogram("latency_seconds", "Latency.", {"op"}, {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0}) h.With({"get"}).Observe(v);
  EXPECT_EQ(r.Render(),
            "# HELP latency_seconds Latency.\n# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{op=\"get\",le=\"0.1\"} 2\n"
            "latency_seconds_bucket{op=\"get\",le=\"1\"} 4\n"
            "latency_seconds_bucket{op=\"get\",le=\"10\"} 5\n"
            "latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 6\n"
            "latency_seconds_sum{op=\"get\"} 104.65\n"
            "latency_seconds_count{op=\"get\"} 6\n");
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-8), "1e-08");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
  EXPECT_EQ(ExponentialBuckets(1e-3, 10, 3), (std::vector<double>{1e-3, 1e-2, 1e-1}));
}

TEST(Metrics, CountersAreSafeFromManyThreads) {
  Registry r;
  auto& c = r.AddCounter("n_total", "n", {"t"});
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) c.With({std::to_string(t % 2)}).Inc();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.With({"0"}).Value() + c.With({"1"}).Value(), 40000);
}

TEST(MetricsDeathTest, MisuseIsAProgrammingError) {
  log::Init(log::Format::kText, spdlog::level::info);  // stderr, as the binaries log
  Registry r;
  auto& c = r.AddCounter("a_total", "a", {"x"});
  EXPECT_DEATH(c.With({"1", "2"}), "a_total has 1 labels, got 2 values");
  EXPECT_DEATH(r.AddGauge("a_total", "again"), "registered twice");
  EXPECT_DEATH(r.AddGauge("bad-name", "x"), "bad metric name");
  EXPECT_DEATH(r.AddGauge("g", "x", {"le"}), "bad or repeated label");
  EXPECT_DEATH(r.AddHistogram("h", "x", {}, {2, 1}), "ascending");
}

TEST(Metrics, ProcessMetricsReadThisProcess) {
  Registry r;
  AddProcessMetrics(&r);
  volatile double burn = 0;
  for (int i = 0; i < 20000000; ++i) burn = burn + i * 1e-9;  // some CPU time
  const std::string text = r.Render();
  auto value = [&](const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " missing in\n" << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
  EXPECT_GT(value("process_cpu_seconds_total"), 0);
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GE(value("process_open_fds"), 3);
  EXPECT_GT(value("process_max_fds"), 0);
  const double start = value("process_start_time_seconds");
  EXPECT_LE(start, static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_GT(start, static_cast<double>(std::time(nullptr)) - 3600);
}

// One request over a real socket; returns the whole response.
std::string Request(int port, const std::string& request) {
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
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string Get(int port, const std::string& path, const std::string& method = "GET") {
  return Request(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

TEST(HttpServer, ServesRegisteredPathsOverRealHttp) {
  Registry r;
  r.AddCounter("hits_total", "Hits.").With().Inc(5);
  HttpServer http;
  http.Handle("/metrics", [&] { return HttpResponse{200, kPrometheusText, r.Render()}; });
  http.Handle("/readyz", [] { return HttpResponse{503, "text/plain; charset=utf-8", "not yet\n"}; });
  ASSERT_TRUE(http.Start("127.0.0.1:0").ok());
  ASSERT_GT(http.port(), 0);

  const std::string m = Get(http.port(), "/metrics?x=1");
  EXPECT_EQ(m.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << m;
  EXPECT_NE(m.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"), std::string::npos) << m;
  EXPECT_NE(m.find("\r\n\r\n# HELP hits_total Hits.\n# TYPE hits_total counter\nhits_total 5\n"), std::string::npos);
  EXPECT_EQ(Get(http.port(), "/readyz").rfind("HTTP/1.1 503", 0), 0u);
  EXPECT_EQ(Get(http.port(), "/nope").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Get(http.port(), "/metrics/x").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Get(http.port(), "/metrics", "POST").rfind("HTTP/1.1 405", 0), 0u);
  const std::string head = Get(http.port(), "/metrics", "HEAD");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(head.find("hits_total 5"), std::string::npos) << "HEAD has no body";
  // Garbage is refused without harming the server.
  Request(http.port(), "\x01\x02 nonsense\r\n\r\n");
  EXPECT_EQ(Get(http.port(), "/metrics").rfind("HTTP/1.1 200", 0), 0u);
  http.Stop();
  EXPECT_EQ(Get(http.port(), "/metrics"), "connect failed");
}

TEST(HttpServer, RefusesBadAddressesAndTakenPorts) {
  HttpServer a;
  for (const char* bad : {"8080", "host:", ":http", ":80x"}) {
    Status s = a.Start(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
  }
  ASSERT_TRUE(a.Start("127.0.0.1:0").ok());
  HttpServer b;
  Status s = b.Start("127.0.0.1:" + std::to_string(a.port()));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("cannot listen on 127.0.0.1:" + std::to_string(a.port())), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace hypertrain::metrics
