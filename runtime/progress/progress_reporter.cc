#include "runtime/progress/progress_reporter.h"

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "contract/env.h"
#include "contract/pod.h"
#include "core/env_lookup.h"
#include "core/time.h"
#include "kube/config.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"

namespace hypertrain::progress {
namespace {

// The first of `a`, `b` that is set and not empty; "" when neither is.
std::string FirstSet(const config::EnvLookup& env, const char* a, const char* b = nullptr) {
  if (const char* v = env(a); v && *v) return v;
  if (b) {
    if (const char* v = env(b); v && *v) return v;
  }
  return "";
}

class Reporter : public launch::LaunchObserver {
 public:
  Reporter(std::shared_ptr<kube::RestClient> client, std::string ns, std::string configmap, std::string metrics,
           std::string ckpt_dir, int64_t max_steps, double interval_s)
      : configmaps_(std::move(client), kube::resources::kConfigMaps, std::move(ns)),
        configmap_(std::move(configmap)),
        tail_(std::move(metrics), /*from_end=*/true),
        ckpt_dir_(std::move(ckpt_dir)),
        interval_(interval_s),
        recovery_path_(std::filesystem::path(tail_.path()).parent_path() / "recovery.json"),
        started_(FormatRfc3339(std::chrono::system_clock::now(), TimePrecision::kMillis)) {
    progress_.max_steps = max_steps;
    // The attempt this launcher belongs to: the ConfigMap outlives it.
    const char* a = ProcessEnvironment()(contract::env::kRestartAttempt);
    if (a != nullptr && *a != '\0') {
      char* end = nullptr;
      const long long v = std::strtoll(a, &end, 10);
      if (*end == '\0' && v >= 0) progress_.attempt = v;
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~Reporter() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void OnTick() override { cv_.notify_all(); }
  void OnFinished(int) override {
    std::lock_guard<std::mutex> l(mu_);
    final_ = true;
    cv_.notify_all();
  }

 private:
  void Loop() {
    std::string last_sent;
    auto last_time = std::chrono::steady_clock::now() - std::chrono::hours(1);
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait_for(l, std::chrono::seconds(1));
      const bool stopping = stop_ || final_;
      l.unlock();
      tail_.Poll(&progress_);
      if (!progress_.recovery) progress_.recovery = ReadRecovery(recovery_path_, started_);
      progress_.last_checkpoint_step = LatestCheckpointStep(ckpt_dir_);
      const auto now = std::chrono::steady_clock::now();
      if (progress_.step >= 0 && (stopping || now - last_time >= std::chrono::duration<double>(interval_))) {
        progress_.time.clear();
        std::string key = contract::EncodeProgress(progress_);  // what changed, the time aside
        if (key != last_sent) {
          progress_.time = FormatRfc3339(std::chrono::system_clock::now());
          auto r = configmaps_.PatchAnnotations(configmap_,
                                                {{contract::kAnnotationProgress, contract::EncodeProgress(progress_)}});
          if (r.ok()) {
            last_sent = key;
          } else {
            spdlog::warn("progress annotation on ConfigMap {}: {}", configmap_, r.status().ToString());
          }
          last_time = now;
        }
      }
      l.lock();
      if (stop_ || (final_ && stopping)) return;
    }
  }

  kube::ResourceClient configmaps_;
  std::string configmap_;
  JsonlTail tail_;
  std::string ckpt_dir_;
  double interval_;
  std::string recovery_path_;  // the trainer's first step after a resume
  std::string started_;        // RFC 3339: this launcher's start
  Progress progress_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, final_ = false;
  std::thread thread_;
};

}  // namespace

JsonlTail::JsonlTail(std::string path, bool from_end) : path_(std::move(path)) {
  if (from_end) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    if (!ec) offset_ = static_cast<long>(size);
  }
}

bool JsonlTail::PollRecords(const std::function<void(const nlohmann::json&)>& each) {
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) return false;
  bool any = false;
  if (std::fseek(f, offset_, SEEK_SET) == 0) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
      offset_ += static_cast<long>(n);
      partial_.append(buf, n);
    }
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
      const std::string line = partial_.substr(0, nl);
      partial_.erase(0, nl + 1);
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
      each(j);
      any = true;
    }
  }
  std::fclose(f);
  return any;
}

namespace {

// The trainer's start-up record (runtime/train/metrics.h WriteStartup): the
// time to first step and its top-level phases (nested ones stay in the file).
std::optional<contract::StartupReport> StartupFromRecord(const nlohmann::json& j) {
  auto s = j.find("startup");
  if (s == j.end() || !s->is_object()) return std::nullopt;
  auto total = s->find("time_to_first_step_s");
  if (total == s->end() || !total->is_number()) return std::nullopt;
  contract::StartupReport r;
  r.time_to_first_step_seconds = total->get<double>();
  auto phases = s->find("phases");
  if (phases != s->end() && phases->is_array()) {
    for (const nlohmann::json& p : *phases) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string() ||
          !p.contains("seconds") || !p["seconds"].is_number() ||
          (p.contains("depth") && p["depth"] != 0)) {
        continue;
      }
      r.phases.push_back({p["name"].get<std::string>(), p["seconds"].get<double>()});
    }
  }
  if (auto other = s->find("other_s"); other != s->end() && other->is_number()) {
    r.phases.push_back({"other", other->get<double>()});
  }
  return r;
}

}  // namespace

