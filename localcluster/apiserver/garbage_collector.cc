#include "localcluster/apiserver/garbage_collector.h"

#include <map>
#include <set>

namespace kubelocal {
namespace {

bool Deleting(const json& o) { return o.contains("/metadata/deletionTimestamp"_json_pointer); }
bool HasFinalizer(const json& o, const std::string& f) {
  if (!o.contains("/metadata/finalizers"_json_pointer)) return false;
  for (const auto& x : o["metadata"]["finalizers"]) {
    if (x == f) return true;
  }
  return false;
}

}  // namespace

GarbageCollector::GarbageCollector(ObjectOps* ops, std::chrono::milliseconds period)
    : ops_(ops), period_(period) {}

GarbageCollector::~GarbageCollector() { Stop(); }

void GarbageCollector::Start() { thread_ = std::thread([this] { Loop(); }); }

void GarbageCollector::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GarbageCollector::Kick() {
  std::lock_guard<std::mutex> l(mu_);
  kicked_ = true;
  cv_.notify_all();
}

void GarbageCollector::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, period_, [&] { return kicked_ || stop_; });
      if (stop_) return;
      kicked_ = false;
    }
    // Repeat while progress is made so that chains of owners collapse quickly.
    for (int i = 0; i < 20 && RunOnce() > 0; ++i) {
    }
  }
}

namespace {

using Objects = std::vector<std::pair<std::string, json>>;  // storage key, object
using TypesByKey = std::map<std::string, ResourceType>;

// Deletes (in the background) objects whose owners are all gone, or whose
// owner is being deleted in the foreground. `referenced` gets every owner uid
// a live object names.
int DeleteOrphans(ObjectOps* ops, const Objects& all, const TypesByKey& types, std::set<std::string>* referenced) {
  std::map<std::string, const json*> by_uid;
  for (const auto& [res, o] : all) by_uid[MetaStr(o, "uid")] = &o;
  int actions = 0;
  for (const auto& [res, o] : all) {
    if (!o.contains("/metadata/ownerReferences"_json_pointer)) continue;
    bool any_alive = false, owner_foreground = false;
    for (const auto& ref : o["metadata"]["ownerReferences"]) {
      const std::string uid = ref.value("uid", "");
      referenced->insert(uid);
      auto it = by_uid.find(uid);
      if (it == by_uid.end()) continue;
      any_alive = true;
      if (Deleting(*it->second) && HasFinalizer(*it->second, "foregroundDeletion")) owner_foreground = true;
    }
    if ((!any_alive || owner_foreground) && !Deleting(o)) {
      auto t = types.find(res);
      if (t == types.end()) continue;
      if (ops->Delete(t->second, MetaStr(o, "namespace"), MetaStr(o, "name"), DeleteOptions()).ok()) ++actions;
    }
  }
  return actions;
}

// Foreground owners whose dependents are all gone lose their finalizer.
int ReleaseForegroundOwners(Store* store, const Objects& all, const std::set<std::string>& referenced) {
  int actions = 0;
  for (const auto& [res, o] : all) {
    if (!Deleting(o) || !HasFinalizer(o, "foregroundDeletion")) continue;
    if (referenced.count(MetaStr(o, "uid"))) continue;
    auto r = store->Mutate(res, MetaStr(o, "namespace"), MetaStr(o, "name"),
                           [](const std::optional<json>& cur) -> StatusOr<Mutation> {
                             if (!cur || !cur->contains("/metadata/finalizers"_json_pointer)) {
                               return Mutation::None();
                             }
                             json next = *cur;
                             json fins = json::array();
                             for (const auto& f : next["metadata"]["finalizers"]) {
                               if (f != "foregroundDeletion") fins.push_back(f);
                             }
                             if (!fins.empty()) {
                               next["metadata"]["finalizers"] = fins;
                               return Mutation::Put(std::move(next));
                             }
                             next["metadata"].erase("finalizers");
                             if (next["metadata"].value("deletionGracePeriodSeconds", int64_t{0}) == 0) {
                               return Mutation::Delete();
                             }
                             return Mutation::Put(std::move(next));
                           });
    if (r.ok()) ++actions;
  }
  return actions;
}

// Terminating namespaces: their objects are deleted, then (once empty and
// without other finalizers) the namespace itself.
int FinishNamespaces(ObjectOps* ops, const Objects& all, const TypesByKey& types) {
  int actions = 0;
  for (const auto& [res, o] : all) {
    if (res != "/namespaces" || !Deleting(o)) continue;
    const std::string ns = MetaStr(o, "name");
    bool empty = true;
    for (const auto& [r2, o2] : all) {
      if (MetaStr(o2, "namespace") != ns || r2 == "/namespaces") continue;
      empty = false;
      if (Deleting(o2)) continue;
      auto t = types.find(r2);
      if (t == types.end() || !t->second.namespaced) continue;
      if (ops->Delete(t->second, ns, MetaStr(o2, "name"), DeleteOptions()).ok()) ++actions;
    }
    if (!empty) continue;
    auto r = ops->store()->Mutate("/namespaces", "", ns, [](const std::optional<json>& cur) -> StatusOr<Mutation> {
      if (!cur) return Mutation::None();
      if (cur->contains("/metadata/finalizers"_json_pointer) && !(*cur)["metadata"]["finalizers"].empty()) {
        return Mutation::None();  // other finalizers still pending
      }
      return Mutation::Delete();
    });
    if (r.ok() && !r->is_null()) ++actions;
  }
  return actions;
}

}  // namespace

int GarbageCollector::RunOnce() {
  const Objects all = ops_->store()->Snapshot();
  // resource storage key -> served type (any version)
  TypesByKey types;
  for (const auto& t : ops_->registry()->All()) types.emplace(t.storage_key(), t);
  std::set<std::string> referenced;  // uids that some live object names as owner
  int actions = DeleteOrphans(ops_, all, types, &referenced);
  actions += ReleaseForegroundOwners(ops_->store(), all, referenced);
  actions += FinishNamespaces(ops_, all, types);
  return actions;
}

}  // namespace kubelocal
