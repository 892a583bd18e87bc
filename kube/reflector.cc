#include "kube/reflector.h"

#include <spdlog/spdlog.h>

#include "kube/rate_limiter.h"

namespace kube {

Reflector::Reflector(ResourceClient client, Store* store, DeltaSink sink, ReflectorOptions opts)
    : client_(std::move(client)), store_(store), sink_(std::move(sink)), opts_(std::move(opts)) {}

std::string Reflector::LastResourceVersion() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

std::string Reflector::What() const {
  const std::string& ns = client_.ns();
  return client_.type().plural + (ns.empty() ? "" : " in namespace " + ns);
}

void Reflector::SetRv(const std::string& rv) {
  if (rv.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  rv_ = rv;
}

void StripManagedFields(Json& obj) {
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) m->erase("managedFields");
}

Status Reflector::ListAndReplace(CancelToken* cancel) {
  // Page by page (each trimmed before the next is read), one consistent
  // snapshot: every page after the first continues the first one's list.
  ListOptions lo;
  lo.label_selector = opts_.label_selector;
  lo.field_selector = opts_.field_selector;
  lo.limit = opts_.page_size;
  std::vector<Json> items;
  std::string rv;
  for (int expired = 0;;) {
    auto page = client_.List(lo);
    if (cancel && cancel->cancelled()) return hypertrain::Cancelled("cancelled");
    if (!page.ok() && IsGone(page.status()) && !lo.continue_token.empty() && ++expired <= 3) {
      items.clear();  // the continue token expired: list again from the start
      lo.continue_token.clear();
      continue;
    }
    if (!page.ok()) return page.status();
    if (lo.continue_token.empty()) rv = page->resource_version;
    for (auto& it : page->items) {
      if (opts_.transform) opts_.transform(it);
      items.push_back(std::move(it));
    }
    if (page->continue_token.empty()) break;
    lo.continue_token = page->continue_token;
  }
  auto deltas = store_->Replace(std::move(items));
  SetRv(rv);
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.lists;
  }
  for (const auto& d : deltas) sink_(d);
  synced_.store(true);
  return {};
}

Status Reflector::WatchOnce(CancelToken* cancel) {
  WatchOptions wo;
  wo.label_selector = opts_.label_selector;
  wo.field_selector = opts_.field_selector;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  wo.timeout_seconds = opts_.watch_timeout_seconds;
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.watches;
  }
  std::optional<Status> in_stream;
  auto res = client_.Watch(
      wo,
      [&](const WatchEvent& e) {
        {
          std::lock_guard<std::mutex> l(mu_);
          ++stats_.events;
          if (e.type == WatchEvent::Type::kBookmark) ++stats_.bookmarks;
        }
        switch (e.type) {
          case WatchEvent::Type::kAdded:
          case WatchEvent::Type::kModified: {
            std::string rv = ResourceVersionOf(e.object);
            const std::string key = Store::KeyOf(e.object);
            Json obj = e.object;
            if (opts_.transform) opts_.transform(obj);
            ObjectPtr old = store_->Upsert(std::move(obj));
            if (!old) {
              sink_({StoreDelta::Type::kAdded, nullptr, store_->Get(key)});
            } else if (ResourceVersionOf(*old) != rv) {
              sink_({StoreDelta::Type::kUpdated, old, store_->Get(key)});
            }
            SetRv(rv);
            break;
          }
          case WatchEvent::Type::kDeleted: {
            ObjectPtr old = store_->Remove(Store::KeyOf(e.object));
            if (old) {
              Json last = e.object;
              if (opts_.transform) opts_.transform(last);
              sink_({StoreDelta::Type::kDeleted, old, std::make_shared<const Json>(std::move(last))});
            }
            SetRv(ResourceVersionOf(e.object));
            break;
          }
          case WatchEvent::Type::kBookmark:
            SetRv(ResourceVersionOf(e.object));
            break;
          case WatchEvent::Type::kError:
            in_stream = ErrorFromStatusObject(0, e.object);
            return false;  // the server ends the stream after an ERROR anyway
        }
        return true;
      },
      cancel);
  if (in_stream) return *in_stream;
  return res;
}

void Reflector::Run(CancelToken* cancel) {
  Backoff backoff(opts_.backoff_base, opts_.backoff_max);
  int failures = 0;
  bool need_list = true;
  auto fail = [&](const Status& e, const char* what) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.errors;
    }
    const auto delay = backoff.Delay(failures++);
    const std::string line = std::string(what) + " " + What() + ": " + e.ToString();
    spdlog::warn("{} (retrying in {} ms)", line, delay.count());
    cancel->SleepFor(delay);
  };
  while (!cancel->cancelled()) {
    if (need_list) {
      auto r = ListAndReplace(cancel);
      if (!r.ok()) {
        if (r.code() == StatusCode::kCancelled) break;
        fail(r, "list");
        continue;
      }
      need_list = false;
      failures = 0;
    }
    auto started = std::chrono::steady_clock::now();
    int64_t events_before = stats().events;
    auto w = WatchOnce(cancel);
    if (cancel->cancelled()) break;
    if (w.ok()) {
      // Normal close (timeoutSeconds): re-watch from the last RV. A watch that
      // ends at once with nothing in it is treated as a failure, so a server
      // that closes every watch immediately does not get a hot loop.
      bool empty_and_short = stats().events == events_before &&
                             std::chrono::steady_clock::now() - started < std::chrono::seconds(1);
      if (empty_and_short) {
        cancel->SleepFor(backoff.Delay(failures++));
      } else {
        failures = 0;
      }
      continue;
    }
    if (IsGone(w)) {
      {
        std::lock_guard<std::mutex> l(mu_);
        ++stats_.relists_after_gone;
      }
      spdlog::info("watch {}: {}; listing again", What(), w.message());
      need_list = true;  // history compacted: re-list, diff, re-watch
      continue;
    }
    fail(w, "watch");
  }
}

}  // namespace kube