bool JsonlTail::Poll(Progress* p) {
  return PollRecords([p](const nlohmann::json& j) {
    p->step = j["step"].get<int64_t>();
    if (auto startup = StartupFromRecord(j)) p->startup = std::move(startup);
    if (j.contains("loss") && j["loss"].is_number()) p->loss = j["loss"].get<double>();
    if (j.contains("tokens_per_s") && j["tokens_per_s"].is_number()) {
      p->tokens_per_second = j["tokens_per_s"].get<double>();
    }
  });
}

std::optional<contract::Recovery> ReadRecovery(const std::string& path, const std::string& launcher_start) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::optional<contract::Recovery> r = contract::DecodeRecovery(text);
  const auto start = ParseRfc3339(launcher_start);
  const auto first = r ? ParseRfc3339(r->first_step_time) : std::nullopt;
  if (!start || !first || *first < *start) return std::nullopt;  // an earlier attempt's
  r->launcher_start = launcher_start;
  return r;
}

std::optional<int64_t> LatestCheckpointStep(const std::string& dir) {
  std::optional<int64_t> best;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    char* end = nullptr;
    const long long n = std::strtoll(name.c_str() + 5, &end, 10);
    if (*end != '\0' || !std::filesystem::exists(e.path() / "manifest.json")) continue;
    if (!best || n > *best) best = n;
  }
  return best;
}

bool TrainPaths(const std::vector<std::string>& command, const config::EnvLookup& env, std::string* metrics_path,
                std::string* checkpoint_dir, int64_t* max_steps) {
  if (command.empty() || command[0] != "train") return false;
  std::string config_flag;
  std::vector<std::string> sets;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    const bool has_next = i + 1 < command.size();
    if (a == "--config" && has_next) config_flag = command[++i];
    else if (a.rfind("--config=", 0) == 0) config_flag = a.substr(9);
    else if (a == "--set" && has_next) sets.push_back(command[++i]);
    else if (a.rfind("--set=", 0) == 0) sets.push_back(a.substr(6));
  }
  auto source = config::ResolveRunConfig(config_flag, sets, env);
  if (!source.ok()) return false;
  auto loaded = config::LoadTrainConfig(source->path, source->overrides, env);
  if (!loaded.ok()) return false;
  const config::TrainConfig& tc = loaded.value();
  *metrics_path = tc.exp_dir + "/metrics.jsonl";
  *checkpoint_dir = tc.checkpoint_dir.empty() ? tc.exp_dir + "/checkpoints" : tc.checkpoint_dir;
  *max_steps = tc.max_steps;
  return true;
}

std::optional<ProgressTarget> ReportingTarget(const config::EnvLookup& env) {
  namespace names = contract::env;
  const std::string node_rank = FirstSet(env, names::kNodeRank, names::kPetNodeRank);
  ProgressTarget t{FirstSet(env, names::kNamespace, names::kPodNamespaceFallback),
                   FirstSet(env, names::kProgressConfigMap)};
  if ((node_rank != "0" && !node_rank.empty()) || t.configmap.empty() || t.namespace_.empty()) return std::nullopt;
  return t;
}

std::unique_ptr<launch::LaunchObserver> MaybeCreateReporter(const launch::LaunchConfig& config) {
  const config::EnvLookup process_env = ProcessEnvironment();
  const std::optional<ProgressTarget> target = ReportingTarget(process_env);
  if (!target) return nullptr;
  const std::string& ns = target->namespace_;
  const std::string& configmap = target->configmap;
  std::string metrics, ckpt;
  int64_t max_steps = 0;
  if (!TrainPaths(config.command, process_env, &metrics, &ckpt, &max_steps)) return nullptr;
  auto cfg = kube::LoadDefault();
  if (!cfg.ok()) {
    spdlog::warn("no progress reporting: {}", cfg.status().ToString());
    return nullptr;
  }
  cfg->request_timeout = std::chrono::seconds(5);
  cfg->max_retries = 2;
  auto client = kube::RestClient::Create(*cfg);
  if (!client.ok()) {
    spdlog::warn("no progress reporting: {}", client.status().ToString());
    return nullptr;
  }
  double interval = 10;
  if (const std::string v = FirstSet(process_env, contract::env::kProgressIntervalS); !v.empty()) {
    interval = std::atof(v.c_str());
  }
  spdlog::info("publishing progress of {} to ConfigMap {}/{} (annotation {}, every {:.0f} s)", metrics, ns, configmap,
               contract::kAnnotationProgress, interval);
  return std::make_unique<Reporter>(*client, ns, configmap, metrics, ckpt, max_steps, interval);
}

}  // namespace hypertrain::progress
