#include "kube/store.h"

namespace kube {
namespace {
std::string Meta(const Json& o, const char* k) {
  auto m = o.find("metadata");
  if (m == o.end() || !m->is_object()) return "";
  auto v = m->find(k);
  return v != m->end() && v->is_string() ? v->get<std::string>() : "";
}
}  // namespace

IndexFunc NamespaceIndex() {
  return [](const Json& o) -> std::vector<std::string> {
    std::string ns = Meta(o, "namespace");
    if (ns.empty()) return {};
    return {ns};
  };
}

IndexFunc OwnerUidIndex() {
  return [](const Json& o) {
    std::vector<std::string> out;
    auto m = o.find("metadata");
    if (m == o.end() || !m->is_object()) return out;
    auto refs = m->find("ownerReferences");
    if (refs == m->end() || !refs->is_array()) return out;
    for (const auto& r : *refs)
      if (r.is_object() && r.contains("uid") && r["uid"].is_string()) out.push_back(r["uid"]);
    return out;
  };
}

IndexFunc LabelIndex(std::string key) {
  return [key](const Json& o) -> std::vector<std::string> {
    auto m = o.find("metadata");
    if (m == o.end() || !m->is_object()) return {};
    auto l = m->find("labels");
    if (l == m->end() || !l->is_object()) return {};
    auto v = l->find(key);
    if (v == l->end() || !v->is_string()) return {};
    return {v->get<std::string>()};
  };
}

Store::Store() {
  index_funcs_[kNamespaceIndexName] = NamespaceIndex();
  index_funcs_[kOwnerUidIndexName] = OwnerUidIndex();
}

std::string Store::KeyOf(const Json& obj) {
  std::string ns = Meta(obj, "namespace");
  std::string name = Meta(obj, "name");
  return ns.empty() ? name : ns + "/" + name;
}

void Store::AddIndex(const std::string& name, IndexFunc fn) {
  std::lock_guard<std::mutex> l(mu_);
  index_funcs_[name] = std::move(fn);
  indexes_.erase(name);
  for (const auto& [key, obj] : items_)
    for (const auto& v : index_funcs_[name](*obj)) indexes_[name][v].insert(key);
}

void Store::IndexLocked(const std::string& key, const Json& obj) {
  for (const auto& [name, fn] : index_funcs_)
    for (const auto& v : fn(obj)) indexes_[name][v].insert(key);
}

void Store::UnindexLocked(const std::string& key, const Json& obj) {
  for (const auto& [name, fn] : index_funcs_) {
    auto& idx = indexes_[name];
    for (const auto& v : fn(obj)) {
      auto it = idx.find(v);
      if (it == idx.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) idx.erase(it);
    }
  }
}

ObjectPtr Store::Upsert(Json obj) {
  std::string key = KeyOf(obj);
  auto p = std::make_shared<const Json>(std::move(obj));
  std::lock_guard<std::mutex> l(mu_);
  ObjectPtr old;
  auto it = items_.find(key);
  if (it != items_.end()) {
    old = it->second;
    UnindexLocked(key, *old);
    it->second = p;
  } else {
    items_[key] = p;
  }
  IndexLocked(key, *p);
  return old;
}

ObjectPtr Store::Remove(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return nullptr;
  ObjectPtr old = it->second;
  UnindexLocked(key, *old);
  items_.erase(it);
  return old;
}

std::vector<StoreDelta> Store::Replace(std::vector<Json> objs) {
  std::map<std::string, ObjectPtr> fresh;
  for (auto& o : objs) {
    std::string k = KeyOf(o);
    fresh[k] = std::make_shared<const Json>(std::move(o));
  }
  std::vector<StoreDelta> deltas;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [key, old] : items_)
    if (!fresh.count(key)) deltas.push_back({StoreDelta::Type::kDeleted, old, old});
  for (const auto& [key, obj] : fresh) {
    auto it = items_.find(key);
    if (it == items_.end()) {
      deltas.push_back({StoreDelta::Type::kAdded, nullptr, obj});
    } else if (Meta(*it->second, "resourceVersion") != Meta(*obj, "resourceVersion") ||
               Meta(*it->second, "uid") != Meta(*obj, "uid")) {
      deltas.push_back({StoreDelta::Type::kUpdated, it->second, obj});
    }
  }
  items_.clear();
  indexes_.clear();
  for (auto& [key, obj] : fresh) {
    IndexLocked(key, *obj);
    items_[key] = std::move(obj);
  }
  return deltas;
}

ObjectPtr Store::Get(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::List() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(v);
  return out;
}

std::vector<std::string> Store::Keys() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

size_t Store::Size() const {
  std::lock_guard<std::mutex> l(mu_);
  return items_.size();
}

StatusOr<std::vector<ObjectPtr>> Store::ByIndex(const std::string& index,
                                                const std::string& value) const {
  std::lock_guard<std::mutex> l(mu_);
  if (!index_funcs_.count(index))
    return hypertrain::InvalidArgument("no index named \"" + index + "\"");
  std::vector<ObjectPtr> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  auto it = idx->second.find(value);
  if (it == idx->second.end()) return out;
  for (const auto& key : it->second) out.push_back(items_.at(key));
  return out;
}

}  // namespace kube
