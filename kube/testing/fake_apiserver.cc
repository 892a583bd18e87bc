#include "kube/testing/fake_apiserver.h"

#include <chrono>
#include <random>

namespace kube::testing {

namespace {
std::string StatusJson(int code, const std::string& reason, const std::string& msg) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", msg}}
      .dump();
}
}  // namespace

FakeApiServer::FakeApiServer(std::string ns) : ns_(std::move(ns)) {
  server_ = std::make_unique<FakeServer>([this](const HttpRequest& r, Conn& c) { Handle(r, c); });
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    ++generation_;
  }
  cv_.notify_all();
  server_->Stop();
}

Json FakeApiServer::RecordLocked(const std::string& type, Json obj) {
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  history_.push_back({rv_, type, obj});
  cv_.notify_all();
  return obj;
}

Json FakeApiServer::Create(const std::string& name, const std::string& app) {
  std::lock_guard<std::mutex> l(mu_);
  Json o = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", ns_}, {"uid", "uid-" + name + "-" + std::to_string(rv_)}}},
      {"spec", {{"counter", 0}}}};
  if (!app.empty()) o["metadata"]["labels"] = {{"app", app}};
  o = RecordLocked("ADDED", o);
  objects_[name] = o;
  return o;
}

Json FakeApiServer::Update(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  Json o = objects_.at(name);
  o["spec"]["counter"] = o["spec"]["counter"].get<int>() + 1;
  o = RecordLocked("MODIFIED", o);
  objects_[name] = o;
  return o;
}

void FakeApiServer::Delete(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  Json o = objects_.at(name);
  objects_.erase(name);
  RecordLocked("DELETED", o);
}

void FakeApiServer::Compact() {
  {
    std::lock_guard<std::mutex> l(mu_);
    compacted_rv_ = rv_;
    history_.clear();
    ++generation_;
  }
  cv_.notify_all();
}

void FakeApiServer::SetExpiryMode(ExpiryMode m) {
  std::lock_guard<std::mutex> l(mu_);
  expiry_mode_ = m;
}

void FakeApiServer::SetFrozen(bool f) {
  {
    std::lock_guard<std::mutex> l(mu_);
    frozen_ = f;
  }
  cv_.notify_all();
}

void FakeApiServer::DropConnections() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++generation_;
  }
  cv_.notify_all();
  server_->DropConnections();
}

void FakeApiServer::SetChunkSeed(uint64_t seed) {
  std::lock_guard<std::mutex> l(mu_);
  chunk_seed_ = seed;
}

void FakeApiServer::SetBookmarkIntervalMs(int ms) {
  std::lock_guard<std::mutex> l(mu_);
  bookmark_ms_ = ms;
}

std::map<std::string, std::string> FakeApiServer::State() const {
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : objects_) out[k] = v["metadata"]["resourceVersion"];
  return out;
}

std::string FakeApiServer::CurrentRv() const {
  std::lock_guard<std::mutex> l(mu_);
  return std::to_string(rv_);
}

int FakeApiServer::lists() const {
  std::lock_guard<std::mutex> l(mu_);
  return lists_;
}

int FakeApiServer::watches() const {
  std::lock_guard<std::mutex> l(mu_);
  return watches_;
}

std::vector<std::string> FakeApiServer::watch_rvs() const {
  std::lock_guard<std::mutex> l(mu_);
  return watch_rvs_;
}

void FakeApiServer::Handle(const HttpRequest& req, Conn& c) {
  if (req.method != "GET" ||
      (req.path != "/api/v1/namespaces/" + ns_ + "/pods" && req.path != "/api/v1/pods")) {
    c.Respond(404, StatusJson(404, "NotFound", "no such path " + req.path));
    return;
  }
  auto w = req.query.find("watch");
  if (w != req.query.end() && (w->second == "1" || w->second == "true"))
    HandleWatch(req, c);
  else
    HandleList(req, c);
}

