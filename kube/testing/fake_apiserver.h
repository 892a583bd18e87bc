#pragma once
// Test-only in-memory API server for ONE namespaced collection, exposing the
// watch behaviours a reflector must survive, deterministically:
// resourceVersion history, paged LIST, WATCH with bookmarks and
// adversarially chunked streams, compaction (410 as an in-stream ERROR event
// or as HTTP 410), frozen watches (events withheld), and dropped connections.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kube/status.h"
#include "kube/testing/fake_server.h"

namespace kube::testing {

class FakeApiServer {
 public:
  enum class ExpiryMode { kErrorEvent, kHttp410 };
  // Serves /api/v1/namespaces/<ns>/pods and /api/v1/pods.
  explicit FakeApiServer(std::string ns = "ns");
  ~FakeApiServer();

  std::string url() const { return server_->url(); }

  Json Create(const std::string& name, const std::string& app = "");
  Json Update(const std::string& name);  // bumps a counter field
  void Delete(const std::string& name);
  // Forgets all history: a watch from an older version gets 410; open
  // watches receive ERROR 410 (or are cut, in kHttp410 mode) and end.
  void Compact();
  void SetExpiryMode(ExpiryMode m);
  // While frozen, open and new watches deliver nothing (events are withheld).
  void SetFrozen(bool frozen);
  void DropConnections();
  // 0 → one event per chunk; else pseudo-random chunk boundaries from `seed`
  // (events split across chunks, several events per chunk).
  void SetChunkSeed(uint64_t seed);
  void SetBookmarkIntervalMs(int ms);

  // name → resourceVersion of the current objects.
  std::map<std::string, std::string> State() const;
  std::string CurrentRv() const;
  int lists() const;
  int watches() const;
  std::vector<std::string> watch_rvs() const;  // resourceVersion param of each watch

 private:
  struct Event {
    int64_t rv;
    std::string type;
    Json obj;
  };
  void Handle(const HttpRequest& req, Conn& c);
  void HandleList(const HttpRequest& req, Conn& c);
  void HandleWatch(const HttpRequest& req, Conn& c);
  Json RecordLocked(const std::string& type, Json obj);

  std::string ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t rv_ = 100;
  int64_t compacted_rv_ = 0;  // watches from rv < this get 410
  int64_t generation_ = 0;    // bumped by DropConnections/Compact to end open watches
  std::map<std::string, Json> objects_;
  std::vector<Event> history_;
  ExpiryMode expiry_mode_ = ExpiryMode::kErrorEvent;
  bool frozen_ = false;
  uint64_t chunk_seed_ = 0;
  int bookmark_ms_ = 0;
  int lists_ = 0, watches_ = 0;
  std::vector<std::string> watch_rvs_;
  bool stopping_ = false;
  std::unique_ptr<FakeServer> server_;
};

}  // namespace kube::testing
