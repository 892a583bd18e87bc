// Watch requests of the API server: parameters, the expired-start answer, and
// the event stream (bookmarks, watch-list, timeouts and the watch faults).
#include <chrono>
#include <optional>
#include <random>
#include <thread>

#include "localcluster/apiserver/api_server.h"
#include "localcluster/apiserver/request_params.h"
#include "localcluster/apiserver/table.h"

namespace kubelocal {

struct WatchRequest {
  ObjectPredicate pred;
  std::optional<uint64_t> from;  // unset: the current state as ADDED events first
  bool send_initial = false;     // watch-list: a BOOKMARK marks the end of the initial events
  int timeout_seconds = 0;
  bool bookmarks = false;
  bool table = false;
  IncludeObject include = IncludeObject::kMetadata;
};

namespace {

StatusOr<WatchRequest> ParseWatchRequest(const HttpRequest& req, const ResourceType& type, uint64_t current_rv,
                                         int max_seconds) {
  WatchRequest w;
  auto pred = SelectorPredicate(req, type);
  if (!pred.ok()) return pred.status();
  w.pred = std::move(*pred);
  const std::string rv = req.Query("resourceVersion");
  if (!rv.empty() && rv != "0") {
    try {
      size_t used = 0;
      w.from = std::stoull(rv, &used);
      if (used != rv.size()) throw std::invalid_argument(rv);
    } catch (const std::exception&) {
      return BadRequest("resourceVersion: Invalid value: \"" + rv + "\": must be a non-negative integer");
    }
  }
  // Watch-list (sendInitialEvents): current state as ADDED, then a BOOKMARK
  // annotated k8s.io/initial-events-end, then changes.
  const std::string sie = req.Query("sendInitialEvents");
  w.send_initial = Truthy(sie);
  if (w.send_initial) {
    if (req.Query("resourceVersionMatch") != "NotOlderThan" || !Truthy(req.Query("allowWatchBookmarks"))) {
      return Invalid("ListOptions.meta.k8s.io", "",
                     {{"FieldValueForbidden", "sendInitialEvents",
                       "Forbidden: sendInitialEvents requires setting "
                       "resourceVersionMatch to NotOlderThan and allowWatchBookmarks"}});
    }
    if (w.from) {
      return BadRequest("kube-local serves sendInitialEvents only from the latest state (resourceVersion unset or \"0\")");
    }
  } else if (sie == "false" && rv.empty()) {
    w.from = current_rv;  // start at the most recent version, no initial events
  }
  w.timeout_seconds = max_seconds;
  if (!req.Query("timeoutSeconds").empty()) {
    try {
      w.timeout_seconds = std::min<int>(max_seconds, std::stoi(req.Query("timeoutSeconds")));
    } catch (const std::exception&) {
      return BadRequest("invalid timeoutSeconds: " + req.Query("timeoutSeconds"));
    }
  }
  w.bookmarks = Truthy(req.Query("allowWatchBookmarks"));
  w.table = WantsTable(req.Header("accept"));
  w.include = IncludeFrom(req);
  return w;
}

// Writes a watch's events: one chunk each, or, with a chunk seed, the bytes of
// the events that are ready cut at pseudo-random points (an event split over
// chunks, several events in one), as a proxy may deliver them.
class EventWriter {
 public:
  EventWriter(ResponseSink& sink, const ResourceType& type, const WatchRequest& w, uint64_t chunk_seed)
      : sink_(sink), type_(type), w_(w), seed_(chunk_seed), rng_(chunk_seed) {}

  // `more`: another event is ready at once, so with a seed its bytes may share a chunk.
  bool Write(const std::string& event_type, const json& object, bool more = false) {
    json obj = object;
    if (event_type != "ERROR" && event_type != "BOOKMARK") {
      obj = ObjectOps::ForVersion(type_, obj);
      if (w_.table) obj = MakeTable(type_, {obj}, w_.include, MetaStr(obj, "resourceVersion"), "", 0);
    }
    std::string line = json({{"type", event_type}, {"object", obj}}).dump() + "\n";
    if (seed_ == 0) return sink_.WriteChunk(line);
    pending_ += line;
    return more || Flush();
  }