void FakeApiServer::HandleList(const HttpRequest& req, Conn& c) {
  std::lock_guard<std::mutex> l(mu_);
  ++lists_;
  size_t limit = req.query.count("limit") ? std::stoul(req.query.at("limit")) : 0;
  // continue token: "<snapshot rv>/<last key>"; the snapshot must still be in history.
  std::string after, snapshot = std::to_string(rv_);
  if (req.query.count("continue")) {
    const std::string& tok = req.query.at("continue");
    auto slash = tok.find('/');
    snapshot = tok.substr(0, slash);
    after = tok.substr(slash + 1);
    if (std::stoll(snapshot) < compacted_rv_) {
      c.Respond(410, StatusJson(410, "Expired", "continue token expired"));
      return;
    }
  }
  Json items = Json::array();
  std::string last;
  bool more = false;
  for (auto it = objects_.upper_bound(after); it != objects_.end(); ++it) {
    if (limit && items.size() == limit) {
      more = true;
      break;
    }
    Json o = it->second;
    o.erase("apiVersion");
    o.erase("kind");
    items.push_back(o);
    last = it->first;
  }
  Json list = {{"kind", "PodList"},
               {"apiVersion", "v1"},
               {"metadata", {{"resourceVersion", snapshot}}},
               {"items", items}};
  if (more) list["metadata"]["continue"] = snapshot + "/" + last;
  c.Respond(200, list.dump());
}

void FakeApiServer::HandleWatch(const HttpRequest& req, Conn& c) {
  std::unique_lock<std::mutex> l(mu_);
  ++watches_;
  std::string rv_param = req.query.count("resourceVersion") ? req.query.at("resourceVersion") : "";
  watch_rvs_.push_back(rv_param);
  int64_t from = rv_param.empty() || rv_param == "0" ? rv_ : std::stoll(rv_param);
  int timeout_s =
      req.query.count("timeoutSeconds") ? std::stoi(req.query.at("timeoutSeconds")) : 60;
  std::string expired =
      Json{{"type", "ERROR"},
           {"object", Json::parse(StatusJson(410, "Expired", "too old resource version"))}}
          .dump() +
      "\n";
  if (from < compacted_rv_) {
    if (expiry_mode_ == ExpiryMode::kHttp410) {
      l.unlock();
      c.Respond(410, StatusJson(410, "Expired", "too old resource version"));
      return;
    }
    l.unlock();
    c.StartChunked(200);
    c.Chunk(expired);
    c.EndChunked();
    return;
  }
  std::mt19937_64 rng(chunk_seed_ + static_cast<uint64_t>(watches_));
  const uint64_t seed = chunk_seed_;
  const int64_t gen = generation_;
  l.unlock();
  c.StartChunked(200);
  l.lock();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  auto last_sent = std::chrono::steady_clock::now();
  size_t cursor = 0;
  while (cursor < history_.size() && history_[cursor].rv <= from) ++cursor;
  std::string pending;
  bool ok = true;
  while (ok && !stopping_) {
    if (generation_ != gen) {
      // Compacted under an open watch → ERROR 410; dropped → just end.
      if (compacted_rv_ > from && expiry_mode_ == ExpiryMode::kErrorEvent)
        pending += expired;
      else if (compacted_rv_ > from)
        pending.clear();
      break;
    }
    if (!frozen_) {
      while (cursor < history_.size()) {
        const Event& e = history_[cursor++];
        pending += Json{{"type", e.type}, {"object", e.obj}}.dump() + "\n";
        from = e.rv;
      }
      if (bookmark_ms_ > 0 && pending.empty() &&
          std::chrono::steady_clock::now() - last_sent > std::chrono::milliseconds(bookmark_ms_)) {
        pending = Json{{"type", "BOOKMARK"},
                       {"object",
                        {{"kind", "Pod"},
                         {"apiVersion", "v1"},
                         {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}}
                      .dump() +
                  "\n";
        from = rv_;
      }
    }
    if (!pending.empty()) {
      std::string out;
      out.swap(pending);
      l.unlock();
      if (seed == 0) {
        ok = c.Chunk(out);
      } else {
        size_t pos = 0;
        while (ok && pos < out.size()) {
          size_t n = 1 + rng() % (rng() % 2 ? 5 : 400);
          ok = c.Chunk(std::string_view(out).substr(pos, n));
          pos += n;
        }
      }
      last_sent = std::chrono::steady_clock::now();
      l.lock();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    cv_.wait_for(l, std::chrono::milliseconds(bookmark_ms_ > 0 ? bookmark_ms_ : 100));
  }
  if (generation_ != gen && !pending.empty()) {
    std::string out;
    out.swap(pending);
    l.unlock();
    c.Chunk(out);
    c.EndChunked();
    return;
  }
  l.unlock();
  if (ok) c.EndChunked();
}

}  // namespace kube::testing
