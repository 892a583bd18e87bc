#include "localcluster/apiserver/store.h"

#include "core/base64.h"

namespace kubelocal {
namespace {

std::string NsOf(const std::string& key) { return key.substr(0, key.find('/')); }

}  // namespace

std::string EncodeContinue(uint64_t rv, const std::string& last_key) {
  return hypertrain::Base64UrlEncode(json({{"rv", rv}, {"start", last_key}}).dump());
}

bool DecodeContinue(const std::string& token, uint64_t* rv, std::string* last_key) {
  auto raw = hypertrain::Base64UrlDecode(token);
  if (!raw.ok()) return false;
  json j = json::parse(*raw, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rv") || !j["rv"].is_number_unsigned() ||
      !j.contains("start") || !j["start"].is_string())
    return false;
  *rv = j["rv"].get<uint64_t>();
  *last_key = j["start"].get<std::string>();
  return true;
}

StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  std::unique_ptr<Store> s(new Store(options));
  if (!options.data_dir.empty()) {
    auto p = Persistence::Open(options.data_dir);
    if (!p.ok()) return p.status();
    s->persistence_ = std::move(*p);
    auto st = s->persistence_->Load();
    if (!st.ok()) return st.status();
    s->objects_ = std::move(st->objects);
    s->rv_ = std::max<uint64_t>(1, st->resource_version);
    s->wal_records_ = st->wal_records;
  }
  // History from before this process is gone: older watches get 410.
  s->hub_.ResetHistory(s->rv_);
  return s;
}

uint64_t Store::CurrentRV() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}

std::optional<json> Store::Get(const std::string& resource, const std::string& ns,
                               const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto r = objects_.find(resource);
  if (r == objects_.end()) return std::nullopt;
  auto o = r->second.find(Key(ns, name));
  if (o == r->second.end()) return std::nullopt;
  return o->second;
}

StatusOr<ListPage> Store::List(const std::string& resource, const std::string& ns,
                               const ObjectPredicate& pred, int64_t limit,
                               const std::string& continue_token) const {
  std::lock_guard<std::mutex> l(mu_);
  ListPage page;
  page.resource_version = rv_;
  std::string start;
  if (!continue_token.empty()) {
    uint64_t rv;
    if (!DecodeContinue(continue_token, &rv, &start)) {
      return BadRequest("invalid continue token: malformed");
    }
    if (rv < hub_.compacted_rv()) {
      return Expired(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter.");
    }
    page.resource_version = rv;
  }
  auto r = objects_.find(resource);
  if (r == objects_.end()) return page;
  const auto& objs = r->second;
  auto it = start.empty() ? (ns.empty() ? objs.begin() : objs.lower_bound(ns + "/"))
                          : objs.upper_bound(start);
  std::string last;
  int64_t remaining = 0;
  for (; it != objs.end(); ++it) {
    if (!ns.empty() && NsOf(it->first) != ns) {
      if (it->first > ns + "/") break;
      continue;
    }
    if (pred && !pred(it->second)) continue;
    if (limit > 0 && static_cast<int64_t>(page.items.size()) >= limit) {
      ++remaining;
      continue;
    }
    page.items.push_back(it->second);
    last = it->first;
  }
  if (remaining > 0) {
    page.continue_token = EncodeContinue(page.resource_version, last);
    page.remaining = remaining;
  }
  return page;
}

StatusOr<json> Store::Mutate(const std::string& resource, const std::string& ns,
                             const std::string& name, const MutateFn& fn) {
  std::lock_guard<std::mutex> l(mu_);
  auto& objs = objects_[resource];
  const std::string key = Key(ns, name);
  auto it = objs.find(key);
  std::optional<json> current;
  if (it != objs.end()) current = it->second;
  auto m = fn(current);
  if (!m.ok()) return m.status();
  if (m->kind == Mutation::Kind::kNone) return current ? *current : json(nullptr);
  if (m->kind == Mutation::Kind::kDelete && !current) return json(nullptr);

  const uint64_t rv = rv_ + 1;
  WatchEvent ev;
  ev.resource = resource;
  ev.ns = ns;
  ev.rv = rv;
  json result;
  if (m->kind == Mutation::Kind::kPut) {
    json obj = std::move(m->object);
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    if (persistence_) {
      if (Status e = persistence_->AppendPut(rv, resource, key, obj); !e.ok()) return e;
    }
    ev.type = current ? "MODIFIED" : "ADDED";
    if (current) ev.prev = *current;
    objs[key] = obj;
    ev.object = obj;
    result = std::move(obj);
  } else {
    if (persistence_) {
      if (Status e = persistence_->AppendDelete(rv, resource, key); !e.ok()) return e;
    }
    json obj = *current;
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    objs.erase(key);
    ev.type = "DELETED";
    ev.object = obj;
    result = std::move(obj);
  }
  rv_ = rv;
  hub_.Publish(ev);
  if (persistence_ && ++wal_records_ >= options_.snapshot_every) {
    if (Status e = persistence_->Compact(rv_, objects_); !e.ok()) return e;
    wal_records_ = 0;
  }
  return result;
}

std::vector<std::pair<std::string, json>> Store::Snapshot(const std::string& resource) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, json>> out;
  for (const auto& [res, objs] : objects_) {
    if (!resource.empty() && res != resource) continue;
    for (const auto& [key, obj] : objs) out.emplace_back(res, obj);
  }
  return out;
}

StatusOr<std::shared_ptr<Watcher>> Store::Watch(const std::string& resource, const std::string& ns,
                                                std::optional<uint64_t> from_rv,
                                                ObjectPredicate pred) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<WatchEvent> initial;
  if (!from_rv) {
    auto r = objects_.find(resource);
    if (r != objects_.end()) {
      for (const auto& [key, obj] : r->second) {
        if (!ns.empty() && NsOf(key) != ns) continue;
        if (pred && !pred(obj)) continue;
        WatchEvent e;
        e.type = "ADDED";
        e.resource = resource;
        e.ns = NsOf(key);
        e.object = obj;
        initial.push_back(std::move(e));
      }
    }
  }
  if (!pred) pred = [](const json&) { return true; };
  return hub_.Subscribe(resource, ns, from_rv, std::move(pred), initial);
}

void Store::CompactHistory() {
  std::lock_guard<std::mutex> l(mu_);
  hub_.Compact(rv_);
}

}  // namespace kubelocal
