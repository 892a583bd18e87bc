#pragma once
// Thread-safe local cache of API objects keyed "namespace/name" (or "name"
// for cluster-scoped objects), with secondary indexes. Objects are stored as
// shared immutable JSON so readers never copy under the lock.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/status.h"

namespace kube {

using ObjectPtr = std::shared_ptr<const Json>;

// Maps an object to the index values it should be found under.
using IndexFunc = std::function<std::vector<std::string>(const Json&)>;

// Built-in index functions.
IndexFunc NamespaceIndex();             // metadata.namespace
IndexFunc OwnerUidIndex();              // every metadata.ownerReferences[].uid
IndexFunc LabelIndex(std::string key);  // value of label `key` (objects without it are not indexed)

inline constexpr const char* kNamespaceIndexName = "namespace";
inline constexpr const char* kOwnerUidIndexName = "owner-uid";

struct StoreDelta {
  enum class Type { kAdded, kUpdated, kDeleted };
  Type type;
  ObjectPtr old_obj;  // for kUpdated / kDeleted
  ObjectPtr obj;      // for kAdded / kUpdated (kDeleted: the last known state)
};

class Store {
 public:
  // Every store has the namespace and owner-uid indexes.
  Store();
  static std::string KeyOf(const Json& obj);

  // Registers an index; existing objects are indexed at once.
  void AddIndex(const std::string& name, IndexFunc fn);

  // Insert or replace; returns the previous object (null if none).
  ObjectPtr Upsert(Json obj);
  // Removes by key; returns the removed object (null if absent).
  ObjectPtr Remove(const std::string& key);
  // Replaces the whole content (after a LIST) and returns what changed:
  // new keys → kAdded, changed resourceVersion → kUpdated, missing → kDeleted.
  // Unchanged objects (same resourceVersion) produce no delta.
  std::vector<StoreDelta> Replace(std::vector<Json> objs);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> Keys() const;
  size_t Size() const;
  // Objects whose index `index` maps to `value`; kInvalidArgument for an unknown index.
  StatusOr<std::vector<ObjectPtr>> ByIndex(const std::string& index,
                                           const std::string& value) const;

 private:
  void IndexLocked(const std::string& key, const Json& obj);
  void UnindexLocked(const std::string& key, const Json& obj);
  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr> items_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name → value → keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
};

}  // namespace kube
