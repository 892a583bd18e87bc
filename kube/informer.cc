#include "kube/informer.h"

namespace kube {

EventHandlers EnqueueKeyHandlers(WorkQueue* q) {
  EventHandlers h;
  h.on_add = [q](const Json& o) { q->Add(Store::KeyOf(o)); };
  h.on_update = [q](const Json&, const Json& o) { q->Add(Store::KeyOf(o)); };
  h.on_delete = [q](const Json& o) { q->Add(Store::KeyOf(o)); };
  return h;
}

EventHandlers EnqueueOwnerHandlers(WorkQueue* q, std::string owner_kind) {
  auto enqueue = [q, owner_kind](const Json& o) {
    auto m = o.find("metadata");
    if (m == o.end() || !m->is_object()) return;
    auto refs = m->find("ownerReferences");
    if (refs == m->end() || !refs->is_array()) return;
    std::string ns = m->value("namespace", "");
    for (const auto& r : *refs) {
      if (!r.is_object() || r.value("kind", "") != owner_kind) continue;
      std::string name = r.value("name", "");
      if (!name.empty()) q->Add(ns.empty() ? name : ns + "/" + name);
    }
  };
  EventHandlers h;
  h.on_add = enqueue;
  h.on_update = [enqueue](const Json& old_obj, const Json& o) {
    enqueue(old_obj);
    enqueue(o);
  };
  h.on_delete = enqueue;
  return h;
}

Informer::Informer(ResourceClient client, ReflectorOptions opts)
    : reflector_(
          std::move(client), &store_, [this](const StoreDelta& d) { Dispatch(d); },
          std::move(opts)) {}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandlers(EventHandlers h) {
  std::lock_guard<std::mutex> l(mu_);
  if (started_ && h.on_add)
    for (const auto& o : store_.List()) h.on_add(*o);
  handlers_.push_back(std::move(h));
}

void Informer::Dispatch(const StoreDelta& d) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& h : handlers_) {
    switch (d.type) {
      case StoreDelta::Type::kAdded:
        if (h.on_add) h.on_add(*d.obj);
        break;
      case StoreDelta::Type::kUpdated:
        if (h.on_update) h.on_update(*d.old_obj, *d.obj);
        break;
      case StoreDelta::Type::kDeleted:
        if (h.on_delete) h.on_delete(*d.obj);
        break;
    }
  }
}

void Informer::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { reflector_.Run(&cancel_); });
}

void Informer::Stop() {
  cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reflector_.HasSynced()) {
    if (std::chrono::steady_clock::now() >= deadline || cancel_.cancelled()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace kube
