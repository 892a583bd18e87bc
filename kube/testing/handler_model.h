#pragma once
// Test helper: replays informer handler calls into a model of the server
// state and records every call that would be a duplicate (add of a known key,
// update with an unchanged version) or inconsistent (update/delete of an
// unknown key, stale old object).
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kube/informer.h"

namespace kube::testing {

// Replays handler calls into a model and flags any call that would be a
// duplicate (add of a known key, update with an unchanged version) or
// inconsistent (update/delete of an unknown key).
class HandlerModel {
 public:
  EventHandlers Handlers() {
    EventHandlers h;
    h.on_add = [this](const Json& o) {
      std::lock_guard<std::mutex> l(mu_);
      ++adds;
      std::string k = NameOf(o);
      if (model_.count(k)) violations.push_back("duplicate add " + k);
      model_[k] = ResourceVersionOf(o);
    };
    h.on_update = [this](const Json& old_obj, const Json& o) {
      std::lock_guard<std::mutex> l(mu_);
      ++updates;
      std::string k = NameOf(o);
      auto it = model_.find(k);
      if (it == model_.end())
        violations.push_back("update of unknown " + k);
      else if (it->second != ResourceVersionOf(old_obj))
        violations.push_back("stale old in update " + k);
      if (ResourceVersionOf(old_obj) == ResourceVersionOf(o))
        violations.push_back("no-op update " + k);
      model_[k] = ResourceVersionOf(o);
    };
    h.on_delete = [this](const Json& o) {
      std::lock_guard<std::mutex> l(mu_);
      ++deletes;
      std::string k = NameOf(o);
      if (!model_.erase(k)) violations.push_back("delete of unknown " + k);
    };
    return h;
  }
  std::map<std::string, std::string> model() {
    std::lock_guard<std::mutex> l(mu_);
    return model_;
  }
  std::mutex mu_;
  std::map<std::string, std::string> model_;
  std::vector<std::string> violations;
  int adds = 0, updates = 0, deletes = 0;
};

}  // namespace kube::testing