  bool Flush() {
    for (size_t pos = 0; pos < pending_.size();) {
      const size_t cap = rng_() % 2 ? 5 : 400;
      const size_t n = 1 + rng_() % cap;
      if (!sink_.WriteChunk(pending_.substr(pos, n))) return false;
      pos += n;
    }
    pending_.clear();
    return true;
  }

 private:
  ResponseSink& sink_;
  const ResourceType& type_;
  const WatchRequest& w_;
  const uint64_t seed_;
  std::mt19937_64 rng_;
  std::string pending_;
};

json BookmarkObject(const ResourceType& type, uint64_t rv) {
  return {{"kind", type.kind}, {"apiVersion", type.api_version()}, {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
}

}  // namespace

void ApiServer::HandleWatch(const HttpRequest& req, ResponseSink& sink, const Target& t) {
  auto w = ParseWatchRequest(req, t.type, store_->CurrentRV(), options_.max_watch_seconds);
  if (!w.ok()) return SendError(sink, w.status());
  // An expired start point: an ERROR event in a 200 stream (the watch cache's
  // answer) or, as the watch-expiry fault chooses, an HTTP 410.
  auto expired = [&](const Status& e) {
    if (faults_.watch_expiry_style() == FaultInjector::ExpiryStyle::kHttp410) return SendError(sink, e);
    EventWriter out(sink, t.type, *w, 0);
    if (sink.StartStream("application/json") && out.Write("ERROR", ToStatusJson(e))) sink.EndStream();
  };
  if (faults_.TakeWatchExpiry()) {
    const std::string rv = req.Query("resourceVersion");
    return expired(Expired("too old resource version: " + (rv.empty() ? "0" : rv) + " (injected fault)"));
  }
  auto watcher = store_->Watch(t.type.storage_key(), t.type.namespaced ? t.ns : "", w->from, w->pred);
  if (!watcher.ok()) {
    if (HttpCode(watcher.status()) == 410) return expired(watcher.status());
    return SendError(sink, watcher.status());
  }
  if (sink.StartStream("application/json") && StreamEvents(sink, t.type, *w, **watcher)) sink.EndStream();
  (*watcher)->Close();
}

bool ApiServer::StreamEvents(ResponseSink& sink, const ResourceType& type, const WatchRequest& w, Watcher& watcher) {
  using Clock = std::chrono::steady_clock;
  EventWriter out(sink, type, w, faults_.watch_chunk_seed());
  size_t initial_left = w.send_initial ? watcher.initial_count() : 0;
  bool initial_done = !w.send_initial;
  auto end_of_initial = [&] {
    initial_done = true;
    json obj = BookmarkObject(type, watcher.start_rv());
    obj["metadata"]["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return out.Write("BOOKMARK", obj);
  };
  const auto deadline = Clock::now() + std::chrono::seconds(w.timeout_seconds);
  auto next_bookmark = Clock::now() + options_.bookmark_interval;
  bool ok = true;
  if (!initial_done && initial_left == 0) ok = end_of_initial();
  std::optional<WatchEvent> held;  // taken from the queue as a stall began
  while (ok && !stopping_) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (faults_.watches_stalled()) {
      // Nothing goes out, not even bookmarks; a watch dropped or expired meanwhile just ends.
      if (watcher.closed() || sink.PeerClosed()) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(20)));
      continue;
    }
    WatchEvent ev;
    Watcher::Next r = Watcher::Next::kEvent;
    if (held) {
      ev = std::move(*held);
      held.reset();
    } else {
      r = watcher.Wait(&ev, std::min({deadline, next_bookmark, now + std::chrono::milliseconds(500)}));
    }
    if (r == Watcher::Next::kClosed) break;
    if (r == Watcher::Next::kEvent) {
      if (faults_.watches_stalled()) {
        held = std::move(ev);
        continue;
      }
      ok = out.Write(ev.type, ev.object, watcher.HasPending());
      if (ok && !initial_done && --initial_left == 0) ok = end_of_initial();
      continue;
    }
    if (sink.PeerClosed()) break;
    if (w.bookmarks && Clock::now() >= next_bookmark) {
      next_bookmark = Clock::now() + options_.bookmark_interval;
      if (auto brv = watcher.BookmarkRV()) ok = out.Write("BOOKMARK", BookmarkObject(type, *brv));
    }
  }
  return ok && out.Flush();
}

}  // namespace kubelocal
