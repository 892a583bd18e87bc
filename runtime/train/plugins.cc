#include "runtime/train/plugins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace hypertrain::train {
namespace {

struct Entry {
  std::string name;
  int priority;
  BackendFactory factory;
};

struct Registry {
  std::mutex mu;
  std::vector<Entry> backends;
  ParallelFactory parallel;
  CheckpointFactory checkpoint;
};

Registry& Get() {
  static Registry* r = new Registry();  // never destroyed: used from static init
  return *r;
}

}  // namespace

bool RegisterBackend(const std::string& name, int priority, BackendFactory factory) {
  Registry& r = Get();
  std::lock_guard<std::mutex> l(r.mu);
  r.backends.erase(std::remove_if(r.backends.begin(), r.backends.end(),
                                  [&](const Entry& e) { return e.name == name; }),
                   r.backends.end());
  r.backends.push_back({name, priority, std::move(factory)});
  std::stable_sort(r.backends.begin(), r.backends.end(),
                   [](const Entry& a, const Entry& b) { return a.priority > b.priority; });
  return true;
}

std::vector<std::string> RegisteredBackends() {
  Registry& r = Get();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> out;
  for (const Entry& e : r.backends) out.push_back(e.name);
  return out;
}

StatusOr<BackendBundle> CreateBackend(const std::string& name, const config::TrainConfig& c,
                                      const model::ModelConfig& m, const model::BackendOptions& o) {
  std::vector<Entry> entries;
  {
    Registry& r = Get();
    std::lock_guard<std::mutex> l(r.mu);
    entries = r.backends;
  }
  std::vector<std::string> skipped;
  for (const Entry& e : entries) {
    if (name != "auto" && e.name != name) continue;
    auto b = e.factory(c, m, o);
    if (b.ok() || name != "auto" || b.status().code() != StatusCode::kUnavailable) return b;
    skipped.push_back(e.name + ": " + b.status().message());
  }
  if (name == "auto") {
    return Unavailable(fmt::format("no backend available ({})", fmt::join(skipped, "; ")));
  }
  std::vector<std::string> names;
  for (const Entry& e : entries) names.push_back(e.name);
  return InvalidArgument(fmt::format("trainer.backend: '{}' is not one of auto, {} (in this build)",
                                     name, fmt::join(names, ", ")));
}

bool SetParallelFactory(ParallelFactory factory) {
  Registry& r = Get();
  std::lock_guard<std::mutex> l(r.mu);
  r.parallel = std::move(factory);
  return true;
}

StatusOr<std::unique_ptr<ParallelRuntime>> CreateParallelRuntime(const config::TrainConfig& c) {
  ParallelFactory f;
  {
    Registry& r = Get();
    std::lock_guard<std::mutex> l(r.mu);
    f = r.parallel;
  }
  if (f) return f(c);
  // Several ranks without a distributed runtime would each train alone and
  // write the same files: refuse.
  const char* world = std::getenv("WORLD_SIZE");
  if (world != nullptr && std::atoi(world) > 1) {
    return InvalidArgument(fmt::format("WORLD_SIZE={} but this build has no distributed runtime "
                                       "registered (link //runtime/parallel into hypertrain)",
                                       world));
  }
  return std::unique_ptr<ParallelRuntime>(std::make_unique<SingleProcessRuntime>());
}

bool SetCheckpointFactory(CheckpointFactory factory) {
  Registry& r = Get();
  std::lock_guard<std::mutex> l(r.mu);
  r.checkpoint = std::move(factory);
  return true;
}

StatusOr<std::unique_ptr<CheckpointHooks>> CreateCheckpointHooks(const config::TrainConfig& c,
                                                                 ParallelRuntime& p) {
  CheckpointFactory f;
  {
    Registry& r = Get();
    std::lock_guard<std::mutex> l(r.mu);
    f = r.checkpoint;
  }
  if (!f) return std::unique_ptr<CheckpointHooks>();
  return f(c, p);
}

}  // namespace hypertrain::train
