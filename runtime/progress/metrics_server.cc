#include "runtime/progress/metrics_server.h"

#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>

#include "contract/env.h"
#include "core/http_server.h"
#include "core/metrics.h"
#include "runtime/launch/env.h"
#include "runtime/progress/progress_reporter.h"
#include "runtime/progress/trainer_metrics.h"

namespace hypertrain::progress {
namespace {

class MetricsServer : public launch::LaunchObserver {
 public:
  explicit MetricsServer(const std::string& jsonl_path) : trainer_(&registry_, jsonl_path, /*from_end=*/true) {
    metrics::AddProcessMetrics(&registry_);
    http_.Handle("/metrics", [this] { return HttpResponse{200, kPrometheusText, registry_.Render()}; });
  }
  ~MetricsServer() override { http_.Stop(); }

  Status Start(int port) { return http_.Start(":" + std::to_string(port)); }
  int port() const { return http_.port(); }

  void OnRanksStarted(int, const std::vector<pid_t>& pids) override {
    running_ = static_cast<int>(pids.size());
    trainer_.SetRanksRunning(running_);
  }
  void OnRankExited(int, int, int code) override {
    if (running_ > 0) --running_;
    trainer_.SetRanksRunning(running_);
    trainer_.RankExited(code);
  }
  void OnTick() override { trainer_.Poll(); }
  void OnFinished(int) override {
    trainer_.Poll();  // the last records, for a scrape before the pod goes
    trainer_.SetRanksRunning(0);
  }

 private:
  metrics::Registry registry_;
  TrainerMetrics trainer_;
  HttpServer http_;
  int running_ = 0;
};

}  // namespace

StatusOr<int> ResolveMetricsPort(int flag_port, const char* env_value) {
  if (flag_port >= 0) return flag_port;
  if (env_value == nullptr || *env_value == '\0') return 0;
  char* end = nullptr;
  const long p = std::strtol(env_value, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) {
    return InvalidArgument(std::string(contract::env::kMetricsPort) + "='" + env_value +
                                   "' is not a port number (0 turns the metrics endpoint off)");
  }
  return static_cast<int>(p);
}

StatusOr<std::unique_ptr<launch::LaunchObserver>> StartMetricsServer(const launch::LaunchConfig& config, int port,
                                                                      int* bound_port) {
  const config::EnvLookup env = ProcessEnvironment();
  std::string jsonl, ckpt;
  int64_t max_steps = 0;
  if (!TrainPaths(config.command, env, &jsonl, &ckpt, &max_steps)) jsonl.clear();
  auto server = std::make_unique<MetricsServer>(jsonl);
  if (Status s = server->Start(port); !s.ok()) {
    return Status(s.code(), "metrics endpoint on port " + std::to_string(port) + ": " + s.message());
  }
  if (bound_port != nullptr) *bound_port = server->port();
  spdlog::info("serving Prometheus metrics on :{}/metrics ({})", server->port(),
               jsonl.empty() ? std::string("launcher series only: the command is not train") : "trainer metrics from " + jsonl);
  return std::unique_ptr<launch::LaunchObserver>(std::move(server));
}

}  // namespace hypertrain::progress
